"""Formatting shared by the renderers: numbers, times, fingerprint flattening, counts."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from typing import Any

from gpufabric.results.records import RunRecord, Status, TestResult


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
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ts: float | None) -> str:
    """ISO 8601 without zone suffix, as JUnit's ``timestamp`` attribute wants it."""
    return dt.datetime.fromtimestamp(ts or 0, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


#: Params that tell repeats of one test apart in tables (a collective sweep's sizes).
KEY_PARAMS = ("op", "size_bytes", "repeat")


def param_tag(result: TestResult) -> str:
    """``[op=all_reduce size_bytes=1024]`` from KEY_PARAMS, or ''."""
    keys = [f"{k}={result.params[k]}" for k in KEY_PARAMS if k in result.params]
    return "[" + " ".join(keys) + "]" if keys else ""


def duration(run: RunRecord) -> str:
    if run.finished_at is None:
        return ""
    seconds = run.finished_at - run.started_at
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


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
