"""Parsers on authentic outputs in tests/data (see tests/data/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.bench.parsers import TOOLS, parser_for, strip_ansi
from gpufabric.bench.parsers.fio import parse_fio
from gpufabric.bench.parsers.iperf3 import parse_iperf3
from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests
from gpufabric.bench.parsers.perftest import parse_perftest
from gpufabric.bench.parsers.sockperf import parse_sockperf
from gpufabric.errors import ParseError
from gpufabric.results.records import Direction

DATA = Path(__file__).resolve().parents[1] / "data"


def read(rel: str) -> str:
    return (DATA / rel).read_text()


# ---------------------------------------------------------------- fio


def test_fio_jsonplus_psync_write_two_jobs():
    parsed = parse_fio(read("fio/psync_write_fsync.jsonplus.json"), source="x.json")
    # numjobs=2 without group_reporting: each clone under its own name, plus the group aggregate
    assert [p.case for p in parsed] == ["ckpt_write.0", "ckpt_write.1", "ckpt_write"]
    doc = json.loads(read("fio/psync_write_fsync.jsonplus.json"))
    job = doc["jobs"][0]
    first = parsed[0]
    assert first.metric("write_bw_gbps").value == pytest.approx(job["write"]["bw_bytes"] / 1e9)
    assert first.metric("write_bw_gbps").direction is Direction.higher
    assert first.metric("write_clat_p99_us").value == pytest.approx(
        job["write"]["clat_ns"]["percentile"]["99.000000"] / 1000
    )
    assert first.metric("write_clat_p99_us").direction is Direction.lower
    # psync fsync latencies are sane and kept
    assert first.metric("fsync_lat_p50_us").value == pytest.approx(
        job["sync"]["lat_ns"]["percentile"]["50.000000"] / 1000
    )
    assert first.metric("fsync_count").value == job["sync"]["total_ios"]
    # json+ bins expand into one sample per I/O
    assert len(first.metric("write_clat_p50_us").samples) == job["write"]["clat_ns"]["N"]
    assert first.warnings == ()
    assert first.info["ioengine"] == "psync" and first.info["version"] == "fio-3.33"
    assert first.metric("read_bw_gbps") is None


def test_fio_plain_json_read_has_no_samples():
    (parsed,) = parse_fio(read("fio/psync_read.json"))
    assert parsed.metric("read_bw_gbps").value > 0
    assert parsed.metric("read_clat_p50_us").samples == ()
    assert parsed.metric("fsync_count") is None


def test_fio_async_engine_sync_latency_is_dropped_with_warning():
    (parsed,) = parse_fio(read("fio/libaio_fsync.json"))
    assert parsed.metric("fsync_lat_p99_us") is None
    assert parsed.metric("fsync_count") is not None
    assert any("asynchronous engine libaio" in w for w in parsed.warnings)
    assert parsed.metric("write_bw_gbps").value > 0


def test_fio_sqpoll_clat_is_dropped_with_warning():
    (parsed,) = parse_fio(read("fio/io_uring_sqpoll.json"))
    assert parsed.metric("read_clat_p50_us") is None
    assert any("sqthread_poll" in w for w in parsed.warnings)
    assert parsed.metric("read_iops").value > 0


def test_fio_latency_longer_than_the_job_is_flagged():
    doc = json.loads(read("fio/psync_read.json"))
    doc["jobs"][0]["read"]["clat_ns"]["percentile"]["99.000000"] = 17.1e9  # 17 s in a ~1 s job
    (parsed,) = parse_fio(json.dumps(doc))
    assert parsed.metric("read_clat_p99_us") is None
    assert any("exceeds the job's whole runtime" in w for w in parsed.warnings)


def test_fio_nan_is_a_parse_error_quoting_it():
    text = read("fio/psync_read.json").replace('"iops" : ', '"iops" : NaN, "x" : ', 1)
    with pytest.raises(ParseError, match=r"bad\.json: non-finite number NaN in fio output.*NaN"):
        parse_fio(text, source="bad.json")


def test_fio_truncated_json():
    text = read("fio/psync_read.json")
    with pytest.raises(ParseError, match="truncated JSON at line [0-9]+ in fio output"):
        parse_fio(text[: len(text) // 2])


def test_fio_skips_warning_lines_before_the_document():
    text = "fio: file hash not empty on exit\n" + read("fio/psync_read.json")
    # the value the file states (read.bw_bytes, B/s per the fio HOWTO), not merely "some value"
    bw_bytes = json.loads(read("fio/psync_read.json"))["jobs"][0]["read"]["bw_bytes"]
    assert parse_fio(text)[0].metric("read_bw_gbps").value == pytest.approx(bw_bytes / 1e9)


def test_fio_status_interval_concatenated_documents_yield_the_last():
    doc = json.loads(read("fio/psync_read.json"))
    interim = json.loads(read("fio/psync_read.json"))
    interim["jobs"][0]["read"]["bw_bytes"] = 1  # an early status report
    (parsed,) = parse_fio(json.dumps(interim) + "\n" + json.dumps(doc))
    assert parsed.metric("read_bw_gbps").value == pytest.approx(doc["jobs"][0]["read"]["bw_bytes"] / 1e9)


def test_iperf3_trailing_error_text_is_a_parse_error():
    text = read("iperf3/loopback_P2.json") + "iperf3: error - control socket has closed unexpectedly\n"
    with pytest.raises(ParseError, match="unexpected text after the iperf3 JSON document.*control socket"):
        parse_iperf3(text)


def test_fio_rejects_other_tools_json():
    with pytest.raises(ParseError, match="not fio JSON output"):
        parse_fio(read("iperf3/loopback_P2.json"), source="f")


def test_fio_rejects_colour_text():
    with pytest.raises(ParseError, match="terminal colour codes"):
        parse_fio(read("sockperf/pingpong_udp.txt"))


def test_fio_job_error_is_reported():
    doc = json.loads(read("fio/psync_read.json"))
    doc["jobs"][0]["error"] = 5
    (parsed,) = parse_fio(json.dumps(doc))
    assert "error 5" in parsed.error


# ---------------------------------------------------------------- iperf3


def test_iperf3_tcp_two_streams():
    (parsed,) = parse_iperf3(read("iperf3/loopback_P2.json"))
    doc = json.loads(read("iperf3/loopback_P2.json"))
    assert parsed.error == ""
    assert parsed.metric("throughput_gbit_s").value == pytest.approx(
        doc["end"]["sum_received"]["bits_per_second"] / 1e9
    )
    assert len(parsed.metric("throughput_gbit_s").samples) == len(doc["intervals"])
    assert parsed.metric("retransmits").value == doc["end"]["sum_sent"]["retransmits"]
    assert parsed.metric("rtt_mean_us").value > 0
    assert parsed.info["streams"] == "2"
    assert parsed.info["host"] == "vm"


def test_iperf3_reverse_has_no_local_rtt():
    (parsed,) = parse_iperf3(read("iperf3/loopback_P2_reverse.json"))
    assert parsed.info["reverse"] == "1"
    assert parsed.metric("throughput_gbit_s").value > 0
    assert parsed.metric("rtt_mean_us") is None  # the remote sender's zeros are not an RTT


def test_iperf3_udp():
    (parsed,) = parse_iperf3(read("iperf3/loopback_udp.json"))
    assert parsed.case == "udp"
    assert parsed.metric("throughput_gbit_s").value == pytest.approx(0.1, rel=0.05)
    assert parsed.metric("lost_percent") is not None


def test_iperf3_error_key_with_exit_0_is_a_failed_run():
    (parsed,) = parse_iperf3(read("iperf3/no_server.json"))
    assert parsed.error == "iperf3: unable to connect to server: Connection refused"
    assert parsed.metrics == ()


def test_iperf3_wrong_tool():
    with pytest.raises(ParseError, match="not iperf3 -J output"):
        parse_iperf3(read("fio/psync_read.json"))


# ---------------------------------------------------------------- sockperf


def test_sockperf_udp_text_with_ansi():
    assert "\x1b[" in read("sockperf/pingpong_udp.txt")
    (parsed,) = parse_sockperf(read("sockperf/pingpong_udp.txt"))
    assert parsed.metric("lat_avg_us").value == 15.175
    assert parsed.metric("lat_p50_us").value == 13.419
    assert parsed.metric("lat_p99_us").value == 32.039
    assert parsed.metric("lat_p99_9_us").value == 215.427
    assert parsed.metric("lat_p99_99_us").value == 276.461
    assert parsed.metric("lat_p99_999_us").value == 761.444
    assert parsed.metric("lat_max_us").value == 761.444
    assert parsed.metric("lat_min_us").value == 10.289
    assert parsed.metric("observations").value == 18077
    assert parsed.info["version"] == "3.7-no.git"
    assert parsed.case == "udp"


def test_sockperf_full_rtt_names_metrics_rtt():
    (parsed,) = parse_sockperf(read("sockperf/pingpong_tcp_fullrtt.txt"))
    assert parsed.metric("rtt_avg_us").value == 32.310
    assert parsed.metric("lat_avg_us") is None
    assert parsed.info["measure"] == "round trip"


def test_sockperf_full_log_samples():
    text = read("sockperf/pingpong_udp_mps2000_fulllog.txt")
    csv = read("sockperf/pingpong_udp_mps2000_fulllog.csv")
    (parsed,) = parse_sockperf(text, full_log=csv)
    samples = parsed.metric("lat_p50_us").samples
    assert len(samples) == 1106 == parsed.metric("observations").value
    assert samples[0] == 16.445
    assert max(samples) == pytest.approx(parsed.metric("lat_max_us").value, abs=0.002)
    # The CSV alone (it starts with the statistics) parses the same.
    (alone,) = parse_sockperf(csv)
    assert alone.metric("lat_p50_us").samples == samples


def test_sockperf_no_server_is_failed_run():
    (parsed,) = parse_sockperf(read("sockperf/pingpong_no_server.txt"))
    assert "no messages were received" in parsed.error


def test_sockperf_rejects_json():
    with pytest.raises(ParseError, match="not sockperf output"):
        parse_sockperf(read("iperf3/loopback_P2.json"))


def test_strip_ansi():
    assert strip_ansi("a\x1b[2;35mb\x1b[0mc") == "abc"


# ---------------------------------------------------------------- perftest


def test_perftest_latency():
    (parsed,) = parse_perftest(read("perftest/ib_write_lat.json"))
    assert parsed.case == "ib_write_lat"
    assert parsed.metric("lat_p50_us").value == 0.98  # t_typical is the median
    assert parsed.metric("lat_p99_9_us").value == 4.21
    assert parsed.info["Device"] == "mlx5_0"


def test_perftest_bandwidth_sweep_headline_is_largest_size():
    (parsed,) = parse_perftest(read("perftest/ib_write_bw_sweep.json"))
    assert parsed.metric("bw_avg_gbps").value == pytest.approx(46738.77 * 1048576 / 1e9)
    assert parsed.metric("bw_avg_gbps@65536B").value == pytest.approx(45802.33 * 1048576 / 1e9)
    assert parsed.info["msg_size_bytes"] == "8388608"
    assert parsed.case == "ib_write_bw"


def test_perftest_empty_results():
    with pytest.raises(ParseError, match="'results' is missing or empty"):
        parse_perftest(read("perftest/ib_send_lat_no_results.json"))


def test_perftest_text_is_not_json():
    with pytest.raises(ParseError, match="no perftest JSON document"):
        parse_perftest(read("perftest/ib_write_lat_no_device.txt"))


# ---------------------------------------------------------------- nccl-tests


def test_nccl_text_table():
    (parsed,) = parse_nccl_tests(read("nccl-tests/all_reduce_8gpu.txt"))
    assert parsed.case == "all_reduce"
    assert parsed.error == ""
    assert parsed.metric("busbw_gbps").value == 176.62
    assert parsed.metric("algbw_gbps").value == 100.92
    assert parsed.metric("time_us").value == 1329.89
    assert parsed.metric("busbw_gbps@8388608B").value == 137.77
    assert parsed.metric("wrong_total").value == 0
    assert parsed.metric("avg_busbw_gbps").value < parsed.metric("busbw_gbps").value
    assert parsed.info["ranks"] == "8" and parsed.info["hosts"] == "gpu-a01"


def test_nccl_wrong_and_out_of_bounds_fail():
    (parsed,) = parse_nccl_tests(read("nccl-tests/all_reduce_8gpu_wrong.txt"))
    assert "3 wrong elements" in parsed.error
    assert "FAILED" in parsed.error
    assert parsed.metric("wrong_total").value == 3


def test_nccl_json():
    (parsed,) = parse_nccl_tests(read("nccl-tests/all_reduce_8gpu.json"))
    text = parse_nccl_tests(read("nccl-tests/all_reduce_8gpu.txt"))[0]
    assert parsed.case == "all_reduce"
    assert parsed.error == ""
    assert parsed.metric("busbw_gbps").value == pytest.approx(text.metric("busbw_gbps").value, abs=0.01)


def test_nccl_truncated_text_has_no_footer():
    text = read("nccl-tests/all_reduce_8gpu.txt")
    cut = text[: text.index("# Out of bounds")]
    (parsed,) = parse_nccl_tests(cut)
    # issue 23: a table without its footer is partial (rows kept, the data check unconfirmed), not a failure
    assert not parsed.error and "no 'Out of bounds values' footer" in parsed.partial
    assert parsed.partial in parsed.warnings and parsed.metric("busbw_gbps") is not None


def test_nccl_bad_row():
    text = read("nccl-tests/all_reduce_8gpu.txt").replace("  176.62 ", "  17x.62 ", 1)
    with pytest.raises(ParseError, match="non-numeric busbw"):
        parse_nccl_tests(text)


def test_nccl_not_nccl():
    with pytest.raises(ParseError, match="not nccl-tests output"):
        parse_nccl_tests(read("sockperf/pingpong_udp.txt"))


def test_parser_for_every_tool_and_unknown_tool():
    assert [parser_for(tool) for tool in TOOLS] == [
        parse_fio,
        parse_iperf3,
        parse_sockperf,
        parse_perftest,
        parse_nccl_tests,
    ]
    with pytest.raises(ParseError, match="unknown tool 'qperf'; expected one of fio, iperf3"):
        parser_for("qperf")


# ---------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.floats(1, 1e6), st.floats(0, 1e3), st.integers(0, 5)),
        min_size=1,
        max_size=12,
        unique_by=lambda r: r[0],
    )
)
def test_nccl_text_rows_round_trip(rows):
    """Rows printed in nccl-tests' column layout parse back to the printed values."""
    lines = ["# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1"]
    printed = []
    for exp, time_us, busbw, wrong in sorted(rows):
        size = 1 << exp
        line = (
            f"{size:12d} {max(size // 4, 1):13d}     float     sum      -1 {time_us:8.2f} {busbw / 2:7.2f} {busbw:7.2f}"
            f" {wrong:6d} {time_us:8.2f} {busbw / 2:7.2f} {busbw:7.2f} {0:6d}"
        )
        lines.append(line)
        printed.append((size, float(line.split()[5]), float(line.split()[7]), wrong))
    lines.append("# Out of bounds values : 0 OK")
    (parsed,) = parse_nccl_tests("\n".join(lines) + "\n")
    top = printed[-1]
    assert parsed.metric("busbw_gbps").value == top[2]
    assert parsed.metric("time_us").value == top[1]
    assert parsed.metric("wrong_total").value == sum(r[3] for r in printed)
    assert bool(parsed.error) == (sum(r[3] for r in printed) > 0)
    for size, time_us, busbw, _ in printed[:-1]:
        assert parsed.metric(f"busbw_gbps@{size}B").value == busbw
        assert parsed.metric(f"time_us@{size}B").value == time_us


def test_fast_metric_sets_every_field_metric_has():
    import dataclasses

    from gpufabric.bench.parsers.nccl_tests import METRIC_FIELDS, _metric
    from gpufabric.results.records import Direction, Metric

    assert tuple(f.name for f in dataclasses.fields(Metric)) == METRIC_FIELDS
    fast = _metric("time_us@8B", 24.7, "us", Direction.lower, (68.5, 24.7))
    assert fast == Metric(name="time_us@8B", value=24.7, unit="us", direction=Direction.lower, samples=(68.5, 24.7))
    assert _metric("x", 1.0, "GB/s", Direction.higher) == Metric(name="x", value=1.0, unit="GB/s")


def test_validation_passes_every_published_table_and_catches_each_edit():
    # Every published table, and each with one impossible value put in: the column-wise
    # checks pass the authentic tables and catch every edited copy.
    from pathlib import Path

    from gpufabric.bench.parsers import nccl_tests as n

    data = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
    cases = []
    for path in sorted(data.glob("*.txt")):
        for rows in n.rows_of(path.read_text(), source=path.name):
            cases.append(rows)
            cases.append([rows[0]._replace(oop_busbw=-1.0), *rows[1:]])
            cases.append([rows[0]._replace(elem_count=rows[0].elem_count + 1), *rows[1:]])
    assert len(cases) > 30
    # the all_gather table has size = count x 4 B x 16 ranks; the all_reduce tables count x 4 B
    found = [
        n._validate(rows, "all_reduce" if n._rank_factor(rows[1:]) == 1 else "all_gather", 16)[0] for rows in cases
    ]
    # the authentic tables (every third case) are clean; both edited copies of each are caught
    assert not any(found[::3])
    assert all(found[1::3]) and all(found[2::3])
    assert all("count" in " ".join(f) for f in found[2::3])


# ---------------------------------------------------------------- wrong JSON value types

#: Values of the wrong type for almost any field: null, a string, a list, an object, a bool,
#: zero, a fraction, a negative and a huge number.
WRONG_TYPES = (None, "12", "x", [], [1], {}, {"x": 1}, True, 0, 0.5, -1, 1e308)
JSON_SAMPLES = sorted(
    [("fio", p) for p in (DATA / "fio").glob("*.json")]
    + [("iperf3", p) for p in (DATA / "iperf3").glob("*.json")]
    + [("perftest", p) for p in (DATA / "perftest").glob("*.json")]
    + [("nccl-tests", p) for p in (DATA / "nccl-tests").glob("*.json")]
)


def _json_paths(doc, prefix=()):
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _json_paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += _json_paths(value, (*prefix, index))
    return out


@pytest.mark.parametrize(("tool", "path"), JSON_SAMPLES, ids=lambda v: getattr(v, "name", v))
def test_json_parsers_refuse_wrong_value_types_with_parse_error(tool, path):
    """Every field of every authentic JSON sample, replaced by a value of the wrong type: the parser
    parses it or raises ParseError (exit 2 at the CLI), never TypeError/AttributeError/KeyError.

    Large documents (fio's json+ latency bins) are sampled: 150 paths per file, a fixed seed.
    """
    import random

    parse = parser_for(tool)
    doc = json.loads(path.read_text())
    paths = _json_paths(doc)
    if len(paths) > 150:
        paths = random.Random(0).sample(paths, 150)
    crashes = []
    for field_path in paths:
        parent = doc
        for part in field_path[:-1]:
            parent = parent[part]
        original = parent[field_path[-1]]
        for value in WRONG_TYPES:
            parent[field_path[-1]] = value
            try:
                parse(json.dumps(doc), source="x.json")
            except ParseError:
                pass
            except Exception as exc:
                crashes.append(f"{'.'.join(map(str, field_path))}={value!r}: {type(exc).__name__}: {exc}")
        parent[field_path[-1]] = original
    assert not crashes, f"{len(crashes)} crashes, e.g.\n" + "\n".join(crashes[:15])


@pytest.mark.parametrize(
    ("tool", "rel", "field_path", "value", "message"),
    [
        (
            "iperf3",
            "iperf3/loopback_P2.json",
            ("start",),
            "x",
            "iperf3 JSON field start: expected an object, got a string",
        ),
        (
            "iperf3",
            "iperf3/loopback_udp.json",
            ("end", "sum"),
            {"x": 1},
            "iperf3 JSON field end.sum.bits_per_second is missing",
        ),
        (
            "fio",
            "fio/libaio_fsync.json",
            ("jobs", 0, "write", "bw_bytes"),
            "12",
            "fio JSON field jobs[0].write.bw_bytes: expected a number, got a string",
        ),
        ("fio", "fio/libaio_fsync.json", ("jobs",), {}, "fio JSON field jobs: expected a list, got an object"),
        (
            "perftest",
            "perftest/ib_write_lat.json",
            ("results",),
            [None],
            "perftest JSON field results: expected an object or a list, got a list",
        ),
        (
            "nccl-tests",
            "nccl-tests/all_reduce_8gpu.json",
            ("results", 1, "out_of_place", "bus_bw"),
            [1],
            "nccl-tests JSON field results[1].out_of_place.bus_bw: expected a number, got a list",
        ),
        (
            "nccl-tests",
            "nccl-tests/all_reduce_8gpu.json",
            ("results", 0, "size"),
            -1,
            "nccl-tests JSON field results[0].size: expected an integer >= 0, got a number",
        ),
    ],
)
def test_wrong_json_type_names_the_field(tool, rel, field_path, value, message):
    doc = json.loads(read(rel))
    target = doc
    for part in field_path[:-1]:
        target = target[part]
    target[field_path[-1]] = value
    with pytest.raises(ParseError, match="^" + re.escape(f"x.json: {message}")):
        parser_for(tool)(json.dumps(doc), source="x.json")


def test_nccl_tests_json_accepts_null_and_na_where_the_tool_writes_them():
    """nccl-tests -J writes null for legs it did not run and "N/A" for #wrong it did not check."""
    doc = json.loads(read("nccl-tests/all_reduce_8gpu.json"))
    for entry in doc["results"]:
        entry["in_place"] = {"time": None, "alg_bw": None, "bus_bw": None, "nwrong": "N/A"}
    (parsed,) = parse_nccl_tests(json.dumps(doc), source="x.json")
    # the headline is the out-of-place busbw of the largest size, as the document states it
    top = max(doc["results"], key=lambda e: e["size"])
    assert parsed.error == "" and parsed.metric("busbw_gbps").value == top["out_of_place"]["bus_bw"]


def test_nccl_tests_records_gpus_per_process_and_the_harness():
    """Issue 32: '# nThread 1 nGpus 8' (-g 8) is one process driving 8 GPUs, the single-process
    harness; nGpus 1 is one process per GPU. Ingest stores them as tool_* params."""
    data = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
    (single,) = parse_nccl_tests((data / "all_reduce_8gpu.txt").read_text())
    assert single.info["gpus_per_process"] == "8" and single.info["harness"] == "single-process"
    assert single.params()["tool_harness"] == "single-process"
    (per_gpu,) = parse_nccl_tests((data / "public_a100_128gpu_sharp_error_column_coreweave.txt").read_text())
    assert per_gpu.info["gpus_per_process"] == "1" and per_gpu.info["harness"] == "per-gpu"
    (two_threads,) = parse_nccl_tests(
        (data / "all_reduce_8gpu.txt").read_text().replace("nThread 1 nGpus 8", "nThread 2 nGpus 1")
    )
    assert two_threads.info["gpus_per_process"] == "2" and two_threads.info["harness"] == "single-process"
