"""The workload registry and the plan/simulate services: one read of the spec, one dispatch."""

from __future__ import annotations

import dataclasses

import pytest

from gpufabric.app import services, workloads
from gpufabric.app.requests import INFERENCE, SPEC, SYNTHETIC, PlanRequest, SimulateRequest
from gpufabric.errors import InputError, SpecError
from tests.conftest import EXAMPLES

SERVING = EXAMPLES / "serving" / "llama3-70b-serving.yaml"
TRAINING = EXAMPLES / "lab-2node.yaml"


def _count_reads(monkeypatch):
    import gpufabric.spec.loader as loader

    reads = []
    real = loader.read_text

    def counting(path, what="spec"):
        reads.append(str(path))
        return real(path, what)

    monkeypatch.setattr(loader, "read_text", counting)
    return reads


@pytest.mark.parametrize(
    ("path", "kind", "spec_type"), [(TRAINING, "training", "Spec"), (SERVING, "inference", "InferenceSpec")]
)
def test_a_spec_is_read_once_and_planned_by_its_kind(monkeypatch, path, kind, spec_type):
    reads = _count_reads(monkeypatch)
    outcome = services.plan(PlanRequest(spec_file=path))
    assert reads == [str(path)]  # was twice: once to decide the kind, once to load
    assert outcome.kind == kind and type(outcome.result).__name__ in ("Plan", "ServingPlan")
    doc = outcome.to_json(outcome.shown(None, default=None))
    assert doc["name"] == outcome.result.name and outcome.exit_code == (0 if outcome.result.recommended else 1)
    workload = workloads.load_workload(path, {})
    assert type(workload.spec).__name__ == spec_type and workloads.kind_for(workload.spec) is workload.kind


def test_an_unknown_kind_is_a_located_error_naming_the_registered_kinds(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nworkload:\n  kind: batch\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"s.yaml:3.*unknown workload kind 'batch'.*choose training or inference"):
        workloads.load_workload(path, {})
    with pytest.raises(TypeError, match="not a spec of a registered workload kind"):
        workloads.kind_for({"name": "x"})


def test_shown_keeps_the_recommended_training_design():
    outcome = services.plan(PlanRequest(spec_file=EXAMPLES / "llama3-70b-1k.yaml"))
    rec = outcome.result.recommended
    for top in (1, 2, 100):
        shown = outcome.shown(top, default=None)
        assert len(shown) == min(top, len(outcome.result.candidates)) and rec in [c.id for c in shown]
    headers, rows = outcome.table(outcome.shown(3, default=None))
    assert len(rows) == 3 and all(len(r) == len(headers) for r in rows) and [r[0] for r in rows].count("*") == 1


@pytest.mark.parametrize(("spec", "mode"), [(None, SYNTHETIC), (TRAINING, SPEC), (SERVING, INFERENCE)])
def test_simulate_resolves_the_mode_from_the_spec_kind(spec, mode):
    request = SimulateRequest(spec=spec, ranks=8 if spec is None else None)
    assert services.prepare_simulation(request).mode == mode


def test_simulate_mode_errors():
    with pytest.raises(InputError, match="give a SPEC, or --ranks N"):
        services.prepare_simulation(SimulateRequest())
    with pytest.raises(InputError, match="--candidate needs a SPEC"):
        services.prepare_simulation(SimulateRequest(ranks=8, candidate="x"))
    with pytest.raises(InputError, match="not both"):
        services.prepare_simulation(SimulateRequest(spec=SERVING, ranks=8))


def test_a_synthetic_simulation_outcome_is_the_engine_result():
    from gpufabric import api

    outcome = api.simulate(SimulateRequest(ranks=64, steps=200, seed=3, jitter="normal:1ms"))
    doc = outcome.to_json()
    assert outcome.exit_code == 0 and doc["mode"] == "synthetic" and (doc["ranks"], doc["steps"]) == (64, 200)
    assert "step_times_s" not in doc and doc["step_time_ms"]["mean"] > 100.0  # max over ranks > the mean


def test_every_simulate_knob_declares_its_flag_help_and_modes():
    for f in dataclasses.fields(SimulateRequest):
        m = f.metadata
        assert m["help"] and m["modes"] <= {SYNTHETIC, SPEC, INFERENCE} and m["modes"]
        assert f.name == "spec" or m["flag"].startswith("--")
