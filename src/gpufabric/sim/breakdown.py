"""Engine input from a planner candidate: ``config_from_breakdown(StepBreakdown) -> SimConfig``."""

from __future__ import annotations

from gpufabric.model.step import StepBreakdown
from gpufabric.sim.config import (
    CheckpointPolicy,
    CommLatency,
    Failures,
    SimConfig,
    Stragglers,
)
from gpufabric.sim.distributions import (
    Constant,
    Distribution,
    Hiccup,
    Normal,
    expected_max,
)


def _normal_or_const(mean_s: float, sigma_s: float) -> Distribution:
    return Normal(mu_s=mean_s, sigma_s=sigma_s) if sigma_s > 0 else Constant(value_s=mean_s)


def config_from_breakdown(
    b: StepBreakdown,
    *,
    steps: int = 10_000,
    train_steps: int = 0,
    runs: int = 1,
    seed: int = 0,
    compute_cv: float | None = None,
    stragglers: Stragglers | None = None,
    hiccup: Hiccup | None = None,
    tokens_per_step: float = 0.0,
) -> SimConfig:
    """Map one candidate's step breakdown onto the engine: the same inputs the planner's
    closed forms (``model.tail.step_tail``, ``model.reliability.goodput``) use.

    - per-rank compute: Normal(compute_s, cv * compute_s), truncated at 0, with
      ``cv = b.compute_cv`` unless ``compute_cv`` overrides it;
    - hiccups: per rank per step, probability ``b.hiccup_prob`` of an extra ``b.hiccup_s``
      (the planner's congestion multiplier included) unless ``hiccup`` overrides them;
    - collectives: ``dependent_latency_steps`` dependent steps, each waiting for the slowest
      of ``num_nodes`` inter-node transfers of latency Normal(latency_per_step_s,
      jitter_per_step_s); the rest of the step time (bubble, the bandwidth term of the
      exposed communication, any data-loader stretch) is deterministic critical-path time;
    - leaves: ``nodes_per_leaf`` nodes share a leaf (no shared leaf jitter is assumed);
    - checkpoints every ``checkpoint_interval_s`` of wall time, in whole mean steps (the
      expected max over ranks, not the deterministic step).
      sync: the block is the write; ``checkpoint_lag_s`` (a drain after a local write)
      is the durability lag. async: the background write lasts ``checkpoint_lag_s``
      (until durable) and the snapshot is the block less the planner's backlog
      ``max(0, lag - interval)``, which the engine produces itself by waiting;
    - failures: exponential with the job MTTF, spread evenly over the nodes;
    - ``stragglers`` are passed through (the planner has none).

    The mean-value step of the result equals ``b.step_time_s`` (up to the truncation of
    the normal).
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
    cv = b.compute_cv if compute_cv is None else compute_cv
    compute = _normal_or_const(b.compute_s, cv * b.compute_s)
    fixed_s = max(0.0, b.step_time_s - b.compute_s - latency_s)
    checkpoint = None
    if b.checkpoint_interval_s > 0 and b.step_time_s > 0:
        # The interval is wall time: count it in mean steps, barrier amplification
        # included (1.5% longer than the deterministic step at 16k ranks).
        step_mean_s = fixed_s + expected_max(compute, b.num_ranks)
        if comm is not None:
            step_mean_s += comm.dependent_steps * expected_max(comm.alpha, comm.width)
        every = max(1, round(b.checkpoint_interval_s / step_mean_s))
        if b.checkpoint_async:
            # The block holds the drain's contention or its backlog (model.storage.block_time_s);
            # the engine draws those itself from the drain's length and slowdown.
            w, c = b.checkpoint_lag_s, b.checkpoint_drain_slowdown
            drain = max(0.0, w * c / (1 + c), w - b.checkpoint_interval_s)
            checkpoint = CheckpointPolicy(
                every_steps=every,
                write_s=w,
                mode="async",
                snapshot_s=max(0.0, b.checkpoint_block_s - drain),
                drain_slowdown=c,
            )
        else:
            checkpoint = CheckpointPolicy(
                every_steps=every, write_s=b.checkpoint_block_s, mode="sync", lag_s=b.checkpoint_lag_s
            )
    failures = None
    if b.job_mttf_s > 0:
        failures = Failures(node_mttf_s=b.job_mttf_s * max(1, b.num_nodes), restart_s=b.restart_s)
    if hiccup is None and b.hiccup_prob > 0 and b.hiccup_s > 0:
        hiccup = Hiccup(prob=b.hiccup_prob, delay_s=b.hiccup_s)
    leaf = b.nodes_per_leaf * ranks_per_node
    num_ranks = max(1, b.num_nodes) * ranks_per_node
    return SimConfig(
        num_ranks=num_ranks,
        ranks_per_node=ranks_per_node,
        ranks_per_leaf=leaf if leaf > 0 and num_ranks % leaf == 0 else 0,
        compute=compute,
        stragglers=stragglers,
        hiccup=hiccup,
        fixed_s=fixed_s,
        comm=comm,
        checkpoint=checkpoint,
        failures=failures,
        steps=steps,
        train_steps=train_steps,
        runs=runs,
        seed=seed,
        tokens_per_step=tokens_per_step,
    )
