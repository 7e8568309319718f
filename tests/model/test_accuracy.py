"""docs/accuracy.md is regenerated from the model and every point stays within its bound."""

from __future__ import annotations

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.model.accuracy import points, render
from tests.conftest import ROOT

DOC = ROOT / "docs" / "accuracy.md"
START, END = "<!-- accuracy-table:start -->", "<!-- accuracy-table:end -->"


def test_doc_table_matches_model():
    text = DOC.read_text()
    table = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert table == render(load_catalog()), "regenerate: python -m gpufabric.model.accuracy > table, paste into docs/accuracy.md"


@pytest.mark.parametrize("point", points(load_catalog()), ids=lambda p: p.quantity)
def test_point_within_recorded_error(point):
    if point.kind.startswith("prediction (must be below)"):
        assert point.predicted < point.published
    else:
        assert abs(point.error_pct) <= point.bound_pct


def test_collective_predictions_within_15_percent():
    coll = [p for p in points(load_catalog()) if "AllReduce" in p.quantity or "NIC" in p.quantity]
    assert len(coll) == 4 and all(abs(p.error_pct) <= 15 for p in coll)
