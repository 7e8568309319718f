from __future__ import annotations

import json

from gpufabric.results.store import Store
from tests.results.factories import make_run, sample_run_results


def test_runs_lists_history_newest_first(cli, tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        first = make_run(store, status="passed")
        second = make_run(store, status="failed")
        interrupted = store.begin_run(kind="bench", argv=["gpufabric", "bench"], fingerprint={"host": "n2"})
    code, out, _ = cli("runs", "--db", db)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["id", "started"]
    assert [int(line.split()[0]) for line in lines[1:]] == [interrupted, second, first]
    assert "running" in lines[1] and "failed" in lines[2] and "1 failed 2 passed 1 skipped" in lines[2]


def test_runs_json_and_limit(cli, tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        make_run(store)
        last = make_run(store)
    code, out, _ = cli("runs", "--db", db, "--limit", "1", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["schema_version"] == 1
    [run] = data["runs"]
    assert run["id"] == last and run["result_count"] == len(sample_run_results())
    assert run["verdict_counts"] == {"passed": 2, "failed": 1, "skipped": 1} and run["host"] == "node1"


def test_runs_on_empty_db_and_env_default(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_DB", str(tmp_path / "env.db"))
    code, out, _ = cli("runs")
    assert code == 0 and out.startswith("no runs in") and "env.db" in out


def test_runs_bad_input(cli, tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite" * 100)
    code, _, err = cli("runs", "--db", bad)
    assert code == 2 and "not a gpufabric results database" in err and "Traceback" not in err
    code, _, err = cli("runs", "--db", tmp_path / "x.db", "--limit", "0")
    assert code == 2 and "--limit" in err


def test_runs_show_duration_cluster_and_job_id(cli, tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        run_id = store.begin_run(
            kind="bench",
            argv=["gpufabric", "bench"],
            fingerprint={"host": "n1"},
            meta={"cluster": "lab-a", "hosts": ["n1", "n2"], "job_id": "slurm:4242\x1b[2J"},
        )
        store.finish_run(run_id, "passed")
    code, out, _ = cli("runs", "--db", db)
    assert code == 0
    line = out.splitlines()[1]
    assert "[cluster lab-a, job id slurm:4242\\x1b[2J]" in line and "\x1b" not in out
    code, out, _ = cli("runs", "--db", db, "--format", "json")
    (run,) = json.loads(out)["runs"]
    assert run["cluster"] == "lab-a" and run["hosts"] == "n1, n2" and run["job_id"].startswith("slurm:4242")
    assert run["duration_s"] is not None and run["duration_s"] >= 0
