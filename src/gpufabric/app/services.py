"""The plan and simulate services: a typed request in, a typed outcome out.

Both read the spec once (``workloads.load_workload``) and hand it to its kind; ``cli`` turns
options into the request, refuses options of another mode and renders the outcome.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpufabric.app.requests import SYNTHETIC, PlanRequest, SimulateRequest
from gpufabric.app.training import StepSimulation, checked
from gpufabric.app.workloads import load_workload
from gpufabric.errors import InputError

if TYPE_CHECKING:
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
