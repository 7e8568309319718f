"""Compare two runs metric by metric with statistics fit for a CI gate (issue 16).

Matching: a metric is identified by (test case, host, metric name), the case being the
test name plus ``records.CASE_PARAMS`` (each size of a sweep is its own case); results
with the same case and host are repeats. ``base``/``cand`` shown are the medians of the
repeats and ``delta`` their relative change; the verdict rests on ``effect``, below.

What is tested, and how (``inference`` has the statistics and their sources):

* **Performance only.** Counts (``observations``, ``fsync_count``, ``retransmits``) and
  percentages (CPU use, loss) are not performance and get no verdict of their own (class
  ``count``/``percent``, method ``not performance``, verdict ``unchanged``): SLOs judge them.
* **Each distinct quantity once.** Metrics of one case and host whose values are identical
  or proportional repeat by repeat in both runs, with the same better direction
  (sockperf's max and p99.999 of a few thousand samples, a sweep's headline busbw and its
  largest size, fio's bandwidth and IOPS) are one quantity: the first is tested, the
  others copy its verdict with ``duplicate_of`` and do not count again.
* **Per-repeat summaries.** With at least two repeats on each side, the repeats' values
  are the evidence (Welch on logs). A side with one repeat falls back to the medians of
  batches of its raw samples, long enough to respect their autocorrelation. Otherwise, or
  with too few batches, the metric is **inconclusive**.
* **Minimum effect per metric class** (``DEFAULT_MIN_EFFECT``): central latency and
  throughput 5 %, tails (p99 and beyond, max) 10 %, spreads (stddev, CV, jitter) 25 %.
* **Size curves as one quantity.** A sweep over message sizes (an nccl-tests table, whose
  rows are metrics ``time_us@<N>B``; the collectives probe, one result per ``size_bytes``)
  has one value per size and side, so no size can be tested alone; but a uniform shift over
  many sizes is strong evidence. Each curve is split at the base curve's half-peak size
  ``n_1/2`` (Hockney, "The communication challenge for MPP", Parallel Computing 20:389, 1994:
  the size at which the rate reaches half its peak, where latency and bandwidth terms are
  equal) into a *bandwidth-bound* range (``n_1/2`` and above, at least the
  ``CURVE_BANDWIDTH_SIZES`` largest sizes) and a *latency-bound* range (the rest): the two
  regimes are governed by different hardware (the beta and alpha of the alpha-beta model),
  and a bandwidth regression confined to the large sizes must not be diluted by the small
  ones. Each range with at least ``CURVE_MIN_SIZES`` sizes is tested once by the
  signed-rank test on the per-size log ratios, its effect the Hodges-Lehmann estimate
  (``stats.signed_rank_effect``), in the same family and with the same verdict rules as
  every metric. Curves of one test that move identically (busbw = size / time) are one
  quantity: the time curve is tested, the others are duplicates. The per-size metrics stay
  listed (inconclusive alone) with ``part_of`` naming their curve.
* **Multiple comparisons.** The p-values of all tested metrics are adjusted together
  (Holm by default, Benjamini-Hochberg on request).

Verdicts: **regression** / **improvement** when the adjusted p-value is below ``alpha``
and the effect exceeds the class's minimum effect; **unchanged** when the effect's
interval (confidence ``1 - 2 alpha``, the two one-sided tests convention of Schuirmann
1987) lies within the minimum effect, or the change is significant but smaller than it;
**inconclusive** otherwise (the data cannot tell a relevant change from noise).
"""

from __future__ import annotations

import enum
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from gpufabric.errors import InputError
from gpufabric.results.inference import CORRECTIONS, Effect, batch_medians, relative_effect
from gpufabric.results.records import CASE_PARAMS, Direction, RunRecord
from gpufabric.results.stats import signed_rank_effect
from gpufabric.units import is_time_unit


class Change(enum.StrEnum):
    regression = "regression"
    improvement = "improvement"
    unchanged = "unchanged"
    inconclusive = "inconclusive"


#: Smallest relative change that counts, per metric class. Tails and spreads move more
#: from run to run on a healthy system (a p99 of 1,000 samples rests on 10 of them), so a
#: gate with the central 5 % on them would cry wolf.
DEFAULT_MIN_EFFECT: dict[str, float] = {
    "latency": 0.05,
    "throughput": 0.05,
    "tail": 0.10,
    "spread": 0.25,
    "other": 0.05,
}
#: Classes that are not performance and get no test.
UNTESTED_CLASSES = ("count", "percent")
METRIC_CLASSES = tuple(DEFAULT_MIN_EFFECT) + UNTESTED_CLASSES

_TAIL = re.compile(r"(^|_)(p99\w*|p9{3,}\w*|max)(_|$)")
_SPREAD = re.compile(r"(^|_)(stddev|std|cv|jitter|mad)(_|$)")


def metric_class(name: str, unit: str) -> str:
    """latency | throughput | tail | spread | other | count | percent, from the name and unit."""
    if unit == "count":
        return "count"
    if unit == "%":
        return "percent"
    if _SPREAD.search(name):
        return "spread"
    if _TAIL.search(name):
        return "tail"
    if is_time_unit(unit):
        return "latency"
    if "/s" in unit or unit in ("IOPS", "Mpps") or unit.endswith("ps"):
        return "throughput"
    return "other"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricDelta:
    test: str
    host: str
    metric: str
    unit: str
    direction: Direction
    metric_class: str
    base: float | None  # median of the base run's repeats
    cand: float | None
    delta: float | None  # (cand - base) / |base| of those medians
    method: str  # repeats | batch medians | not performance | duplicate | -
    verdict: Change = Change.inconclusive
    effect: float | None = None  # the tested relative change (ratio of geometric means - 1)
    ci_low: float | None = None  # interval of effect, confidence 1 - 2 alpha
    ci_high: float | None = None
    p_value: float | None = None  # two-sided, H0: no change
    p_adjusted: float | None = None  # after the multiple-comparison correction
    min_effect: float | None = None
    n_base: int = 0  # summaries tested per side (repeats or batches)
    n_cand: int = 0
    duplicate_of: str = ""
    note: str = ""
    regime: str = ""  # a size curve's range: bandwidth-bound | latency-bound | all sizes; "" for one metric
    sizes: int = 0  # sizes in that range (the curve's n_base/n_cand)
    part_of: str = ""  # a per-size metric: the curve range that tested it ("test @host metric")

    @property
    def worse(self) -> bool:
        """Moved in the bad direction (by the tested effect, else the medians' delta)."""
        x = self.effect if self.effect is not None else self.delta
        return x is not None and (x < 0 if self.direction == Direction.higher else x > 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    base_id: int
    cand_id: int
    alpha: float
    correction: str
    min_effect: dict[str, float]
    tested: int  # metrics in the multiple-comparison family
    deltas: tuple[MetricDelta, ...]

    @property
    def regressions(self) -> tuple[MetricDelta, ...]:
        return tuple(d for d in self.deltas if d.verdict == Change.regression and not d.duplicate_of)


@dataclass(slots=True)
class _Side:
    values: list[float]  # one per repeat
    samples: list[float]  # raw samples of all repeats, in measurement order
    unit: str
    direction: Direction


def _collect(run: RunRecord) -> dict[tuple[str, str, str], _Side]:
    out: dict[tuple[str, str, str], _Side] = {}
    for result in run.results:
        if not result.status.measured:
            continue
        for m in result.metrics:
            if not math.isfinite(m.value):
                continue
            side = out.setdefault((result.case, result.host, m.name), _Side([], [], m.unit, m.direction))
            side.values.append(m.value)
            side.samples.extend(m.samples)
    return out


def _shape(values: list[float]) -> tuple[float, ...] | None:
    """The values scaled by their first one, rounded: equal for series that are the same
    quantity in another unit or scale (fio's bandwidth and IOPS, algbw and busbw of one sweep)."""
    first = values[0]
    if first == 0 or not all(math.isfinite(v) for v in values):
        return tuple(values)
    # 6 digits: tools round bandwidth and rates separately (fio bw_bytes is an integer, iops a float)
    return tuple(float(f"{v / first:.6g}") for v in values)


def _rel(base: float, cand: float) -> float:
    if base:
        return (cand - base) / abs(base)
    return 0.0 if cand == base else math.copysign(math.inf, cand - base)


def _effect(a: _Side, b: _Side, level: float) -> tuple[str, Effect | None, str]:
    """(method, effect or None, why not) for one metric present in both runs."""
    if len(a.values) >= 2 and len(b.values) >= 2:
        return "repeats", relative_effect(np.asarray(a.values), np.asarray(b.values), level=level), ""
    if a.samples and b.samples:
        ba, bb = batch_medians(np.asarray(a.samples)), batch_medians(np.asarray(b.samples))
        if ba is None or bb is None:
            return "batch medians", None, "one repeat and too few or too autocorrelated samples for independent batches"
        return "batch medians", relative_effect(ba, bb, level=level), ""
    return "-", None, "one value per side: nothing measures the noise (run more repeats)"


#: A range of a size curve is tested with at least this many sizes: below 6 the exact
#: signed-rank test cannot reach p < 0.05 even when every size moved the same way.
CURVE_MIN_SIZES = 6
#: The bandwidth-bound range holds at least this many of the largest sizes (2 / 2**8 = 0.008
#: is the smallest p of 8 sizes, room for the multiple-comparison correction).
CURVE_BANDWIDTH_SIZES = 8
#: Per-size metric names of a table sweep (the nccl-tests parser's ``time_us@1048576B``).
_AT_SIZE = re.compile(r"^(.+)@(\d+)B$")


@dataclass(slots=True)
class _Curve:
    unit: str
    direction: Direction
    values: dict[int, list[float]]  # size_bytes -> one value per repeat
    members: dict[int, tuple[str, str]]  # size_bytes -> (case, metric) of the per-size metric


def _curves(run: RunRecord) -> dict[tuple[str, str, str], _Curve]:
    """(curve test, host, metric) -> the metric's values by message size."""
    out: dict[tuple[str, str, str], _Curve] = {}
    for result in run.results:
        if not result.status.measured:
            continue
        per_case = "size_bytes" in result.params
        if per_case:
            # The collectives probe: one result per size; the curve is the case without its size.
            keys = [f"{k}={result.params[k]}" for k in CASE_PARAMS if k != "size_bytes" and k in result.params]
            test = f"{result.name}[{' '.join(keys)}]" if keys else result.name
        else:
            test = result.case
        stems = {m.group(1) for x in result.metrics if (m := _AT_SIZE.match(x.name))}
        top = result.params.get("tool_max_size_bytes", "")
        for metric in result.metrics:
            if not (math.isfinite(metric.value) and metric.value > 0):
                continue
            size_text, stem = "", metric.name
            if per_case:
                size_text = result.params["size_bytes"]
            elif m := _AT_SIZE.match(metric.name):
                stem, size_text = m.group(1), m.group(2)
            elif metric.name in stems and top:
                size_text = top  # the table's headline metric is its largest size
            if not size_text.isdigit() or int(size_text) <= 0:
                continue
            size = int(size_text)
            curve = out.setdefault((test, result.host, stem), _Curve(metric.unit, metric.direction, {}, {}))
            curve.values.setdefault(size, []).append(metric.value)
            curve.members[size] = (result.case, metric.name)
    return {k: c for k, c in out.items() if len(c.values) >= 2}


def _ranges(sizes: list[int], base: list[float], unit: str) -> list[tuple[str, list[int]]]:
    """(regime, sizes) to test, split at the base curve's half-peak size (module docstring)."""
    if is_time_unit(unit):
        rate = [s / v for s, v in zip(sizes, base, strict=True)]
    elif metric_class("", unit) == "throughput":
        rate = list(base)
    else:
        return [("all sizes", sizes)] if len(sizes) >= CURVE_MIN_SIZES else []
    peak = max(rate)
    half = next(i for i, r in enumerate(rate) if r >= peak / 2)
    cut = min(half, max(len(sizes) - CURVE_BANDWIDTH_SIZES, 0))
    out = []
    if cut >= CURVE_MIN_SIZES:
        out.append(("latency-bound", sizes[:cut]))
    if len(sizes) - cut >= CURVE_MIN_SIZES:
        out.append(("bandwidth-bound", sizes[cut:]))
    return out


def _size(size: int) -> str:
    return f"{size}B"


@dataclass(slots=True)
class _Tested:
    """A curve tested in ranges: its bad-way log change and rounding tolerance per size."""

    test: str
    host: str
    worse: dict[int, float]
    tol: dict[int, float]
    ranges: list[tuple[str, str, list[int]]]  # (delta name, regime, sizes)


def _twin(
    tested: list[_Tested], test: str, host: str, worse: dict[int, float], tol: dict[int, float]
) -> _Tested | None:
    """The curve of the same test and host this one moves with, size by size: busbw and algbw are
    size / time, so their change is the time's inverted. Printed tables round each cell, so they
    agree within 2 % plus the rounding of the smaller value (0.01 / value: two decimals)."""
    for t in tested:
        if (t.test, t.host) != (test, host):
            continue
        common = [s for s in worse if s in t.worse]
        if len(common) >= max(2, len(worse) // 2) and all(
            abs(worse[s] - t.worse[s]) <= max(tol[s], t.tol[s]) for s in common
        ):
            return t
    return None


def _curve_deltas(
    base: RunRecord, cand: RunRecord, thresholds: dict[str, float], level: float
) -> tuple[list[MetricDelta], list[Effect | None], dict[tuple[str, str, str], str]]:
    """One delta per tested curve range (with its effect, None for a duplicate) and, for each
    per-size metric inside a tested range, the name of that range's delta."""
    a, b = _curves(base), _curves(cand)
    # Time curves first: they are what the others (busbw = size / time) duplicate.
    keys = sorted((k for k in a if k in b), key=lambda k: not is_time_unit(a[k].unit))
    deltas: list[MetricDelta] = []
    effects: list[Effect | None] = []
    members: dict[tuple[str, str, str], str] = {}
    tested: list[_Tested] = []
    for key in keys:
        test, host, stem = key
        ca, cb = a[key], b[key]
        cls = metric_class(stem, ca.unit)
        if cls in UNTESTED_CLASSES or ca.unit != cb.unit or ca.direction != cb.direction:
            continue
        sizes = sorted(s for s in ca.values if s in cb.values)
        med_a = {s: statistics.median(ca.values[s]) for s in sizes}
        med_b = {s: statistics.median(cb.values[s]) for s in sizes}
        d_of = {s: math.log(med_b[s] / med_a[s]) for s in sizes}
        worse = {s: d if ca.direction == Direction.lower else -d for s, d in d_of.items()}  # > 0: the bad way
        tol = {s: 0.02 + 0.01 / min(med_a[s], med_b[s]) for s in sizes}
        about = partial(
            MetricDelta,
            test=test,
            host=host,
            unit=ca.unit,
            direction=ca.direction,
            metric_class=cls,
            base=None,
            cand=None,
            method="signed rank over sizes",
            min_effect=thresholds[cls],
        )
        twin = _twin(tested, test, host, worse, tol)
        if twin is not None:
            for twin_name, regime, twin_sizes in twin.ranges:
                mine = [s for s in sizes if twin_sizes[0] <= s <= twin_sizes[-1]]
                if not mine:
                    continue
                for s in mine:
                    case, metric = ca.members[s]
                    members[(case, host, metric)] = f"{test} @{host} {twin_name}"
                deltas.append(
                    about(
                        metric=f"{stem}@[{_size(mine[0])}..{_size(mine[-1])}]",
                        delta=math.expm1(float(np.median([d_of[s] for s in mine]))),
                        regime=regime,
                        sizes=len(mine),
                        duplicate_of=twin_name,
                    )
                )
                effects.append(None)
            continue
        ranges = []
        for regime, chosen in _ranges(sizes, [med_a[s] for s in sizes], ca.unit):
            d = np.array([d_of[s] for s in chosen])
            name = f"{stem}@[{_size(chosen[0])}..{_size(chosen[-1])}]"
            ranges.append((name, regime, chosen))
            for s in chosen:
                case, metric = ca.members[s]
                members[(case, host, metric)] = f"{test} @{host} {name}"
            effect, low, high, p = signed_rank_effect(d, level=level)
            deltas.append(
                about(
                    metric=name,
                    delta=math.expm1(float(np.median(d))),
                    regime=regime,
                    sizes=len(chosen),
                    n_base=len(chosen),
                    n_cand=len(chosen),
                )
            )
            effects.append(Effect(effect=effect, ci_low=low, ci_high=high, p_value=p, n_base=d.size, n_cand=d.size))
        tested.append(_Tested(test=test, host=host, worse=worse, tol=tol, ranges=ranges))
    return deltas, effects, members


def resolve_min_effect(
    tolerance: float | None = None, overrides: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Class -> minimum effect: the defaults, ``tolerance`` for the central classes, then ``overrides``.

    Raises:
        InputError: an unknown class or a negative or non-finite effect.
    """
    out = dict(DEFAULT_MIN_EFFECT)
    if tolerance is not None:
        out.update(latency=tolerance, throughput=tolerance, other=tolerance)
    for cls, value in (overrides or {}).items():
        if cls not in DEFAULT_MIN_EFFECT:
            raise InputError(
                f"unknown metric class {cls!r} for a minimum effect; one of {', '.join(DEFAULT_MIN_EFFECT)}"
            )
        out[cls] = value
    for cls, value in out.items():
        if not (math.isfinite(value) and 0 <= value < 10):
            raise InputError(f"minimum effect for {cls} must be between 0 and 10 (a fraction), got {value}")
    return out


def compare_runs(
    base: RunRecord,
    cand: RunRecord,
    *,
    alpha: float = 0.05,
    correction: str = "holm",
    tolerance: float | None = None,
    min_effect: Mapping[str, float] | None = None,
) -> Comparison:
    """Per-metric verdicts of ``cand`` against ``base``; see the module docstring.

    Args:
        alpha: family-wise (Holm) or false-discovery (BH) error rate across the tested metrics.
        correction: ``holm``, ``bh`` or ``none``.
        tolerance: minimum effect of the latency, throughput and other classes (default 5 %).
        min_effect: per-class overrides of the minimum effect.
    """
    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}; one of {', '.join(CORRECTIONS)}")
    if not 0 < alpha < 0.5:
        raise InputError(f"alpha must be between 0 and 0.5, got {alpha}")
    thresholds = resolve_min_effect(tolerance, min_effect)
    a, b = _collect(base), _collect(cand)
    deltas: list[MetricDelta] = []
    effects: dict[int, Effect] = {}  # index in deltas -> effect, for the tested ones
    first_of: dict[tuple, str] = {}  # (case, host, values of both sides) -> metric tested
    for key in list(a) + [k for k in b if k not in a]:
        test, host, metric = key
        sa, sb = a.get(key), b.get(key)
        side = sa if sa is not None else b[key]  # every key is in a or in b
        cls = metric_class(metric, side.unit)
        about = partial(
            MetricDelta, test=test, host=host, metric=metric, unit=side.unit, direction=side.direction, metric_class=cls
        )
        if sa is None or sb is None:
            deltas.append(
                about(
                    base=statistics.median(sa.values) if sa else None,
                    cand=statistics.median(sb.values) if sb else None,
                    delta=None,
                    method="-",
                    verdict=Change.inconclusive,
                    note="only in base" if sa else "only in candidate",
                )
            )
            continue
        base_med, cand_med = statistics.median(sa.values), statistics.median(sb.values)
        delta = _rel(base_med, cand_med)
        common = partial(about, base=base_med, cand=cand_med)
        if cls in UNTESTED_CLASSES:
            deltas.append(
                common(
                    delta=delta,
                    method="not performance",
                    verdict=Change.unchanged,
                    note=f"a {cls}, not performance: judged by SLOs, not compared",
                )
            )
            continue
        ident = (test, host, side.direction, _shape(sa.values + sb.values))
        if ident in first_of:
            deltas.append(common(delta=delta, method="duplicate", duplicate_of=first_of[ident]))
            continue
        first_of[ident] = metric
        method, eff, why = _effect(sa, sb, 1 - 2 * alpha)
        if eff is None:
            deltas.append(
                common(delta=delta, method=method, verdict=Change.inconclusive, min_effect=thresholds[cls], note=why)
            )
            continue
        effects[len(deltas)] = eff
        deltas.append(
            common(
                delta=delta,
                method=method,
                effect=eff.effect,
                ci_low=eff.ci_low,
                ci_high=eff.ci_high,
                p_value=eff.p_value,
                min_effect=thresholds[cls],
                n_base=eff.n_base,
                n_cand=eff.n_cand,
            )
        )
    curve_deltas, curve_effects, members = _curve_deltas(base, cand, thresholds, 1 - 2 * alpha)
    for i, d in enumerate(deltas):
        if (curve := members.get((d.test, d.host, d.metric))) is not None:
            note = f"judged with its size curve: {curve}"
            deltas[i] = replace(d, part_of=curve, note=f"{d.note}; {note}" if d.note else note)
    for d, eff in zip(curve_deltas, curve_effects, strict=True):
        if eff is None:
            deltas.append(d)
            continue
        effects[len(deltas)] = eff
        deltas.append(replace(d, effect=eff.effect, ci_low=eff.ci_low, ci_high=eff.ci_high, p_value=eff.p_value))
    idx = list(effects)
    adjusted = CORRECTIONS[correction](np.array([effects[i].p_value for i in idx])) if idx else np.empty(0)
    for i, p_adj in zip(idx, adjusted, strict=True):
        deltas[i] = _judge(deltas[i], float(p_adj), alpha, correction, len(idx))
    _copy_duplicates(deltas)
    return Comparison(
        base_id=base.id,
        cand_id=cand.id,
        alpha=alpha,
        correction=correction,
        min_effect=thresholds,
        tested=len(idx),
        deltas=tuple(deltas),
    )


def _copy_duplicates(deltas: list[MetricDelta]) -> None:
    """Give each metric tested once for another (``duplicate_of``) that metric's verdict and
    effect, in place; a rate that moves with a time gets the time's effect inverted."""
    by_metric = {(d.test, d.host, d.metric): d for d in deltas}
    for i, d in enumerate(deltas):
        if d.duplicate_of:
            src = by_metric[(d.test, d.host, d.duplicate_of)]
            effect, ci_low, ci_high = src.effect, src.ci_low, src.ci_high
            if d.direction != src.direction and None not in (effect, ci_low, ci_high):
                # a rate that moves with a time (busbw = size / time): the same change as its ratio's inverse
                effect, ci_low, ci_high = (1 / (1 + x) - 1 for x in (effect, ci_high, ci_low))  # type: ignore[operator]
            deltas[i] = replace(
                d,
                verdict=src.verdict,
                effect=effect,
                ci_low=ci_low,
                ci_high=ci_high,
                p_value=src.p_value,
                p_adjusted=src.p_adjusted,
                min_effect=src.min_effect,
                n_base=src.n_base,
                n_cand=src.n_cand,
                note=(
                    f"moves with {d.duplicate_of} at every size (one quantity): tested once"
                    if d.regime
                    else f"same quantity as {d.duplicate_of} (equal or proportional values in both runs): tested once"
                ),
            )


def _judge(d: MetricDelta, p_adj: float, alpha: float, correction: str, family: int) -> MetricDelta:
    assert d.effect is not None and d.min_effect is not None and d.ci_low is not None and d.ci_high is not None
    beyond = abs(d.effect) > d.min_effect
    significant = p_adj < alpha
    if significant and beyond:
        verdict, note = (Change.regression if d.worse else Change.improvement), ""
    elif -d.min_effect <= d.ci_low and d.ci_high <= d.min_effect:
        verdict, note = Change.unchanged, ""
    elif significant:
        verdict, note = (
            Change.unchanged,
            f"a real change of {d.effect:+.1%}, below the {d.min_effect:.0%} minimum effect",
        )
    elif beyond:
        verdict = Change.inconclusive
        note = f"moved {d.effect:+.1%} but not significant" + (
            f" after {correction} over {family} metrics" if correction != "none" else ""
        )
    else:
        verdict = Change.inconclusive
        note = (
            f"interval [{d.ci_low:+.1%}, {d.ci_high:+.1%}] does not rule out a {d.min_effect:.0%} change;"
            " more repeats would tell"
        )
    return replace(d, verdict=verdict, p_adjusted=p_adj, note=note)


def inconclusive_regressions(comparison: Comparison) -> tuple[MetricDelta, ...]:
    """Inconclusive metrics that moved the bad way beyond their minimum effect (``compare --strict`` fails on them)."""
    curves = {f"{d.test} @{d.host} {d.metric}": d for d in comparison.deltas if d.regime}
    out = []
    for d in comparison.deltas:
        if d.verdict != Change.inconclusive or d.duplicate_of or not d.worse:
            continue
        if d.part_of and curves[d.part_of].verdict != Change.inconclusive:
            continue  # its curve was conclusive: that verdict, not one size's lone value, decides
        moved = d.effect if d.effect is not None else d.delta
        threshold = d.min_effect if d.min_effect is not None else DEFAULT_MIN_EFFECT["other"]
        if moved is not None and abs(moved) > threshold:
            out.append(d)
    return tuple(out)
