"""Run ``bench gpu`` end to end: one local rank on one device, records -> results -> verdicts -> store.

The rank runs through the probes' launcher (``run.prepare``/``execute``, local, one process)
so it has their watchdog, process-group kill and crash-surviving record files; the parent
turns the records into results (``gpu_results``), judges them against ``--thresholds`` and
the plan's expectations, and records the run with the device it measured in the fingerprint.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufabric.bench.probes import run as probe_run
from gpufabric.bench.probes.gpu_plan import GpuPlan
from gpufabric.bench.probes.gpu_results import gpu_results
from gpufabric.bench.probes.outcomes import ProbeOutcome
from gpufabric.results.records import Direction, Outcome, RunStatus, Slo, Status, TestResult, Verdict


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
    slos: Sequence[Slo],
    db: str | None,
    argv: Sequence[str],
) -> GpuOutcome:
    """Measure ``plan`` on one device; every failed measurement and every failed SLO fails the run."""
    from gpufabric.bench.probes.service import store_run
    from gpufabric.results.verdicts import evaluate

    started = time.time()
    prep = probe_run.prepare("gpu", plan.as_config(), opts)
    try:
        ex = probe_run.execute(prep, opts)
    finally:
        probe_run.cleanup(prep)
    log = ex.logs[0]
    ready = log.of("ready")
    info = ready[0].get("info", {}) if ready else {}
    results = gpu_results(
        log.of("gpu"), host=log.host, info=info, catalog=catalog, spec=spec, argv=tuple(prep.plan.commands[0].argv)
    )
    verdicts = [
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
    verdicts += evaluate([r for r in results if r.status is Status.ok], slos) if slos else []
    failed = any(v.outcome is Outcome.failed for v in verdicts) or not results
    status = RunStatus.error if ex.error else RunStatus.failed if failed else RunStatus.passed
    run_id = store_run(
        db=db,
        kind="bench.gpu",
        argv=argv,
        executed=[ex],
        results=results,
        verdicts=verdicts,
        status=status,
        meta={"device": info, "spec": plan.spec_name, "gpu": plan.gpu, "plan_device": plan.device},
        started_at=started,
    )
    return GpuOutcome(
        run_id=run_id,
        status=status,
        error=ex.error,
        device=info,
        rows=tuple(GpuRow.from_result(r) for r in results),
        failures=tuple(v.reason for v in verdicts if v.outcome is Outcome.failed),
        warnings=tuple(v.reason for v in verdicts if v.outcome is Outcome.noisy),
    )
