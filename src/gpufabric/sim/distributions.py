"""Per-rank time distributions with the inverse functions the order-statistics engine needs.

Every distribution is non-negative and exposes ``isf(q)``: the value x with P(X > x) = q.
The maximum of n i.i.d. draws has survival 1 - F(x)^n, so with U uniform on (0, 1) the
maximum is ``isf(q)`` with ``q = 1 - U^(1/n) = -expm1(log(U)/n)``. Working with the
survival probability q instead of the CDF level p = U^(1/n) keeps full relative precision
in the far tail: at n = 16,384 the level p sits within 1e-5 of 1, where ``1 - p`` computed
in floating point would keep only ~11 significant digits (reference/models.md section 2.5,
"Barrier / max-of-N").

``sample`` draws with numpy's own generators (rejection for the truncated normal), not
through ``isf``, so the brute-force reference path checks the inverse functions rather
than reusing them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpufabric.errors import InputError


def _ndtr(x: Any) -> Any:
    """scipy.special.ndtr, imported on first use: scipy.special is ~0.2 s of CPU to import, and
    every command that loads the simulator's types (a serving plan) paid it at start-up."""
    from scipy.special import ndtr

    return ndtr(x)


def _ndtri(q: Any) -> Any:
    """scipy.special.ndtri, imported on first use (see _ndtr)."""
    from scipy.special import ndtri

    return ndtri(q)


def max_survival(u: np.ndarray, n: np.ndarray | int) -> np.ndarray:
    """Survival level q of the maximum of ``n`` i.i.d. draws driven by uniforms ``u``.

    ``q = 1 - u**(1/n)``, computed as ``-expm1(log(u)/n)`` so that q keeps full relative
    precision when it is tiny (large n). Entries with n == 0 are computed as n = 1 (their
    result is meaningless; ``draw_max`` masks them).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.expm1(np.log(u) / np.maximum(n, 1))


@dataclass(frozen=True, slots=True, kw_only=True)
class Constant:
    """Always ``value_s``."""

    value_s: float

    @property
    def mean(self) -> float:
        return self.value_s

    def isf(self, q: np.ndarray) -> np.ndarray:
        return np.full(np.shape(q), self.value_s)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) >= self.value_s).astype(float)

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        return np.full(size, self.value_s)

    def affine(self, *, loc_s: float = 0.0, scale: float = 1.0) -> Constant:
        return Constant(value_s=loc_s + scale * self.value_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Normal:
    """Normal(mu_s, sigma_s) truncated (conditioned) to x >= lower_s.

    Truncation rather than clipping keeps a density, so the max-of-n inverse stays exact.
    It only matters when sigma is a sizeable fraction of the mean.
    """

    mu_s: float
    sigma_s: float
    lower_s: float = 0.0

    @property
    def _alpha(self) -> float:
        return (self.lower_s - self.mu_s) / self.sigma_s

    @property
    def _mass(self) -> float:
        # P(Z > alpha) for the untruncated standard normal, computed without cancellation.
        return float(_ndtr(-self._alpha))

    @property
    def mean(self) -> float:
        a = self._alpha
        return self.mu_s + self.sigma_s * math.exp(-0.5 * a * a) / math.sqrt(2 * math.pi) / self._mass

    def isf(self, q: np.ndarray) -> np.ndarray:
        # P(X > x) = ndtr(-z) / mass = q  =>  z = -ndtri(q * mass): no 1 - q anywhere.
        return self.mu_s - self.sigma_s * _ndtri(np.asarray(q) * self._mass)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, dtype=float) - self.mu_s) / self.sigma_s
        return np.clip(1.0 - _ndtr(-z) / self._mass, 0.0, 1.0)

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        out = rng.normal(self.mu_s, self.sigma_s, size)
        bad = out < self.lower_s
        while bad.any():
            out[bad] = rng.normal(self.mu_s, self.sigma_s, int(bad.sum()))
            bad = out < self.lower_s
        return out

    def affine(self, *, loc_s: float = 0.0, scale: float = 1.0) -> Normal:
        return Normal(
            mu_s=loc_s + scale * self.mu_s,
            sigma_s=scale * self.sigma_s,
            lower_s=loc_s + scale * self.lower_s,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LogNormal:
    """``loc_s + median_s * exp(sigma * Z)``: heavy-ish right tail, e.g. OS noise."""

    median_s: float
    sigma: float
    loc_s: float = 0.0

    @property
    def mean(self) -> float:
        return self.loc_s + self.median_s * math.exp(0.5 * self.sigma**2)

    def isf(self, q: np.ndarray) -> np.ndarray:
        return self.loc_s + self.median_s * np.exp(-self.sigma * _ndtri(np.asarray(q)))

    def cdf(self, x: np.ndarray) -> np.ndarray:
        y = np.asarray(x, dtype=float) - self.loc_s
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.log(np.where(y > 0, y, np.nan) / self.median_s) / self.sigma
        return np.where(y > 0, _ndtr(np.nan_to_num(z, nan=-np.inf)), 0.0)

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        return self.loc_s + rng.lognormal(math.log(self.median_s), self.sigma, size)

    def affine(self, *, loc_s: float = 0.0, scale: float = 1.0) -> LogNormal:
        return LogNormal(median_s=scale * self.median_s, sigma=self.sigma, loc_s=loc_s + scale * self.loc_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShiftedExponential:
    """``shift_s + Exp(mean = mean_excess_s)``; E[max of n] = shift + mean_excess * H_n."""

    shift_s: float
    mean_excess_s: float

    @property
    def mean(self) -> float:
        return self.shift_s + self.mean_excess_s

    def isf(self, q: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return self.shift_s - self.mean_excess_s * np.log(np.asarray(q))

    def cdf(self, x: np.ndarray) -> np.ndarray:
        y = np.maximum(np.asarray(x, dtype=float) - self.shift_s, 0.0)
        return -np.expm1(-y / self.mean_excess_s)

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        return self.shift_s + rng.exponential(self.mean_excess_s, size)

    def affine(self, *, loc_s: float = 0.0, scale: float = 1.0) -> ShiftedExponential:
        return ShiftedExponential(shift_s=loc_s + scale * self.shift_s, mean_excess_s=scale * self.mean_excess_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hiccup:
    """``loc_s`` plus, with probability ``prob``, an extra ``delay_s`` (Tail at Scale)."""

    prob: float
    delay_s: float
    loc_s: float = 0.0

    @property
    def mean(self) -> float:
        return self.loc_s + self.prob * self.delay_s

    def isf(self, q: np.ndarray) -> np.ndarray:
        # The max is slow when the survival level falls inside the top ``prob`` mass.
        return self.loc_s + np.where(np.asarray(q) < self.prob, self.delay_s, 0.0)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return np.where(x >= self.loc_s + self.delay_s, 1.0, np.where(x >= self.loc_s, 1.0 - self.prob, 0.0))

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        return self.loc_s + self.delay_s * (rng.random(size) < self.prob)

    def affine(self, *, loc_s: float = 0.0, scale: float = 1.0) -> Hiccup:
        return Hiccup(prob=self.prob, delay_s=scale * self.delay_s, loc_s=loc_s + scale * self.loc_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Empirical:
    """A measured distribution: piecewise-linear CDF through (levels, values_s).

    From samples, the knots are the sorted samples at levels i/(n-1) (numpy's "linear"
    quantile rule); from a histogram, the bin edges at the cumulative count fractions
    (uniform within a bin; a level repeats across an empty bin, where np.interp's
    right-closed search makes the quantile jump to the next non-empty bin).
    It cannot say anything about tails beyond its largest value: the max of many ranks
    saturates there (see docs/simulation.md, limits).
    """

    levels: tuple[float, ...]
    values_s: tuple[float, ...]
    source: str = field(default="", compare=False)

    @classmethod
    def from_samples(cls, samples_s, *, source: str = "") -> Empirical:
        xs = np.sort(np.asarray(samples_s, dtype=float))
        if xs.size < 2 or not np.all(np.isfinite(xs)) or xs[0] < 0:
            raise InputError(f"{source or 'empirical'}: need at least 2 finite non-negative samples")
        return cls(levels=tuple(np.linspace(0.0, 1.0, xs.size)), values_s=tuple(xs), source=source)

    @classmethod
    def from_histogram(cls, edges_s, counts, *, source: str = "") -> Empirical:
        edges = np.asarray(edges_s, dtype=float)
        counts = np.asarray(counts, dtype=float)
        if edges.size != counts.size + 1 or np.any(np.diff(edges) <= 0) or np.any(counts < 0) or counts.sum() <= 0:
            raise InputError(f"{source or 'histogram'}: need increasing edges, one more edge than counts, counts >= 0")
        if edges[0] < 0:
            raise InputError(f"{source or 'histogram'}: bin edges must be non-negative")
        levels = np.concatenate([[0.0], np.cumsum(counts) / counts.sum()])
        # Keep only edges of non-empty bins: inside a run of empty bins the CDF is flat and
        # the quantile function jumps from the run's first edge to its last one.
        full = counts > 0
        keep = np.concatenate([full, [False]]) | np.concatenate([[False], full])
        return cls(levels=tuple(levels[keep]), values_s=tuple(edges[keep]), source=source)

    @property
    def mean(self) -> float:
        lv, xs = np.asarray(self.levels), np.asarray(self.values_s)
        return float(np.sum(np.diff(lv) * (xs[1:] + xs[:-1]) / 2))

    def isf(self, q: np.ndarray) -> np.ndarray:
        return np.interp(1.0 - np.asarray(q), self.levels, self.values_s)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        return np.interp(x, self.values_s, self.levels, left=0.0, right=1.0)

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        return np.interp(rng.random(size), self.levels, self.values_s)

    def affine(self, *, loc_s: float = 0.0, scale: float = 1.0) -> Empirical:
        return replace(self, values_s=tuple(loc_s + scale * np.asarray(self.values_s)))


Distribution = Constant | Normal | LogNormal | ShiftedExponential | Hiccup | Empirical


def draw_max(dist: Distribution, n, u: np.ndarray) -> np.ndarray:
    """Maximum of ``n`` i.i.d. draws (n may be an array; n == 0 gives -inf)."""
    x = dist.isf(max_survival(u, n))
    if np.ndim(n) == 0:
        return x if n > 0 else np.full(np.shape(u), -np.inf)
    return np.where(np.asarray(n) > 0, x, -np.inf)


def max_moments(classes, *, grid: int = 100_001) -> tuple[float, float]:
    """Mean and variance of the max over classes [(dist, n), ...] of n i.i.d. draws each.

    For non-negative draws E[M^k] = integral_0^inf k x^(k-1) (1 - prod_c F_c(x)^n_c) dx,
    by Simpson's rule between the 1e-14 quantiles (below the lower one the survival is 1
    to within 1e-14; above the upper one it is below 1e-14).
    """
    lo = min(float(d.isf(np.array(1.0 - 1e-14))) for d, _ in classes)
    hi = max(float(d.isf(max_survival(np.array(1.0 - 1e-14), n))) for d, n in classes)
    if hi <= lo:
        return lo, 0.0
    x = np.linspace(lo, hi, grid)
    log_f = sum(n * np.log(np.clip(d.cdf(x), 1e-300, 1.0)) for d, n in classes)
    surv = -np.expm1(log_f)
    h = (hi - lo) / (grid - 1)

    def simpson(y: np.ndarray) -> float:
        return float(h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum()))

    m1 = lo + simpson(surv)
    m2 = lo * lo + simpson(2 * x * surv)
    return m1, max(m2 - m1 * m1, 0.0)


def expected_max(dist: Distribution, n: int) -> float:
    """E[max of n i.i.d. draws] by numerical integration (closed-form checks, planner)."""
    return max_moments([(dist, n)])[0]
