"""Run ``bench gpu`` end to end: one local rank on one device, records -> results -> verdicts -> store.

The rank runs through the probes' launcher (``run.prepare``/``execute``, local, one process)
so it has their watchdog, process-group kill and crash-surviving record files; the parent
turns the records into results (``gpu_results``), judges them against ``--thresholds`` and
the plan's expectations, and records the run with the device it measured in the fingerprint.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpufabric.bench.probes import run as probe_run
from gpufabric.bench.probes.gpu_plan import GpuPlan, plan_for_spec
from gpufabric.bench.probes.gpu_results import gpu_results
from gpufabric.bench.probes.outcomes import ProbeOutcome, envelope
from gpufabric.bench.probes.service import Judging, lines, session, validate
from gpufabric.errors import InputError
from gpufabric.exec.knobs import duration_s
from gpufabric.exec.launchers import LaunchOptions

if TYPE_CHECKING:
    from gpufabric.bench.probes.requests import GpuRequest
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


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPrepared:
    """A checked ``bench gpu``: what it measures (``--dry-run`` prints it) and how it runs."""

    request: GpuRequest
    device: str
    spec: Any
    catalog: Any
    plan: GpuPlan
    opts: LaunchOptions
    slos: tuple[Any, ...] = ()
    exit_code: int = 0

    def document(self) -> dict[str, Any]:
        """The ``--dry-run --format json`` document."""
        config = self.plan.as_config()
        return envelope(
            {"dry_run": True, "device": self.device, "measurements": self.plan.describe(), "config": config}
        )

    def dry_run_lines(self) -> list[str]:
        """The text form of ``--dry-run``: the measurements it would make and the SLOs."""
        from gpufabric.bench.slo import describe

        plan = self.plan
        head = (
            f"bench gpu {self.spec.name} on {self.device} ({plan.warmup} warm-up, {plan.repeats} timed repeats each):"
        )
        return [head, *(f"  {m}" for m in plan.describe()), *(f"  SLO {s}" for s in describe(self.slos))]

    def run(self, argv: Sequence[str]) -> GpuOutcome:
        return run_gpu(
            self.plan,
            self.opts,
            spec=self.spec,
            catalog=self.catalog,
            judging=Judging(slos=self.slos),
            db=self.request.db,
            argv=argv,
        )


def prepare(request: GpuRequest) -> GpuPrepared:
    """The device, the spec (training or inference) and the measurements to make; nothing runs."""
    from gpufabric.bench.slo import load_thresholds
    from gpufabric.catalog import load_catalog
    from gpufabric.spec.inference import load_inference_spec, read_located, workload_kind
    from gpufabric.spec.loader import load_spec

    device = ("cuda" if shutil.which("nvidia-smi") else "cpu") if request.device == "auto" else request.device
    if device not in ("cuda", "cpu"):
        raise InputError(f"--device {device!r}: use auto, cuda or cpu")
    catalog = load_catalog(request.catalog_files)
    located = read_located(request.spec_file)
    spec: Any
    if workload_kind(located) == "inference":
        spec = load_inference_spec(located, known_ids=catalog.known_ids())
    else:
        spec = load_spec(request.spec_file).spec
    plan = plan_for_spec(spec, device=device, repeats=request.repeats or None)
    opts = LaunchOptions(
        nproc=1,
        backend="gloo",
        timeout_s=duration_s("--timeout", request.timeout),
        op_timeout_s=duration_s("--op-timeout", request.op_timeout),
    )
    slos = tuple(load_thresholds(request.thresholds)) if request.thresholds else ()
    return GpuPrepared(request=request, device=device, spec=spec, catalog=catalog, plan=plan, opts=opts, slos=slos)


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
