"""Reading a saved plan back: the one reader bench and config share."""

from __future__ import annotations

import json

import pytest

from gpufabric.errors import InputError
from gpufabric.spec.plan_file import load_plan, recommended_candidate

PLAN = {"recommended": "b", "candidates": [{"id": "a", "fabric": "ib-ndr", "storage": "nfs"},
                                           {"id": "b", "fabric": "tcp-100g", "storage": "local-nvme"}]}


def test_recommended_candidate_of_a_saved_plan(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PLAN))
    assert recommended_candidate(load_plan(path), path)["fabric"] == "tcp-100g"


@pytest.mark.parametrize(("text", "message"), [
    ('{"x": 1}', "no 'candidates'"),
    ("{not json", r"p\.json:1: not a plan JSON file \(not JSON"),
])
def test_load_plan_rejects_what_is_not_a_plan(tmp_path, text, message):
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_plan(path)


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
