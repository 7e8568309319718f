"""docs/accuracy.md's training table is what scripts/training_accuracy.py writes, and its bars hold."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.model import efficiency
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("training_accuracy", ROOT / "scripts" / "training_accuracy.py")
ta = importlib.util.module_from_spec(_spec)
sys.modules["training_accuracy"] = ta
_spec.loader.exec_module(ta)

CAT = load_catalog()
DOC = ROOT / "docs" / "accuracy.md"


@pytest.fixture(scope="module")
def results():
    return ta.results(CAT)


def test_doc_table_matches_the_script():
    text = DOC.read_text()
    assert ta.regenerate(text, CAT) == text, "regenerate: PYTHONPATH=src python scripts/training_accuracy.py --write"


def test_no_row_comes_from_the_held_out_tables():
    banned = ("nemo", "megatron-bridge", "torchtitan")
    for row in ta.ROWS:
        assert not any(b in (row.table + row.note).lower() for b in banned), row.name


def test_held_out_rows_meet_the_bars(results):
    s = ta.summary(results)
    assert s["held-out"]["n"] >= 10
    assert s["held-out"]["model_median"] <= 12.0
    assert s["held-out"]["anchored_median"] <= 5.0
    # Context-parallel rows are expressible and predicted, none refused.
    cp = [r for r in results if r.row.cp > 1]
    assert cp and all(abs(r.model_pct) < 25 for r in cp)


def test_the_fitted_constant_is_optimal_on_its_grid_neighbours():
    """FRAMEWORK_EFFICIENCY is what fit() finds for the shipped passes: no neighbour on the
    0.01 grid fits the fit rows better (the full --fit searches the passes too)."""
    eta, ew, sm = efficiency.FRAMEWORK_EFFICIENCY, efficiency.ELEMENTWISE_PASSES, efficiency.SOFTMAX_PASSES
    here = ta.fit_error(CAT, eta, ew, sm)
    for other in (round(eta - 0.01, 2), round(eta + 0.01, 2)):
        assert ta.fit_error(CAT, other, ew, sm) >= here - 1e-9
