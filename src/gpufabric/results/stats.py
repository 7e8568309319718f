"""Summaries of raw samples: percentiles to p99.99, moments, a histogram, quality warnings; mergeable.

Speed (issue 4 bar: 10 million samples in under 1 s). One ``np.sort`` serves everything:
exact percentiles by index, and the histogram and sketch by binary searches at their
bucket bounds (O(buckets log n)). Selection was measured first and lost on numpy 2.x,
whose sort is SIMD-vectorised: for 10M float64 here ``np.partition`` at the 12 ranks
the percentiles need took 361 ms against 229 ms for ``np.sort``, and bucketing
unsorted samples (a ``log`` per sample plus ``bincount``) another 185 ms against 0.1 ms
of ``searchsorted`` on sorted ones (benchmarks/bench_stats.py, docs/performance.md).

Merging (STYLE.md "Statistics that merge"): count, mean, M2 (Chan et al. 1979 pairwise
update), min and max merge exactly. Percentiles cannot be merged from percentiles, so
every summary also carries a DDSketch (Masson, Rim, Lee, "DDSketch: a fast and
fully-mergeable quantile sketch with relative-error guarantees", VLDB 2019,
https://arxiv.org/abs/1908.10693): values fall into buckets ``ceil(log_gamma(x))`` with
``gamma = (1 + a) / (1 - a)``, and any quantile read from the buckets is within a
relative error ``a`` (SKETCH_ACCURACY, 1 %) of a true sample at that rank. A merged
summary's percentiles come from the merged sketch and say so (``percentiles_exact``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpufabric.errors import InputError
from gpufabric.units import is_time_unit

#: Relative accuracy of the merge sketch: 1 % keeps ~115 buckets per decade.
SKETCH_ACCURACY = 0.01

#: pyperf warns when the standard deviation is >= 10 % of the mean
#: (psf/pyperf pyperf/_cli.py format_checks, "the benchmark result may be unstable").
CV_WARN = 0.10

#: Fewer samples than this and the mean's normal approximation (and the CV itself) are
#: unreliable: the customary n >= 30 rule for the central limit theorem.
MIN_SAMPLES = 30

#: A tail percentile is "thin" when fewer than this many samples lie beyond it.
TAIL_SUPPORT = 10

#: (attribute, quantile) of the reported percentiles.
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999), ("p9999", 0.9999))


@dataclass(frozen=True, slots=True, kw_only=True)
class QualityWarning:
    """Why a summary may not support a judgement; ``code`` is stable, ``message`` is for people."""

    code: str  # cv_high | few_samples | tail_thin | non_finite | empty
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Histogram:
    """Bin ``i`` counts values in ``[edges[i], edges[i+1])``; ``log`` when the edges are log-spaced."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    log: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Sketch:
    """DDSketch buckets: ``pos``/``neg`` map bucket index -> count for x > 0 / x < 0 (by |x|)."""

    gamma: float
    pos: tuple[tuple[int, int], ...] = ()
    neg: tuple[tuple[int, int], ...] = ()
    zeros: int = 0

    def merge(self, other: Sketch) -> Sketch:
        if self.gamma != other.gamma:
            raise InputError(f"cannot merge sketches of different accuracy (gamma {self.gamma} vs {other.gamma})")
        return Sketch(
            gamma=self.gamma,
            pos=_add(self.pos, other.pos),
            neg=_add(self.neg, other.neg),
            zeros=self.zeros + other.zeros,
        )

    def values_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Representative value of each bucket (ascending) and its count."""
        lg = math.log(self.gamma)
        # 2 gamma^i / (gamma + 1) is the point of bucket (gamma^(i-1), gamma^i] with equal relative error to both ends.

        def rep(idx: npt.ArrayLike) -> np.ndarray:
            return 2.0 * np.exp(np.asarray(idx, dtype=float) * lg) / (self.gamma + 1.0)

        neg_idx = np.array([i for i, _ in self.neg], dtype=float)
        neg_cnt = np.array([c for _, c in self.neg], dtype=np.int64)
        pos_idx = np.array([i for i, _ in self.pos], dtype=float)
        pos_cnt = np.array([c for _, c in self.pos], dtype=np.int64)
        order = np.argsort(-neg_idx)  # most negative first
        values = np.concatenate([-rep(neg_idx[order]), [0.0] if self.zeros else [], rep(pos_idx)])
        counts = np.concatenate([neg_cnt[order], [self.zeros] if self.zeros else [], pos_cnt]).astype(np.int64)
        return values, counts


def _add(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    merged = dict(a)
    for key, count in b:
        merged[key] = merged.get(key, 0) + count
    return tuple(sorted(merged.items()))


def _buckets_sorted(s: np.ndarray, gamma: float) -> tuple[tuple[int, int], ...]:
    """DDSketch buckets of sorted positive values: bucket i holds (gamma^(i-1), gamma^i].

    Binary searches at the bucket bounds, O(buckets log n), instead of a log() per sample.
    """
    if s.size == 0:
        return ()
    lg = math.log(gamma)
    first, last = math.ceil(math.log(s[0]) / lg), math.ceil(math.log(s[-1]) / lg)
    indices = np.arange(first - 1, last + 2)
    bounds = np.exp(indices * lg)
    below = np.searchsorted(s, bounds, side="right")  # values <= gamma^i
    counts = np.diff(below)
    nz = np.flatnonzero(counts)
    return tuple(zip((indices[1:][nz]).tolist(), counts[nz].tolist(), strict=True))


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Distribution of one metric's samples. Units follow ``unit``; ``cv`` is std / |mean|."""

    count: int
    mean: float
    std: float  # sample standard deviation (ddof=1)
    cv: float
    min: float
    p50: float
    p90: float
    p99: float
    p999: float
    p9999: float
    max: float
    histogram: Histogram
    unit: str = ""
    percentiles_exact: bool = True  # False after merge(): read from the sketch, within SKETCH_ACCURACY
    warnings: tuple[QualityWarning, ...] = ()
    m2: float = 0.0  # sum of squared deviations from the mean, for merging
    sketch: Sketch = field(default_factory=lambda: Sketch(gamma=_GAMMA), repr=False)

    @property
    def percentiles(self) -> dict[str, float]:
        return {name: getattr(self, name) for name, _ in PERCENTILES}

    @property
    def noisy(self) -> bool:
        """True when the spread or the sample count make the summary unfit to judge by."""
        return any(w.code in ("cv_high", "few_samples", "empty") for w in self.warnings)

    def merge(self, other: Summary) -> Summary:
        """Combine two summaries (per rank, per host) as if their samples had been summarised together.

        Raises:
            InputError: the units differ or the sketches were built with different accuracy.
        """
        if self.unit != other.unit:
            raise InputError(f"cannot merge summaries in different units ({self.unit!r} vs {other.unit!r})")
        sketch = self.sketch.merge(other.sketch)
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * other.count / n
        m2 = self.m2 + other.m2 + delta * delta * self.count * other.count / n
        lo, hi = min(self.min, other.min), max(self.max, other.max)
        values, counts = sketch.values_counts()
        cum = np.cumsum(counts)

        def quantile(q: float) -> float:
            rank = q * (n - 1)
            return float(np.clip(values[int(np.searchsorted(cum, rank, side="right"))], lo, hi))

        return _build(
            n=n,
            mean=mean,
            m2=m2,
            lo=lo,
            hi=hi,
            pct={name: quantile(q) for name, q in PERCENTILES},
            unit=self.unit,
            sketch=sketch,
            exact=False,
            dropped=0,
        )


_GAMMA: float = (1 + SKETCH_ACCURACY) / (1 - SKETCH_ACCURACY)


def summarize(samples: npt.ArrayLike, *, unit: str = "") -> Summary:
    """Summarise raw samples (any float array-like); non-finite values are dropped with a warning."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    finite = np.isfinite(x)
    dropped = 0
    if not finite.all():
        dropped = int(x.size - np.count_nonzero(finite))
        x = x[finite]
    n = int(x.size)
    if n == 0:
        return _build(
            n=0,
            mean=math.nan,
            m2=0.0,
            lo=math.nan,
            hi=math.nan,
            pct={name: math.nan for name, _ in PERCENTILES},
            unit=unit,
            sketch=Sketch(gamma=_GAMMA),
            exact=True,
            dropped=dropped,
        )
    s = np.sort(x)  # see the module docstring: with numpy's SIMD sort this beats selection + bucketing
    pct = {}
    for name, q in PERCENTILES:
        # Linear interpolation between closest ranks, as np.percentile's default: rank h = q (n - 1).
        h = q * (n - 1)
        lo_i = int(math.floor(h))
        hi_i = min(lo_i + 1, n - 1)
        pct[name] = float(s[lo_i] + (s[hi_i] - s[lo_i]) * (h - lo_i))
    mean = float(x.sum() / n)
    d = x - mean
    m2 = float(np.dot(d, d))
    zero_lo, zero_hi = int(np.searchsorted(s, 0.0, side="left")), int(np.searchsorted(s, 0.0, side="right"))
    sketch = Sketch(
        gamma=_GAMMA,
        pos=_buckets_sorted(s[zero_hi:], _GAMMA),
        neg=_buckets_sorted(-s[:zero_lo][::-1], _GAMMA),
        zeros=int(zero_hi - zero_lo),
    )
    return _build(
        n=n,
        mean=mean,
        m2=m2,
        lo=float(s[0]),
        hi=float(s[-1]),
        pct=pct,
        unit=unit,
        sketch=sketch,
        exact=True,
        dropped=dropped,
        sorted_values=s,
    )


def _build(
    *,
    n: int,
    mean: float,
    m2: float,
    lo: float,
    hi: float,
    pct: dict[str, float],
    unit: str,
    sketch: Sketch,
    exact: bool,
    dropped: int,
    sorted_values: np.ndarray | None = None,
) -> Summary:
    std = math.sqrt(m2 / (n - 1)) if n > 1 else (0.0 if n == 1 else math.nan)
    cv = std / abs(mean) if n and mean != 0 else math.nan
    return Summary(
        count=n,
        mean=mean,
        std=std,
        cv=cv,
        min=lo,
        max=hi,
        **pct,
        unit=unit,
        percentiles_exact=exact,
        m2=m2,
        sketch=sketch,
        histogram=_histogram(sketch, n, lo, hi, unit, sorted_values),
        warnings=_warnings(n, mean, std, cv, dropped, unit),
    )


def _fmt(value: float, unit: str) -> str:
    return f"{value:.4g} {unit}".strip()


def _warnings(n: int, mean: float, std: float, cv: float, dropped: int, unit: str) -> tuple[QualityWarning, ...]:
    out = []
    if n == 0:
        out.append(QualityWarning(code="empty", message="no finite samples"))
    if dropped:
        out.append(QualityWarning(code="non_finite", message=f"{dropped} non-finite samples (NaN/inf) dropped"))
    if 0 < n < MIN_SAMPLES:
        out.append(QualityWarning(code="few_samples", message=f"only {n} samples (want >= {MIN_SAMPLES})"))
    if n >= 2 and math.isfinite(cv) and cv >= CV_WARN:
        out.append(
            QualityWarning(
                code="cv_high",
                message=f"the standard deviation ({_fmt(std, unit)}) is {cv:.0%} of the mean ({_fmt(mean, unit)})",
            )
        )
    thin = [name for name, q in PERCENTILES[2:] if n and n * (1 - q) < TAIL_SUPPORT]
    if thin and n >= MIN_SAMPLES:
        out.append(
            QualityWarning(
                code="tail_thin",
                message=f"{', '.join(thin)} rest on fewer than {TAIL_SUPPORT} samples beyond them",
            )
        )
    return tuple(out)


#: Display bins of the histogram.
HIST_BINS = 40


def _histogram(sketch: Sketch, n: int, lo: float, hi: float, unit: str, sorted_values: np.ndarray | None) -> Histogram:
    """Exact counts from the sorted samples when there are any, else (after a merge) from the sketch."""
    if n == 0:
        return Histogram(edges=(), counts=(), log=False)
    if hi == lo:
        return Histogram(edges=(lo, hi), counts=(n,), log=False)
    # Latencies span decades (a 5 us median, a 2 ms tail): log bins keep both visible.
    log = lo > 0 and (is_time_unit(unit) or hi / lo >= 100)
    edges = np.geomspace(lo, hi, HIST_BINS + 1) if log else np.linspace(lo, hi, HIST_BINS + 1)
    edges[0], edges[-1] = lo, hi  # geomspace may round the ends off the data
    if sorted_values is not None:
        # [e_i, e_i+1) like np.histogram, the last bin closed
        below = np.searchsorted(sorted_values, edges[:-1], side="left")
        hist = np.diff(np.append(below, sorted_values.size))
    else:
        values, counts = sketch.values_counts()
        hist, _ = np.histogram(np.clip(values, lo, hi), bins=edges, weights=counts)
    return Histogram(edges=tuple(edges.tolist()), counts=tuple(int(c) for c in hist), log=log)


# --- paired curves ------------------------------------------------------------------------------------------------


def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t), t = 0 .. n(n+1)/2, of Wilcoxon's signed-rank statistic without ties, by the
    recursion on the number of ranks (each rank is positive with probability 1/2)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k].copy()
    return np.cumsum(counts) / 2.0**n


def signed_rank_effect(log_ratios: npt.ArrayLike, *, level: float) -> tuple[float, float, float, float]:
    """(effect, ci_low, ci_high, p_value) of paired log ratios ``log(cand / base)``, one per size.

    Wilcoxon's signed-rank test (Wilcoxon 1945, Biometrics Bulletin 1:80) with Pratt's
    treatment of zero differences (Pratt 1959, JASA 54:655: zeros are ranked, then left out of
    the statistic, so a copy that equals its base at some sizes is not made to look stronger),
    via ``scipy.stats.wilcoxon`` (exact without ties or zeros, else the normal approximation).
    The effect is the Hodges-Lehmann estimate, the median of the Walsh averages, and the
    interval the matching order statistics of the Walsh averages (Hollander, Wolfe and Chicco,
    "Nonparametric Statistical Methods", 3rd ed. 2014, sec. 3.3), both as ``exp(x) - 1``: a
    relative change. Needs at least 2 ratios.
    """
    from scipy import stats as st

    d = np.asarray(log_ratios, dtype=float)
    n = int(d.size)
    if n < 2 or not np.isfinite(d).all():
        raise InputError(f"a paired curve test needs at least 2 finite ratios, got {d.tolist()[:5]}")
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2.0)
    # Order statistic k of the Walsh averages bounds the interval: the largest k with
    # P(T+ < k) <= (1 - level) / 2; with few sizes no k reaches the level and the interval is the range.
    cdf = _signed_rank_cdf(n)
    k = max(int(np.searchsorted(cdf, (1 - level) / 2, side="right")), 1)
    low, high = walsh[k - 1], walsh[walsh.size - k]
    # scipy cannot rank an all-zero difference: that is no change at all
    p = float(st.wilcoxon(d, zero_method="pratt", correction=False).pvalue) if np.any(d) else 1.0
    return math.expm1(float(np.median(walsh))), math.expm1(float(low)), math.expm1(float(high)), p
