"""The tail quadrature's fast path gives the same bits as the plain form (issue 32)."""

from __future__ import annotations

import numpy as np
import pytest

from gpufabric.model import tail


def _nested_sf(x: np.ndarray) -> np.ndarray:
    """normal_sf as first written: the nested Chebyshev form, one temporary per operation."""
    x = np.asarray(x, dtype=float)
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    c = tail._ERFC
    poly = c[0] + t * (
        c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * (c[5] + t * (c[6] + t * (c[7] + t * (c[8] + t * c[9])))))))
    )
    erfc = t * np.exp(-z * z + poly)
    return np.where(x >= 0, 0.5 * erfc, 1.0 - 0.5 * erfc)


@pytest.mark.parametrize("shape", [(), (1,), (5,), (37, 802)])
def test_normal_sf_in_place_is_the_nested_form_bit_for_bit(shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(3).normal(0.0, 9.0, shape)
    got = tail.normal_sf(x)
    assert got.shape == np.shape(x)
    assert np.array_equal(got, _nested_sf(x))
    edge = np.array([0.0, -0.0, -9.0, -9.000001, -40.0, 40.0, np.inf, -np.inf])
    assert np.array_equal(tail.normal_sf(edge), _nested_sf(edge))


def test_normal_sf_is_exactly_one_below_the_skip_threshold() -> None:
    # _log_cdf_max skips the hiccup term's evaluation there; this is what makes that exact.
    x = np.linspace(-60.0, tail._SF_ONE_BELOW, 20001)
    assert np.all(_nested_sf(x) == 1.0)


def test_barrier_does_not_depend_on_how_rows_are_grouped(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    rows = 150
    n = rng.integers(1, 100_000, rows).astype(float)
    q = rng.choice([0.0, 1e-6, 1e-3, 0.3], rows)
    d = np.where(q > 0, rng.choice([0.5, 3.0, 20.0, 400.0, 1e4], rows) * rng.uniform(0.5, 2.0, rows), 0.0)
    chunked = tail._barrier_unique(n, q, d)
    monkeypatch.setattr(tail, "_CHUNK_ROWS", rows)
    whole = tail._barrier_unique(n, q, d)
    one = [tail._barrier_unique(n[i : i + 1], q[i : i + 1], d[i : i + 1]) for i in range(0, rows, 37)]
    for got, ref in zip(chunked, whole, strict=True):
        assert np.array_equal(got, ref)
    for k, i in enumerate(range(0, rows, 37)):
        assert all(one[k][j][0] == whole[j][i] for j in range(3))
