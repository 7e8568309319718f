"""Reading a saved plan back: the one reader bench and config share."""

from __future__ import annotations

import json

import pytest

from gpufabric.errors import InputError
from gpufabric.spec.plan_file import load_plan, recommended_candidate

PLAN = {
    "recommended": "b",
    "candidates": [
        {"id": "a", "fabric": "ib-ndr", "storage": "nfs"},
        {"id": "b", "fabric": "tcp-100g", "storage": "local-nvme"},
    ],
}


def test_recommended_candidate_of_a_saved_plan(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PLAN))
    saved = load_plan(path)
    assert (saved.schema_version, saved.recommended, len(saved.candidates)) == (1, "b", 2)
    chosen = recommended_candidate(saved, path)
    assert (chosen.id, chosen.fabric, chosen.storage, chosen.capacity) == ("b", "tcp-100g", "local-nvme", "build")
    assert chosen.step_time_s is None and chosen.breakdown == {}  # keys the hand-written plan leaves out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"x": 1}', "no 'candidates'"),
        ("{not json", r"p\.json:1: not a plan JSON file \(not JSON"),
    ],
)
def test_load_plan_rejects_what_is_not_a_plan(tmp_path, text, message):
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_plan(path)


def test_figures_that_are_not_finite_numbers_read_as_absent():
    odd = {
        "recommended": "a",
        "candidates": [
            {
                "id": "a",
                "fabric": "ib-ndr",
                "storage": "nfs",
                "step_time_s": "1",
                "storage_read_gbps": True,
                "breakdown": [1],
                "capacity": "rent",
            }
        ],
    }
    chosen = recommended_candidate(odd)
    assert (chosen.step_time_s, chosen.storage_read_gbps, chosen.breakdown, chosen.capacity) == (None, None, {}, "rent")


def test_load_plan_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read plan"):
        load_plan(tmp_path / "absent.json")


def test_recommended_must_exist_and_name_fabric_and_storage():
    with pytest.raises(InputError, match="recommended candidate None is not among candidates"):
        recommended_candidate({"candidates": []})
    with pytest.raises(InputError, match="candidate 'b' lacks fabric/storage ids"):
        recommended_candidate({"recommended": "b", "candidates": [{"id": "b", "fabric": "ib-ndr"}]})


def test_recommended_ids_are_catalog_ids():
    from gpufabric.catalog import load_catalog

    known = load_catalog().known_ids()
    bad = {"recommended": "b", "candidates": [{"id": "b", "fabric": "ib-xdr9", "storage": "nfs"}]}
    with pytest.raises(InputError, match=r"unknown fabric id 'ib-xdr9' \(did you mean 'ib-xdr'\?\)"):
        recommended_candidate(bad, known_ids=known)
    hostile = {"recommended": "b", "candidates": [{"id": "b", "fabric": "ib-ndr", "storage": "nfs\n$(id)"}]}
    with pytest.raises(InputError, match="unknown storage id"):
        recommended_candidate(hostile, known_ids=known)


def _saved_plan(cli, tmp_path):
    from tests.conftest import EXAMPLES

    code, out, err = cli("plan", EXAMPLES / "lab-2node.yaml", "--format", "json")
    assert code in (0, 1), err
    assert (code == 1) == (json.loads(out)["recommended"] is None)  # exit 1 exactly when nothing is recommended
    path = tmp_path / "plan.json"
    path.write_text(out)
    return path, json.loads(out)


def test_saved_plan_round_trips_through_its_module(cli, tmp_path):
    from gpufabric.spec.plan_file import PLAN_SCHEMA_VERSION, plan_from_dict

    path, written = _saved_plan(cli, tmp_path)
    assert written["schema_version"] == PLAN_SCHEMA_VERSION
    saved = load_plan(path)
    assert saved.document == written and plan_from_dict(json.loads(json.dumps(written))) == saved
    if written["recommended"] is not None:  # read back typed: the figures the SLOs use
        chosen = recommended_candidate(saved, path)
        row = next(c for c in written["candidates"] if c["id"] == written["recommended"])
        assert chosen.step_time_s == row["step_time_s"] > 0 and chosen.capacity == row["capacity"]
        assert chosen.storage_read_gbps == row["storage_read_gbps"] and chosen.breakdown == row["breakdown"]


def test_a_plan_of_the_previous_version_reads(tmp_path):
    # v0: no schema_version (a hand-written plan, or one whose envelope was stripped)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PLAN))
    doc = load_plan(path)
    assert doc.schema_version == doc.document["schema_version"] == 1 and recommended_candidate(doc, path).id == "b"


def test_a_plan_from_a_newer_gpufabric_is_refused_with_exit_2(cli, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**PLAN, "schema_version": 99}))
    with pytest.raises(InputError, match=r"p\.json: plan schema_version 99 is newer than this gpufabric reads"):
        load_plan(path)
    code, out, err = cli("bench", "--suite", "quick", "--dry-run", "--plan", path)
    assert code == 2 and "schema_version 99 is newer" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("bad", ['"1"', "-1", "1.5", "true"])
def test_a_malformed_schema_version_is_refused(tmp_path, bad):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PLAN)[:-1] + f', "schema_version": {bad}}}')
    with pytest.raises(InputError, match="not a whole number"):
        load_plan(path)
