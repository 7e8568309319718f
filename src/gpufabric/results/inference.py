"""Inference for ``compare``: relative effects with intervals, batch summaries of autocorrelated
samples, and multiple-comparison corrections.

Why these and not a test on raw samples: samples of one run (sockperf's 40,000 round trips,
fio's completion latencies) are autocorrelated, so a test that treats them as independent
understates the noise by the integrated autocorrelation time (p < 1e-300 for two identical
runs, issue 16). The unit of evidence is therefore a *summary*: one value per repeat, or,
when a side has a single repeat, the median of each of several contiguous batches of its
samples (the method of non-overlapping batch means; Law and Kelton, "Simulation Modeling and
Analysis", 5th ed. 2015, sec. 9.5.3; medians instead of means so a few huge tail samples do
not decide). Batches are made long enough that their summaries are close to independent:
at least ``BATCH_TAU_MULT`` integrated autocorrelation times of an AR(1) process with the
measured lag-1 autocorrelation, ``tau = (1 + rho) / (1 - rho)``.

Summaries are compared on the log scale by Welch's t-test (Welch 1947, Biometrika 34:28):
the effect is the ratio of geometric means minus one, a relative change whatever the unit,
and multiplicative noise (what latency and bandwidth have) becomes additive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

#: Batches are at least this many integrated autocorrelation times long.
BATCH_TAU_MULT = 10
#: At most this many batches: more adds little power and costs a median each.
MAX_BATCHES = 32
#: Fewer batches than this per side and the interval is too wide to say anything.
MIN_BATCHES = 8
#: The lag-1 autocorrelation is estimated on at most this many leading samples: plenty for
#: a stationary series (its standard error is ~1/sqrt(n)) at a tenth of the cost on 1e6.
RHO_WINDOW = 100_000
#: Autocorrelation is capped here: beyond it tau explodes and the run is one long drift.
MAX_RHO = 0.99


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """A relative change ``cand / base - 1`` with its two-sided interval and p-value (H0: no change)."""

    effect: float
    ci_low: float
    ci_high: float
    p_value: float
    n_base: int
    n_cand: int


def lag1_autocorrelation(x: np.ndarray) -> float:
    """Sample lag-1 autocorrelation (0 for a constant or a series shorter than 3)."""
    if x.size < 3:
        return 0.0
    d = x - x.mean()
    denom = float(np.dot(d, d))
    return float(np.dot(d[:-1], d[1:]) / denom) if denom > 0 else 0.0


def batch_medians(x: np.ndarray) -> np.ndarray | None:
    """Medians of contiguous batches of the series ``x`` (in measurement order), or None when
    the series is too short or too autocorrelated to give ``MIN_BATCHES`` near-independent batches."""
    n = x.size
    rho = min(max(lag1_autocorrelation(x[:RHO_WINDOW]), 0.0), MAX_RHO)
    tau = (1 + rho) / (1 - rho)
    size = max(math.ceil(BATCH_TAU_MULT * tau), 1)
    k = min(MAX_BATCHES, n // size)
    if k < MIN_BATCHES:
        return None
    m = n // k
    return np.median(x[: k * m].reshape(k, m), axis=1)


def relative_effect(base: np.ndarray, cand: np.ndarray, *, level: float) -> Effect:
    """Welch's t-test of two sets of summaries; the interval has confidence ``level``.

    Positive summaries are compared on the log scale (ratio of geometric means). With any
    summary <= 0 the difference of means is taken relative to |base mean|, ignoring the
    base mean's own uncertainty (a first-order approximation, fine when it is well away from 0).
    """
    a, b = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    na, nb = a.size, b.size
    log = bool((a > 0).all() and (b > 0).all())
    if log:
        a, b = np.log(a), np.log(b)
        scale = 1.0
    else:
        scale = abs(float(a.mean())) or 1.0
    d = float(b.mean() - a.mean()) / scale
    va, vb = float(a.var(ddof=1)) / scale**2, float(b.var(ddof=1)) / scale**2
    se2 = va / na + vb / nb
    to_rel = (lambda v: math.expm1(v)) if log else (lambda v: v)
    if se2 == 0.0:
        # No spread on either side: any difference is exact (e.g. a deterministic count of steps).
        return Effect(
            effect=to_rel(d), ci_low=to_rel(d), ci_high=to_rel(d), p_value=1.0 if d == 0 else 0.0, n_base=na, n_cand=nb
        )
    se = math.sqrt(se2)
    # Welch-Satterthwaite degrees of freedom; a side with zero variance contributes nothing.
    df = se2**2 / sum((v / n) ** 2 / (n - 1) for v, n in ((va, na), (vb, nb)) if v > 0)
    p = float(2.0 * special.stdtr(df, -abs(d) / se))
    q = float(special.stdtrit(df, 0.5 + level / 2))
    return Effect(
        effect=to_rel(d), ci_low=to_rel(d - q * se), ci_high=to_rel(d + q * se), p_value=p, n_base=na, n_cand=nb
    )


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979, Scand. J. Statist. 6:65): family-wise error control."""
    p = np.asarray(p, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p)
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (JRSS B 57:289, 1995): false-discovery-rate control."""
    p = np.asarray(p, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


CORRECTIONS = {"holm": holm, "bh": benjamini_hochberg, "none": lambda p: np.asarray(p, dtype=float)}
