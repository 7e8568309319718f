from __future__ import annotations

import json
import math

import pytest

from gpufabric.errors import InputError
from gpufabric.report import load_json_report, render_json
from gpufabric.results.codec import run_from_dict, run_to_dict
from gpufabric.results.records import Metric, Status, TestResult
from gpufabric.results.store import Store
from tests.results.factories import make_run


def test_json_report_round_trips_to_the_same_run(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run = store.get_run(make_run(store))
    path = tmp_path / "run.json"
    path.write_text(render_json(run))
    again = load_json_report(str(path))
    assert again.results == run.results and again.verdicts == run.verdicts
    assert again.fingerprint == run.fingerprint and again.argv == run.argv and again.id == run.id


def test_nan_becomes_null_and_back():
    run = make_nan_run()
    data = json.loads(json.dumps(run_to_dict(run)))
    assert data["results"][0]["metrics"][0]["value"] is None
    assert math.isnan(run_from_dict(data).results[0].metrics[0].value)


def make_nan_run():
    from gpufabric.results.records import RunRecord

    return RunRecord(
        id=1,
        kind="ingest",
        status="passed",
        started_at=0.0,
        finished_at=None,
        argv=(),
        fingerprint={},
        results=(
            TestResult(
                name="fio.x",
                tool="fio",
                host="h",
                status=Status.ok,
                metrics=(Metric(name="lat", value=math.nan, unit="us"),),
            ),
        ),
    )


def test_wrong_shape_names_the_source():
    with pytest.raises(InputError, match="base.json: not a gpufabric run report"):
        run_from_dict({"id": 1, "results": [{"name": "x"}]}, source="base.json")


def _probe_run(tmp_path):
    from gpufabric.results.records import RankStat, RankStats

    stats = RankStats(
        quantity="step_s",
        ranks=(
            RankStat(rank=0, host="a", p50=0.5, p99=0.6, cv=0.01),
            RankStat(rank=1, host="b", p50=0.9, p99=1.0, cv=0.02),
        ),
        stragglers=(1,),
        oversubscribed="",
    )
    with (
        Store.open(tmp_path / "r.db") as store,
        store.recording("bench.train", ["gpufabric", "bench", "train"], {"host": "a"}) as rec,
    ):
        rec.result(
            TestResult(
                name="torch.train", tool="torch", host="cluster", status=Status.ok, params={"repeat": "0"}, ranks=stats
            )
        )
    with Store.open(tmp_path / "r.db") as store:
        return store.get_run(rec.run_id)


def test_run_export_v2_round_trips_typed_ranks(tmp_path):
    from gpufabric.results.codec import RUN_EXPORT_VERSION, export_from_dict, export_to_dict

    run = _probe_run(tmp_path)
    doc = json.loads(json.dumps(export_to_dict(run)))
    assert doc["schema_version"] == RUN_EXPORT_VERSION == 2
    assert doc["run"]["results"][0]["ranks"]["stragglers"] == [1]
    assert "rank_hosts" not in doc["run"]["results"][0]["params"]
    assert export_from_dict(doc) == run


def test_a_v1_run_export_reads(tmp_path):
    """v1 (what gpufabric wrote before RankStats): per-rank data as JSON text in params."""
    from gpufabric.results.codec import export_from_dict

    run = _probe_run(tmp_path)
    v1_result = {
        "name": "torch.train",
        "tool": "torch",
        "host": "cluster",
        "status": "ok",
        "metrics": [],
        "params": {
            "repeat": "0",
            "rank_step_p50_s": '{"0": 0.5, "1": 0.9}',
            "rank_step_p99_s": '{"0": 0.6, "1": 1.0}',
            "rank_step_cv": '{"0": 0.01, "1": 0.02}',
            "rank_hosts": '{"0": "a", "1": "b"}',
            "stragglers": "[1]",
            "oversubscribed": "",
        },
    }
    v1 = {
        "schema_version": 1,
        "gpufabric_version": "0.1.0",
        "run": {
            "id": run.id,
            "kind": run.kind,
            "status": "passed",
            "started_at": run.started_at,
            "argv": list(run.argv),
            "fingerprint": {"host": "a"},
            "results": [v1_result],
        },
    }
    (result,) = export_from_dict(v1).results
    assert result.ranks == run.results[0].ranks and result.params == {"repeat": "0"}


def test_a_run_export_from_a_newer_gpufabric_is_refused_with_exit_2(cli, tmp_path):
    from gpufabric.results.codec import export_to_dict

    run = _probe_run(tmp_path)
    path = tmp_path / "newer.json"
    path.write_text(json.dumps({**export_to_dict(run), "schema_version": 3}))
    with pytest.raises(InputError, match="run export schema_version 3 is newer than this gpufabric reads"):
        load_json_report(str(path))
    code, _, err = cli("compare", path, path)
    assert code == 2 and "schema_version 3 is newer" in err and "Traceback" not in err
