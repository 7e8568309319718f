"""Model outputs are checked before they leave the planner (issue 9 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError
from gpufabric.plan import rank, recommend
from gpufabric.plan.candidates import to_records
from gpufabric.plan.evaluate import evaluate_table
from gpufabric.plan.table import build_table, enumerate_designs
from gpufabric.spec import load_spec
from tests.conftest import EXAMPLES


def _evaluated():
    spec = load_spec(EXAMPLES / "lab-2node.yaml").spec
    designs = enumerate_designs(spec)
    out = evaluate_table(build_table(spec, load_catalog(), designs))
    return spec, designs, {k: np.array(v, dtype=float) for k, v in out.items()}


@pytest.mark.parametrize(("column", "bad"), [("run_cost_usd", np.nan), ("step_time_s", np.inf),
                                              ("capex_usd", -1.0), ("goodput", np.nan)])
def test_nan_inf_or_negative_output_is_a_violation_never_recommended(column, bad):
    spec, designs, out = _evaluated()
    first = recommend(rank(to_records(spec, designs, out)), spec.requirements).recommended
    row = next(i for i, d in enumerate(designs) if d.id == first)
    out[column][row] = bad
    cands = rank(to_records(spec, designs, out))
    broken = next(c for c in cands if c.id == first)
    assert not broken.meets_requirements
    assert broken.violations[0].startswith(f"model_output {column}") and first in broken.violations[0]
    assert recommend(cands, spec.requirements).recommended != first


def test_no_sound_design_is_an_error_not_a_recommendation():
    spec, designs, out = _evaluated()
    out["run_cost_usd"][:] = np.nan
    with pytest.raises(InputError, match="no finite answer for any design"):
        recommend(rank(to_records(spec, designs, out)), spec.requirements)
