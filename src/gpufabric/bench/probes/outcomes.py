"""Typed outcomes of the torch probes: what ``service`` returns and the CLI renders.

Each row is read once from its stored ``TestResult`` (``from_result``); the CLI reads the
fields, and ``to_dict`` gives the JSON document ``--format json`` prints (unchanged keys:
scripts that read it keep working).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from gpufabric.bench.probes.summaries import Reproducibility
from gpufabric.results.document import versioned as envelope
from gpufabric.results.records import RankStats, RunStatus, Status, TestResult


def _metrics(result: TestResult) -> dict[str, float]:
    return {m.name: m.value for m in result.metrics}


def _value(result: TestResult, name: str) -> float:
    found = result.metric(name)
    return math.nan if found is None else found.value


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveRow:
    """One (op, dtype, size) of a sweep."""

    op: str
    dtype: str
    size_bytes: int
    num_ranks: int
    time_p50_us: float
    time_p99_us: float
    time_cv: float
    algbw_gbps: float
    busbw_gbps: float
    wrong_elements: float
    status: Status
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)  # every metric, for the JSON document
    ranks: RankStats | None = None

    @classmethod
    def from_result(cls, r: TestResult) -> CollectiveRow:
        return cls(
            op=r.params["op"],
            dtype=r.params["dtype"],
            size_bytes=int(r.params["size_bytes"]),
            num_ranks=int(r.params["num_ranks"]),
            time_p50_us=_value(r, "time_p50_us"),
            time_p99_us=_value(r, "time_p99_us"),
            time_cv=_value(r, "time_cv"),
            algbw_gbps=_value(r, "algbw_gbps"),
            busbw_gbps=_value(r, "busbw_gbps"),
            wrong_elements=_value(r, "wrong_elements"),
            status=r.status,
            reason=r.reason,
            metrics=_metrics(r),
            ranks=r.ranks,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "dtype": self.dtype,
            "size_bytes": self.size_bytes,
            "num_ranks": self.num_ranks,
            **self.metrics,
            "status": self.status.value,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainRow:
    """One repeat of the training probe, with each rank's step times."""

    repeat: int
    num_ranks: int
    sha256: str
    step_time_p50_s: float
    step_time_p99_s: float
    step_time_cv: float
    final_loss: float
    ranks: RankStats
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_result(cls, r: TestResult) -> TrainRow:
        return cls(
            repeat=int(r.params["repeat"]),
            num_ranks=int(r.params["num_ranks"]),
            sha256=r.params["sha256"],
            step_time_p50_s=_value(r, "step_time_p50_s"),
            step_time_p99_s=_value(r, "step_time_p99_s"),
            step_time_cv=_value(r, "step_time_cv"),
            final_loss=_value(r, "final_loss"),
            ranks=r.ranks if r.ranks is not None else RankStats(),
            metrics=_metrics(r),
        )

    def to_dict(self) -> dict[str, Any]:
        per_rank = self.ranks.ranks
        return {
            "repeat": self.repeat,
            "num_ranks": self.num_ranks,
            "sha256": self.sha256,
            **self.metrics,
            "rank_step_p50_s": {str(s.rank): s.p50 for s in per_rank},
            "rank_step_p99_s": {str(s.rank): s.p99 for s in per_rank},
            "rank_step_cv": {str(s.rank): s.cv for s in per_rank},
            "rank_hosts": {str(s.rank): s.host for s in per_rank},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRow:
    """One checkpoint format written and read back."""

    format: str
    size_bytes: int
    write_duration_s: float
    write_gbps: float
    write_min_rank_gbps: float
    read_duration_s: float
    read_gbps: float
    read_min_rank_gbps: float
    wrong_tensors: float
    phases_s: dict[str, float] = field(default_factory=dict)  # commit phase -> seconds (slowest rank), when measured
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_result(cls, r: TestResult, phases: tuple[str, ...]) -> CheckpointRow:
        return cls(
            format=r.params["format"],
            size_bytes=int(r.params["bytes"]),
            write_duration_s=_value(r, "write_duration_s"),
            write_gbps=_value(r, "write_gbps"),
            write_min_rank_gbps=_value(r, "write_min_rank_gbps"),
            read_duration_s=_value(r, "read_duration_s"),
            read_gbps=_value(r, "read_gbps"),
            read_min_rank_gbps=_value(r, "read_min_rank_gbps"),
            wrong_tensors=_value(r, "wrong_tensors"),
            phases_s={p: m.value for p in phases if (m := r.metric(p)) is not None},
            metrics=_metrics(r),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "bytes": self.size_bytes, **self.metrics}


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Parameters of two training runs compared bitwise."""

    compared: str  # "repeat 0 vs repeat 1", "run 7 vs this run"
    result: Reproducibility

    def to_dict(self) -> dict[str, Any]:
        return {"compared": self.compared, **asdict(self.result)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeOutcome:
    """A recorded probe run: its id, status (the exit code follows from it) and what to report."""

    run_id: int
    status: RunStatus
    error: str = ""
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    signum: int = 0  # the signal that interrupted the run (SIGINT 2, SIGTERM 15), else 0

    @property
    def exit_code(self) -> int:
        """The status's exit code; an interrupted run exits 128 + the signal (130, 143)."""
        if self.status is RunStatus.interrupted and self.signum:
            return 128 + self.signum
        return self.status.exit_code

    def _head(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status.value, "error": self.error or None}

    def to_dict(self) -> dict[str, Any]:
        return {**self._head(), **self._tail()}

    def document(self) -> dict[str, Any]:
        """The JSON document ``--format json`` prints: the versioned envelope around :meth:`to_dict`."""
        return envelope(self.to_dict())

    def _tail(self) -> dict[str, Any]:
        return {"failures": list(self.failures), "warnings": list(self.warnings)}


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectivesOutcome(ProbeOutcome):
    rows: tuple[CollectiveRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self._head(), "results": [r.to_dict() for r in self.rows], **self._tail()}


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainOutcome(ProbeOutcome):
    shape: dict[str, Any] = field(default_factory=dict)
    rows: tuple[TrainRow, ...] = ()
    reproducibility: tuple[Comparison, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._head(),
            "shape": self.shape,
            "results": [r.to_dict() for r in self.rows],
            "reproducibility": [c.to_dict() for c in self.reproducibility],
            **self._tail(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointOutcome(ProbeOutcome):
    rows: tuple[CheckpointRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self._head(), "results": [r.to_dict() for r in self.rows], **self._tail()}


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowedOutcome(ProbeOutcome):
    """A job applied and followed (k8s): the ranks' records stay in the pods; the log is the output."""

    launcher: str = "k8s"
    manifest: str = ""
    returncode: int | None = None
    timed_out: bool = False
    log: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "launcher": self.launcher,
            "run_id": self.run_id,
            "manifest": self.manifest,
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "log": self.log,
            "status": self.status.value,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DryRun:
    """What a probe would run (``--dry-run``): nothing is launched or stored; exit 0."""

    launcher: str
    commands: tuple[str, ...]  # one copy-pasteable shell line each
    script: str  # the generated sbatch script or job manifest ('' when none)
    script_label: str  # what the script is, for the text rendering
    config: dict[str, Any]
    slos: tuple[Any, ...] = ()  # results.records.Slo
    slo_lines: tuple[str, ...] = ()  # bench.slo.describe
    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "launcher": self.launcher,
            "commands": list(self.commands),
            "sbatch_script": self.script,
            "config": self.config,
            "slos": list(self.slos),
        }

    def document(self) -> dict[str, Any]:
        return envelope(self.to_dict())

    def text(self) -> str:
        """The text form: the launch commands (and script), then the SLOs, one a line."""
        script = f"# {self.script_label}:\n{self.script}" if self.script else ""
        slos = "# SLOs:\n" + "".join(f"#   {line}\n" for line in self.slo_lines) if self.slo_lines else ""
        return "".join(c + "\n" for c in self.commands) + script + slos
