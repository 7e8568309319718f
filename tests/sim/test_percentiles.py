"""sim/serving.py ``percentiles`` is np.percentile bit for bit (issue 32: without np.unique's
import of numpy.ma at start-up), on samples with ties, infinities, NaN and every small size."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from gpufabric.sim.serving import percentiles

QS = [(50, 99), (0, 100), (25, 75, 99.9), (1,), (100,)]


def _same(a: list[float], b: list[float]) -> bool:
    return all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("kind", ["lognormal", "ties", "inf", "nan"])
def test_percentiles_are_numpys_bit_for_bit(kind):
    rng = np.random.default_rng(11)
    for n in [*range(1, 90), 299, 300, 301, 1999, 2000, 2001, 36_000]:
        if kind == "lognormal":
            x = rng.lognormal(0.0, 1.0, n) * rng.random()
        elif kind == "ties":
            x = rng.integers(0, 5, n).astype(float) * 0.1
        else:
            x = rng.standard_normal(n)
            x[rng.integers(0, n)] = np.inf if kind == "inf" else np.nan
        for q in QS:
            with np.errstate(invalid="ignore"):
                want = np.percentile(x, q).tolist()
                got = percentiles(x, q)
            assert _same(want, got), (kind, n, q, want, got)


def test_a_serving_summary_does_not_import_numpy_ma():
    code = (
        "import sys\n"
        "from tests.sim.test_miss_rule import _cfg\n"
        "from gpufabric.sim.serving import simulate_serving\n"
        "simulate_serving(_cfg()).summary()\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
