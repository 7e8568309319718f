"""Model outputs are checked before they leave the planner (issue 9 item 4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpufabric.catalog import load_catalog
from gpufabric.plan import rank
from gpufabric.plan.candidates import concat_tables, prepare, to_records
from gpufabric.plan.evaluate import evaluate_table
from gpufabric.plan.recommend import recommend
from gpufabric.plan.table import build_table, scale_table
from gpufabric.spec import load_spec
from tests.conftest import EXAMPLES


def _records(spec, catalog, damage=None):
    """The planner's own path (evaluate_scenarios at 1, 1), with ``damage(out)`` applied to the outputs."""
    p = prepare(spec, catalog)
    k = len(p.designs)
    base = build_table(
        spec,
        catalog,
        p.designs,
        p.choice.layouts,
        pairs=(np.arange(k), np.arange(k)),
        compute_efficiency=p.anchor.compute_efficiency,
    )
    out = evaluate_table(concat_tables([scale_table(base, network_latency=1.0, storage_latency=1.0)]))
    if damage is not None:
        damage(out)
    return p.designs, rank(
        to_records(
            spec,
            p.designs,
            p.choice.layouts,
            out,
            peak_tflops=p.anchor.peak_tflops,
            figure_flops_per_token=p.anchor.figure_flops_per_token(p.choice.layouts),
            compute_efficiency=p.anchor.compute_efficiency,
            runner_ups=p.choice.runner_ups,
            notes=p.choice.notes,
        )
    )


@pytest.mark.parametrize(
    ("column", "bad"), [("run_cost_usd", np.nan), ("step_time_s", np.inf), ("capex_usd", -1.0), ("goodput", np.nan)]
)
def test_nan_inf_or_negative_output_is_a_violation_never_recommended(column, bad):
    spec, catalog = load_spec(EXAMPLES / "lab-2node.yaml").spec, load_catalog()
    designs, cands = _records(spec, catalog)
    first = recommend(cands, spec.requirements).recommended
    row = next(i for i, d in enumerate(designs) if d.id == first)

    def damage(out):
        getattr(out, column)[row] = bad

    _, cands = _records(spec, catalog, damage)
    broken = next(c for c in cands if c.id == first)
    assert not broken.meets_requirements
    assert broken.violations[0].startswith(f"model_output {column}") and first in broken.violations[0]
    assert recommend(cands, spec.requirements).recommended != first


def test_no_sound_design_is_never_recommended():
    spec, catalog = load_spec(EXAMPLES / "lab-2node.yaml").spec, load_catalog()

    def damage(out):
        out.run_cost_usd[:] = np.nan

    _, cands = _records(spec, catalog, damage)
    rec = recommend(cands, spec.requirements)
    assert rec.recommended is None and rec.binding == "model_output"
    assert "no finite answer for any design" in rec.rationale


def test_evaluation_columns_checked_are_all_numeric_outputs():
    from gpufabric.plan.candidates import invalid_outputs
    from gpufabric.plan.evaluate import Evaluation

    assert any(f.name == "run_cost_usd" for f in dataclasses.fields(Evaluation))
    spec, catalog = load_spec(EXAMPLES / "llama3-405b-16k.yaml").spec, load_catalog()
    _, cands = _records(spec, catalog)
    assert not any(v.startswith("model_output") for c in cands for v in c.violations)
    assert invalid_outputs({"a": np.array([1.0, -2.0]), "b": np.array([np.nan, 3.0])}) == {0: ("b",), 1: ("a",)}
