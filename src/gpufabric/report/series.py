"""Plot-ready series pulled out of a run's results, by the metric naming the parsers use.

Conventions read here (the bench parsers and probes write them):

* **Collective sweeps.** Either one result per message size with ``params["size_bytes"]``
  and a ``busbw_gbps`` metric (torch probes), or one result per run with
  ``busbw_gbps@<size>B`` metrics for each size plus ``busbw_gbps`` for the largest
  (nccl-tests parser). The largest size comes from ``params["max_size_bytes"]`` or
  ``params["size_bytes"]`` when present, else from nccl-tests' own definition
  algbw = S / t (reference/bench-tools.md, busbw table): S = algbw * time.
* **Latency percentiles.** Metrics named ``<prefix>_p<digits>[_<digits>]_us`` (``clat_p99_9_us``
  is p99.9 of fio's completion latency).
* **Latency distributions.** Any metric in a time unit that carries raw samples.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

from gpufabric.results.records import RunRecord, TestResult
from gpufabric.units import is_time_unit

_AT_SIZE = re.compile(r"^busbw_gbps@(\d+)B$")
_PCT = re.compile(r"^(?P<prefix>[a-z_]+?)_p(?P<int>\d{1,2})(?:_(?P<frac>\d+))?_(?P<unit>us|ns|ms)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    unit: str = ""


def _label(result: TestResult, suffix: str = "") -> str:
    host = f" @{result.host}" if result.host else ""
    return f"{result.name}{suffix}{host}"


def _top_size(result: TestResult) -> float | None:
    for key in ("max_size_bytes", "size_bytes"):
        if key in result.params:
            return float(result.params[key])
    algbw, time_us = result.metric("algbw_gbps"), result.metric("time_us")
    if algbw is None or time_us is None or not (algbw.value > 0 and time_us.value > 0):
        return None
    size = algbw.value * 1e9 * time_us.value * 1e-6
    nearest = 2.0 ** round(math.log2(size))
    return nearest if abs(size - nearest) <= 0.05 * nearest else size  # sweeps are powers of two


def busbw_series(run: RunRecord) -> list[Series]:
    """busbw (GB/s) against message size (bytes), one series per test and host."""
    points: dict[str, dict[float, float]] = {}
    for r in run.results:
        busbw = r.metric("busbw_gbps")
        if not r.status.measured or busbw is None:
            continue
        label = _label(r)
        row = points.setdefault(label, {})
        for m in r.metrics:
            match = _AT_SIZE.match(m.name)
            if match and math.isfinite(m.value):
                row[float(match.group(1))] = m.value
        top = _top_size(r)
        value = busbw.value
        if top is not None and math.isfinite(value):
            row[top] = value
    return [
        Series(label=label, x=tuple(sorted(row)), y=tuple(row[k] for k in sorted(row)), unit="GB/s")
        for label, row in points.items()
        if row
    ]


def percentile_series(run: RunRecord, *, tool: str | None = None) -> list[Series]:
    """Latency percentiles (x: percentile in %, y: latency) per result and metric prefix."""
    out = []
    for r in run.results:
        if not r.status.measured or (tool is not None and r.tool != tool):
            continue
        groups: dict[tuple[str, str], dict[float, float]] = {}
        for m in r.metrics:
            match = _PCT.match(m.name)
            if not match or not math.isfinite(m.value):
                continue
            pct = float(match.group("int") + ("." + match.group("frac") if match.group("frac") else ""))
            groups.setdefault((match.group("prefix"), match.group("unit")), {})[pct] = m.value
        for (prefix, unit), row in groups.items():
            if len(row) >= 2:
                xs = sorted(row)
                out.append(Series(label=_label(r, f" {prefix}"), x=tuple(xs), y=tuple(row[x] for x in xs), unit=unit))
    return out


def latency_samples(run: RunRecord) -> list[tuple[str, str, tuple[float, ...]]]:
    """(label, unit, samples) of every time-unit metric that kept its raw samples."""
    out = []
    for r in run.results:
        for m in r.metrics:
            if m.samples and is_time_unit(m.unit):
                # parsers hang the distribution on the p50 metric: name it by what it is
                name = re.sub(r"_p\d+(?:_\d+)?(?=_)", "", m.name)
                out.append((_label(r, f" {name}"), m.unit, m.samples))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """Repeats combined: the median at each x, and the min-max range of the repeats."""

    label: str
    x: tuple[float, ...]
    median: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    repeats: int  # most repeats behind one point
    unit: str = ""


def _bands(
    groups: dict[tuple[str, str], dict[float, list[float]]], unit_of: dict[tuple[str, str], str], label_of
) -> dict[str, list[Band]]:
    out: dict[str, list[Band]] = {}
    for (test, label), points in groups.items():
        xs = sorted(points)
        if not xs:
            continue
        out.setdefault(test, []).append(
            Band(
                label=label_of(test, label),
                x=tuple(xs),
                median=tuple(statistics.median(points[x]) for x in xs),
                lo=tuple(min(points[x]) for x in xs),
                hi=tuple(max(points[x]) for x in xs),
                repeats=max(len(points[x]) for x in xs),
                unit=unit_of[(test, label)],
            )
        )
    return out


def sweep_bands(run: RunRecord) -> dict[str, list[Band]]:
    """busbw (GB/s) against message size per test, one band per host, repeats combined."""
    groups: dict[tuple[str, str], dict[float, list[float]]] = {}
    units: dict[tuple[str, str], str] = {}
    for r in run.results:
        busbw = r.metric("busbw_gbps")
        if not r.status.measured or busbw is None:
            continue
        key = (r.name, r.host)
        row = groups.setdefault(key, {})
        units[key] = "GB/s"
        for m in r.metrics:
            match = _AT_SIZE.match(m.name)
            if match and math.isfinite(m.value):
                row.setdefault(float(match.group(1)), []).append(m.value)
        top = _top_size(r)
        value = busbw.value
        if (
            top is not None
            and math.isfinite(value)
            and not any((hit := _AT_SIZE.match(m.name)) and float(hit.group(1)) == top for m in r.metrics)
        ):
            row.setdefault(top, []).append(value)
    return _bands(groups, units, lambda test, host: f"@{host}" if host else test)


def percentile_bands(run: RunRecord) -> dict[str, list[Band]]:
    """Latency against percentile per test, one band per (host, metric prefix), repeats combined."""
    groups: dict[tuple[str, str], dict[float, list[float]]] = {}
    units: dict[tuple[str, str], str] = {}
    for r in run.results:
        if not r.status.measured:
            continue
        per_prefix: dict[tuple[str, str], dict[float, float]] = {}
        for m in r.metrics:
            match = _PCT.match(m.name)
            if match and math.isfinite(m.value):
                pct = float(match.group("int") + ("." + match.group("frac") if match.group("frac") else ""))
                per_prefix.setdefault((match.group("prefix"), match.group("unit")), {})[pct] = m.value
        for (prefix, unit), row in per_prefix.items():
            if len(row) < 2:
                continue
            key = (r.name, f"{prefix} @{r.host}" if r.host else prefix)
            units[key] = unit
            for pct, value in row.items():
                groups.setdefault(key, {}).setdefault(pct, []).append(value)
    return _bands(groups, units, lambda test, label: label)


def pooled_samples(run: RunRecord) -> dict[str, list[tuple[str, str, tuple[float, ...]]]]:
    """Raw time samples per test: one (label, unit, samples) per host and metric, repeats pooled."""
    pooled: dict[tuple[str, str, str], list[float]] = {}
    for r in run.results:
        for m in r.metrics:
            if m.samples and is_time_unit(m.unit):
                name = re.sub(r"_p\d+(?:_\d+)?(?=_)", "", m.name)
                pooled.setdefault((r.name, f"{name} @{r.host}" if r.host else name, m.unit), []).extend(m.samples)
    out: dict[str, list[tuple[str, str, tuple[float, ...]]]] = {}
    for (test, label, unit), xs in pooled.items():
        out.setdefault(test, []).append((label, unit, tuple(xs)))
    return out
