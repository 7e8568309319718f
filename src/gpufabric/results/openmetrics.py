"""Stored runs as OpenMetrics text, for Prometheus (node_exporter's textfile collector, a Pushgateway).

Three gauge families (OpenMetrics 1.0, https://prometheus.io/docs/specs/om/open_metrics_spec/):

- ``gpufabric_result{cluster, host, test, case, repeat, metric, unit, tool, run_id, job_id}``:
  every metric of every result, its value (NaN where the tool gave none);
- ``gpufabric_verdict{cluster, host, test, metric, outcome, run_id, job_id}``: 1 passed,
  0 failed, NaN when not judged (noisy, skipped, not the planned hardware);
- ``gpufabric_run`` (an info family: sample ``gpufabric_run_info{cluster, run_id, job_id,
  kind, status, spec, gpufabric_version}`` 1), with the gauges ``gpufabric_run_started_seconds``
  and ``gpufabric_run_duration_seconds``.

No sample carries a timestamp: node_exporter's textfile collector refuses files with
client-side timestamps and a Pushgateway rejects them by default; the run's time is a
sample of its own. ``repeat`` tells the repeats of one measurement apart (a label set is
unique within a family). Label values are escaped as the spec says (backslash, double
quote, line feed).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from gpufabric.results.records import Outcome, RunRecord

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def _labels(pairs: Iterable[tuple[str, Any]]) -> str:
    return "{" + ",".join(f'{k}="{str(v).translate(_ESCAPES)}"' for k, v in pairs) + "}"


def _number(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def run_labels(run: RunRecord) -> tuple[tuple[str, str], ...]:
    """The labels that place a run in a fleet: its cluster, id and scheduler job id."""
    meta, fp = run.meta or {}, run.fingerprint or {}
    cluster = getattr(run, "cluster", "") or meta.get("cluster") or fp.get("cluster") or ""
    job_id = getattr(run, "job_id", "") or meta.get("job_id") or fp.get("job_id") or ""
    return (("cluster", str(cluster)), ("run_id", str(run.id)), ("job_id", str(job_id)))


def _family(name: str, help_text: str, lines: Iterable[str], kind: str = "gauge") -> Iterator[str]:
    yield f"# TYPE {name} {kind}"
    yield f"# HELP {name} {help_text}"
    yield from lines


def _results(runs: Iterable[RunRecord]) -> Iterator[str]:
    for run in runs:
        base = run_labels(run)
        seen: dict[tuple[str, str, str], int] = {}
        for result in run.results:
            key = (result.name, result.case, result.host)
            repeat = seen.get(key, 0)
            seen[key] = repeat + 1
            for metric in result.metrics:
                labels = (
                    ("cluster", base[0][1]),
                    ("host", result.host),
                    ("test", result.name),
                    ("case", result.case),
                    ("repeat", repeat),
                    ("metric", metric.name),
                    ("unit", metric.unit),
                    ("tool", result.tool),
                    *base[1:],
                )
                yield f"gpufabric_result{_labels(labels)} {_number(metric.value)}"


def _verdicts(runs: Iterable[RunRecord]) -> Iterator[str]:
    for run in runs:
        base = run_labels(run)
        seen: set[str] = set()
        for v in run.verdicts:
            labels = _labels(
                (
                    ("cluster", base[0][1]),
                    ("host", v.host),
                    ("test", v.test),
                    ("metric", v.metric),
                    ("outcome", v.outcome.value),
                    *base[1:],
                )
            )
            if labels in seen:  # the same SLO applied twice (a suite and its repeat): one sample
                continue
            seen.add(labels)
            value = {Outcome.passed: 1.0, Outcome.failed: 0.0}.get(v.outcome)
            yield f"gpufabric_verdict{labels} {_number(value)}"


def to_openmetrics(runs: Iterable[RunRecord]) -> str:
    """The OpenMetrics exposition of ``runs`` (loaded with their results), ending in ``# EOF``."""
    runs = list(runs)
    info, started, duration = [], [], []
    for run in runs:
        base = run_labels(run)
        labels = (
            *base,
            ("kind", run.kind),
            ("status", run.status.value),
            ("spec", run.spec_name),
            ("gpufabric_version", run.gpufabric_version),
        )
        info.append(f"gpufabric_run_info{_labels(labels)} 1")
        started.append(f"gpufabric_run_started_seconds{_labels(base)} {_number(run.started_at)}")
        if run.finished_at is not None:
            duration.append(
                f"gpufabric_run_duration_seconds{_labels(base)} {_number(run.finished_at - run.started_at)}"
            )
    lines = [
        *_family("gpufabric_run", "A stored gpufabric run: its kind, status and spec.", info, kind="info"),
        *_family("gpufabric_run_started_seconds", "When the run started, unix seconds.", started),
        *_family("gpufabric_run_duration_seconds", "How long the run took, seconds.", duration),
        *_family(
            "gpufabric_result", "A measured metric of a test result (its unit in the unit label).", _results(runs)
        ),
        *_family("gpufabric_verdict", "An SLO verdict: 1 passed, 0 failed, NaN not judged.", _verdicts(runs)),
        "# EOF",
    ]
    return "\n".join(lines) + "\n"
