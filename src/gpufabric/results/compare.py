"""Compare two runs metric by metric: relative deltas, significance, regressions.

Matching: a metric is identified by (test case, host, metric name), the case being the
test name plus ``records.CASE_PARAMS`` (each size of a sweep is its own case); results
with the same case and host are repeats. The compared value of each side is the median of its
repeats, and ``delta`` is ``(cand - base) / |base|``.

Significance, best evidence first:

1. **Mann-Whitney U** (two-sided) on the raw samples when both sides have at least
   ``MIN_SAMPLES_MWU`` of them: distribution-free, so latency tails do not break it.
   Very long sample logs are thinned to ``MWU_MAX_SAMPLES`` by a seeded draw, which
   keeps the test's power far beyond any tolerance that matters.
2. **Bootstrap** over repeats when both sides have at least two: the percentile
   interval (level ``1 - alpha``) of the relative difference of means, from
   ``BOOTSTRAP_RESAMPLES`` seeded resamples; significant when it excludes 0.
3. Otherwise **not testable**: a single number per side says nothing about noise.

A metric **regresses** when it moved in its bad direction by more than ``tolerance``
and the move is significant at ``alpha``. ``alpha`` is per metric; with many metrics
some false alarms are expected at 5 %, which is why the tolerance must also be exceeded.
"""

from __future__ import annotations

import enum
import math
import statistics
from dataclasses import dataclass

import numpy as np

from gpufabric.results.records import Direction, RunRecord, Status

#: Below this many samples per side the U test's normal approximation is poor; use repeats.
MIN_SAMPLES_MWU = 8
#: Thinning cap for the U test (its ranking is O(n log n)).
MWU_MAX_SAMPLES = 200_000
BOOTSTRAP_RESAMPLES = 4000
SEED = 20240601


class Change(str, enum.Enum):
    regression = "regression"
    improvement = "improvement"
    unchanged = "unchanged"          # within tolerance or not significant
    untestable = "untestable"        # beyond tolerance but no way to test significance
    missing = "missing"              # present in only one run


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricDelta:
    test: str
    host: str
    metric: str
    unit: str
    direction: Direction
    base: float | None
    cand: float | None
    delta: float | None              # (cand - base) / |base|
    method: str                      # mann-whitney | bootstrap | not testable | -
    p_value: float | None = None
    ci_low: float | None = None      # bootstrap interval of delta
    ci_high: float | None = None
    significant: bool | None = None
    change: Change = Change.unchanged
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    base_id: int
    cand_id: int
    tolerance: float
    alpha: float
    deltas: tuple[MetricDelta, ...]

    @property
    def regressions(self) -> tuple[MetricDelta, ...]:
        return tuple(d for d in self.deltas if d.change == Change.regression)


def _collect(run: RunRecord) -> dict[tuple[str, str, str], tuple[list[float], list[float], str, Direction]]:
    out: dict[tuple[str, str, str], tuple[list[float], list[float], str, Direction]] = {}
    for result in run.results:
        if result.status != Status.ok:
            continue
        for m in result.metrics:
            if not math.isfinite(m.value):
                continue
            values, samples, _, _ = out.setdefault((result.case, result.host, m.name), ([], [], m.unit, m.direction))
            values.append(m.value)
            samples.extend(m.samples)
    return out


def _mwu(a: list[float], b: list[float]) -> float:
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(SEED)
    xa, xb = np.asarray(a), np.asarray(b)
    if xa.size > MWU_MAX_SAMPLES:
        xa = rng.choice(xa, MWU_MAX_SAMPLES, replace=False)
    if xb.size > MWU_MAX_SAMPLES:
        xb = rng.choice(xb, MWU_MAX_SAMPLES, replace=False)
    if np.ptp(np.concatenate([xa, xb])) == 0:
        return 1.0  # identical constants: no difference at all (scipy would warn)
    return float(mannwhitneyu(xa, xb, alternative="two-sided").pvalue)


def _bootstrap(a: list[float], b: list[float], alpha: float) -> tuple[float, float]:
    rng = np.random.default_rng(SEED)
    xa, xb = np.asarray(a), np.asarray(b)
    ma = xa[rng.integers(0, xa.size, (BOOTSTRAP_RESAMPLES, xa.size))].mean(axis=1)
    mb = xb[rng.integers(0, xb.size, (BOOTSTRAP_RESAMPLES, xb.size))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (mb - ma) / np.abs(ma)
    rel = rel[np.isfinite(rel)]
    if rel.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(rel, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def compare_runs(base: RunRecord, cand: RunRecord, *, tolerance: float = 0.05, alpha: float = 0.05) -> Comparison:
    """Per-metric deltas of ``cand`` against ``base``; see the module docstring."""
    a, b = _collect(base), _collect(cand)
    deltas = []
    for key in list(a) + [k for k in b if k not in a]:
        test, host, metric = key
        if key not in a or key not in b:
            side = a.get(key) or b[key]
            deltas.append(MetricDelta(
                test=test, host=host, metric=metric, unit=side[2], direction=side[3],
                base=statistics.median(a[key][0]) if key in a else None,
                cand=statistics.median(b[key][0]) if key in b else None,
                delta=None, method="-", change=Change.missing,
                note="only in base" if key in a else "only in candidate",
            ))
            continue
        (va, sa, unit, _), (vb, sb, _, direction) = a[key], b[key]
        base_v, cand_v = statistics.median(va), statistics.median(vb)
        delta = (cand_v - base_v) / abs(base_v) if base_v else (0.0 if cand_v == base_v else math.copysign(math.inf, cand_v - base_v))
        p = lo = hi = None
        if len(sa) >= MIN_SAMPLES_MWU and len(sb) >= MIN_SAMPLES_MWU:
            method = "mann-whitney"
            p = _mwu(sa, sb)
            significant = p < alpha
        elif len(va) >= 2 and len(vb) >= 2:
            method = "bootstrap"
            lo, hi = _bootstrap(va, vb, alpha)
            significant = bool(math.isfinite(lo) and (lo > 0 or hi < 0))
        else:
            method = "not testable"
            significant = None
        worse = delta < 0 if direction == Direction.higher else delta > 0
        beyond = abs(delta) > tolerance
        if not beyond:
            change = Change.unchanged
        elif significant is None:
            change = Change.untestable
        elif not significant:
            change = Change.unchanged
        else:
            change = Change.regression if worse else Change.improvement
        note = ""
        if change == Change.untestable:
            note = f"{'worse' if worse else 'better'} by {abs(delta):.1%} but no samples or repeats to test it"
        deltas.append(MetricDelta(
            test=test, host=host, metric=metric, unit=unit, direction=direction, base=base_v, cand=cand_v,
            delta=delta, method=method, p_value=p, ci_low=lo, ci_high=hi, significant=significant, change=change,
            note=note,
        ))
    return Comparison(base_id=base.id, cand_id=cand.id, tolerance=tolerance, alpha=alpha, deltas=tuple(deltas))


def untestable_regressions(comparison: Comparison) -> tuple[MetricDelta, ...]:
    """Untestable deltas that moved the bad way beyond the tolerance (``compare --strict`` fails on them)."""
    return tuple(
        d for d in comparison.deltas
        if d.change == Change.untestable and d.delta is not None
        and (d.delta < 0 if d.direction == Direction.higher else d.delta > 0)
    )
