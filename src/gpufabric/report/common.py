"""Formatting shared by the renderers: numbers, times, fingerprint flattening, counts."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpufabric.results.records import RunRecord, Status, TestResult, Verdict

#: Characters a terminal or a browser acts on instead of showing: C0 controls (ESC starts
#: cursor and colour sequences, CR overwrites a line), DEL, C1 controls (CSI 0x9b is ESC [ on
#: 8-bit terminals) and the bidirectional overrides and isolates that reorder what is shown
#: (Boucher and Anderson, "Trojan Source", CVE-2021-42574).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``), never acted on;
    ``keep_newlines`` leaves line feeds (and tabs) for multi-line blocks."""

    def show(m: re.Match[str]) -> str:
        c = m.group(0)
        if keep_newlines and c in "\n\t":
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    return _UNSAFE.sub(show, text)


def num(value: float | None) -> str:
    """4 significant digits; '-' for missing or non-finite values."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.4g}"


def pct(value: float | None) -> str:
    """A signed percentage (margins, deltas)."""
    return "-" if value is None or not math.isfinite(value) else f"{value:+.1%}"


def ratio(value: float | None) -> str:
    """An unsigned percentage (CV)."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.1%}"


def when(ts: float | None) -> str:
    if not ts:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ts: float | None) -> str:
    """ISO 8601 without zone suffix, as JUnit's ``timestamp`` attribute wants it."""
    return dt.datetime.fromtimestamp(ts or 0, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


#: Params that tell repeats of one test apart in tables (a collective sweep's sizes).
KEY_PARAMS = ("op", "size_bytes", "repeat")


def param_tag(result: TestResult) -> str:
    """``[op=all_reduce size_bytes=1024]`` from KEY_PARAMS, or ''."""
    keys = [f"{k}={result.params[k]}" for k in KEY_PARAMS if k in result.params]
    return "[" + " ".join(keys) + "]" if keys else ""


def duration(run: RunRecord) -> str:
    if run.finished_at is None:
        return ""
    from gpufabric.units import format_duration

    return format_duration(run.finished_at - run.started_at)


def flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts -> (dotted.key, value) rows; lists stay as compact JSON."""
    if isinstance(data, dict) and data:
        rows: list[tuple[str, str]] = []
        for key in data:
            rows.extend(flatten(data[key], f"{prefix}.{key}" if prefix else str(key)))
        return rows
    if isinstance(data, str):
        return [(prefix, data)]
    return [(prefix, json.dumps(data, sort_keys=True))]


def is_judged(result: TestResult, judged: set[tuple[str, str]]) -> bool:
    """Whether a verdict names this result, by its case label or its plain name."""
    return (result.case, result.host) in judged or (result.name, result.host) in judged


def outcome_counts(run: RunRecord) -> dict[str, int]:
    """Verdict outcomes, plus test statuses of results that no verdict covers."""
    counts = Counter(v.outcome.value for v in run.verdicts)
    judged = {(v.test, v.host) for v in run.verdicts}
    for r in run.results:
        if not is_judged(r, judged) and r.status != Status.ok:
            counts[f"test {r.status.value}"] += 1
    return dict(counts)


def human(value: float | None, unit: str = "") -> str:
    """A value in the unit people read: times as us/ms/s/min ('11.6 ms', not '1.16e+04 us'),
    byte counts as KiB-GiB, the rest with 4 significant digits and its unit."""
    from gpufabric.units import format_duration, format_size, seconds_per

    if value is None or not math.isfinite(value):
        return "-"
    scale = seconds_per(unit)
    if scale is not None:
        return format_duration(value * scale)
    if unit in ("B", "bytes"):
        return format_size(value)
    text = f"{value:,.0f}" if abs(value) >= 1e4 and unit in ("count", "") else num(value)
    return f"{text} {unit}".strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class Straggler:
    test: str
    case: str
    rank: int
    host: str
    p50_us: float
    median_us: float


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSection:
    """What one node did in a run: its results by status, its verdicts by outcome, its slow ranks."""

    host: str
    statuses: dict[str, int]
    outcomes: dict[str, int]
    stragglers: tuple[Straggler, ...]


def node_sections(run: RunRecord) -> list[NodeSection]:
    """One section per node. Probe results are recorded for the whole 'cluster'; their per-rank
    figures (``RankStats``: hosts, collective p50 per rank, stragglers) are spread to the nodes."""
    from gpufabric.results.ranks import rank_stats

    statuses: dict[str, Counter] = {}
    outcomes: dict[str, Counter] = {}
    slow: dict[str, list[Straggler]] = {}
    for r in run.results:
        ranks = rank_stats(r)
        hosts = {s.rank: s.host for s in ranks.ranks} if ranks else {}
        for host in set(hosts.values()) or {r.host}:
            statuses.setdefault(host, Counter())[r.status.value] += 1
        if ranks is None or ranks.quantity != "time_us":
            continue
        p50 = {s.rank: s.p50 for s in ranks.ranks if s.p50 is not None}
        if p50 and ranks.stragglers:
            median = statistics.median(p50.values())
            for rank in ranks.stragglers:
                host = hosts.get(rank) or r.host
                slow.setdefault(host, []).append(
                    Straggler(
                        test=r.name, case=r.case, rank=rank, host=host, p50_us=p50.get(rank, math.nan), median_us=median
                    )
                )
    for v in run.verdicts:
        outcomes.setdefault(v.host or "-", Counter())[v.outcome.value] += 1
    return [
        NodeSection(
            host=h,
            statuses=dict(statuses.get(h, {})),
            outcomes=dict(outcomes.get(h, {})),
            stragglers=tuple(slow.get(h, ())),
        )
        for h in sorted(set(statuses) | set(outcomes))
    ]


# --- what CI and people read first -----------------------------------------------------------------------------------

#: Verdicts in the order a reader needs them: what failed first, what passed last.
_OUTCOME_ORDER = {"failed": 0, "not_planned_hardware": 1, "noisy": 2, "skipped": 3, "passed": 4}
#: Results likewise: a broken tool before a partial output before a clean one.
_STATUS_ORDER = {"failed": 0, "timeout": 1, "partial": 2, "skipped": 3, "ok": 4}


def verdicts_failures_first(run: RunRecord) -> list[Verdict]:
    """The run's verdicts, failures first (stable: the recorded order within an outcome)."""
    return sorted(run.verdicts, key=lambda v: _OUTCOME_ORDER.get(v.outcome.value, 5))


def results_failures_first(run: RunRecord) -> list[TestResult]:
    """The run's results, failed and timed-out tools first."""
    return sorted(run.results, key=lambda r: _STATUS_ORDER.get(r.status.value, 5))


def run_seconds(run: RunRecord) -> float | None:
    """The run's wall time: its recorded ``duration_s`` when the record has one, else finish - start."""
    recorded = getattr(run, "duration_s", None)
    if isinstance(recorded, (int, float)) and math.isfinite(recorded) and recorded > 0:
        return float(recorded)
    if run.finished_at is None:
        return None
    return max(run.finished_at - run.started_at, 0.0)


def durations_by_test(run: RunRecord) -> dict[tuple[str, str], float]:
    """(test, host) -> seconds its results took, repeats summed; keyed by both the case and the
    plain name, as verdicts name either. Tools that did not report a duration add nothing."""
    out: dict[tuple[str, str], float] = {}
    for r in run.results:
        if r.duration_s > 0 and math.isfinite(r.duration_s):
            for key in {(r.case, r.host), (r.name, r.host)}:
                out[key] = out.get(key, 0.0) + r.duration_s
    return out


def seconds(value: float | None) -> str:
    """A duration for a table cell; '-' where none was measured (not '0 ns')."""
    from gpufabric.units import format_duration

    if value is None or not math.isfinite(value) or value <= 0:
        return "-"
    return format_duration(value)


#: Run fields that say where a run ran, in the order reports show them (the run record's own
#: fields when it has them, else the same keys in its meta: older runs and ingested files).
CONTEXT_FIELDS = (("cluster", "cluster"), ("hosts", "hosts"), ("job_id", "job id"))


def run_context(run: RunRecord) -> list[tuple[str, str]]:
    """(label, text) of the cluster name, host list and Slurm/Kubernetes job id the run records."""
    out = []
    for name, label in CONTEXT_FIELDS:
        value = getattr(run, name, None) or run.meta.get(name)
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        if value not in (None, ""):
            out.append((label, str(value)))
    return out
