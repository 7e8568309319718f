"""gpufabric.api: the declared names exist, work on the shipped examples and agree with the CLI."""

from __future__ import annotations

import json

import pytest

from gpufabric import api
from gpufabric.errors import SpecError
from tests.conftest import EXAMPLES


def test_declared_surface():
    assert api.API_VERSION == 1
    for name in ("load_spec", "plan", "evaluate", "predict_collective", "simulate", "open_store", "load_catalog"):
        assert name in api.__all__ and callable(getattr(api, name))


def test_plan_matches_the_cli_recommendation(cli):
    spec = api.load_spec(EXAMPLES / "lab-2node.yaml")
    result = api.plan(spec)
    code, out, _ = cli("plan", EXAMPLES / "lab-2node.yaml", "--format", "json")
    assert code in (0, 1)
    assert result.recommended == json.loads(out)["recommended"]


def test_load_spec_from_a_mapping_and_its_errors():
    import yaml

    data = yaml.safe_load((EXAMPLES / "lab-2node.yaml").read_text(encoding="utf-8"))
    assert api.load_spec(data).name == data["name"]
    data["cluster"]["gpu"] = "h100-typo"
    with pytest.raises(SpecError, match="unknown catalog id"):
        api.load_spec(data)


def test_evaluate_one_and_a_batch_unranked():
    spec = api.load_spec(EXAMPLES / "lab-2node.yaml")
    one = api.evaluate(spec)
    two = api.evaluate([spec, spec])
    assert one and len(two) == 2 and [c.id for c in two[0]] == [c.id for c in one]


def test_serving_spec_plans_through_the_same_call():
    spec = api.load_spec(EXAMPLES / "serving" / "llama3-70b-serving.yaml")
    result = api.plan(spec)
    assert result.candidates


def test_predict_collective_and_store(tmp_path):
    p = api.predict_collective(
        op="all_reduce", size_bytes=1 << 30, nodes=2, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr"
    )
    assert 0 < p.algbw_gbps <= p.ceiling_algbw_gbps and p.busbw_gbps > p.algbw_gbps
    with api.open_store(tmp_path / "r.db") as store:
        assert store.list_runs() == []


def test_the_docs_example_runs(tmp_path, monkeypatch, capsys):
    import re

    from tests.conftest import ROOT

    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), re.S).group(1)
    (tmp_path / "examples").symlink_to(EXAMPLES)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/api.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(api.plan(api.load_spec(EXAMPLES / "llama3-70b-1k.yaml")).recommended)
    assert [line.split()[0] for line in out[1:4]] == ["96", "128", "160"]
