"""The plan and simulate services: a typed request in, a typed outcome out.

Both read the spec once (``workloads.load_workload``) and hand it to its kind; ``cli`` turns
options into the request, refuses options of another mode and renders the outcome.
``predict_collective`` and ``calibrate`` (at the end) read no spec: their outcomes are in
``app.collective`` and ``app.calibration``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpufabric.app.requests import SYNTHETIC
from gpufabric.app.training import StepSimulation, checked
from gpufabric.app.workloads import load_workload
from gpufabric.errors import InputError
from gpufabric.exec.knobs import check_range

if TYPE_CHECKING:
    from gpufabric.app.calibration import FabricCalibration, GpuCalibrationOutcome
    from gpufabric.app.collective import CollectiveOutcome
    from gpufabric.app.requests import CalibrateRequest, PlanRequest, PredictCollectiveRequest, SimulateRequest
    from gpufabric.app.workloads import PlanOutcome, SimulateOutcome, Workload
    from gpufabric.catalog import Catalog
    from gpufabric.sim import SimConfig


def plan(request: PlanRequest) -> PlanOutcome:
    """Every candidate design of the spec, costed and predicted, one recommended."""
    from gpufabric.catalog import load_catalog

    catalog = load_catalog(list(request.catalog_files))
    workload = load_workload(request.spec_file, catalog.known_ids())
    return workload.kind.plan(workload.spec, catalog, located=workload.located, catalog_files=request.catalog_files)


@dataclass(frozen=True, slots=True, kw_only=True)
class Simulation:
    """A simulate request resolved to its mode (synthetic, spec or inference), ready to run."""

    mode: str
    request: SimulateRequest
    workload: Workload | None = None
    catalog: Catalog | None = None

    def run(self) -> SimulateOutcome:
        if self.workload is not None and self.catalog is not None:
            return self.workload.kind.simulate(self.workload.spec, self.catalog, self.request)
        from gpufabric.sim import simulate

        cfg = checked(synthetic_config(self.request), self.request)
        return StepSimulation(meta={"mode": SYNTHETIC}, result=simulate(cfg, brute_force=self.request.brute_force))


def prepare_simulation(request: SimulateRequest) -> Simulation:
    """The mode of ``request``: a spec's kind decides it, else the synthetic job of the flags.

    Raises:
        InputError: a SPEC and --ranks together, or neither; --candidate without a SPEC.
        SpecError: the spec is not valid.
    """
    if request.spec is None:
        if request.ranks is None:
            raise InputError("give a SPEC, or --ranks N for a synthetic job (see gpufabric simulate --help)")
        if request.candidate is not None:
            raise InputError("--candidate needs a SPEC")
        return Simulation(mode=SYNTHETIC, request=request)
    if request.ranks is not None:
        raise InputError("give either a SPEC or --ranks (synthetic mode), not both")
    from gpufabric.catalog import load_catalog

    catalog = load_catalog([])
    workload = load_workload(request.spec, catalog.known_ids())
    return Simulation(mode=workload.kind.simulate_mode, request=request, workload=workload, catalog=catalog)


def synthetic_config(r: SimulateRequest) -> SimConfig:
    """The engine configuration of a synthetic job described by the request's flags."""
    from gpufabric.sim import (
        CommLatency,
        Constant,
        Distribution,
        Failures,
        Normal,
        SimConfig,
        parse_checkpoint,
        parse_distribution,
        parse_hiccup,
        parse_stragglers,
    )

    assert r.ranks is not None  # prepare_simulation: synthetic mode has --ranks
    for name, value in (
        ("--compute-ms", r.compute_ms),
        ("--fixed-ms", r.fixed_ms),
        ("--node-mttf-h", r.node_mttf_h),
        ("--restart-min", r.restart_min),
        ("--tokens-per-step", r.tokens_per_step),
    ):
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"{name} must be a finite number >= 0, got {value}")
    if r.compute_ms + r.fixed_ms <= 0:  # throughput and shares divide by the step time
        raise InputError("--compute-ms plus --fixed-ms must be > 0: a training step takes time")
    if r.ring_steps < 0 or r.ring_width < 0 or r.ranks_per_leaf < 0:
        raise InputError("--ring-steps, --ring-width and --ranks-per-leaf must be >= 0")
    if r.ranks < 1 or r.steps < 1 or r.ranks_per_node < 1:
        raise InputError("--ranks, --steps and --gpus-per-node must be >= 1")
    base_s = r.compute_ms * 1e-3
    compute: Distribution = Constant(value_s=base_s)
    if r.jitter:
        j = parse_distribution(r.jitter)
        # A normal jitter is centred on the compute time and the total is truncated at 0;
        # any other jitter is a non-negative delay added to it.
        compute = Normal(mu_s=base_s + j.mu_s, sigma_s=j.sigma_s) if isinstance(j, Normal) else j.affine(loc_s=base_s)
    comm = None
    if r.comm_latency or r.ring_steps:
        if not (r.comm_latency and r.ring_steps):
            raise InputError("--comm-latency and --ring-steps go together")
        comm = CommLatency(
            alpha=parse_distribution(r.comm_latency),
            dependent_steps=r.ring_steps,
            width=r.ring_width or max(1, r.ranks // r.ranks_per_node),
            slow_links=parse_stragglers(r.slow_links) if r.slow_links else None,
        )
    elif r.slow_links:
        raise InputError("--slow-links needs --comm-latency and --ring-steps")
    return SimConfig(
        num_ranks=r.ranks,
        ranks_per_node=r.ranks_per_node,
        ranks_per_leaf=r.ranks_per_leaf,
        compute=compute,
        leaf_jitter=parse_distribution(r.leaf_jitter) if r.leaf_jitter else None,
        hiccup=parse_hiccup(r.hiccup) if r.hiccup else None,
        stragglers=parse_stragglers(r.straggler) if r.straggler else None,
        fixed_s=r.fixed_ms * 1e-3,
        comm=comm,
        checkpoint=parse_checkpoint(r.checkpoint_every) if r.checkpoint_every else None,
        failures=Failures(node_mttf_s=r.node_mttf_h * 3600, restart_s=r.restart_min * 60)
        if r.node_mttf_h > 0
        else None,
        steps=r.steps,
        train_steps=r.train_steps,
        runs=r.runs,
        seed=r.seed,
        tokens_per_step=r.tokens_per_step,
    )


#: Largest message size predicted: 1 PiB, far above any single collective (HBM is ~1e11 B per GPU).
MAX_COLLECTIVE_BYTES = 1 << 50


def predict_collective(request: PredictCollectiveRequest) -> CollectiveOutcome:
    """What nccl-tests should report for one collective on the request's cluster.

    Raises:
        InputError: counts out of range, an unreadable or huge size, an unknown op, algorithm,
            protocol, timing, harness or NCCL version.
        CatalogError: an unknown GPU or fabric id, a bad catalog override file.
    """
    from gpufabric.app.collective import CollectiveOutcome
    from gpufabric.catalog import load_catalog
    from gpufabric.model.collectives import predict_collective as predict
    from gpufabric.units import format_size, parse_size

    r = request
    check_range("--nodes", r.nodes, 1, 1 << 24)
    check_range("--gpus-per-node", r.gpus_per_node, 1, 1024)
    size_bytes = parse_size(r.size)
    if size_bytes > MAX_COLLECTIVE_BYTES:
        raise InputError(
            f"--bytes {r.size} is beyond any collective message (at most {format_size(MAX_COLLECTIVE_BYTES)})"
        )
    prediction = predict(
        op=r.op,
        size_bytes=size_bytes,
        nodes=r.nodes,
        gpus_per_node=r.gpus_per_node,
        gpu=r.gpu,
        fabric=r.fabric,
        catalog=load_catalog(r.catalog_files),
        algorithm=r.algorithm,
        deterministic=r.deterministic,
        sharp=r.sharp,
        timing=r.timing,
        protocol=r.protocol,
        harness=r.harness,
        nccl_version=r.nccl_version,
    )
    return CollectiveOutcome(request=r, prediction=prediction)


def calibrate(request: CalibrateRequest) -> FabricCalibration | GpuCalibrationOutcome:
    """Fit a stored run (collective sweeps and fio results, or a ``bench gpu`` run) and write its
    catalog override to ``request.out`` (not on a dry run, nor when the fit is refused).

    Raises:
        InputError: an unknown id, no run or nothing to fit in it, an unwritable ``out``.
    """
    from gpufabric.app.calibration import FabricCalibration, GpuCalibrationOutcome, write_override
    from gpufabric.catalog import load_catalog
    from gpufabric.plan import calibrate_gpu
    from gpufabric.plan.calibrate import calibrate as fit
    from gpufabric.plan.calibrate import render_yaml
    from gpufabric.results.store import Store

    r = request
    catalog = load_catalog(r.catalog_files)
    ids = (r.gpu, r.fabric, r.storage)
    # Every id given is checked before anything is read or written (they become YAML keys).
    for given, lookup in zip(ids, (catalog.gpu, catalog.fabric, catalog.storage_backend), strict=True):
        if given is not None:
            lookup(given)
    with Store.open(r.db, create=False) as store:
        run = store.get_run(int(r.run) if r.run.isdigit() else r.run)
    if calibrate_gpu.is_gpu_run(run):
        if any(i is not None for i in ids):
            raise InputError("--gpu/--fabric/--storage: a bench gpu run names its GPU itself; drop them")
        gpu_cal = calibrate_gpu.calibrate_gpu(run, catalog=catalog)
        if not r.dry_run:
            write_override(r.out, calibrate_gpu.render_yaml(gpu_cal))
        return GpuCalibrationOutcome(calibration=gpu_cal, out=r.out, written=not r.dry_run)
    cal = fit(run, gpu=r.gpu, fabric=r.fabric, storage=r.storage, base_catalog=r.catalog_files, harness=r.harness)
    refused = bool(cal.worsened) and not r.force
    if written := not r.dry_run and not refused:
        write_override(r.out, render_yaml(cal))
    return FabricCalibration(calibration=cal, out=r.out, written=written, refused=refused)
