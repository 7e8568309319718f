"""``store.recording``: the one way a run is recorded; its status gives the exit code."""

from __future__ import annotations

import json
import sqlite3

import pytest

from gpufabric.results.codec import run_from_dict, run_to_dict
from gpufabric.results.ranks import from_params, rank_stats, to_params
from gpufabric.results.records import (
    Direction,
    Outcome,
    RankStat,
    RankStats,
    RunStatus,
    Status,
    TestResult,
    Verdict,
)
from gpufabric.results.store import Store


def _result(name: str, status: Status = Status.ok) -> TestResult:
    return TestResult(name=name, tool="fio", host="n1", status=status)


def _failed_verdict() -> Verdict:
    return Verdict(
        test="t",
        metric="m",
        host="n1",
        outcome=Outcome.failed,
        measured=1.0,
        expected=2.0,
        direction=Direction.higher,
        margin=-0.5,
    )


def test_results_are_stored_as_they_arrive_and_the_status_follows_from_them(tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store, store.recording("bench", ["gpufabric", "bench"], {"host": "n1"}) as rec:
        rec.result(_result("a"))
        with Store.open(db) as reader:  # another handle sees it before the run ends
            assert reader.get_run(rec.run_id).result_count == 1
            assert reader.get_run(rec.run_id).status is RunStatus.running
        rec.artifact("commands", "fio ...\n")
    assert rec.status is RunStatus.passed and rec.status.exit_code == 0
    with Store.open(db) as store:
        run = store.get_run(rec.run_id)
    assert run.status is RunStatus.passed and run.artifacts == {"commands": "fio ...\n"}


def test_a_failed_verdict_or_test_fails_the_run_with_exit_1(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        with store.recording("bench", [], {}) as rec:
            rec.result(_result("a"))
            rec.add_verdicts([_failed_verdict()])
        assert rec.status is RunStatus.failed and rec.status.exit_code == 1
        with store.recording("ingest", [], {}) as rec2:
            rec2.result(_result("b", Status.timeout))
        assert store.get_run(rec2.run_id).status == "failed"


def test_ctrl_c_marks_the_run_interrupted_and_keeps_what_finished(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        with pytest.raises(KeyboardInterrupt), store.recording("bench", [], {}) as rec:
            rec.result(_result("done"))
            raise KeyboardInterrupt
        run = store.get_run(rec.run_id)
    assert run.status is RunStatus.interrupted and RunStatus.interrupted.exit_code == 130
    assert [r.name for r in run.results] == ["done"] and run.finished_at is not None


def test_an_exception_marks_the_run_error(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        with pytest.raises(ValueError, match="boom"), store.recording("bench", [], {}) as rec:
            raise ValueError("boom")
        assert store.get_run(rec.run_id).status is RunStatus.error


def test_an_explicit_status_wins_and_a_run_finishes_once(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        with store.recording("bench.collectives", [], {}) as rec:
            rec.result(_result("a"))
            rec.finish(RunStatus.error)  # the launch failed although the result parsed
            with pytest.raises(RuntimeError, match="already finished"):
                rec.finish(RunStatus.passed)
        assert store.get_run(rec.run_id).status is RunStatus.error


def test_a_broken_or_interrupted_run_carries_a_failing_verdict_saying_why(tmp_path):
    """One status: JUnit, HTML and Markdown count verdicts, so a run that ends error or
    interrupted with none failing gets one (else a CI gate reads it as green)."""
    from gpufabric.errors import Terminated

    with Store.open(tmp_path / "r.db") as store:
        with pytest.raises(Terminated), store.recording("bench.train", [], {}) as rec:
            rec.result(_result("step"))
            raise Terminated()
        interrupted = store.get_run(rec.run_id)
        with pytest.raises(ValueError), store.recording("bench.checkpoint", [], {}) as rec:
            raise ValueError("disk vanished")
        broken = store.get_run(rec.run_id)
        with store.recording("bench", [], {}) as rec:
            rec.add_verdicts([_failed_verdict()])
            rec.finish(RunStatus.error, reason="launch failed")
        already = store.get_run(rec.run_id)
        with store.recording("bench", [], {}) as rec:
            rec.result(_result("ok"))
        passed = store.get_run(rec.run_id)
    (why,) = [v for v in interrupted.verdicts if v.metric == "run"]
    assert interrupted.status is RunStatus.interrupted and why.outcome is Outcome.failed
    assert why.test == "bench.train" and why.reason == "interrupted by SIGTERM; 1 finished result(s) kept"
    (why,) = broken.verdicts
    assert broken.status is RunStatus.error and why.reason == "ValueError: disk vanished"
    assert [v.metric for v in already.verdicts] == ["m"]  # a failing verdict already says it
    assert passed.verdicts == ()


def _probe_result() -> TestResult:
    stats = RankStats(
        quantity="time_us",
        ranks=(RankStat(rank=0, host="a", p50=10.0), RankStat(rank=1, host="b", p50=31.0)),
        stragglers=(1,),
        oversubscribed="",
    )
    return TestResult(
        name="torch.all_reduce",
        tool="torch",
        host="cluster",
        status=Status.ok,
        params={"op": "all_reduce", "size_bytes": "1024"},
        ranks=stats,
    )


def test_per_rank_data_is_typed_and_stored_in_the_columns_older_files_use(tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store, store.recording("bench.collectives", [], {}) as rec:
        rec.result(_probe_result())
    # On disk: the params keys results stored before RankStats existed (schema unchanged) ...
    (params,) = sqlite3.connect(db).execute("SELECT params FROM test_result").fetchone()
    stored = json.loads(params)
    assert json.loads(stored["rank_time_p50_us"]) == {"0": 10.0, "1": 31.0} and stored["stragglers"] == "[1]"
    # ... read back as typed fields, the params free of them.
    with Store.open(db) as store:
        (back,) = store.get_run(rec.run_id).results
    assert back.ranks == _probe_result().ranks and back.params == {"op": "all_reduce", "size_bytes": "1024"}


def test_a_record_with_per_rank_data_only_in_params_reads_typed():
    legacy = TestResult(
        name="torch.train",
        tool="torch",
        host="cluster",
        status=Status.ok,
        params={
            "rank_step_p50_s": '{"0": 0.5, "1": 0.7}',
            "rank_step_p99_s": '{"0": 0.6, "1": 0.9}',
            "rank_step_cv": '{"0": 0.01, "1": 0.02}',
            "rank_hosts": '{"0": "a", "1": "b"}',
            "stragglers": "[]",
            "oversubscribed": "",
            "repeat": "0",
        },
    )
    stats = rank_stats(legacy)
    assert (
        stats is not None
        and stats.unit == "s"
        and stats.get(1) == RankStat(rank=1, host="b", p50=0.7, p99=0.9, cv=0.02)
    )
    assert to_params(stats) == {k: v for k, v in legacy.params.items() if k != "repeat"}
    assert from_params({"rank_hosts": "not json"})[0] == RankStats()
    assert from_params({"size_bytes": "8"}) == (None, {"size_bytes": "8"})


def test_run_export_round_trips_typed_ranks_and_reads_exports_without_them(tmp_path):
    with Store.open(tmp_path / "r.db") as store, store.recording("bench.collectives", [], {}) as rec:
        rec.result(_probe_result())
    with Store.open(tmp_path / "r.db") as store:
        run = store.get_run(rec.run_id)
    doc = run_to_dict(run)
    assert run_from_dict(doc).results == run.results
    old = json.loads(json.dumps(doc))
    result = old["results"][0]
    del result["ranks"]
    result["params"].update(to_params(run.results[0].ranks))  # how an export before RankStats looked
    assert run_from_dict(old).results == run.results
