from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import numpy as np
import pytest

from gpufabric import __version__
from gpufabric.errors import InputError
from gpufabric.results.records import Direction, Metric, Outcome, Status, TestResult, Verdict
from gpufabric.results.schema import MIGRATIONS, STORE_SCHEMA_VERSION, migrate
from gpufabric.results.sqlconn import SqliteConnection
from gpufabric.results.store import Store, StoreDamaged, default_path
from tests.results.factories import bw_result, latency_result, make_run, sample_run_results


def test_round_trip_keeps_every_field(tmp_path):
    result = latency_result(n=500)
    with Store.open(tmp_path / "sub" / "r.db") as store:
        run_id = store.begin_run(
            kind="bench",
            argv=["gpufabric", "bench"],
            fingerprint={"host": "n1", "gpus": []},
            spec_name="s",
            plan={"recommended": "c1"},
            meta={"suite": "quick"},
        )
        store.add_result(run_id, result)
        store.add_verdicts(
            run_id,
            [
                Verdict(
                    test="t",
                    metric="m",
                    host="n1",
                    outcome=Outcome.noisy,
                    measured=1.5,
                    expected=None,
                    direction=Direction.lower,
                    margin=-0.01,
                    warnings=("cv 40%",),
                    unit="us",
                    passed_repeats=1,
                    total_repeats=3,
                    source="plan",
                )
            ],
        )
        store.add_artifact(run_id, "sbatch.sh", "#!/bin/bash\n")
        run = store.get_run(run_id)
    assert run.results == (result,)  # samples survive the float64 BLOB bit for bit
    assert run.argv == ("gpufabric", "bench") and run.gpufabric_version == __version__
    assert run.fingerprint == {"host": "n1", "gpus": []} and run.plan == {"recommended": "c1"}
    assert run.verdicts[0].warnings == ("cv 40%",) and run.verdicts[0].total_repeats == 3
    assert run.artifacts == {"sbatch.sh": "#!/bin/bash\n"}
    assert run.status == "running" and run.finished_at is None


def test_nan_metric_value_reads_back_as_nan(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.begin_run(kind="ingest", argv=[], fingerprint={})
        store.add_result(
            run_id,
            TestResult(
                name="fio.x",
                tool="fio",
                host="h",
                status=Status.ok,
                metrics=(Metric(name="lat", value=math.nan, unit="us"),),
            ),
        )
        assert math.isnan(store.get_run(run_id).results[0].metrics[0].value)


def test_list_runs_newest_first_with_counts_and_refs(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        first = make_run(store, status="passed")
        second = make_run(store, status="failed")
        runs = store.list_runs()
        assert [r.id for r in runs] == [second, first]
        assert runs[0].results == () and runs[0].result_count == len(sample_run_results())
        assert runs[0].verdict_counts == {"passed": 2, "failed": 1, "skipped": 1}
        assert store.get_run("latest").id == second
        assert store.get_run("latest~1").id == first
        assert store.get_run(str(first)).status == "passed"
        assert len(store.list_runs(limit=1)) == 1


@pytest.mark.parametrize("ref", [99, "latest~5", "yesterday"])
def test_unknown_run_ref_is_input_error(tmp_path, ref):
    with Store.open(tmp_path / "r.db") as store:
        make_run(store)
        with pytest.raises(InputError, match="run"):
            store.get_run(ref)


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("run", "fingerprint", "{not json"),
        ("run", "status", "exploded"),
        ("test_result", "params", "[1,"),
        ("run", "started_at", "yesterday"),  # text in a number column: no error downstream, a wrong answer
        ("test_result", "duration_s", "abc"),
        ("metric", "value", "fast"),
        ("verdict", "measured", "x1"),
    ],
)
def test_a_hand_edited_database_is_one_line_not_a_traceback(tmp_path, cli, table, column, value):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        make_run(store)
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {table} SET {column}=?", (value,))
    with (
        Store.open(db) as store,
        pytest.raises(StoreDamaged, match=rf"r\.db: run 1: table {table}, column {column} \(row 1\) holds"),
    ):
        store.get_run("latest")
    code, _, err = cli("report", "latest", "--db", db)
    assert code == 1 and "edited by hand" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and f"table {table}, column {column}" in err


def test_finish_run_rejects_unknown_status(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.begin_run(kind="bench", argv=[], fingerprint={})
        with pytest.raises(InputError, match="status 'ok'"):
            store.finish_run(run_id, "ok")


def test_default_path_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_DB", str(tmp_path / "env" / "x.db"))
    assert default_path() == tmp_path / "env" / "x.db"
    with Store.open() as store:
        assert store.path == tmp_path / "env" / "x.db"
    assert (tmp_path / "env" / "x.db").exists()


def test_pragmas_wal_and_full_sync(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store.schema_version == STORE_SCHEMA_VERSION


def test_garbage_file_is_a_clear_input_error(tmp_path):
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(InputError, match="not a gpufabric results database"):
        Store.open(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "r.db"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="schema v99 is newer"):
        Store.open(path)


def test_v1_store_is_migrated_with_its_samples(tmp_path):
    """A file written by the v1 schema (samples as inline JSON) opens, migrates and reads back."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(SqliteConnection(conn), target=1)
    conn.execute(
        "INSERT INTO run (id, kind, status, started_at, argv, fingerprint, gpufabric_version)"
        " VALUES (7, 'bench', 'passed', 1.7e9, '[\"gpufabric\",\"bench\"]', '{\"host\":\"old\"}', '0.0.9')"
    )
    conn.execute(
        "INSERT INTO test_result (id, run_id, name, tool, host, status) VALUES (3, 7, 'sockperf.data',"
        " 'sockperf', 'old', 'ok')"
    )
    conn.execute(
        "INSERT INTO metric (result_id, name, value, unit, direction, samples) VALUES"
        " (3, 'lat_p50_us', 12.5, 'us', 'lower', '[12.0, 12.5, 13.25]')"
    )
    conn.execute(
        "INSERT INTO verdict (run_id, test, metric, host, outcome, measured, expected, direction, margin)"
        " VALUES (7, 'sockperf.data', 'lat_p50_us', 'old', 'passed', 12.5, 15, 'lower', 0.1)"
    )
    conn.close()

    with Store.open(path) as store:
        assert store.schema_version == STORE_SCHEMA_VERSION == len(MIGRATIONS)
        run = store.get_run(7)
        assert run.fingerprint == {"host": "old"} and run.gpufabric_version == "0.0.9"
        assert run.results[0].metrics[0].samples == (12.0, 12.5, 13.25)
        assert run.verdicts[0].outcome == Outcome.passed and run.verdicts[0].total_repeats == 0
        columns = [row[1] for row in store._conn.execute("PRAGMA table_info(metric)")]
        assert "samples" not in columns
        blob = store._conn.execute("SELECT data FROM sample").fetchone()[0]
        assert len(blob) == 3 * 8  # float64 BLOB, not JSON text
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_v2_store_gains_run_fields_and_finished_durations(tmp_path):
    """v3 (issue 23): runs carry duration_s, cluster, hosts and job_id; old finished runs get their duration."""
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(SqliteConnection(conn), target=2)
    conn.execute(
        "INSERT INTO run (id, kind, status, started_at, finished_at, argv, fingerprint)"
        " VALUES (1, 'bench', 'passed', 100.0, 112.5, '[]', '{}'), (2, 'bench', 'running', 200.0, NULL, '[]', '{}')"
    )
    conn.close()
    with Store.open(path) as store:
        done, running = store.get_run(1), store.get_run(2)
        assert done.duration_s == 12.5 and done.hosts == () and done.cluster == done.job_id == ""
        assert running.duration_s is None
        from gpufabric.results.records import RunInfo

        store.finish_run(2, "failed", RunInfo(cluster="c1", hosts=("n1", "n2"), job_id="77"))
        run = store.get_run(2)
        assert run.hosts == ("n1", "n2") and run.cluster == "c1" and run.job_id == "77" and run.duration_s > 0
        assert [r.job_id for r in store.list_runs()] == ["77", ""]


def test_empty_v0_file_is_initialised(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()  # a zero-length file: version 0
    with Store.open(path) as store:
        assert store.schema_version == STORE_SCHEMA_VERSION
        assert store.list_runs() == []


_WRITER = textwrap.dedent("""
    import sys
    from gpufabric.results.records import Metric, Status, TestResult
    from gpufabric.results.store import Store
    store = Store.open(sys.argv[1])
    run_id = store.begin_run(kind="bench", argv=["killme"], fingerprint={"host": "h"})
    i = 0
    while True:
        store.add_result(run_id, TestResult(name=f"t{i}", tool="fio", host="h", status=Status.ok,
            raw_output="x" * 20000,
            metrics=(Metric(name="lat_us", value=float(i), unit="us", samples=tuple(float(j) for j in range(5000))),)))
        print(i, flush=True)
        i += 1
""")


def test_kill_9_mid_run_keeps_finished_results_and_integrity(tmp_path):
    path = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        committed = -1
        deadline = time.monotonic() + 60
        while committed < 15 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            committed = int(line)
        os.kill(proc.pid, signal.SIGKILL)  # mid-write of the next result, most likely
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert committed >= 15
    with Store.open(path) as store:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        run = store.get_run("latest")
        assert run.status == "running"  # never finished: shows as interrupted
        names = [r.name for r in run.results]
        # every result reported as committed is there, whole; a torn one is not
        assert names[: committed + 1] == [f"t{i}" for i in range(committed + 1)]
        assert all(len(r.metrics[0].samples) == 5000 for r in run.results)
        assert store.list_runs()[0].status == "running"


def test_concurrent_reader_sees_committed_results(tmp_path):
    path = tmp_path / "r.db"
    with Store.open(path) as writer, Store.open(path) as reader:
        run_id = writer.begin_run(kind="bench", argv=[], fingerprint={})
        writer.add_result(run_id, latency_result(n=10))
        assert reader.get_run(run_id).result_count == 1
        assert json.loads(json.dumps(reader.list_runs()[0].fingerprint)) == {}


def test_samples_stored_compactly(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.begin_run(kind="bench", argv=[], fingerprint={})
        samples = tuple(np.linspace(1, 2, 100_000).tolist())
        store.add_result(
            run_id,
            TestResult(
                name="t",
                tool="sockperf",
                host="h",
                status=Status.ok,
                metrics=(Metric(name="lat_us", value=1.0, unit="us", samples=samples),),
            ),
        )
        count, size = store._conn.execute("SELECT count, length(data) FROM sample").fetchone()
    assert (count, size) == (100_000, 800_000)


def _corpus_results() -> list[TestResult]:
    """Results as ingest builds them from a real nccl-tests log (61 metrics, samples on the times)."""
    from pathlib import Path

    from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests

    path = Path(__file__).parents[1] / "data" / "nccl-tests" / "public_h100_8node_issue309.txt"
    return [
        TestResult(name=f"nccl.{p.case}", tool="nccl-tests", host="h", status=Status.ok, metrics=p.metrics)
        for p in parse_nccl_tests(path.read_text(), source=path.name)
    ]


def test_add_results_stores_what_add_result_stores(tmp_path):
    batch = [*sample_run_results(), *_corpus_results(), latency_result(n=500)]
    with Store.open(tmp_path / "one.db") as one, Store.open(tmp_path / "many.db") as many:
        run_one = one.begin_run(kind="ingest", argv=[], fingerprint={})
        ids_one = [one.add_result(run_one, r) for r in batch]
        run_many = many.begin_run(kind="ingest", argv=[], fingerprint={})
        many.add_result(run_many, bw_result())  # ids continue after rows already stored
        other = many.begin_run(kind="ingest", argv=[], fingerprint={})
        many.add_result(other, bw_result())
        ids_many = many.add_results(run_many, batch)
        assert many.get_run(run_many).results == (bw_result(), *batch) == (bw_result(), *one.get_run(run_one).results)
        assert many.get_run(other).results == (bw_result(),)
        dump = "SELECT m.name, m.value, m.unit, m.direction, s.count, s.data FROM metric m"
        dump += " LEFT JOIN sample s ON s.metric_id = m.id WHERE m.result_id >= ? ORDER BY m.id"
        assert many._conn.execute(dump, (ids_many[0],)).fetchall() == one._conn.execute(dump, (1,)).fetchall()
    assert ids_one == list(range(1, len(batch) + 1))
    assert ids_many == list(range(3, len(batch) + 3))


def test_add_results_bulk_keeps_foreign_keys_sound(tmp_path):
    """A batch is written with SQLite's foreign-key checks off (Store._bulk_write): the
    references are still sound, the checks are back on afterwards, and a run deleted
    before the batch's transaction is still refused as the check would have refused it.
    Its larger page cache is the connection's own again afterwards too."""
    from gpufabric.results import store as store_module

    with Store.open(tmp_path / "r.db") as store:
        cache = store._conn.execute("PRAGMA cache_size").fetchone()[0]
        run_id = store.begin_run(kind="ingest", argv=[], fingerprint={})
        store.add_results(run_id, [*_corpus_results(), latency_result()])
        assert store._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert store._conn.execute("PRAGMA cache_size").fetchone()[0] == cache != -store_module._BULK_CACHE_KIB
        assert store._conn.execute("PRAGMA foreign_key_check").fetchall() == []
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            store._write(store_module._insert_results_checked, run_id + 1, [latency_result()])
        with pytest.raises(ValueError, match="sideways"):  # a failed batch restores the checks too
            bad = Metric(name="lat", value=1.0, unit="us", direction="sideways")  # type: ignore[arg-type]
            store.add_results(run_id, [latency_result(), replace(latency_result(), metrics=(bad,))])
        assert store._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_add_results_stores_non_float_values_as_floats(tmp_path):
    odd = TestResult(
        name="t",
        tool="fio",
        host="h",
        status=Status.ok,
        metrics=(
            Metric(name="int", value=3, unit="count"),
            Metric(name="numpy", value=np.int64(5), unit="count", direction="lower"),  # type: ignore[arg-type]
            Metric(name="plain", value=0.5, unit="s", samples=(1, np.float32(0.25))),  # type: ignore[arg-type]
        ),
    )
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.begin_run(kind="ingest", argv=[], fingerprint={})
        store.add_results(run_id, [odd, latency_result()])
        (back, _) = store.get_run(run_id).results
    assert [(m.value, type(m.value), m.direction) for m in back.metrics] == [
        (3.0, float, Direction.higher),
        (5.0, float, Direction.lower),
        (0.5, float, Direction.higher),
    ]
    assert back.metrics[2].samples == (1.0, 0.25)


def test_add_results_is_all_or_none(tmp_path):
    bad = TestResult(
        name="t",
        tool="fio",
        host="h",
        status=Status.ok,
        metrics=(Metric(name="lat", value=1.0, unit="us", direction="sideways"),),  # type: ignore[arg-type]
    )
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.begin_run(kind="ingest", argv=[], fingerprint={})
        store.add_result(run_id, bw_result())
        with pytest.raises(ValueError, match="sideways"):
            store.add_results(run_id, [latency_result(), *_corpus_results(), bad])
        assert store.get_run(run_id).results == (bw_result(),)
        assert store._conn.execute("SELECT COUNT(*) FROM metric").fetchone()[0] == len(bw_result().metrics)
        assert store.add_results(run_id, []) == []
