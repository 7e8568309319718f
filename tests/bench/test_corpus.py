"""Every public output in tests/data ingests with the figures read by hand from the file.

Provenance of each file: tests/data/README.md. Values below were read off the files
(the row, then the column), not computed by the parser.
"""

from __future__ import annotations

import pytest

from gpufabric.bench.parsers import detect_tool, parser_for
from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests, rows_of
from tests.conftest import DATA


def parse(rel: str, tool: str | None = None):
    text = (DATA / rel).read_text()
    tool = tool or detect_tool(text)
    return parser_for(tool)(text, source=rel)


# (file, case, ranks, nodes, gpus_per_node, gpu model, graph, headline time us, headline busbw, one mid row (size, oop time))
NCCL = [
    (
        "public_h100_1node_issue290.txt",
        "all_reduce",
        8,
        1,
        8,
        "NVIDIA H100 80GB HBM3",
        "0",
        15870,
        473.60,
        (536870912, 2175.8),
    ),
    (
        "public_h100_2node_srun_issue290.txt",
        "all_reduce",
        16,
        2,
        8,
        "NVIDIA H100 80GB HBM3",
        "0",
        103530,
        155.57,
        (67108864, 918.4),
    ),
    (
        "public_h100_2node_srun_ring_issue290.txt",
        "all_reduce",
        16,
        2,
        8,
        "NVIDIA H100 80GB HBM3",
        None,
        179148,
        89.90,
        (8388608, 407.5),
    ),
    (
        "public_a3mega_h100_2node.txt",
        "all_reduce",
        16,
        2,
        8,
        "NVIDIA H100 80GB HBM3",
        "0",
        47535,
        338.82,
        (1024, 147.1),
    ),
    ("public_efa_t4_2node_tag_output.txt", "collective", 2, 2, 1, "Tesla T4", "0", 344981, 3.11, (1048576, 583.4)),
    ("public_h100_dgx_1node_llmb.txt", "all_reduce", 8, 1, 8, "NVIDIA H100 80GB HBM3", "0", 62648, 479.90, (32, 68.14)),
    (
        "public_h100_2node_mpirun_g8.txt",
        "all_reduce",
        16,
        2,
        8,
        "NVIDIA H100 80GB HBM3",
        "0",
        73372,
        219.51,
        (65536, 125.0),
    ),
    (
        "public_mi300x_1node_rccl_issue1562.txt",
        "all_reduce",
        8,
        1,
        8,
        "AMD Instinct MI300X VF",
        "0",
        801.4,
        293.07,
        (4194304, 65.52),
    ),
    ("public_v100_2node_indented.txt", "collective", 2, 2, 1, "Tesla V100-PCIE-32GB", "0", 136001, 0.99, (16, 17.45)),
    (
        "public_h100_ndr_2node_issue309.txt",
        "all_reduce",
        16,
        2,
        8,
        "NVIDIA H100 80GB HBM3",
        "0",
        68652,
        469.21,
        (256, 94.40),
    ),
    (
        "public_h100_4node_issue309.txt",
        "all_reduce",
        32,
        4,
        8,
        "NVIDIA H100 80GB HBM3",
        "0",
        90986,
        365.84,
        (2097152, 191.3),
    ),
    (
        "public_h100_8node_issue309.txt",
        "all_reduce",
        64,
        8,
        8,
        "NVIDIA H100 80GB HBM3",
        "0",
        52733,
        320.70,
        (8388608, 1272.4),
    ),
]


@pytest.mark.parametrize("row", NCCL, ids=lambda r: r[0])
def test_public_nccl_tables(row):
    name, case, ranks, nodes, gpn, model, graph, t_top, busbw_top, (mid_size, mid_t) = row
    (p,) = parse(f"nccl-tests/{name}")
    assert p.tool == "nccl-tests" and p.case == case and not p.error and not p.invalid
    assert (p.info["ranks"], p.info["nodes"], p.info["gpus_per_node"]) == (str(ranks), str(nodes), str(gpn))
    assert p.info["gpu_model"] == model and p.info.get("graph") == graph
    assert p.metric("time_us").value == t_top and p.metric("busbw_gbps").value == busbw_top
    assert p.metric(f"time_us@{mid_size}B").value == mid_t


def test_nccl_na_cells_stay_absent_and_prefixes_are_stripped():
    (p,) = parse("nccl-tests/public_h100_2node_srun_issue290.txt")
    assert p.metric("wrong_total") is None  # every #wrong cell is N/A (-c 0): absent, not 0
    (rows,) = rows_of((DATA / "nccl-tests/public_h100_2node_srun_issue290.txt").read_text())
    assert rows[0].wrong is None and rows[0].ip_time_us == 180.0  # " 0:      8388608 ... 180.0   46.60   87.38    N/A"


def test_open_mpi_tag_output_with_interleaved_rank_lines():
    (p,) = parse("nccl-tests/public_efa_t4_2node_tag_output.txt")
    assert p.info["nccl_version"] == "2.12.7+cuda11.4"
    assert p.info["hosts"] == "test-nccl-efa-worker-0,test-nccl-efa-worker-1"
    assert p.metric("time_us@4B").value == 65.70 and p.metric("time_us@4B").samples == (65.70, 64.84)


def test_rccl_table_with_asterisk_note_and_no_group_column():
    (p,) = parse("nccl-tests/public_mi300x_1node_rccl_issue1562.txt")
    assert p.metric("avg_busbw_gbps").value == 54.8575 and p.metric("wrong_total").value == 0


def test_several_runs_and_launchers_in_one_file():
    """Two real tables of one issue in one file, one under srun -l, the other under Open MPI
    --tag-output with --timestamp-output, then torchrun and MPICH prefixes: one result each."""
    a = (DATA / "nccl-tests/public_h100_1node_issue290.txt").read_text().splitlines()
    b = (DATA / "nccl-tests/public_h100_ndr_2node_issue309.txt").read_text().splitlines()
    text = "\n".join(
        [f" 0: {x}" for x in a]
        + [f"Mon Mar  4 10:11:12 2024[1,0]<stdout>:{x}" for x in b]
        + [f"[rank0]:{x}" for x in a]
        + [f"[0] {x}" for x in a]
    )
    runs = parse_nccl_tests(text, source="all_reduce_perf.log")
    assert [r.info["ranks"] for r in runs] == ["8", "16", "8", "8"]
    assert [r.metric("busbw_gbps").value for r in runs] == [473.60, 469.21, 473.60, 473.60]


def test_interleaved_ranks_do_not_break_a_table():
    lines = (DATA / "nccl-tests/public_h100_1node_issue290.txt").read_text().splitlines()
    mixed = []
    for i, x in enumerate(lines):
        mixed.append(f" 0: {x}")
        mixed.append(
            f" {1 + i % 7}: node005:295203:295203 [{1 + i % 7}] NCCL INFO comm 0x1 rank {1 + i % 7} - Init COMPLETE"
        )
    (p,) = parse_nccl_tests("\n".join(mixed))
    assert p.metric("time_us@268435456B").value == 1139.2


PERFTEST = [
    (
        "public_cx7_ndr_ib_send_bw.txt",
        "ib_send_bw",
        "RC",
        {"bw_avg_gbps": 46557.03 * 2**20 / 1e9, "msg_rate_mpps": 0.744912},
    ),
    (
        "public_cx7_ndr_ib_read_bw_gbits.txt",
        "ib_read_bw",
        "RC",
        {"bw_avg_gbps": 328.61 / 8, "bw_peak_gbps": 328.64 / 8},
    ),
    ("public_cx7_ndr_ib_write_bw_gbits.txt", "ib_write_bw", "RC", {"bw_avg_gbps": 392.34 / 8}),
    (
        "public_cx7_ndr_ib_send_lat.txt",
        "ib_send_lat",
        "RC",
        {"lat_p50_us": 1.27, "lat_p99_us": 1.37, "lat_max_us": 5.19},
    ),
    (
        "public_cx5_ib_send_bw_ud_client.txt",
        "ib_send_bw",
        "UD",
        {"bw_avg_gbps": 6170.13 * 2**20 / 1e9, "bw_avg_gbps@2B": 4.87 * 2**20 / 1e9},
    ),
    ("public_cx5_ib_send_bw_ud_server.txt", "ib_send_bw", "UD", {"bw_avg_gbps": 5706.22 * 2**20 / 1e9}),
    ("public_cx5_ib_send_lat_ud_client.txt", "ib_send_lat", "UD", {"lat_p50_us": 1.67, "lat_p99_9_us@4096B": 7.95}),
]


@pytest.mark.parametrize("row", PERFTEST, ids=lambda r: r[0])
def test_public_perftest_text(row):
    name, case, conn, figures = row
    (p,) = parse(f"perftest/{name}")
    assert p.case == case and p.info["Connection_type"] == conn and p.info["Device"] == "mlx5_0"
    for metric, value in figures.items():
        assert p.metric(metric).value == pytest.approx(value, rel=1e-9), metric


def test_perftest_warnings_between_rows_are_quality_warnings_and_server_peak_zero_is_absent():
    (lat,) = parse("perftest/public_cx7_ndr_ib_send_lat.txt")
    assert len(lat.warnings) == 2 and all("Conflicting CPU frequency" in w for w in lat.warnings)
    (server,) = parse("perftest/public_cx5_ib_send_bw_ud_server.txt")
    assert server.metric("bw_peak_gbps") is None  # the server prints 0.00: not measured


def test_perftest_transcript_with_several_tests():
    text = "\n".join((DATA / f"perftest/{n}").read_text() for n, *_ in PERFTEST[:4])
    assert [p.case for p in parser_for("perftest")(text)] == ["ib_send_bw", "ib_read_bw", "ib_write_bw", "ib_send_lat"]


def test_public_fio_json_normal_and_iperf3():
    (fio,) = parse("fio/public_cbt_nvme_randwrite_json_normal.txt")
    assert fio.case == "/dev/nvme8n13"
    assert fio.metric("write_iops").value == 1244.175582
    assert fio.metric("write_clat_p99_us").value == 1695.744  # "99.000000" : 1695744 ns
    (ip,) = parse("iperf3/public_gke_tcp_200mb.json")
    assert ip.metric("retransmits").value == 414 and ip.metric("rtt_mean_us").value == 64661


def test_fio_groups_aggregate_like_group_reporting():
    parsed = parse("fio/two_groups_two_jobs.jsonplus.json")
    assert [p.case for p in parsed] == ["seqwrite.0", "seqwrite.1", "seqread.0", "seqread.1", "seqwrite", "seqread"]
    import json

    doc = json.loads((DATA / "fio/two_groups_two_jobs.jsonplus.json").read_text())
    w = [j["write"] for j in doc["jobs"] if j["groupid"] == 0]
    # group_reporting: all bytes over the longest runtime (ms)
    expected = sum(x["io_bytes"] for x in w) / max(x["runtime"] for x in w) * 1000 / 1e9
    assert parsed[4].metric("write_bw_gbps").value == pytest.approx(expected)
    assert "group 0 of 2 jobs" in parsed[4].info["aggregate"]
    (one,) = parse("fio/group_reporting_3jobs.json")  # fio already aggregated: no second aggregate
    assert one.case == "mixed"


def test_every_public_file_is_detected_as_its_tool():
    files = sorted(DATA.glob("*/public_*"))
    assert len(files) >= 20
    for f in files:
        assert detect_tool(f.read_text()) == f.parent.name, f


# --- issue 23: logs as people post them (provenance: tests/data/README.md) ----------------------------------------


def test_pre_2_13_error_column_is_a_relative_error_not_corruption():
    # CoreWeave's 128-GPU A100 SHARP table (NCCL 2.12 era): 'error' cells such as 2e-07 and 5e-07
    (p,) = parse("nccl-tests/public_a100_128gpu_sharp_error_column_coreweave.txt")
    assert p.error == "" and p.invalid == "" and p.partial == ""
    assert p.metric("wrong_total") is None  # no count was printed
    assert p.case == "all_reduce"  # busbw / algbw = 115.64 / 59.68: 2(n-1)/n, though 5 of 128 device lines are shown
    assert "relative error" in p.info["check"]
    assert p.metric("time_us").value == 143927 and p.metric("busbw_gbps").value == 115.64
    assert p.metric("avg_busbw_gbps").value == 37.7108


def test_error_column_with_a_count_of_wrong_elements_is_still_corruption():
    text = (DATA / "nccl-tests/public_a100_128gpu_sharp_error_column_coreweave.txt").read_text()
    broken = text.replace("5e-07   4821.8", "    3   4821.8", 1).replace("values : 0 OK", "values : 3 FAILED")
    (p,) = parse_nccl_tests(broken)
    assert "3 wrong elements" in p.error and "FAILED" in p.error


def test_all_gather_size_is_count_times_type_times_ranks():
    # GKE B200, 2 nodes x 8: "1024 16 float none" = 16 elements x 4 B x 16 ranks; no device lines
    (p,) = parse("nccl-tests/public_b200_2node_all_gather_gke.txt")
    assert p.error == "" and p.invalid == "" and p.warnings == ()
    assert p.metric("busbw_gbps").value == 376.40 and p.metric("time_us@1024B").value == 43.34
    rows = rows_of((DATA / "nccl-tests/public_b200_2node_all_gather_gke.txt").read_text())[0]
    from gpufabric.bench.parsers.nccl_tests import _validate

    assert _validate(rows, "all_gather", 16) == ([], "")
    assert _validate(rows, "all_gather", 8) == (
        [],
        "the device lines list 8 ranks but the sizes imply 16 (lines left out?)",
    )
    assert "does not match count 16 x 4 B" in _validate(rows, "all_reduce", 16)[0][0]  # as all_reduce: impossible
    edited = [rows[0]._replace(size=2048), *rows[1:]]  # one row with another factor
    assert _validate(edited, "all_gather", 0)[0]


def test_a_table_without_its_footer_is_partial_not_failed():
    # CoreWeave README of 2023-06-12: the block stops after the 8 GiB row
    (p,) = parse("nccl-tests/public_a100_128gpu_sharp_no_footer_coreweave.txt")
    assert p.error == "" and p.invalid == ""
    assert "no 'Out of bounds values' footer" in p.partial and p.partial in p.warnings
    assert p.metric("time_us").value == 104180 and p.metric("busbw_gbps").value == 159.75
