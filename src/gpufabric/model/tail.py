"""Tail amplification of synchronous steps: the max over N ranks (models.md 2.5).

A synchronous step ends when its slowest rank ends. With per-rank i.i.d. Gaussian
noise of std-dev sigma, the barrier adds ``sigma * m(N)`` on average, where m(N) and
v(N) are the mean and variance of the maximum of N standard normals:

    m(N) = integral x * N phi(x) Phi(x)^(N-1) dx      (exact, by quadrature on a grid)
    m(N) ~ sqrt(2 ln N)  (3.0 at N=100 with the leading term; exact value 2.51)

A collective with S dependent latency steps, each waiting for the slowest of p
concurrent transfers with jitter sigma_j, adds S sigma_j m(p) on average and S sigma_j^2
v(p) of variance. Rare hiccups (probability q per rank per step, delay D; Dean &
Barroso, "The Tail at Scale", CACM 2013) make a step slow with P = 1 - (1 - q)^N, adding
D P to the mean and D^2 P (1 - P) to the variance.

The step time is then a two-component mixture: Normal(m0, s0) with weight 1 - P and
Normal(m0 + D, s0) with weight P. The CV is ``std / mean`` of the mixture (exact).
The p99 uses the well-separated limit (D >> s0, the case for retransmit timeouts and
pause storms), which is closed form and monotone in jitter and in rank count:

    P <  1%:  x = min(m0 + s0 * Phi^-1(0.99 / (1 - P)), m0 + D)
    P >= 1%:  x = m0 + D + s0 * max(0, Phi^-1(1 - 0.01 / P))
    p99 = max(x, m0 + 2.326 s0)

With P = 0 it is the Gaussian ``m0 + 2.326 s0``. The exact mixture quantile
(:func:`mixture_quantile`) can *fall* when jitter grows while P is just above 1%,
because the 99th percentile then sits in the left tail of the slow component; the
clamp at 0 removes that artefact and overstates the exact quantile by at most
``|Phi^-1(1 - 0.01/P)| * s0`` there (s0 is microseconds to milliseconds, D is
milliseconds to 200 ms). These are the closed forms of the model the simulator
samples, so they can be cross-checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

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


_X = np.linspace(-8.0, 12.0, 4001)
_DX = _X[1] - _X[0]
_PHI = np.exp(-0.5 * _X**2) / np.sqrt(2 * np.pi)
_CDF = ndtr(_X)
Z99 = 2.3263478740408408


@lru_cache(maxsize=4096)
def _max_normal_moments_scalar(n: int) -> tuple[float, float]:
    if n <= 1:
        return 0.0, 1.0
    dens = n * _PHI * _CDF ** (n - 1)
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
) -> TailStats:
    """Mean, std, p99 and CV of a synchronous step (vectorised).

    Args:
        base_s: deterministic step time (compute + bubble + exposed comm).
        compute_s, compute_cv: per-rank compute time and its CV (barrier over num_ranks).
        dependent_steps, group_size, jitter_s: latency-bound steps on the critical path,
            the ranks each waits for, and the per-step latency std-dev.
        hiccup_prob, hiccup_s: per-rank per-step probability and length of a rare delay.
    """
    m_c, v_c = max_normal_moments(num_ranks)
    m_j, v_j = max_normal_moments(group_size)
    sigma_c = np.asarray(compute_s) * np.asarray(compute_cv)
    steps = np.asarray(dependent_steps, dtype=float)
    jit = np.asarray(jitter_s, dtype=float)
    m0 = np.asarray(base_s) + sigma_c * m_c + steps * jit * m_j
    var0 = sigma_c**2 * v_c + steps * jit**2 * v_j
    s0 = np.sqrt(var0)
    P = slow_step_probability(hiccup_prob, num_ranks)
    D = np.asarray(hiccup_s, dtype=float)
    mean = m0 + D * P
    var = var0 + D**2 * P * (1 - P)
    std = np.sqrt(var)
    p99 = separated_p99(m0, s0, D, P)
    return TailStats(mean_s=mean, std_s=std, p99_s=p99, cv=std / mean)


def separated_p99(m0: Any, s0: Any, d: Any, p: Any) -> np.ndarray:
    """p99 of the hiccup mixture in the well-separated limit (module docstring)."""
    m0, s0, d, p = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (m0, s0, d, p)))
    low = np.minimum(m0 + s0 * ndtri(np.clip(0.99 / np.maximum(1 - p, 1e-300), 0.99, 1 - 1e-12)), m0 + d)
    high = m0 + d + s0 * np.maximum(0.0, ndtri(np.clip(1 - 0.01 / np.maximum(p, 0.01), 1e-12, 0.99)))
    return np.maximum(np.where(p < 0.01, low, high), m0 + Z99 * s0)


def ndtri(q: Any) -> np.ndarray:
    """Inverse standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9)."""
    q = np.asarray(q, dtype=float)
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    lo = np.minimum(q, 1 - q)
    r = np.sqrt(-2 * np.log(np.maximum(lo, 1e-300)))
    tail = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1)
    tail = np.where(q < 0.5, tail, -tail)
    u = q - 0.5
    t = u * u
    mid = (((((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4]) * t + a[5]) * u / (((((b[0] * t + b[1]) * t + b[2]) * t + b[3]) * t + b[4]) * t + 1)
    return np.where(np.abs(u) <= 0.5 - 0.02425, mid, tail)


def mixture_quantile(m0: Any, s0: Any, d: Any, p: Any, q: float) -> np.ndarray:
    """Exact q-quantile of (1-p) N(m0, s0) + p N(m0 + d, s0), by bisection (vectorised)."""
    m0, s0, d, p = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (m0, s0, d, p)))
    s = np.maximum(s0, 1e-12)
    lo = m0 - 10 * s
    hi = m0 + d + 10 * s
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        cdf = (1 - p) * ndtr((mid - m0) / s) + p * ndtr((mid - m0 - d) / s)
        below = cdf < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)
