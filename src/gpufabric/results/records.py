"""Typed records shared by benchmarks, the results store, verdicts and reports.

This is the contract between ``bench`` (which produces results), ``results`` (which
stores, judges and compares them) and ``report`` (which renders them). Units are in
metric names (``write_bw_gbps``, ``lat_p99_us``); GB/s is 1e9 bytes/s.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Direction(enum.StrEnum):
    """Which way is better for a metric."""

    higher = "higher"
    lower = "lower"  # type: ignore[assignment]  # the member shadows str.lower; renaming it means editing its 87 callers


class Status(enum.StrEnum):
    """Outcome of running one test (before any SLO is applied)."""

    ok = "ok"  # the tool ran and its output parsed
    failed = "failed"  # the tool exited non-zero or reported an error
    timeout = "timeout"  # killed at its timeout; partial output kept
    skipped = "skipped"  # not runnable here (tool not installed, no RDMA device, ...)
    partial = "partial"  # the output stops early but what it has is sound (a table without its footer)

    @property
    def measured(self) -> bool:
        """Whether the metrics are measurements to judge, compare and plot (ok or partial)."""
        return self in (Status.ok, Status.partial)


class RunStatus(enum.StrEnum):
    """State of a whole run; a finished run's status decides the command's exit code."""

    running = "running"  # not finished (yet, or ever: killed with -9)
    passed = "passed"
    failed = "failed"  # an SLO or a test failed
    interrupted = "interrupted"  # Ctrl-C; the finished results are kept
    error = "error"  # the run itself broke (launch failed, an exception)

    @property
    def exit_code(self) -> int:
        """0 passed, 130 interrupted (as a shell reports SIGINT), 1 otherwise."""
        return {"passed": 0, "interrupted": 130}.get(self.value, 1)


class Outcome(enum.StrEnum):
    """Verdict of an SLO on a metric."""

    passed = "passed"
    failed = "failed"
    noisy = "noisy"  # too noisy or too few samples to judge
    skipped = "skipped"
    not_planned = "not_planned_hardware"  # derived from a plan for other hardware (bench.planned)


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One measured quantity of a test; ``samples`` keeps the raw values when there are any."""

    name: str
    value: float
    unit: str
    direction: Direction = Direction.higher
    samples: tuple[float, ...] = ()


class MetricRows(tuple[Metric, ...]):
    """A tuple of metrics that also holds them as columns (``columns``: names, values, units,
    directions, samples; the very objects the metrics hold, in their order). A parser that
    built the columns anyway (nccl-tests: 680,000 metrics per 100 MB log) hands them on, and
    the store and the ingest JSON read them instead of 3.4 million attribute look-ups
    (issue 32). It is a tuple in every other way; build it only with :meth:`of`, which
    takes the metrics and the columns they were made of."""

    columns: tuple[list[str], list[float], list[str], list[Direction], list[tuple[float, ...]]]

    @classmethod
    def of(cls, metrics: list[Metric], columns: tuple[list[Any], ...]) -> MetricRows:
        """The tuple of ``metrics`` with their ``columns`` (each as long as ``metrics``)."""
        if len(columns) != 5 or any(len(col) != len(metrics) for col in columns):
            raise ValueError("MetricRows: five columns, one cell per metric")
        rows = cls(metrics)
        rows.columns = columns  # checked above: five columns of the metrics
        return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class RankStat:
    """One rank of a multi-rank probe: where it ran and its own timing (in ``RankStats.unit``)."""

    rank: int
    host: str
    p50: float | None = None
    p99: float | None = None
    cv: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RankStats:
    """Per-rank data of a probe result (torch collectives, train, checkpoint).

    ``quantity`` says what ``p50``/``p99``/``cv`` measure: ``time_us`` (one collective
    iteration, microseconds), ``step_s`` (one training step, seconds) or ``""`` (placement only).
    """

    quantity: str = ""
    ranks: tuple[RankStat, ...] = ()
    stragglers: tuple[int, ...] = ()  # ranks flagged as slow
    oversubscribed: str = ""  # why timings are not judged ("3 ranks on vm with 2 CPUs"), or ""

    @property
    def unit(self) -> str:
        return {"time_us": "us", "step_s": "s"}.get(self.quantity, "")

    def host(self, rank: int) -> str:
        return next((r.host for r in self.ranks if r.rank == rank), "")

    def get(self, rank: int) -> RankStat | None:
        return next((r for r in self.ranks if r.rank == rank), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TestResult:
    """One run of one tool with one profile on one host."""

    __test__ = False  # not a pytest test class, despite the name

    name: str  # e.g. "fio.checkpoint_write", "iperf3.data", "nccl.all_reduce"
    tool: str  # fio, iperf3, sockperf, perftest, nccl-tests, torch
    host: str
    status: Status
    metrics: tuple[Metric, ...] = ()
    reason: str = ""  # why skipped/failed/timeout
    argv: tuple[str, ...] = ()
    started_at: float = 0.0  # unix seconds
    duration_s: float = 0.0
    raw_output: str = ""  # the tool's output as captured (stored for provenance)
    params: dict[str, str] = field(default_factory=dict)  # profile parameters (size, streams, ...)
    ranks: RankStats | None = None  # per-rank data of a multi-rank probe

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    def require(self, name: str) -> Metric:
        """A metric its producer always records; KeyError naming the test when it is absent."""
        found = self.metric(name)
        if found is None:
            raise KeyError(f"{self.name}: no metric {name!r}")
        return found

    @property
    def case(self) -> str:
        """The name plus any CASE_PARAMS: results with equal ``case`` and host are repeats of one measurement."""
        keys = [f"{k}={self.params[k]}" for k in CASE_PARAMS if k in self.params]
        return f"{self.name}[{' '.join(keys)}]" if keys else self.name


#: Params that make results of one test name different cases rather than repeats: a
#: collective sweep stores one result per (dtype, message size) under one name.
CASE_PARAMS = ("dtype", "size_bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """An expectation on a metric: ``expected`` with a relative tolerance, or absolute bounds."""

    test: str
    metric: str
    direction: Direction
    expected: float | None = None
    tolerance: float = 0.1  # pass if within this fraction on the bad side of expected
    minimum: float | None = None
    maximum: float | None = None
    source: str = ""  # "plan", "thresholds:<file>", "predict"
    min_pass: int | None = None  # k of n repeats that must pass; None: a strict majority (n // 2 + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """An SLO applied to a measured metric."""

    test: str
    metric: str
    host: str
    outcome: Outcome
    measured: float | None
    expected: float | None
    direction: Direction
    margin: float | None  # relative margin on the good side (+) or bad side (-)
    reason: str = ""
    warnings: tuple[str, ...] = ()
    unit: str = ""
    passed_repeats: int = 0  # repeats that met the SLO ...
    total_repeats: int = 0  # ... out of this many judged (skipped repeats excluded)
    source: str = ""  # the Slo's source, for provenance in reports


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """Where a run ran, known once it has (``Recorder.describe``): stored on the run row."""

    cluster: str = ""  # Slurm ClusterName, the k8s namespace/context, or the spec's name
    hosts: tuple[str, ...] = ()  # the hosts the run measured, in rank order, each once
    job_id: str = ""  # Slurm job id or Kubernetes job name, when a scheduler ran it


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One stored run: provenance plus (from ``Store.get_run``) its results, verdicts, artifacts.

    ``Store.list_runs`` leaves ``results``/``verdicts``/``artifacts`` empty and fills the
    counts instead, so listing history never loads raw samples.
    """

    id: int
    kind: str  # "bench", "ingest", ...
    status: RunStatus
    started_at: float  # unix seconds
    finished_at: float | None
    argv: tuple[str, ...]
    fingerprint: dict[str, Any]
    spec_name: str = ""
    plan: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    gpufabric_version: str = ""
    results: tuple[TestResult, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    artifacts: dict[str, str] = field(default_factory=dict)
    result_count: int = 0
    verdict_counts: dict[str, int] = field(default_factory=dict)  # outcome value -> count
    duration_s: float | None = None  # finished_at - started_at; None while running
    cluster: str = ""
    hosts: tuple[str, ...] = ()
    job_id: str = ""
