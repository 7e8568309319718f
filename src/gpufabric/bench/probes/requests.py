"""The probe commands as application services: a typed request in, a typed outcome out.

Each request record (:class:`CollectivesRequest`, :class:`TrainRequest`,
:class:`CheckpointRequest`) declares its knobs once, as fields whose metadata is the
command-line option (``exec.knobs``; ``cli/request_options.py`` derives the options from them), and
holds the launch as typed (``exec.launchers.LaunchRequest``). :func:`prepare` checks it all
and gives a :class:`Prepared` probe: the launch options, the rank config and what the run is
judged against. :func:`dry_run` says what would run; :func:`run` records the run through
``bench.probes.service`` (every launcher alike: a launcher that follows a job, k8s, is
recorded as the job it follows) and returns the outcome, which owns its JSON document and
exit status (``bench/probes/outcomes.py``). The CLI only renders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpufabric.errors import InputError
from gpufabric.exec.knobs import DB_HELP, SIZE_SYNTAX, Refusal, knob, like
from gpufabric.exec.launchers import LaunchRequest
from gpufabric.units import parse_size

if TYPE_CHECKING:  # the service and outcomes import numpy: loaded when a probe runs, not when the CLI starts
    from gpufabric.bench.probes.gpu_service import GpuPrepared
    from gpufabric.bench.probes.outcomes import DryRun, ProbeOutcome
    from gpufabric.bench.probes.service import Judging
    from gpufabric.exec.launchers import LabHosts, LaunchOptions

OnRecord = Callable[[dict[str, Any]], None]

#: (flag, help) of knobs several probes declare.
THRESHOLDS = (
    "--thresholds",
    "Thresholds YAML (as for `bench --suite`): bounds on the metrics this probe measures, by test"
    " name (torch.all_reduce, torch.train, torch.checkpoint.dcp, ...); a miss fails the run.",
)
PLAN = (
    "--plan",
    "Plan JSON (gpufabric plan SPEC --format json): judge against its recommended design, and"
    " mark every SLO verdict not_planned_hardware on other hardware (add --spec for the GPU).",
)
DB = ("--db", DB_HELP)


def parse_sizes(text: str) -> list[int]:
    """``1K:1G`` (powers of two, factor 2, both ends included), ``1K,64K,1M`` or one size."""
    if ":" in text:
        lo_text, _, hi_text = text.partition(":")
        lo, hi = parse_size(lo_text), parse_size(hi_text)
        if lo <= 0 or hi < lo:
            raise InputError(f"--sizes {text!r}: need 0 < start <= end")
        sizes = []
        size = lo
        while size <= hi:
            sizes.append(size)
            size *= 2
        return sizes
    sizes = [parse_size(t) for t in text.split(",") if t.strip()]
    if not sizes or min(sizes) <= 0:
        raise InputError(f"--sizes {text!r}: give positive sizes such as 1K:1G or 1M,16M")
    return sizes


def _csv(text: str, allowed: tuple[str, ...], flag: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise InputError(f"{flag}: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(allowed)}")
    return items


def _no_plan(request: Any) -> bool:
    return request.plan is None


def _spec(path: Path | None) -> Any:
    if path is None:
        return None
    from gpufabric.spec.loader import load_spec

    return load_spec(path).spec


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A checked probe request: how it launches, what the ranks run, what it is judged against."""

    request: Any  # the request record it came from
    opts: LaunchOptions
    config: dict[str, Any]
    judging: Judging


def judging(
    request: Any, spec: Any, opts: LaunchOptions, config: Mapping[str, Any], *, plan: Path | None = None
) -> Judging:
    """What a probe is judged against: ``--thresholds`` bounds and ``--plan``'s expectations."""
    from gpufabric.bench import slo
    from gpufabric.bench.probes.service import Judging

    slos = tuple(slo.load_thresholds(request.thresholds)) if request.thresholds is not None else ()
    if plan is None:
        return Judging(slos=slos)
    from gpufabric.bench.planned import planned_hardware
    from gpufabric.spec.plan_file import load_plan

    doc = load_plan(plan)
    kind = request.kind
    expected = slo.probe_slos(kind, doc, spec, path=str(plan), nodes=opts.nodes, nproc=opts.nproc, config=config)
    return Judging(slos=slos, plan_slos=tuple(expected), planned=planned_hardware(doc, spec, path=str(plan)))


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectivesRequest:
    """``bench collectives``: torch.distributed collective sweeps."""

    kind: ClassVar[str] = "collectives"
    ops: str = knob(
        "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv", "--ops", "Comma-separated collectives."
    )
    sizes: str = knob("1K:16M", "--sizes", "Size sweep: START:END doubles (1K:1G) or a list (1M,16M).")
    dtypes: str = knob("float32", "--dtypes", "float32, float16, bfloat16, float64 (comma-separated).")
    iters: int = knob(10, "--iters", "Timed iterations per size.", min=1)
    warmup: int = knob(3, "--warmup", "Untimed iterations per size.", min=0)
    thresholds: Path | None = knob(None, *THRESHOLDS)
    plan: Path | None = knob(None, *PLAN)
    spec: Path | None = knob(
        None,
        "--spec",
        "With --plan: the spec, for the GPU (planned hardware) and the busbw expectation.",
        refuse=Refusal(when=_no_plan, why="without --plan"),
    )
    launch: LaunchRequest = field(default_factory=LaunchRequest)
    db: str | None = knob(None, *DB)
    corrupt_rank: int = knob(-1, "--inject-corrupt-rank", "", hidden=True)
    die_rank: int = knob(-1, "--inject-die-rank", "", hidden=True)
    die_after: str = knob("0", "--inject-die-after", "", hidden=True)

    def prepare(self, lab_hosts: LabHosts | None) -> Prepared:
        from gpufabric.bench.probes.collectives import DTYPES
        from gpufabric.model.collectives import OPS

        opts = self.launch.resolve(lab_hosts=lab_hosts)
        config = {
            "ops": _csv(self.ops, OPS, "--ops"),
            "sizes": parse_sizes(self.sizes),
            "dtypes": _csv(self.dtypes, DTYPES, "--dtypes"),
            "iters": self.iters,
            "warmup": self.warmup,
            "corrupt_rank": self.corrupt_rank if self.corrupt_rank >= 0 else None,
            "die_rank": self.die_rank if self.die_rank >= 0 else None,
            "die_after": parse_size(self.die_after),
        }
        judge = judging(self, _spec(self.spec), opts, config, plan=self.plan)
        return Prepared(request=self, opts=opts, config=config, judging=judge)

    def run(self, prep: Prepared, *, argv: list[str], on_record: OnRecord | None = None) -> ProbeOutcome:
        """``on_record`` gets a ``live.size_row`` for each size rank 0 finishes."""
        from gpufabric.bench.probes import service

        return service.run_collectives(
            prep.config, prep.opts, db=self.db, argv=argv, on_size=on_record, judging=prep.judging
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainRequest:
    """``bench train``: a small deterministic transformer under DDP/FSDP."""

    kind: ClassVar[str] = "train"
    spec: Path | None = knob(None, "--spec", "Spec whose model shape is scaled down.")
    scale: int = knob(64, "--scale", "Divide hidden size and sequence length by this.", min=1)
    blocks: int = knob(2, "--blocks", "Transformer blocks.", min=1)
    steps: int = knob(10, "--steps", "Timed training steps (K).", min=1)
    warmup: int = knob(2, "--warmup", "Untimed steps first.", min=0)
    seed: int = knob(0, "--seed", "Seed for weights and data.")
    mode: str = knob("ddp", "--mode", "ddp or fsdp (FSDP2 fully_shard).")
    repeat: int = knob(1, "--repeat", "Runs; 2+ gives the bitwise verdict.", min=1, max=10)
    against: str | None = knob(None, "--against", "Compare parameters with a stored train run.")
    deterministic: bool = knob(
        True,
        "--deterministic",
        "torch.use_deterministic_algorithms and CUBLAS_WORKSPACE_CONFIG.",
        off="--no-deterministic",
    )
    thresholds: Path | None = knob(None, *THRESHOLDS)
    launch: LaunchRequest = field(default_factory=LaunchRequest)
    db: str | None = knob(None, *DB)
    delay_rank: int = knob(-1, "--inject-delay-rank", "", hidden=True)
    delay_ms: float = knob(0.0, "--inject-delay-ms", "", hidden=True)

    def prepare(self, lab_hosts: LabHosts | None) -> Prepared:
        from gpufabric.bench.probes.shapes import train_shape

        if self.mode not in ("ddp", "fsdp"):
            raise InputError(f"--mode {self.mode!r}: use ddp or fsdp")
        spec = _spec(self.spec)
        opts = self.launch.resolve(lab_hosts=lab_hosts)
        config = {
            **train_shape(spec, scale=self.scale, blocks=self.blocks).as_config(),
            "steps": self.steps,
            "warmup": self.warmup,
            "seed": self.seed,
            "mode": self.mode,
            "deterministic": self.deterministic,
            "delay_rank": self.delay_rank if self.delay_rank >= 0 else None,
            "delay_rank_ms": self.delay_ms,
        }
        # No --plan: the probe's model is scaled down, so the plan's step time says nothing about it.
        return Prepared(request=self, opts=opts, config=config, judging=judging(self, spec, opts, config))

    def run(self, prep: Prepared, *, argv: list[str], on_record: OnRecord | None = None) -> ProbeOutcome:
        import os

        from gpufabric.bench.probes import service

        return service.run_train(
            prep.config,
            prep.opts,
            repeat=self.repeat,
            against=self.against,
            db=self.db,
            argv=argv,
            env=dict(os.environ),
            judging=prep.judging,
            on_record=on_record,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRequest:
    """``bench checkpoint``: a spec-shaped state dict written and read back."""

    kind: ClassVar[str] = "checkpoint"
    directory: Path = knob(..., "--dir", "Directory on the storage under test (shared for dcp).")
    spec: Path | None = knob(None, "--spec", "Spec whose checkpoint (params x bytes/param) is scaled.")
    scale: int = knob(10000, "--scale", "Divide the spec's checkpoint size by this.", min=1)
    size: str = knob("", "--bytes", "Total checkpoint size instead of the spec's: " + SIZE_SYNTAX)
    formats: str = knob("torch,safetensors,dcp", "--formats", "torch, safetensors, dcp.")
    keep: bool = knob(False, "--keep", "Keep the written files.")
    thresholds: Path | None = knob(None, *THRESHOLDS)
    plan: Path | None = knob(None, *PLAN)
    launch: LaunchRequest = field(default_factory=LaunchRequest)
    db: str | None = knob(None, *DB)

    def prepare(self, lab_hosts: LabHosts | None) -> Prepared:
        from gpufabric.bench.probes.shapes import checkpoint_shape

        spec = _spec(self.spec)
        shape = checkpoint_shape(spec, scale=self.scale)
        if self.size:
            shape = replace(shape, total_bytes=parse_size(self.size))
        # Writes need no GPU: auto is gloo here.
        backend = "gloo" if self.launch.backend == "auto" else self.launch.backend
        opts = self.launch.resolve(lab_hosts=lab_hosts, backend=backend)
        config = {
            **shape.as_config(),
            "directory": str(self.directory.resolve()),
            "keep": self.keep,
            "formats": _csv(self.formats, ("torch", "safetensors", "dcp"), "--formats"),
        }
        judge = judging(self, spec, opts, config, plan=self.plan)
        return Prepared(request=self, opts=opts, config=config, judging=judge)

    def run(self, prep: Prepared, *, argv: list[str], on_record: OnRecord | None = None) -> ProbeOutcome:
        from gpufabric.bench.probes import service

        return service.run_checkpoint(
            prep.config, prep.opts, db=self.db, argv=argv, judging=prep.judging, on_record=on_record
        )


def dry_run(kind: str, config: dict[str, Any], opts: LaunchOptions, judge: Judging) -> DryRun:
    """The launch commands (and script) the probe would run, and the SLOs it would be judged by."""
    from gpufabric.bench.probes import run as probe_run
    from gpufabric.bench.probes.outcomes import DryRun
    from gpufabric.bench.slo import describe

    prep = probe_run.prepare(kind, config, opts, write=False)  # nothing lands in --run-dir
    try:
        slos = (*judge.slos, *judge.plan_slos)
        return DryRun(
            launcher=prep.plan.launcher,
            commands=tuple(c.shell() for c in prep.plan.commands),
            script=prep.plan.script,
            script_label="TrainJob manifest" if opts.runner.follows_job else "sbatch script (kept with the run)",
            config=prep.config,
            slos=slos,
            slo_lines=tuple(describe(slos)),
        )
    finally:
        probe_run.cleanup(prep)


def run(prep: Prepared, *, argv: list[str], on_record: OnRecord | None = None) -> ProbeOutcome:
    """Record the probe's run; a launcher that follows a job (k8s) records the job it follows."""
    from gpufabric.bench.probes import service

    request = prep.request
    if prep.opts.runner.follows_job:
        if prep.judging.count:
            raise InputError(
                f"--thresholds/--plan with --launcher {prep.opts.launcher}: the measurements stay in the pods;"
                " judge them there"
            )
        return service.run_followed(request.kind, prep.config, prep.opts, db=request.db, argv=argv)
    return request.run(prep, argv=argv, on_record=on_record)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuRequest:
    """``bench gpu``: one device measured on a spec's shapes (``bench.probes.gpu_service``)."""

    spec_file: Path = knob(..., "--spec", "Training or inference spec whose shapes are measured.")
    device: str = knob(
        "auto", "--device", "cuda, cpu, or auto (cuda when nvidia-smi is on PATH; cpu scales every shape down)."
    )
    repeats: int = knob(0, "--repeats", "Timed repeats per measurement (0: 10 on CUDA, 3 on CPU).", min=0, max=10000)
    thresholds: Path | None = knob(
        None,
        "--thresholds",
        "Thresholds YAML (tests: gpu.gemm.*, gpu.hbm.read, ...; metrics tflops, bw_gbps, time_ms ...).",
    )
    catalog_files: list[Path] = knob([], "--catalog", "Catalog override file (the GPU's peaks).")
    timeout: str = like(LaunchRequest, "timeout", "600s")
    op_timeout: str = like(LaunchRequest, "op_timeout", "60s")
    db: str | None = knob(None, *DB)

    def prepare(self) -> GpuPrepared:
        """The device, the spec (training or inference) and the measurements to make; nothing runs."""
        from gpufabric.bench.probes.gpu_service import prepare

        return prepare(self)
