"""Run ``bench gpu`` end to end: one local rank on one device, records -> results -> verdicts -> store.

The rank runs through the probes' launcher (``run.prepare``/``execute``, local, one process)
so it has their watchdog, process-group kill and crash-surviving record files; the parent
turns the records into results (``gpu_results``), judges them against ``--thresholds`` and
the plan's expectations, and records the run with the device it measured in the fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufabric.bench.probes import run as probe_run
from gpufabric.bench.probes.gpu_plan import GpuPlan
from gpufabric.bench.probes.gpu_results import gpu_results
from gpufabric.bench.probes.outcomes import ProbeOutcome
from gpufabric.bench.probes.service import Judging, lines, session, validate
from gpufabric.results.recorder import interruption
from gpufabric.results.records import Direction, Outcome, Status, TestResult, Verdict


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuRow:
    """One measurement as reported: its figures and, where a model predicts it, the prediction."""

    name: str
    label: str
    status: Status
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)
    predicted_time_ms: float | None = None
    error_pct: float | None = None

    @classmethod
    def from_result(cls, r: TestResult) -> GpuRow:
        pred = r.params.get("predicted_time_ms")
        err = r.params.get("error_pct")
        return cls(
            name=r.name,
            label=r.params.get("label", r.name),
            status=r.status,
            reason=r.reason,
            metrics={m.name: m.value for m in r.metrics},
            predicted_time_ms=float(pred) if pred else None,
            error_pct=float(err) if err else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            **self.metrics,
            "predicted_time_ms": self.predicted_time_ms,
            "error_pct": self.error_pct,
            "status": self.status.value,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuOutcome(ProbeOutcome):
    device: dict[str, Any] = field(default_factory=dict)
    rows: tuple[GpuRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self._head(), "device": self.device, "results": [r.to_dict() for r in self.rows], **self._tail()}


def run_gpu(
    plan: GpuPlan,
    opts: probe_run.LaunchOptions,
    *,
    spec: Any,
    catalog: Any,
    judging: Judging = Judging(),
    db: str | None,
    argv: Sequence[str],
) -> GpuOutcome:
    """Measure ``plan`` on one device in one recorded run; a failed measurement and a failed SLO
    fail it, an interruption keeps what finished."""
    config = plan.as_config()
    validate("gpu", config, opts)
    meta = {"spec": plan.spec_name, "gpu": plan.gpu, "plan_device": plan.device, "launcher": opts.launcher}
    with session(db, "bench.gpu", argv, opts, meta=meta, judging=judging, spec_name=plan.spec_name) as run:
        ex = run.launch("gpu", config, opts)
        log = ex.logs.get(0)
        ready = log.of("ready") if log is not None else []
        info = ready[0].get("info", {}) if ready else {}
        results = (
            gpu_results(
                log.of("gpu"),
                host=log.host,
                info=info,
                catalog=catalog,
                spec=spec,
                argv=tuple(ex.prepared.plan.commands[0].argv),
            )
            if log is not None
            else []
        )
        own = [
            Verdict(
                test=r.name,
                metric="status",
                host=r.host,
                outcome=Outcome.failed,
                measured=None,
                expected=None,
                direction=Direction.lower,
                margin=None,
                reason=f"{r.params.get('label', r.name)}: {r.reason}",
            )
            for r in results
            if r.status is not Status.ok
        ]
        run.rec.update_fingerprint({**run.fingerprint, "device": info})
        verdicts = run.judge(results, own, judging)
        status = run.finish(no_results="" if results else "no measurement finished")
    return GpuOutcome(
        run_id=run.rec.run_id,
        status=status,
        signum=run.signum,
        error="; ".join(run.errors) or (interruption(run.interrupted) if run.interrupted else ""),
        device=info,
        rows=tuple(GpuRow.from_result(r) for r in results),
        failures=lines(verdicts, Outcome.failed, Outcome.not_planned),
        warnings=lines(verdicts, Outcome.noisy),
    )
