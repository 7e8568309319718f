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


def _plain_moments(c0: np.ndarray, n: np.ndarray, q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, ...]:
    """The quadrature as first written: one fresh temporary per operation."""
    unit = np.linspace(0.0, 1.0, tail._GRID)[None, :]
    z = np.sort(
        np.concatenate([c0 + tail._OFFSETS[None, :], d - tail._HALF + (c0 + 2 * tail._HALF) * unit], axis=1), axis=1
    )
    log_f = tail._log_cdf_max(z, n, q, d)
    cdf, sf = np.exp(log_f), -np.expm1(log_f)
    dz = np.diff(z, axis=1)
    right = z[:, :-1] >= c0

    def trapezoid(left_vals: np.ndarray, right_vals: np.ndarray) -> np.ndarray:
        seg = np.where(right, right_vals[:, 1:] + right_vals[:, :-1], left_vals[:, 1:] + left_vals[:, :-1])
        return np.sum(0.5 * seg * dz, axis=1)

    first = trapezoid(-cdf, sf)
    second = trapezoid(2.0 * (c0 - z) * cdf, 2.0 * (z - c0) * sf)
    return c0[:, 0] + first, np.maximum(second - first**2, 0.0), z


@pytest.mark.parametrize("rows", [1, 7, 16])
def test_the_buffered_quadrature_is_the_plain_one_bit_for_bit(rows: int) -> None:
    # _moments writes every intermediate into reused buffers (_Work); the same operations.
    rng = np.random.default_rng(rows)
    work = tail._Work(16)
    for _ in range(20):
        n = rng.choice([1.0, 8.0, 1024.0, 131072.0], rows)[:, None]
        q = rng.choice([0.0, 1e-6, 1e-3, 0.3, 1.0], rows)[:, None]
        d = (rng.uniform(0.0, 80.0, rows) * rng.choice([1e-9, 1e-3, 1.0], rows))[:, None]
        if rows > 1:
            d[0, 0] = np.nan  # a model output gone wrong: NaN where the plain form gives NaN
        c0 = tail.max_normal_moments(n)[0]
        want = _plain_moments(c0, n, q, d)
        for got in (tail._moments(c0, n, q, d), tail._moments(c0, n, q, d, work=work)):
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g, w, equal_nan=True)
        mean, var, _ = tail._moments(c0, n, q, d, mean_only=True, work=work)
        assert var is None and np.array_equal(mean, want[0], equal_nan=True)


def test_mean_only_barrier_keeps_the_mean_and_computes_nothing_else() -> None:
    rng = np.random.default_rng(9)
    n, q, d = rng.integers(1, 10_000, 40).astype(float), np.full(40, 1e-4), rng.uniform(0.0, 50.0, 40)
    full = tail.barrier_stats(n, q, d)
    mean, var, p99 = tail.barrier_stats(n, q, d, mean_only=True)
    assert np.array_equal(mean, full[0])
    assert np.isnan(var).all() and np.isnan(p99).all()


@pytest.mark.parametrize("rows", [1, 3, 16])
def test_the_few_rows_p99_takes_the_plain_bisections_path(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    rng = np.random.default_rng(rows + 100)
    n = rng.choice([1.0, 8.0, 1024.0, 131072.0], rows)
    q = rng.choice([0.0, 1e-6, 1e-2, 0.5], rows)
    d = rng.uniform(0.0, 60.0, rows)
    few = tail._barrier_unique(n, q, d)[2]
    monkeypatch.setattr(tail, "_FEW_ROWS", 0)  # every call the plain 48 one-level passes
    assert np.array_equal(few, tail._barrier_unique(n, q, d)[2])
