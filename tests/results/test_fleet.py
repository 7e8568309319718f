"""The fleet store (issue 30): the same commands on a real PostgreSQL server, concurrent writers,
runs moving between SQLite and PostgreSQL unchanged, and OpenMetrics that Prometheus parses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric.results.codec import run_to_dict
from gpufabric.results.store import Store
from tests import postgres
from tests.conftest import DATA

pytestmark = pytest.mark.skipif(postgres.binaries() is None, reason="PostgreSQL server not installed")

NCCL = DATA / "nccl-tests" / "public_h100_ndr_2node_issue309.txt"
NCCL_B = DATA / "nccl-tests" / "public_h100_4node_issue309.txt"
FIO = DATA / "fio" / "psync_write_fsync.jsonplus.json"


@pytest.fixture(scope="module")
def pg_server():
    with postgres.server() as url:
        yield url


@pytest.fixture
def pg(pg_server):
    """An empty gpufabric database on the module's server for each test."""
    import psycopg

    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return pg_server


def _comparable(run) -> dict:
    data = run_to_dict(run)
    data.pop("id")
    data["meta"].pop("imported_from_id", None)
    return data


def test_commands_work_against_postgresql(cli, pg):
    code, out, err = cli("ingest", "--tool", "nccl-tests", NCCL, "--db", pg)
    assert code == 0, err
    code, out, err = cli("ingest", "--tool", "nccl-tests", NCCL_B, "--db", pg)
    assert code == 0, err
    code, out, err = cli("runs", "--db", pg, "--format", "json")
    assert code == 0, err
    listed = json.loads(out)
    assert [r["id"] for r in listed["runs"]] == [2, 1] and all(r["result_count"] > 0 for r in listed["runs"])
    assert "password" not in listed["db"]
    code, out, err = cli("report", "latest", "--db", pg, "--format", "json")
    assert code == 0 and '"nccl.all_reduce"' in out, err
    code, out, err = cli("compare", "1", "2", "--db", pg)
    assert code in (0, 1), err  # 2 vs 4 nodes: a comparison is made either way
    assert "busbw" in out
    with Store.open(pg) as store:
        assert store.dialect == "postgresql"
        run = store.get_run(1)
    assert run.results and any(m.samples or m.value for r in run.results for m in r.metrics)


def test_four_concurrent_ingests_store_four_runs(pg):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpufabric",
                "ingest",
                "--tool",
                "nccl-tests",
                str(f),
                "--db",
                pg,
                "--allow-duplicate",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for f in (NCCL, NCCL_B, NCCL, NCCL_B)
    ]
    outcomes = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e.decode()[-500:] for _, e in outcomes]
    with Store.open(pg) as store:
        runs = store.list_runs()
        loaded = [store.get_run(r.id) for r in runs]
    assert len(runs) == 4
    # Each run has exactly its own file's results: no ids collided between the writers.
    counts = sorted(len(r.results) for r in loaded)
    with Store.open(pg) as store:
        total = store.list_runs()
    assert sum(r.result_count for r in total) == sum(counts)
    assert counts[0] == counts[1] and counts[2] == counts[3]


def test_runs_round_trip_sqlite_postgresql_sqlite_unchanged(cli, pg, tmp_path):
    src, back = tmp_path / "ci.db", tmp_path / "back.db"
    assert cli("ingest", "--tool", "nccl-tests", NCCL, "--db", src)[0] == 0
    assert cli("ingest", "--tool", "fio", FIO, "--db", src)[0] == 0
    export = tmp_path / "runs.jsonl"
    code, out, err = cli("export", "1", "2", "--db", src, "--out", export)
    assert code == 0 and out == "" and "exported 2 run(s)" in err
    code, out, err = cli("import", export, "--db", pg, "--format", "json")
    assert code == 0, err
    assert [p["id"] for p in json.loads(out)["imported"]] == [1, 2]
    code, out, _ = cli("export", "1", "2", "--db", pg)
    again = tmp_path / "again.jsonl"
    again.write_text(out, encoding="utf-8")
    assert cli("import", again, "--db", back)[0] == 0
    with Store.open(src) as a, Store.open(pg) as b, Store.open(back) as c:
        for i in (1, 2):
            original = _comparable(a.get_run(i))
            assert _comparable(b.get_run(i)) == original
            assert _comparable(c.get_run(i)) == original


def test_openmetrics_export_parses_and_labels_every_sample(cli, tmp_path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    db = tmp_path / "r.db"
    assert cli("ingest", "--tool", "nccl-tests", NCCL, "--db", db)[0] == 0
    assert cli("ingest", "--tool", "fio", FIO, "--db", db)[0] == 0
    code, out, err = cli("export", "latest", "latest~1", "--db", db, "--format", "openmetrics")
    assert code == 0, err
    families = {f.name: f for f in text_string_to_metric_families(out)}
    assert {"gpufabric_run", "gpufabric_result", "gpufabric_run_started_seconds"} <= families.keys()
    samples = families["gpufabric_result"].samples
    assert len(samples) > 50
    for s in samples:
        assert {"cluster", "host", "test", "metric", "unit", "run_id", "job_id"} <= s.labels.keys()
        assert s.labels["test"] and s.labels["metric"] and s.labels["run_id"] in ("1", "2")
    assert {s.labels["run_id"] for s in samples} == {"1", "2"}


def test_hostile_label_values_are_escaped(tmp_path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from gpufabric.results.openmetrics import to_openmetrics
    from gpufabric.results.records import Metric, RunRecord, RunStatus, Status, TestResult

    host = 'evil"}\nx{y="1'
    run = RunRecord(
        id=1,
        kind="bench",
        status=RunStatus.passed,
        started_at=1.0,
        finished_at=2.0,
        argv=(),
        fingerprint={},
        results=(
            TestResult(
                name="t\\", tool="fio", host=host, status=Status.ok, metrics=(Metric(name="m", value=1.5, unit="s"),)
            ),
        ),
    )
    fam = {f.name: f for f in text_string_to_metric_families(to_openmetrics([run]))}
    (sample,) = fam["gpufabric_result"].samples
    assert sample.labels["host"] == host and sample.labels["test"] == "t\\" and sample.value == 1.5


def test_password_in_url_is_never_shown(cli):
    code, out, err = cli(
        "runs", "--db", "postgresql://alice:s3cret@/nodb?host=/nonexistent-socket-dir&connect_timeout=2"
    )
    assert code == 1
    assert "s3cret" not in out + err and "alice@" in err


def test_url_folded_by_a_path_is_refused(tmp_path):
    from gpufabric.errors import InputError

    with pytest.raises(InputError, match="PostgreSQL URL"):
        Store.open(Path("postgresql://u@h/db"))


def test_network_filesystem_is_recognised_by_the_longest_mount():
    from gpufabric.results.sqlconn import network_filesystem

    mounts = (
        "/dev/sda1 / ext4 rw 0 0\n"
        "fs1:/export /shared nfs4 rw,relatime 0 0\n"
        "/dev/nvme0n1 /shared/local xfs rw 0 0\n"
        "lustre@tcp:/scratch /scratch lustre rw 0 0\n"
    )
    assert network_filesystem("/shared/ci/results.db", mounts) == "nfs4"
    assert network_filesystem("/shared/local/results.db", mounts) is None
    assert network_filesystem("/scratch/x.db", mounts) == "lustre"
    assert network_filesystem("/sharedx/x.db", mounts) is None
    assert network_filesystem("/home/u/results.db", mounts) is None


def test_a_hand_edited_server_store_is_one_line_not_a_traceback(cli, pg):
    import psycopg

    assert cli("ingest", "--tool", "fio", FIO, "--db", pg)[0] == 0
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")
    code, out, err = cli("runs", "--db", pg)
    assert code == 1 and "schema_version" in err and "Traceback" not in err
