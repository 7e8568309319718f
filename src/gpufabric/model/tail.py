"""Tail amplification of synchronous steps: the max over N ranks (models.md 2.5).

A synchronous step ends when its slowest rank ends. This is the closed form of the model
the simulator samples (docs/simulation.md, "The model"), so the two can be checked
against each other (tests/sim/test_planner_agreement.py):

    T = max over ranks i (C_i + H_i)  +  fixed  +  sum over s = 1..S (max over p links a_{j,s})

- C_i ~ Normal(c, sigma_c): per-rank compute time, sigma_c = compute x compute_cv.
- H_i: a hiccup (Dean & Barroso, "The Tail at Scale", CACM 2013): with probability q
  per rank per step an extra delay D on *that rank only*. It costs the step
  ``max(0, C_i + D - max of the other ranks)``: a 200 ms retransmit timeout on a rank
  whose compute ended 30 ms before the slowest one costs 170 ms, not 200.
- a_{j,s} ~ Normal(alpha, sigma_j): S dependent latency steps, each waiting for the
  slowest of p concurrent transfers.

**Barrier (compute + hiccups), exact.** In units of sigma_c (z = (x - c)/sigma_c,
d = D/sigma_c) every rank has the CDF ``G(z) = (1-q) Phi(z) + q Phi(z - d)``, so the
barrier has the CDF ``G(z)^N``. Its mean and variance are integrals of ``1 - G^N`` and
``G^N`` (trapezoid rule on two grids of 401 points, one around the no-hiccup maximum
m(N), one around d; between them the integrand is constant; accurate to ~1e-3 sigma_c,
checked against a grid ten times finer in the tests); its p99 solves
``G(z)^N = 0.99`` (bisection, 48 halvings). With q = 0 these are m(N), v(N) (the mean
and variance of the max of N standard normals; ``max_normal_moments``) and
``Phi^-1(0.99^(1/N))``. With q > 0 these are tabulated in d for each (n, q) (1% steps
in log d, 5% below d = 0.1, cubic interpolation, nodes kept between calls;
``barrier_stats``): within 5e-5 max(1, d) sigma_c of each row's own quadrature for mean
and std (that quadrature's own jitter as its grid slides with d) and 1e-6 max(1, d) for
the p99 (tests/model/test_tail_table.py). With q N small the step is slow with probability
``P = 1 - (1-q)^N`` (``slow_step_probability``) but by less than D.

**Collectives.** The S dependent steps add ``S sigma_j m(p)`` to the mean and
``S sigma_j^2 v(p)`` to the variance; their sum is taken as normal (the engine does the
same beyond 64 steps).

**Step.** Mean and variance add (the parts are independent), so the CV is exact for this
model. The p99 combines the barrier's exact p99 ``y99`` (mean ``mu_Y``) with the normal
collective sum (mean ``mu_X``, p99 excursion ``e_X = 2.326 sqrt(S v(p)) sigma_j``):

    e_Y = max(0, y99 - mu_Y)
    p99 = y99 + mu_X + sqrt(e_Y^2 + e_X^2) - e_Y

exact when both parts are normal (then it is ``mu + 2.326 std``). Unlike the exact
quantile of a sum, it never falls when the jitter or the rank count grows (the exact p99
of a bimodal step can fall when symmetric noise is added; a planner that ranked designs
on that artefact would reward jitter): d p99 / d sigma_j >= 0 because mu_X and e_X grow
with sigma_j, and d p99 / dN >= 0 because it is a convex combination of the growth of
y99 and of mu_Y, both non-decreasing in N. Agreement with the engine:
docs/simulation.md, "Agreement with the planner's closed forms".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from gpufabric.model.rows import unique_rows


def ndtr(x: Any) -> np.ndarray:
    """Standard normal CDF via erf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7).

    numpy only: importing scipy.special costs ~0.4 s, a fifth of the CLI's budget.
    """
    z = np.asarray(x, dtype=float) / np.sqrt(2.0)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-a * a)
    return 0.5 * (1.0 + np.sign(z) * erf)


#: ``erfcc``'s Chebyshev coefficients, constant term first (normal_sf's source).
_ERFC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


#: From this many points ``normal_sf`` works in place; below, the per-call cost of ``out=``
#: dominates (the p99 bisection of one row calls it 96 times on one-element arrays).
_IN_PLACE_FROM = 256


def _normal_sf_small(x: np.ndarray) -> np.ndarray:
    """``normal_sf`` as plain expressions (the same operations, so the same bits)."""
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    c = _ERFC
    poly = c[0] + t * (
        c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * (c[5] + t * (c[6] + t * (c[7] + t * (c[8] + t * c[9])))))))
    )
    half_erfc = 0.5 * (t * np.exp(-z * z + poly))
    return np.where(x >= 0, half_erfc, 1.0 - half_erfc)


def normal_sf(x: Any) -> np.ndarray:
    """Standard normal survival 1 - Phi(x) with *relative* error < 1.2e-7 everywhere.

    Chebyshev fit of erfc (Press et al., Numerical Recipes in C, 2nd ed., section 6.2,
    ``erfcc``). The barrier over 10^5 ranks lives where 1 - Phi is ~1e-5, below the
    absolute error of :func:`ndtr`. Evaluated in place (the same operations in the same
    order as the nested form ``c0 + t (c1 + t (...))``, so the same bits, with one buffer
    instead of twenty temporaries: the tail's quadrature calls it on ~10^6 points).
    """
    x = np.asarray(x, dtype=float)
    if x.size < _IN_PLACE_FROM:
        return _normal_sf_small(x)
    shape = x.shape
    z = np.abs(x)
    z /= np.sqrt(2.0)
    t = 0.5 * z
    t += 1.0
    np.divide(1.0, t, out=t)
    poly = t * _ERFC[-1]
    for c in _ERFC[-2:0:-1]:
        poly += c
        poly *= t
    poly += _ERFC[0]
    half_erfc = np.negative(z)  # -z z + poly, exp, times t: t exp(-z^2 + poly) = erfc
    half_erfc *= z
    half_erfc += poly
    np.exp(half_erfc, out=half_erfc)
    half_erfc *= t
    half_erfc *= 0.5
    return np.where(x >= 0, half_erfc, 1.0 - half_erfc).reshape(shape)


_X = np.linspace(-8.0, 12.0, 4001)
_DX = _X[1] - _X[0]
_PHI = np.exp(-0.5 * _X**2) / np.sqrt(2 * np.pi)
_SF = normal_sf(_X)
Z99 = 2.3263478740408408
#: Half-width (in sigma_c) of the integration grids around the barrier's body and around
#: the hiccup delay; beyond it 1 - Phi < 1e-17.
_HALF = 8.5
_GRID = 401
_BISECT = 48
_OFFSETS = np.linspace(-_HALF, _HALF, _GRID)
_OFFSETS[_GRID // 2] = 0.0  # c0 must be a node exactly: the moment integrands jump there


@lru_cache(maxsize=4096)
def _max_normal_moments_scalar(n: int) -> tuple[float, float]:
    if n <= 1:
        return 0.0, 1.0
    # Phi^(n-1) from the survival function: ndtr's absolute error 1.5e-7, raised to the
    # power 10^5, would move the variance by 15%.
    dens = n * _PHI * np.exp((n - 1) * np.log1p(-np.minimum(_SF, 1.0)))
    mean = float(np.sum(_X * dens) * _DX)
    second = float(np.sum(_X**2 * dens) * _DX)
    return mean, max(second - mean**2, 0.0)


def max_normal_moments(n: Any) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the max of ``n`` i.i.d. standard normals (n >= 1; arrays ok)."""
    arr = np.asarray(n)
    flat = np.maximum(np.rint(arr).astype(np.int64).ravel(), 1)
    uniq, inv = np.unique(flat, return_inverse=True)
    stats = np.array([_max_normal_moments_scalar(int(u)) for u in uniq]).reshape(-1, 2)
    return stats[inv, 0].reshape(arr.shape), stats[inv, 1].reshape(arr.shape)


def expected_max_offset(n: Any) -> np.ndarray:
    """E[max of n standard normals], in units of sigma."""
    return max_normal_moments(n)[0]


def slow_step_probability(q: Any, n: Any) -> Any:
    """P(at least one of n ranks hiccups) = 1 - (1 - q)^n (Dean & Barroso 2013)."""
    return -np.expm1(np.asarray(n, dtype=float) * np.log1p(-np.asarray(q, dtype=float)))


#: Below this ``normal_sf`` is exactly 1.0 (1 - erfc/2 with erfc < 1e-18 rounds to 1), so
#: ``_log_cdf_max`` skips evaluating it there: a hiccup rank's term, far left of d, is most
#: of the grid around the barrier's body when d is large (the result is the same bits).
_SF_ONE_BELOW = -9.0
#: Rows per quadrature pass: 16 x 802 floats (~100 KiB) keeps each temporary under glibc's
#: 128 KiB mmap threshold, so it is reused from the heap rather than mapped and page-faulted
#: afresh (a batch of 1,000 configurations: 116,000 page faults and 3x the time at 64 rows,
#: ~400 at 16). A row's result does not depend on how rows are grouped.
_CHUNK_ROWS = 16


def _log_cdf_max(z: np.ndarray, n: np.ndarray, q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """log G(z)^n with G the per-rank CDF of compute + hiccup (standard units)."""
    x = np.asarray(z - d)
    dead = x < _SF_ONE_BELOW if x.size >= _IN_PLACE_FROM else None
    if dead is not None and dead.any():
        hiccup = np.ones_like(x)
        live = ~dead  # NaN stays live: normal_sf's own answer
        hiccup[live] = normal_sf(x[live])
    else:
        hiccup = normal_sf(x)
    sf = (1.0 - q) * normal_sf(z) + q * hiccup
    with np.errstate(divide="ignore"):
        return n * np.log1p(-np.minimum(sf, 1.0))


@lru_cache(maxsize=4)
def _unit(points: int) -> np.ndarray:
    """0..1 in ``points`` steps (read-only; by the grid size, which a test may change)."""
    unit = np.linspace(0.0, 1.0, points)
    unit.setflags(write=False)
    return unit


class _Work:
    """The buffers of one quadrature pass of up to ``rows`` rows, reused by every pass of a call.

    Every intermediate lives in one of these (numpy ``out=``): freeing ~25 fresh 100 KiB
    temporaries per pass let glibc trim the heap's top and page-fault it back on the next
    pass, which cost ~70% of the quadrature's time (a 16-row pass: ~1.4 ms, ~0.4 ms here).
    """

    __slots__ = ("a", "b", "c", "dead", "dz", "e", "f", "h", "mask", "right", "s1", "s2", "z")

    def __init__(self, rows: int) -> None:
        wide, narrow = (rows, 2 * _GRID), (rows, 2 * _GRID - 1)
        self.z, self.a, self.b, self.c, self.e, self.f, self.h = (np.empty(wide) for _ in range(7))
        self.dz, self.s1, self.s2 = (np.empty(narrow) for _ in range(3))
        self.mask, self.dead = np.empty(wide, dtype=bool), np.empty(wide, dtype=bool)
        self.right = np.empty(narrow, dtype=bool)

    def view(self, rows: int) -> _Work:
        """The first ``rows`` rows of every buffer (the last, shorter pass)."""
        out = _Work.__new__(_Work)
        for name in _Work.__slots__:
            object.__setattr__(out, name, getattr(self, name)[:rows])
        return out


def _normal_sf_into(
    x: np.ndarray, out: np.ndarray, z: np.ndarray, t: np.ndarray, poly: np.ndarray, mask: np.ndarray
) -> None:
    """``normal_sf(x)`` into ``out`` through the scratch buffers ``z``, ``t``, ``poly``, ``mask``:
    its in-place path's operations in its order (the same bits), with no temporaries."""
    np.abs(x, out=z)
    z /= np.sqrt(2.0)
    np.multiply(z, 0.5, out=t)
    t += 1.0
    np.divide(1.0, t, out=t)
    np.multiply(t, _ERFC[-1], out=poly)
    for c in _ERFC[-2:0:-1]:
        poly += c
        poly *= t
    poly += _ERFC[0]
    np.negative(z, out=out)
    out *= z
    out += poly
    np.exp(out, out=out)
    out *= t
    out *= 0.5
    np.subtract(1.0, out, out=poly)  # where(x >= 0, half_erfc, 1 - half_erfc)
    np.greater_equal(x, 0.0, out=mask)
    np.logical_not(mask, out=mask)
    np.copyto(out, poly, where=mask)


def _moments(
    c0: np.ndarray, n: np.ndarray, q: np.ndarray, d: np.ndarray, *, mean_only: bool = False, work: _Work | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Mean and variance of the standardised barrier (2-d columns in), and its integration grid
    (``mean_only``: no variance, None; the mean is the same bits). ``work``: buffers of at
    least these rows (the grid returned is a view of one of them)."""
    rows = len(c0)
    w = _Work(rows) if work is None else work.view(rows)
    # One grid around the no-hiccup maximum (c0 is a node), one from d - 8.5 to d + c0 + 8.5
    # (a hiccup rank's time, up to the slowest of many hiccup ranks).
    z = w.z
    np.add(c0, _OFFSETS, out=z[:, :_GRID])
    np.multiply(c0 + 2 * _HALF, _unit(_GRID), out=z[:, _GRID:])
    np.add(z[:, _GRID:], d - _HALF, out=z[:, _GRID:])
    z.sort(axis=1)
    # log G(z)^n (_log_cdf_max): the hiccup rank's term is exactly 1 below _SF_ONE_BELOW.
    x, hiccup, sf = w.h, w.c, w.a
    np.subtract(z, d, out=x)
    np.less(x, _SF_ONE_BELOW, out=w.dead)
    _normal_sf_into(x, hiccup, w.b, w.e, w.f, w.mask)
    np.copyto(hiccup, 1.0, where=w.dead)
    _normal_sf_into(z, sf, w.b, w.e, w.f, w.mask)
    sf *= 1.0 - q
    hiccup *= q
    sf += hiccup
    np.minimum(sf, 1.0, out=sf)
    np.negative(sf, out=sf)
    with np.errstate(divide="ignore"):
        np.log1p(sf, out=sf)
    sf *= n
    log_f = sf
    cdf, surv = np.exp(log_f, out=w.b), np.expm1(log_f, out=w.e)
    np.negative(surv, out=surv)
    # Moments about c0: E[Z - c0] = int_c0^inf (1 - F) dz - int_-inf^c0 F dz and
    # E[(Z - c0)^2] = int 2 |z - c0| (1 - F or F) dz (integration by parts).
    dz, right = w.dz, w.right
    np.subtract(z[:, 1:], z[:, :-1], out=dz)
    np.greater_equal(z[:, :-1], c0, out=right)

    def trapezoid(left_vals: np.ndarray, right_vals: np.ndarray) -> np.ndarray:
        # where(right, r[1:] + r[:-1], l[1:] + l[:-1]), halved, times dz, summed per row.
        seg, other = w.s1, w.s2
        np.add(left_vals[:, 1:], left_vals[:, :-1], out=seg)
        np.add(right_vals[:, 1:], right_vals[:, :-1], out=other)
        np.copyto(seg, other, where=right)
        seg *= 0.5
        seg *= dz
        return np.sum(seg, axis=1)

    np.negative(cdf, out=w.f)
    first = trapezoid(w.f, surv)
    if mean_only:
        return c0[:, 0] + first, None, z
    left, rght = w.f, w.h
    np.subtract(c0, z, out=left)
    left *= 2.0
    left *= cdf
    np.subtract(z, c0, out=rght)
    rght *= 2.0
    rght *= surv
    second = trapezoid(left, rght)
    return c0[:, 0] + first, np.maximum(second - first**2, 0.0), z


def _barrier_unique(
    n: np.ndarray, q: np.ndarray, d: np.ndarray, *, mean_only: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance and p99 of the standardised barrier for 1-d arrays of distinct rows
    (``mean_only``: variance and p99 NaN, not computed; the mean is the same bits)."""
    c0 = max_normal_moments(n)[0]
    rows = len(n)
    mean, var = np.empty(rows), np.full(rows, np.nan)
    lo, hi = np.empty(rows), np.empty(rows)
    work = _Work(min(rows, _CHUNK_ROWS))
    for i in range(0, rows, _CHUNK_ROWS):
        part = slice(i, i + _CHUNK_ROWS)
        cols = (a[part, None] for a in (c0, n, q, d))
        mean[part], v, z = _moments(*cols, mean_only=mean_only, work=work)
        if v is not None:
            var[part] = v
        lo[part], hi[part] = z[:, 0], z[:, -1]
    if mean_only:
        return mean, var, np.full(rows, np.nan)
    return mean, var, _p99(lo, hi, n, q, d)


#: Halvings of the p99 bisection taken per pass when rows are few (numpy's per-call cost
#: dominates there: one design's plan spent ~2 ms in 48 one-row passes): the 2^L - 1
#: midpoints the next L halvings can visit, evaluated at once, then the path the plain
#: bisection takes through them. The same midpoints from the same ends, so the same bits.
_LEVELS = 4
_FEW_ROWS = 16


def _p99(lo: np.ndarray, hi: np.ndarray, n: np.ndarray, q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The p99 of each row: G(z)^n = 0.99 by bisection between ``lo`` and ``hi`` (the grid's ends)."""
    target = np.log(0.99)
    if len(lo) > _FEW_ROWS or _BISECT % _LEVELS:
        for _ in range(_BISECT):
            mid = 0.5 * (lo + hi)
            below = _log_cdf_max(mid, n, q, d) < target
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        return 0.5 * (lo + hi)
    cols = np.arange(len(lo))
    for _ in range(_BISECT // _LEVELS):
        # Level by level, every interval the path may reach: below keeps (mid, hi), else (lo, mid).
        mids, spans = [], [(lo, hi)]
        for _level in range(_LEVELS):
            nxt = []
            for a, b in spans:
                m = 0.5 * (a + b)
                mids.append(m)
                nxt += [(m, b), (a, m)]
            spans = nxt
        points = np.stack(mids)
        below_all = _log_cdf_max(points, n, q, d) < target
        node = np.zeros(len(lo), dtype=int)  # index within its level
        for level in range(_LEVELS):
            at = (1 << level) - 1 + node
            below, mid = below_all[at, cols], points[at, cols]
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
            node = 2 * node + np.where(below, 0, 1)
    return 0.5 * (lo + hi)


def barrier_stats(
    n: Any, q: Any, d: Any, *, quantise: bool = False, mean_only: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance and p99 of max over ``n`` ranks of (Z + d B), Z standard normal,
    B Bernoulli(q): the compute barrier with hiccups in units of sigma_c (arrays ok).

    Rows with equal (n, q, d) are computed once (a plan has few distinct ones). With
    ``quantise`` d is rounded to a 2% geometric grid first, so a layout search (where
    every layout has its own compute time, hence its own d) shares a few hundred
    quadratures: the tabulated form of the integral. The error is bounded by the
    barrier's change over 1% of d (below 1% of the hiccup's contribution). With
    ``mean_only`` the variance and p99 are NaN, not computed (the anchor's solve reads
    only the mean step time: a third of the quadrature and the p99's 48 bisection passes).

    Rows with q > 0 and d in TABLE_D are interpolated between nodes on a fixed grid in
    log d (``_barrier_table``; module docstring for the bound): a batch of configurations
    whose d all differ costs a few hundred node quadratures, not three per row, and a row's
    value depends on (n, q, d) alone.
    """
    n, q, d = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (n, q, d)))
    shape = n.shape
    q = np.clip(q.ravel(), 0.0, 1.0)
    # Without hiccups d is irrelevant; dropping it keeps those rows on one grid (the grid's
    # placement moves the quadrature by ~1e-4 sigma).
    d = np.where(q > 0, np.maximum(d.ravel(), 0.0), 0.0)
    if quantise:
        with np.errstate(divide="ignore"):
            d = np.where(d > 0, np.exp(np.round(np.log(np.maximum(d, 1e-300)) / 0.02) * 0.02), 0.0)
    n1 = np.maximum(np.rint(n.ravel()), 1.0)
    first, inv = unique_rows(n1, q, d)
    nu, qu, du = n1[first], q[first], d[first]
    table = (q[first] > 0) & (du >= TABLE_D[0]) & (du <= TABLE_D[1])  # NaN d: the quadrature's answer
    if table.all():
        mean, var, p99 = _barrier_table(nu, qu, du, mean_only=mean_only)
    else:
        mean, var, p99 = np.empty(len(nu)), np.empty(len(nu)), np.empty(len(nu))
        exact = ~table
        mean[exact], var[exact], p99[exact] = _barrier_unique(nu[exact], qu[exact], du[exact], mean_only=mean_only)
        if table.any():
            got = _barrier_table(nu[table], qu[table], du[table], mean_only=mean_only)
            mean[table], var[table], p99[table] = got
    if mean_only:
        var, p99 = np.full(len(nu), np.nan), np.full(len(nu), np.nan)
    return mean[inv].reshape(shape), var[inv].reshape(shape), p99[inv].reshape(shape)


#: The barrier with hiccups is tabulated in d on this range (standard units); outside it,
#: and for q = 0 (where d is irrelevant: one quadrature per n), each row is its own
#: quadrature. Nodes at d = exp(k TABLE_STEP) for integer k (COARSE_STEP below
#: COARSE_BELOW_D), the same nodes for every call,
#: so a row's value depends on (n, q, d) alone: a batch and its rows one at a time agree to
#: the bit, and a node computed once serves every later call (``_NODES``).
TABLE_D = (1e-4, 1e6)
#: 1% steps in d: cubic interpolation in log d then adds < 2e-7 sigma_c (times max(1, d))
#: to the p99 and nothing visible to mean and variance, whose error against the row's own
#: quadrature (< 5e-5 sigma_c, tests/model/test_tail_table.py) is the quadrature's own
#: jitter as its grid slides with d (it is accurate to ~1e-3 sigma_c, module docstring).
TABLE_STEP = 0.01
#: Below this d the barrier is nearly flat in log d (its change from d = 0 is ~q N d), and
#: 5% steps interpolate as well (a batch of configurations whose d spans 10^-3..10^-2 needs
#: 46 nodes per (n, q), not 230). Each row reads the nodes of its own grid.
COARSE_BELOW_D, COARSE_STEP = 0.1, 0.05


#: Nodes kept: mean, variance and p99 of each (n, q, k) (``_NODES``), the mean alone where
#: only it was asked for (``_MEANS``: the anchor's solve, a third of the quadrature and no
#: bisection; the same bits as the full node's mean). Past _NODES_MAX nodes a cache starts
#: afresh (~100 bytes a node), which changes no value, only what is recomputed.
_NODES_MAX = 200_000
_NODES: dict[tuple[float, float, int, int], tuple[float, float, float]] = {}
_MEANS: dict[tuple[float, float, int, int], float] = {}
_NODES_LOCK = threading.Lock()


def clear_table() -> None:
    """Forget the tabulated nodes (benchmarks measure a cold process with it; no value changes)."""
    with _NODES_LOCK:
        _NODES.clear()
        _MEANS.clear()


def _nodes(keys: list[tuple[float, float, int, int]], *, mean_only: bool) -> np.ndarray:
    """(len(keys), 3) mean, variance, p99 at the nodes (n, q, grid, k: d = exp(k TABLE_STEP),
    or exp(k COARSE_STEP) on grid 1) (``mean_only``: (len(keys), 1) means), the missing ones
    computed in one quadrature and kept.

    Threads: the values are read into a local dict first (``dict.get`` is atomic), so another
    thread's clearing of the cache between the look-up and the answer cannot lose one; the
    updates and the clearing take ``_NODES_LOCK``. Two threads may compute one node twice
    (the same bits)."""
    found: dict[tuple[float, float, int, int], Any] = {}
    for key in keys:
        full = _NODES.get(key)
        value = (full[0] if full is not None else _MEANS.get(key)) if mean_only else full
        if value is not None:
            found[key] = value
    missing = [key for key in keys if key not in found]
    if missing:
        cols = np.array(missing, dtype=float)
        step = np.where(cols[:, 2] > 0, COARSE_STEP, TABLE_STEP)
        got = _barrier_unique(cols[:, 0], cols[:, 1], np.exp(cols[:, 3] * step), mean_only=mean_only)
        new = dict(
            zip(missing, got[0].tolist() if mean_only else zip(*(g.tolist() for g in got), strict=True), strict=True)
        )
        found.update(new)
        with _NODES_LOCK:
            if len(_NODES) + len(_MEANS) + len(new) > _NODES_MAX:
                _NODES.clear()
                _MEANS.clear()
            (_MEANS if mean_only else _NODES).update(new)
    if mean_only:
        return np.array([[found[key]] for key in keys])
    return np.array([found[key] for key in keys])


def _barrier_table(
    n: np.ndarray, q: np.ndarray, d: np.ndarray, *, mean_only: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_barrier_unique`` by cubic Lagrange interpolation in log d between the four nodes
    around each row (rows with q > 0 and d in TABLE_D), nodes computed once and kept."""
    coarse = d < COARSE_BELOW_D
    u = np.log(d) / np.where(coarse, COARSE_STEP, TABLE_STEP)
    k = np.floor(u)
    t = u - k
    # The four nodes k-1..k+2 of every row on its grid; the distinct ones looked up (or computed).
    grid = np.repeat(coarse.astype(float), 4)
    keys = np.stack([np.repeat(n, 4), np.repeat(q, 4), grid, (k[:, None] + np.arange(-1.0, 3.0)).ravel()], axis=1)
    first, inv = unique_rows(keys[:, 0], keys[:, 1], keys[:, 2], keys[:, 3])
    wanted = [(float(a), float(b), int(g), int(c)) for a, b, g, c in keys[first]]
    values = _nodes(wanted, mean_only=mean_only)[inv].reshape(len(n), 4, -1)
    w = np.stack(
        [
            -t * (t - 1) * (t - 2) / 6,
            (t + 1) * (t - 1) * (t - 2) / 2,
            -(t + 1) * t * (t - 2) / 2,
            (t + 1) * t * (t - 1) / 6,
        ],
        axis=1,
    )
    # Term by term in a fixed order (not einsum, whose summation order follows the shapes):
    # a mean interpolated alone is the same bits as with the variance and p99.
    out = [
        w[:, 0] * v[:, 0] + w[:, 1] * v[:, 1] + w[:, 2] * v[:, 2] + w[:, 3] * v[:, 3] for v in np.moveaxis(values, 2, 0)
    ]
    if mean_only:
        nan = np.full(len(n), np.nan)
        return out[0], nan, nan
    return out[0], np.maximum(out[1], 0.0), out[2]


@dataclass(frozen=True, slots=True, kw_only=True)
class TailStats:
    """Step-time distribution summary (seconds)."""

    mean_s: Any
    std_s: Any
    p99_s: Any
    cv: Any


def step_tail(
    *,
    base_s: Any,
    compute_s: Any,
    compute_cv: Any,
    num_ranks: Any,
    dependent_steps: Any,
    group_size: Any,
    jitter_s: Any,
    hiccup_prob: Any,
    hiccup_s: Any,
    quantise: bool = False,
    mean_only: bool = False,
) -> TailStats:
    """Mean, std, p99 and CV of a synchronous step (vectorised; module docstring).

    Args:
        base_s: deterministic step time (compute + bubble + exposed comm).
        compute_s, compute_cv: per-rank compute time and its CV (barrier over num_ranks).
        dependent_steps, group_size, jitter_s: latency-bound steps on the critical path,
            the ranks each waits for, and the per-step latency std-dev.
        hiccup_prob, hiccup_s: per-rank per-step probability and length of a rare delay
            of one rank.
        quantise: share quadratures across rows on a 2% grid of d (``barrier_stats``).
        mean_only: only ``mean_s`` (the same bits); std, p99 and CV are NaN.
    """
    sigma_c = np.asarray(compute_s, dtype=float) * np.asarray(compute_cv, dtype=float)
    D = np.asarray(hiccup_s, dtype=float)
    # Without compute jitter the hiccup is a plain Bernoulli delay; a floor of 1e-9 D keeps
    # d = D / sigma finite (and its grid representable) at no visible cost.
    sigma = np.maximum(sigma_c, 1e-9 * D + 1e-300)
    mu_z, var_z, p99_z = barrier_stats(num_ranks, hiccup_prob, D / sigma, quantise=quantise, mean_only=mean_only)
    m_j, v_j = max_normal_moments(group_size)
    steps = np.asarray(dependent_steps, dtype=float)
    jit = np.asarray(jitter_s, dtype=float)
    base = np.asarray(base_s, dtype=float)
    mu_y = base + sigma * mu_z
    y99 = base + sigma * p99_z
    mu_x = steps * jit * m_j
    e_x = Z99 * jit * np.sqrt(steps * v_j)
    mean = mu_y + mu_x
    std = np.sqrt(sigma**2 * var_z + steps * jit**2 * v_j)
    e_y = np.maximum(y99 - mu_y, 0.0)
    p99 = y99 + mu_x + (np.hypot(e_y, e_x) - e_y)
    return TailStats(mean_s=mean, std_s=std, p99_s=p99, cv=std / mean)


def ndtri(q: Any) -> np.ndarray:
    """Inverse standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9)."""
    q = np.asarray(q, dtype=float)
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    lo = np.minimum(q, 1 - q)
    r = np.sqrt(-2 * np.log(np.maximum(lo, 1e-300)))
    tail = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / (
        (((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1
    )
    tail = np.where(q < 0.5, tail, -tail)
    u = q - 0.5
    t = u * u
    mid = (
        (((((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4]) * t + a[5])
        * u
        / (((((b[0] * t + b[1]) * t + b[2]) * t + b[3]) * t + b[4]) * t + 1)
    )
    return np.where(np.abs(u) <= 0.5 - 0.02425, mid, tail)
