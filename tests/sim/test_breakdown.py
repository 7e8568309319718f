"""config_from_breakdown: a planner candidate's StepBreakdown -> engine input."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufabric.model.step import StepBreakdown
from gpufabric.sim import (
    Constant,
    Hiccup,
    Normal,
    config_from_breakdown,
    expected_max,
    mean_value_step_s,
    simulate,
)

BREAKDOWN = StepBreakdown(
    step_time_s=10.0,
    compute_s=8.0,
    bubble_s=1.0,
    comm_exposed_s=1.0,
    dependent_latency_steps=254,
    latency_per_step_s=9.6e-6,  # NCCL's old NET ring per-step constant (models.md 2.3)
    jitter_per_step_s=2e-6,
    num_ranks=1024,
    num_nodes=128,
    nodes_per_leaf=32,
    checkpoint_write_s=60.0,
    checkpoint_block_s=5.0,
    checkpoint_interval_s=1800.0,
    checkpoint_async=True,
    restart_s=600.0,
    job_mttf_s=3.1 * 3600,  # Llama 3: one interruption every ~3.1 h (models.md 2.6)
    compute_cv=0.01,
    hiccup_prob=1e-5,
    hiccup_s=2e-3,
    checkpoint_lag_s=70.0,  # write 60 s + drain 10 s
)


def test_mapping_of_every_field():
    cfg = config_from_breakdown(BREAKDOWN, steps=500, runs=2, seed=7)
    assert (cfg.num_ranks, cfg.ranks_per_node, cfg.ranks_per_leaf) == (1024, 8, 256)
    # Compute CV and hiccups come from the breakdown, not from the catalog.
    assert cfg.compute == Normal(mu_s=8.0, sigma_s=0.08)
    assert cfg.hiccup == Hiccup(prob=1e-5, delay_s=2e-3)
    assert cfg.comm.dependent_steps == 254 and cfg.comm.width == 128
    assert cfg.comm.alpha == Normal(mu_s=9.6e-6, sigma_s=2e-6)
    # The latency part of the exposed communication is drawn; the rest is fixed time.
    assert cfg.fixed_s == pytest.approx(1.0 + 1.0 - 254 * 9.6e-6)
    # 1800 s of wall time in mean steps: 10 s + 0.08 s x 3.248 (E[max of 1,024 normals])
    # + 254 x 2 us x 2.6 (E[max of 128]) = 10.261 s -> 175 (the deterministic 10 s: 180).
    assert cfg.checkpoint.every_steps == 175
    # async: the background write lasts until durable (write + drain).
    assert cfg.checkpoint.mode == "async" and cfg.checkpoint.snapshot_s == 5.0 and cfg.checkpoint.write_s == 70.0
    assert cfg.checkpoint.durable_lag_s == 70.0
    assert cfg.failures.node_mttf_s == pytest.approx(3.1 * 3600 * 128)
    assert cfg.failures.restart_s == 600.0
    assert (cfg.steps, cfg.runs, cfg.seed) == (500, 2, 7)
    assert mean_value_step_s(cfg) == pytest.approx(BREAKDOWN.step_time_s + 2e-8, rel=1e-9)


def test_overrides_and_the_async_backlog():
    cfg = config_from_breakdown(BREAKDOWN, compute_cv=0.02, hiccup=Hiccup(prob=0.1, delay_s=1.0))
    assert cfg.compute == Normal(mu_s=8.0, sigma_s=0.16)
    assert cfg.hiccup == Hiccup(prob=0.1, delay_s=1.0)
    # A drain longer than the interval: the planner's block holds the backlog, which the
    # engine produces by waiting, so the snapshot is the block less the backlog.
    slow = replace(BREAKDOWN, checkpoint_lag_s=2000.0, checkpoint_block_s=5.0 + 200.0)
    ck = config_from_breakdown(slow).checkpoint
    assert ck.snapshot_s == pytest.approx(5.0) and ck.write_s == 2000.0


def test_sync_when_the_block_is_the_write_and_constants_without_jitter():
    b = replace(
        BREAKDOWN,
        checkpoint_async=False,
        checkpoint_block_s=60.0,
        checkpoint_lag_s=12.0,
        jitter_per_step_s=0.0,
        job_mttf_s=0.0,
        compute_cv=0.0,
        hiccup_prob=0.0,
    )
    cfg = config_from_breakdown(b)
    assert cfg.checkpoint.mode == "sync" and cfg.checkpoint.write_s == 60.0
    assert cfg.checkpoint.durable_lag_s == 12.0  # a drain to the durable tier after a local write
    assert cfg.comm.alpha == Constant(value_s=9.6e-6)
    assert cfg.compute == Constant(value_s=8.0)
    assert cfg.failures is None and cfg.hiccup is None


def test_simulating_a_candidate():
    r = simulate(config_from_breakdown(BREAKDOWN, steps=2000, runs=2, seed=1, hiccup=Hiccup(prob=0.0, delay_s=0.0)))
    # Mean step = fixed time + E[max of 1,024 compute draws] + 254 x E[max of 128 link
    # latencies]: the barrier adds ~3.25 sigma = 0.26 s to 8 s of compute.
    compute = expected_max(Normal(mu_s=8.0, sigma_s=0.08), 1024)
    ring = 254 * expected_max(Normal(mu_s=9.6e-6, sigma_s=2e-6), 128)
    expected_ms = 1e3 * (compute + ring + 2.0 - 254 * 9.6e-6)
    assert compute - 8.0 == pytest.approx(0.08 * 3.2482, rel=1e-3)  # E[max of 1,024 N(0,1)], scipy quad
    assert r.step_time_ms.mean == pytest.approx(expected_ms, rel=2e-4)
    assert r.step_time_ms.p99 > r.mean_value_step_ms > 0
    assert 0 < r.lost.checkpoints < 0.01
