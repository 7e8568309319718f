"""The barrier tabulated in d (model.tail.barrier_stats, issue 32): its error against each
row's own quadrature, bounded; a row's value independent of the batch and of the cache."""

from __future__ import annotations

import numpy as np
import pytest

from gpufabric.model import tail

#: Bounds in sigma_c, times max(1, d) (the barrier grows like d once hiccups dominate).
#: Mean and std: the row quadrature's own jitter as its grid slides with d (measured up to
#: 2.8e-5; the quadrature is accurate to ~1e-3, QUADRATURE_SIGMAS in
#: test_storage_reliability_tail.py), not the interpolation. p99: the interpolation
#: (cubic in log d at 1% steps, 5% below d = 0.1: measured 3.6e-8; the bisection is exact
#: to 1e-13).
MEAN_STD_BOUND = 5e-5
P99_BOUND = 1e-6


def _cases() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    rows = 1200
    half = rows // 2
    # Edge values (one rank, 2^17 ranks; q from 1e-9, where q N is tiny, to 1) and random ones.
    n = np.concatenate([rng.choice([1.0, 2.0, 8.0, 1024.0, 131072.0], half), np.rint(10 ** rng.uniform(0, 5.2, half))])
    q = np.concatenate([rng.choice([1e-9, 1e-6, 1e-3, 0.3, 1.0], half), 10 ** rng.uniform(-9, 0, half)])
    lo, hi = np.log10(tail.TABLE_D[0]), np.log10(tail.TABLE_D[1])
    d = 10 ** np.concatenate([rng.uniform(lo, hi, rows - 300), rng.uniform(lo, np.log10(tail.COARSE_BELOW_D), 300)])
    d[:20] = np.exp(np.round(np.log(d[:20]) / tail.TABLE_STEP) * tail.TABLE_STEP)  # on a node
    d[20:22] = tail.TABLE_D
    d[22:24] = np.nextafter(tail.COARSE_BELOW_D, [0.0, 1.0])  # either side of the coarse grid's end
    return n, q, d


@pytest.fixture
def cold() -> None:
    tail.clear_table()


def test_the_table_is_within_its_bound_of_every_rows_quadrature(cold: None) -> None:
    n, q, d = _cases()
    exact = tail._barrier_unique(n, q, d)
    table = tail.barrier_stats(n, q, d)
    scale = np.maximum(1.0, d)
    assert np.all(np.abs(table[0] - exact[0]) <= MEAN_STD_BOUND * scale)
    assert np.all(np.abs(np.sqrt(table[1]) - np.sqrt(exact[1])) <= MEAN_STD_BOUND * scale)
    assert np.all(np.abs(table[2] - exact[2]) <= P99_BOUND * scale)


def test_rows_off_the_table_are_their_own_quadrature(cold: None) -> None:
    # q = 0 (d irrelevant), d = 0, d below and above the table, NaN: the row quadrature's bits.
    n = np.array([1024.0, 1024.0, 8.0, 8.0, 131072.0, 16.0])
    q = np.array([0.0, 1e-4, 1e-3, 1e-3, 1e-6, 1e-3])
    d = np.array([5.0, 0.0, tail.TABLE_D[0] / 2, tail.TABLE_D[1] * 3, 1e9, np.nan])
    got = tail.barrier_stats(n, q, d)
    want = tail._barrier_unique(n, q, np.where(q > 0, d, 0.0))
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w, equal_nan=True)
    assert not tail._NODES and not tail._MEANS


def test_a_rows_value_depends_on_it_alone_not_the_batch_or_the_cache(cold: None) -> None:
    n, q, d = (a[:200] for a in _cases())
    whole = tail.barrier_stats(n, q, d)
    means = tail.barrier_stats(n, q, d, mean_only=True)[0]
    for i in range(0, 200, 23):
        tail.clear_table()
        alone_mean = tail.barrier_stats(n[i], q[i], d[i], mean_only=True)[0]
        alone = tail.barrier_stats(n[i], q[i], d[i])
        assert alone_mean == whole[0][i] == means[i]
        assert all(a == w[i] for a, w in zip(alone, whole, strict=True))


def test_the_cache_starts_afresh_past_its_size(cold: None, monkeypatch: pytest.MonkeyPatch) -> None:
    n, q, d = (a[:50] for a in _cases())
    want = tail.barrier_stats(n, q, d)
    tail.clear_table()
    monkeypatch.setattr(tail, "_NODES_MAX", 30)
    got = [tail.barrier_stats(n[i], q[i], d[i]) for i in range(50)]
    assert len(tail._NODES) <= 30
    for i, row in enumerate(got):
        assert all(a == w[i] for a, w in zip(row, want, strict=True))


def test_p99_stays_non_decreasing_in_d_on_the_table(cold: None) -> None:
    # p99 of the barrier grows with the hiccup's length; the interpolation must not add wiggles.
    for n, q in [(1024.0, 1e-6), (1024.0, 1e-4), (8.0, 0.3), (131072.0, 1e-5)]:
        d = np.geomspace(0.01, 50.0, 3001)  # both grids
        p99 = tail.barrier_stats(np.full_like(d, n), np.full_like(d, q), d)[2]
        assert np.all(np.diff(p99) >= -P99_BOUND)


def test_threads_sharing_the_table_get_each_rows_own_value(cold: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A small cache that four threads keep clearing: every answer is still the row's own value.
    import threading

    n, q, d = (a[:120] for a in _cases())
    want = tail.barrier_stats(n, q, d)
    want_mean = tail.barrier_stats(n, q, d, mean_only=True)[0]
    monkeypatch.setattr(tail, "_NODES_MAX", 40)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in np.random.default_rng(seed).permutation(120)[:40]:
                got = tail.barrier_stats(n[i], q[i], d[i], mean_only=bool(i % 2))
                assert got[0] == want[0][i] == want_mean[i]
                if not i % 2:
                    assert got[1] == want[1][i] and got[2] == want[2][i]
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
