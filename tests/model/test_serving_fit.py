"""docs/accuracy.md (serving): the fitting rows recomputed with the package's constants.

benchmarks/fit_serving.py fits the engine overheads on tests/data/serving/fit_rows.json;
this test reruns the fit and the closed-loop simulation of each row and fails if the
constants drift from the fit or a row leaves the error recorded in docs/accuracy.md.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpufabric.model import inference as m

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("fit_serving", ROOT / "benchmarks" / "fit_serving.py")
assert spec and spec.loader
fit_serving = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fit_serving)
DOC = json.loads((ROOT / "tests" / "data" / "serving" / "fit_rows.json").read_text())


def test_package_constants_are_the_fit():
    step, seq = fit_serving.fit(DOC)
    request, api = fit_serving.fit_api(DOC)
    assert m.STEP_OVERHEAD_S == pytest.approx(step, rel=0.02)
    assert m.SEQ_OVERHEAD_S == pytest.approx(seq, rel=0.02)
    assert m.REQUEST_OVERHEAD_S == pytest.approx(request, rel=0.02)
    assert m.API_S_PER_TOKEN_RATE == pytest.approx(api, rel=0.02)


def test_fitting_rows_within_recorded_errors():
    rows = fit_serving.errors(DOC)
    itl_err = [abs(i) for _, i, _ in rows]
    ttft_err = [abs(t) for _, _, t in rows if t is not None]
    held = [abs(e) for r, i, t in rows if r["split"] == "check" for e in (i, t) if e is not None]
    assert max(itl_err) < 0.06  # docs/accuracy.md: ITL within 5% on every row, fit or held out
    # TTFT within 20% on every row (the held-out concurrency-32 row the worst, +20%); the
    # single-server-queue law this replaced was +72% there.
    assert max(ttft_err) < 0.22
    # The bar on the held-out points: median |error| <= 15%, none beyond 100%.
    assert sorted(held)[len(held) // 2] <= 0.15 and max(held) < 1.0
