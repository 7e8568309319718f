"""Engine input from a planner candidate: ``config_from_breakdown(StepBreakdown) -> SimConfig``."""

from __future__ import annotations

from gpufabric.model.step import StepBreakdown
from gpufabric.sim.config import CheckpointPolicy, CommLatency, Failures, SimConfig, Stragglers
from gpufabric.sim.distributions import Constant, Distribution, Hiccup, Normal

#: Per-rank compute-time coefficient of variation when the caller knows nothing better.
#: [U] An assumption, not a sourced figure (the catalog's per-GPU ``compute_jitter_cv``,
#: which spec mode uses, is an estimate too); override it with a measured value. The
#: simulator's purpose is to show the effect of a CV, not to assert one.
DEFAULT_COMPUTE_CV = 0.005


def _normal_or_const(mean_s: float, sigma_s: float) -> Distribution:
    return Normal(mu_s=mean_s, sigma_s=sigma_s) if sigma_s > 0 else Constant(value_s=mean_s)


def config_from_breakdown(
    b: StepBreakdown,
    *,
    steps: int = 10_000,
    train_steps: int = 0,
    runs: int = 1,
    seed: int = 0,
    compute_cv: float = DEFAULT_COMPUTE_CV,
    stragglers: Stragglers | None = None,
    hiccup: Hiccup | None = None,
    tokens_per_step: float = 0.0,
) -> SimConfig:
    """Map one candidate's step breakdown onto the engine.

    - per-rank compute: Normal(compute_s, compute_cv * compute_s), truncated at 0;
    - collectives: ``dependent_latency_steps`` dependent steps, each waiting for the slowest
      of ``num_nodes`` inter-node transfers of latency Normal(latency_per_step_s,
      jitter_per_step_s); the rest of the exposed communication (its bandwidth term) and
      the pipeline bubble are deterministic time on the critical path;
    - leaves: ``nodes_per_leaf`` nodes share a leaf (no shared leaf jitter is assumed);
    - checkpoints every ``checkpoint_interval_s`` of wall time, rounded to whole steps;
      async when the blocking time is shorter than the write;
    - failures: exponential with the job MTTF, spread evenly over the nodes;
    - ``stragglers`` and ``hiccup`` (per rank per step) are passed through: the breakdown
      does not carry them (the planner takes hiccups from the fabric's catalog entry).

    The mean-value step of the result equals ``b.step_time_s`` when ``step_time_s =
    compute_s + bubble_s + comm_exposed_s`` (up to the truncation of the normal).
    """
    ranks_per_node = max(1, b.num_ranks // max(1, b.num_nodes))
    latency_s = b.dependent_latency_steps * b.latency_per_step_s
    comm = None
    if b.dependent_latency_steps > 0:
        comm = CommLatency(
            alpha=_normal_or_const(b.latency_per_step_s, b.jitter_per_step_s),
            dependent_steps=b.dependent_latency_steps,
            width=max(1, b.num_nodes),
        )
    checkpoint = None
    if b.checkpoint_interval_s > 0 and b.step_time_s > 0:
        every = max(1, round(b.checkpoint_interval_s / b.step_time_s))
        if b.checkpoint_block_s < b.checkpoint_write_s:
            checkpoint = CheckpointPolicy(every_steps=every, write_s=b.checkpoint_write_s, mode="async",
                                          snapshot_s=b.checkpoint_block_s)
        else:
            checkpoint = CheckpointPolicy(every_steps=every, write_s=b.checkpoint_block_s, mode="sync")
    failures = None
    if b.job_mttf_s > 0:
        failures = Failures(node_mttf_s=b.job_mttf_s * max(1, b.num_nodes), restart_s=b.restart_s)
    leaf = b.nodes_per_leaf * ranks_per_node
    num_ranks = max(1, b.num_nodes) * ranks_per_node
    return SimConfig(
        num_ranks=num_ranks,
        ranks_per_node=ranks_per_node,
        ranks_per_leaf=leaf if leaf > 0 and num_ranks % leaf == 0 else 0,
        compute=_normal_or_const(b.compute_s, compute_cv * b.compute_s),
        stragglers=stragglers,
        hiccup=hiccup,
        fixed_s=b.bubble_s + max(0.0, b.comm_exposed_s - latency_s),
        comm=comm,
        checkpoint=checkpoint,
        failures=failures,
        steps=steps,
        train_steps=train_steps,
        runs=runs,
        seed=seed,
        tokens_per_step=tokens_per_step,
    )
