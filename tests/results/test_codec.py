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

    return RunRecord(id=1, kind="ingest", status="passed", started_at=0.0, finished_at=None, argv=(), fingerprint={},
                     results=(TestResult(name="fio.x", tool="fio", host="h", status=Status.ok,
                                         metrics=(Metric(name="lat", value=math.nan, unit="us"),)),))


def test_wrong_shape_names_the_source():
    with pytest.raises(InputError, match="base.json: not a gpufabric run report"):
        run_from_dict({"id": 1, "results": [{"name": "x"}]}, source="base.json")
