"""``gpufabric ingest``: good files become one run; malformed ones exit 2 and store nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpufabric.results.store import Store

DATA = Path(__file__).resolve().parents[1] / "data"


def runs_in(db: Path) -> int:
    if not db.exists():
        return 0
    with Store.open(db) as store:
        return len(store.list_runs())


def test_ingest_nccl_text_and_json_as_one_run(cli, tmp_path):
    db = tmp_path / "r.db"
    code, out, err = cli(
        "ingest",
        "--tool",
        "nccl-tests",
        DATA / "nccl-tests/all_reduce_8gpu.txt",
        DATA / "nccl-tests/all_reduce_8gpu.json",
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "passed"
    assert [r["name"] for r in doc["results"]] == ["nccl.all_reduce", "nccl.all_reduce"]
    with Store.open(db) as store:
        run = store.get_run(doc["run_id"])
    assert run.kind == "ingest" and run.status == "passed"
    # argv is recorded one way for every command: the command line as typed
    assert run.argv[:4] == ("gpufabric", "ingest", "--tool", "nccl-tests") and run.argv[-2:] == ("--format", "json")
    assert len(run.results) == 2
    assert run.results[0].host == "gpu-a01"
    assert run.results[0].metric("busbw_gbps").value == 176.62
    assert run.results[0].params["file"].endswith("all_reduce_8gpu.txt")


def test_ingest_with_thresholds_judges_repeats(cli, tmp_path):
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("tests:\n  nccl.all_reduce:\n    busbw_gbps: {target: 180, tolerance: 0.05}\n")
    code, out, _ = cli(
        "ingest",
        "--tool",
        "nccl-tests",
        DATA / "nccl-tests/all_reduce_8gpu.txt",
        DATA / "nccl-tests/all_reduce_8gpu.json",
        "--db",
        tmp_path / "r.db",
        "--thresholds",
        thresholds,
    )
    assert code == 0
    assert "PASSED  nccl.all_reduce busbw_gbps" in out


def test_ingest_every_tool(cli, tmp_path):
    db = tmp_path / "r.db"
    cases = {
        "fio": ["fio/psync_write_fsync.jsonplus.json", "fio/libaio_fsync.json"],
        "iperf3": ["iperf3/loopback_P2.json", "iperf3/loopback_udp.json"],
        "sockperf": ["sockperf/pingpong_udp.txt", "sockperf/pingpong_udp_mps2000_fulllog.csv"],
        "perftest": ["perftest/ib_write_lat.json", "perftest/ib_write_bw_sweep.json"],
    }
    for tool, files in cases.items():
        code, out, err = cli("ingest", "--tool", tool, *[DATA / f for f in files], "--db", db)
        assert code == 0, (tool, err)
    assert runs_in(db) == 4
    with Store.open(db) as store:
        fio_run = [r for r in store.list_runs() if r.meta.get("tool") == "fio"][0]
        fio = store.get_run(fio_run.id)
    aio = next(r for r in fio.results if r.name == "fio.aio_fsync")
    assert "asynchronous engine libaio" in aio.params["quality_warnings"]


def test_ingest_failed_iperf3_run_is_stored_failed_and_exits_1(cli, tmp_path):
    db = tmp_path / "r.db"
    code, out, _ = cli("ingest", "--tool", "iperf3", DATA / "iperf3/no_server.json", "--db", db)
    assert code == 1
    assert "unable to connect to server" in out
    with Store.open(db) as store:
        assert store.get_run("latest").status == "failed"


def test_dry_run_stores_nothing(cli, tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    monkeypatch.setenv("GPUFABRIC_DB", str(db))
    code, out, _ = cli("ingest", "--tool", "fio", DATA / "fio/psync_read.json", "--dry-run")
    assert code == 0 and "would import: 1 results" in out
    assert runs_in(db) == 0
    # --db would do nothing with --dry-run: refused rather than ignored (issue 10)
    code, _, err = cli("ingest", "--tool", "fio", DATA / "fio/psync_read.json", "--db", db, "--dry-run")
    assert code == 2 and "--db has no effect with --dry-run" in err


def _truncated(tmp_path: Path) -> Path:
    text = (DATA / "fio/psync_read.json").read_text()
    path = tmp_path / "truncated.json"
    path.write_text(text[: len(text) // 3])
    return path


def _nan(tmp_path: Path) -> Path:
    text = (DATA / "fio/psync_read.json").read_text()
    path = tmp_path / "nan.json"
    path.write_text(text.replace('"iops" : ', '"iops" : NaN, "was" : ', 1))
    return path


def _colour(tmp_path: Path) -> Path:
    path = tmp_path / "colour.json"
    path.write_text((DATA / "sockperf/pingpong_udp.txt").read_text())
    return path


@pytest.mark.parametrize(
    ("tool", "make", "message"),
    [
        ("fio", _truncated, r"truncated\.json: truncated JSON at line \d+ in fio output"),
        ("fio", _nan, r"nan\.json: non-finite number NaN in fio output"),
        ("fio", _colour, r"colour\.json: not fio JSON output: it contains terminal colour codes"),
        ("iperf3", lambda p: DATA / "fio/psync_read.json", r"psync_read\.json: not iperf3 -J output"),
        ("nccl-tests", lambda p: DATA / "iperf3/loopback_P2.json", r"loopback_P2\.json: not nccl-tests -J output"),
        ("perftest", lambda p: DATA / "perftest/ib_write_lat_no_device.txt", r"no perftest JSON document"),
    ],
)
def test_malformed_file_exits_2_names_it_and_stores_nothing(cli, tmp_path, tool, make, message):
    db = tmp_path / "r.db"
    bad = make(tmp_path)
    good = {
        "fio": "fio/psync_read.json",
        "iperf3": "iperf3/loopback_P2.json",
        "nccl-tests": "nccl-tests/all_reduce_8gpu.txt",
        "perftest": "perftest/ib_write_lat.json",
    }[tool]
    # The good file comes first: validation of all files happens before any write.
    code, out, err = cli("ingest", "--tool", tool, DATA / good, bad, "--db", db)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.search(message, err), err
    assert runs_in(db) == 0


def test_missing_file_and_unknown_tool(cli, tmp_path):
    code, _, err = cli("ingest", "--tool", "fio", tmp_path / "nope.json", "--db", tmp_path / "r.db")
    assert code == 2 and "nope.json: cannot read" in err
    code, _, err = cli("ingest", "--tool", "qperf", DATA / "fio/psync_read.json", "--db", tmp_path / "r.db")
    assert code == 2 and "choose one of fio, iperf3" in err


# ------------------------------------------------- issue 13 / issue 9 item 8


def test_tool_auto_detects_each_file_and_wrong_tool_names_the_right_one(cli, tmp_path):
    db = tmp_path / "r.db"
    files = [
        DATA / "nccl-tests/public_h100_ndr_2node_issue309.txt",
        DATA / "perftest/public_cx7_ndr_ib_send_lat.txt",
        DATA / "fio/public_cbt_nvme_randwrite_json_normal.txt",
        DATA / "iperf3/public_gke_tcp_200mb.json",
    ]
    code, out, err = cli("ingest", "--tool", "auto", *files, "--db", db, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [r["name"] for r in doc["results"]] == [
        "nccl.all_reduce",
        "perftest.ib_send_lat",
        "fio./dev/nvme8n13",
        "iperf3.tcp",
    ]
    with Store.open(db) as store:
        run = store.get_run(doc["run_id"])
    assert run.meta["tool"] == "fio,iperf3,nccl-tests,perftest" and len(run.meta["sha256"]) == 4
    nccl = run.results[0]
    assert (nccl.params["tool_ranks"], nccl.params["tool_nodes"], nccl.params["tool_gpus_per_node"]) == ("16", "2", "8")
    assert nccl.params["tool_gpu_model"] == "NVIDIA H100 80GB HBM3"
    code, _, err = cli("ingest", "--tool", "fio", DATA / "perftest/public_cx7_ndr_ib_send_lat.txt", "--db", db)
    assert code == 2 and "it looks like perftest output: use --tool perftest or --tool auto" in err
    code, _, err = cli("ingest", "--tool", "auto", DATA / "audit/ss-tulpnH.txt", "--db", db)
    assert code == 2 and "cannot tell which tool wrote it" in err


def test_same_file_twice_is_refused_unless_allowed(cli, tmp_path):
    db = tmp_path / "r.db"
    f = DATA / "nccl-tests/public_h100_1node_issue290.txt"
    assert cli("ingest", "--tool", "nccl-tests", f, "--db", db)[0] == 0
    copy = tmp_path / "renamed.log"
    copy.write_text(f.read_text())
    code, _, err = cli("ingest", "--tool", "nccl-tests", copy, "--db", db)
    assert code == 2 and "already ingested as run 1 (same content)" in err and "--allow-duplicate" in err
    assert runs_in(db) == 1
    code, _, err = cli("ingest", "--tool", "nccl-tests", f, f, "--db", tmp_path / "other.db")
    assert code == 2 and "given twice" in err
    assert cli("ingest", "--tool", "nccl-tests", copy, "--db", db, "--allow-duplicate")[0] == 0
    assert runs_in(db) == 2


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        # a negative bandwidth, a NaN time and a size that is not count x 4 B, each put into a real table
        (lambda t: t.replace("  382.99 ", " -382.99 ", 1), "negative busbw -382.99 at 134217728 B"),
        (lambda t: t.replace("   613.3 ", "     nan ", 1), "time is nan at 134217728 B"),
        (
            lambda t: t.replace("   134217728      33554432 ", "   134217728      33554431 ", 1),
            "size 134217728 B does not match count 33554431 x 4 B (float)",
        ),
    ],
)
def test_impossible_values_are_stored_invalid_never_ok(cli, tmp_path, edit, why):
    bad = tmp_path / "all_reduce_perf.log"
    bad.write_text(edit((DATA / "nccl-tests/public_h100_1node_issue290.txt").read_text()))
    db = tmp_path / "r.db"
    code, out, _ = cli("ingest", "--tool", "nccl-tests", bad, "--db", db, "--format", "json")
    assert code == 1
    (row,) = json.loads(out)["results"]
    assert row["status"] == "failed"
    with Store.open(db) as store:
        result = store.get_run("latest").results[0]
    assert result.status.value == "failed" and why in result.params["invalid"] and "invalid data" in result.reason


def test_perftest_negative_value_is_invalid(tmp_path):
    from gpufabric.bench.parsers import parser_for

    text = (DATA / "perftest/public_cx7_ndr_ib_send_lat.txt").read_text().replace(" 1.24  ", "-1.24  ", 1)
    (p,) = parser_for("perftest")(text)
    assert "-1.24" in p.invalid


def test_negative_fio_bandwidth_is_invalid_not_ok(cli, tmp_path):
    doc = json.loads((DATA / "fio/psync_read.json").read_text())
    doc["jobs"][0]["read"]["bw_bytes"] = -doc["jobs"][0]["read"]["bw_bytes"]
    bad = tmp_path / "neg.json"
    bad.write_text(json.dumps(doc))
    code, out, _ = cli("ingest", "--tool", "fio", bad, "--db", tmp_path / "r.db", "--format", "json")
    assert code == 1
    (row,) = json.loads(out)["results"]
    assert row["status"] == "failed"
    with Store.open(tmp_path / "r.db") as store:
        result = store.get_run("latest").results[0]
    assert "impossible values read_bw_gbps=-" in result.params["invalid"]


def test_json_report_is_print_jsons_document_one_result_per_line(cli, tmp_path, capsys):
    # Two real tables (one with a NaN time put in: a non-finite metric becomes null, as
    # print_json writes it) and the other tools' files: the fast renderer gives the same
    # document, with each result on one line.
    from gpufabric.cli.output import print_json

    nan = tmp_path / "all_reduce_perf.log"
    nan.write_text(
        (DATA / "nccl-tests/public_h100_1node_issue290.txt").read_text().replace("   613.3 ", "     nan ", 1)
    )
    files = [nan, DATA / "nccl-tests/public_h100_ndr_2node_issue309.txt"]
    code, out, _ = cli("ingest", "--tool", "nccl-tests", *files, "--dry-run", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    rows = doc["results"]
    assert len(rows) == 2 and None in rows[0]["metrics"].values()
    assert list(doc) == ["schema_version", "gpufabric_version", "run_id", "dry_run", "status", "results", "verdicts"]
    lines = out.splitlines()
    assert sum(line.startswith('    {"name": "nccl.') for line in lines) == 2
    print_json({k: doc[k] for k in ("run_id", "dry_run", "status", "results", "verdicts")})
    assert json.loads(capsys.readouterr().out) == doc
    code, out, _ = cli("ingest", "--tool", "nccl-tests", *files[1:], "--dry-run", "--format", "json")
    assert code == 0 and json.loads(out)["status"] == "passed"


def test_the_collector_is_paused_while_ingesting_and_restored_after(cli, tmp_path, monkeypatch):
    import gc

    from gpufabric.bench import parsers
    from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests

    seen = []

    def spy(text, *, source=""):
        seen.append(gc.isenabled())
        return parse_nccl_tests(text, source=source)

    monkeypatch.setattr(parsers, "parser_for", lambda tool: spy)
    assert gc.isenabled()
    code, _, err = cli(
        "ingest", "--tool", "nccl-tests", DATA / "nccl-tests/public_h100_ndr_2node_issue309.txt", "--dry-run"
    )
    assert code == 0, err
    assert seen == [False] and gc.isenabled()
    code, _, _ = cli("ingest", "--tool", "no-such-tool", DATA / "nccl-tests/public_h100_ndr_2node_issue309.txt")
    assert code == 2 and gc.isenabled()  # restored on an error too


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("public_a100_128gpu_sharp_error_column_coreweave.txt", "ok"),
        ("public_b200_2node_all_gather_gke.txt", "ok"),
        ("public_a100_128gpu_sharp_no_footer_coreweave.txt", "partial"),
    ],
)
def test_posted_logs_ingest_with_exit_0_and_no_false_corruption(cli, tmp_path, name, status):
    from tests.conftest import DATA

    db = tmp_path / "r.db"
    code, out, err = cli("ingest", "--tool", "auto", DATA / "nccl-tests" / name, "--db", db, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "passed"
    (row,) = doc["results"]
    assert row["status"] == status and "corruption" not in json.dumps(row) and "invalid" not in json.dumps(row)
    code, out, _ = cli("runs", "--db", db)
    assert code == 0 and "passed" in out


def test_ingest_records_the_files_hosts_not_the_ingesting_job(cli, tmp_path, monkeypatch):
    """Run fields (issue 23): hosts from the files; the Slurm job ingest itself runs in is not theirs."""
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    sample = next((DATA / "fio").glob("*.json"))
    db = tmp_path / "r.db"
    code, _, err = cli("ingest", "--tool", "fio", sample, "--host", "stor-7", "--db", db)
    assert code in (0, 1), err
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.hosts == ("stor-7",) and run.job_id == "" and run.duration_s is not None


def test_ingest_judges_a_table_against_the_plans_busbw_at_its_scale(cli, tmp_path):
    """SLOs from what was bought (issue 23): an imported 2-node table is judged against the busbw
    the plan's fabric should give at that scale; a table from another GPU is not the planned one."""
    from tests.conftest import EXAMPLES

    spec = EXAMPLES / "llama3-70b-1k.yaml"
    code, out, err = cli("plan", spec, "--format", "json")
    assert code == 0, err
    plan = tmp_path / "plan.json"
    plan.write_text(out)
    table = DATA / "nccl-tests/public_h100_ndr_2node_issue309.txt"
    code, out, err = cli(
        "ingest", "--tool", "nccl-tests", table, "--plan", plan, "--spec", spec, "--dry-run", "--format", "json"
    )
    assert code == 0, err
    (verdict,) = json.loads(out)["verdicts"]
    assert verdict["test"] == "nccl.all_reduce" and verdict["metric"] == "busbw_gbps"
    assert verdict["outcome"] in ("passed", "failed") and verdict["measured"] > 0
    assert "predict_collective all_reduce 17179869184 B on 2 x 8 h100-sxm" in verdict["source"]
    other = tmp_path / "a100.yaml"
    other.write_text(spec.read_text().replace("gpu: h100-sxm", "gpu: a100-sxm"))
    code, out, err = cli(
        "ingest", "--tool", "nccl-tests", table, "--plan", plan, "--spec", other, "--dry-run", "--format", "json"
    )
    (verdict,) = json.loads(out)["verdicts"]
    assert code == 1 and verdict["outcome"] == "not_planned_hardware"
    assert "NVIDIA H100 80GB HBM3 is not the planned a100-sxm" in verdict["reason"]
    code, _, err = cli("ingest", "--tool", "nccl-tests", table, "--plan", plan, "--dry-run")
    assert code == 2 and "--plan and --spec go together" in err
