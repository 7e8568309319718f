"""Checkpoint stalls, failures, time to train and the attribution of lost time."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from gpufabric.errors import InputError
from gpufabric.sim import CheckpointPolicy, Constant, Failures, Normal, SimConfig, Stragglers, simulate
from gpufabric.sim.timeline import run_time, segment_step_sums

RNG = np.random.Generator(np.random.PCG64(0))


def _cfg(**kw) -> SimConfig:
    base = dict(num_ranks=8, compute=Constant(value_s=1.0), steps=1000)
    base.update(kw)
    return SimConfig(**base)


def test_segments_cycle_the_simulated_steps():
    t = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(segment_step_sums(t, 7, 2), [3.0, 4.0, 5.0, 1.0])
    np.testing.assert_allclose(segment_step_sums(t, 7, 7), [13.0])


def test_sync_checkpoint_blocks_for_the_write():
    cfg = _cfg(checkpoint=CheckpointPolicy(every_steps=100, write_s=8.0, mode="sync"))
    rt = run_time(cfg, np.ones(1000), RNG)
    assert rt.checkpoint_s == pytest.approx(10 * 8.0)
    assert rt.wall_s == pytest.approx(1000 + 80)


def test_async_checkpoint_blocks_only_for_the_snapshot_when_the_drain_fits():
    cfg = _cfg(checkpoint=CheckpointPolicy(every_steps=100, write_s=8.0, mode="async", snapshot_s=0.5))
    assert run_time(cfg, np.ones(1000), RNG).wall_s == pytest.approx(1000 + 10 * 0.5)


def test_async_drain_contention_and_back_pressure():
    # Drain slows overlapping steps by 1.5x: a drain of 8 s costs 8 * 0.5/1.5 extra.
    cfg = _cfg(
        checkpoint=CheckpointPolicy(every_steps=100, write_s=8.0, mode="async", snapshot_s=0.5, drain_slowdown=0.5)
    )
    assert run_time(cfg, np.ones(1000), RNG).wall_s == pytest.approx(1000 + 10 * 0.5 + 9 * 8.0 * 0.5 / 1.5)
    # A drain longer than the next segment (150 s > 100 s x 1.0): checkpoints 2..10 each
    # wait 50 s for the previous drain; the first has no drain before it and the last
    # drain finishes after the run.
    slow = _cfg(checkpoint=CheckpointPolicy(every_steps=100, write_s=150.0, mode="async", snapshot_s=0.0))
    rt = run_time(slow, np.ones(1000), RNG)
    assert rt.wall_s == pytest.approx(1000 + 9 * 50)


def test_failures_match_the_restart_formula():
    # A segment of length T under exponential failures (rate l = 1/M) with restart R,
    # failures striking during restarts too, completes on average in M e^(R/M) (e^(T/M) - 1)
    # (Daly 2006; models.md 2.6): 5% more than (M + R)(e^(T/M) - 1) here, where restarts
    # would be immune.
    seg, node_mttf, restart, nodes = 100.0, 8 * 400.0, 20.0, 8
    rate = nodes / node_mttf
    cfg = _cfg(
        num_ranks=nodes,
        steps=100,
        train_steps=100 * 4000,
        checkpoint=CheckpointPolicy(every_steps=100, write_s=0.0),
        failures=Failures(node_mttf_s=node_mttf, restart_s=restart),
    )
    rt = run_time(cfg, np.ones(100), np.random.Generator(np.random.PCG64(1)))
    expected = 4000 / rate * math.exp(rate * restart) * math.expm1(rate * seg)
    assert rt.wall_s == pytest.approx(expected, rel=0.02)
    # Failures per segment e^(lT) - 1, each restart retried e^(lR) times on average.
    assert rt.failures == pytest.approx(4000 * math.expm1(rate * seg) * math.exp(rate * restart), rel=0.05)


def test_a_run_that_cannot_finish_is_refused():
    cfg = _cfg(failures=Failures(node_mttf_s=10.0, restart_s=1.0))
    with pytest.raises(InputError, match="checkpoint more often"):
        run_time(cfg, np.ones(1000), RNG)


def test_lost_time_shares_add_up_and_name_the_causes():
    cfg = SimConfig(
        num_ranks=1024,
        ranks_per_node=8,
        compute=Normal(mu_s=0.1, sigma_s=0.002),
        stragglers=Stragglers(fraction=0.02, factor=1.2),
        checkpoint=CheckpointPolicy(every_steps=500, write_s=8.0),
        failures=Failures(node_mttf_s=2000 * 3600, restart_s=600),
        steps=20_000,
        runs=4,
        seed=3,
    )
    r = simulate(cfg)
    lost = r.lost
    total = lost.compute_imbalance + lost.communication_latency + lost.jitter + lost.checkpoints + lost.failures
    assert r.efficiency + total == pytest.approx(1.0, abs=1e-9)
    wall = r.time_to_train_s.mean
    # Checkpoints: 40 blocking writes of 8 s per run.
    assert lost.checkpoints * wall == pytest.approx(40 * 8.0, rel=1e-9)
    # Jitter of 1,024 normal ranks: E[max] - mu ~ 3.2 sigma = 6.4 ms of a ~100 ms step.
    assert 0.04 < lost.jitter < 0.08
    assert lost.compute_imbalance > 0.05  # most runs have a 1.2x slow node
    assert r.goodput == pytest.approx(1 - lost.checkpoints - lost.failures, abs=1e-9)
    assert r.time_to_train_s.cv > 0  # stragglers and failures differ run to run


def test_without_effects_nothing_is_lost_but_jitter():
    r = simulate(SimConfig(num_ranks=1, compute=Constant(value_s=0.1), steps=100))
    assert r.efficiency == pytest.approx(1.0)
    assert r.step_time_ms.cv == 0.0
    assert r.time_to_train_s.mean == pytest.approx(10.0)
    assert r.throughput_steps_per_s == pytest.approx(10.0)


def test_train_steps_longer_than_simulated_steps():
    cfg = SimConfig(num_ranks=4, compute=Constant(value_s=0.1), steps=100, train_steps=10_000, tokens_per_step=1000)
    r = simulate(cfg)
    assert r.time_to_train_s.mean == pytest.approx(1000.0)
    assert r.throughput_tokens_per_s == pytest.approx(10_000.0)
    assert replace(cfg, train_steps=0).total_steps == 100


def test_too_many_checkpoint_intervals_are_refused():
    with pytest.raises(InputError, match="more than 1,000,000 checkpoint intervals"):
        _cfg(train_steps=10_000_000, checkpoint=CheckpointPolicy(every_steps=1, write_s=0.0))
