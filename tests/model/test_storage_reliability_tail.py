"""Storage, reliability and tail formulas against models.md worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.model import reliability, storage, tail
from gpufabric.model.tail import (
    Z99,
    barrier_stats,
    max_normal_moments,
    ndtr,
    ndtri,
    normal_sf,
    slow_step_probability,
    step_tail,
)
from tests.model.test_accuracy import acc  # the accuracy script holds the MLPerf shapes

MLPERF_SHAPES, MLPERF_SIZES = acc.MLPERF_SHAPES, acc.MLPERF_SIZES


@pytest.mark.parametrize("name", ["8B", "70B", "405B"])
def test_mlperf_checkpoint_sizes(name):
    # 14 B/param of the DLIO model shape, MLPerf sizes read as GiB/TiB (docs/accuracy.md).
    size = storage.checkpoint_bytes(storage.llama_params(**MLPERF_SHAPES[name]), 14)
    assert size == pytest.approx(MLPERF_SIZES[name], rel=0.03)


def test_bytes_per_param_by_precision_and_optimizer():
    assert storage.bytes_per_param() == 14
    assert storage.bytes_per_param(weights="fp32", optimizer="adam") == 12
    assert storage.bytes_per_param(weights="bf16", optimizer="sgd") == 10
    assert storage.bytes_per_param(weights="fp8", master_fp32=True, optimizer="adam") == 13


def test_llama_param_counts():
    assert storage.llama_params(**MLPERF_SHAPES["8B"]) == pytest.approx(8.03e9, rel=0.002)
    # The DLIO 70B shape lists 128 heads (Llama 3 70B has 64), so its K/V projections are half as large.
    assert storage.llama_params(**MLPERF_SHAPES["70B"]) == pytest.approx(70.55e9, rel=0.01)


def test_worked_write_times():
    # models.md 2.6: 5.29 TB at 2 TB/s ~2.6 s, at 100 GB/s ~53 s, at 10 GB/s ~9 min.
    for bw, expect in ((2000, 2.6), (100, 53), (10, 529)):
        assert storage.write_time_s(size_bytes=5.29e12, bandwidth_gbps=bw, commit_s=0) == pytest.approx(
            expect, rel=0.02
        )


def test_commit_rounds():
    # 1024 shards, 32 concurrent commits of 2 ms, no jitter -> 32 rounds = 64 ms.
    t = storage.commit_time_s(shards=1024, nodes=128, commit_ms=2.0, jitter_ms=0.0, concurrency=32, per_node=False)
    assert t == pytest.approx(0.064)
    t_node = storage.commit_time_s(shards=1024, nodes=128, commit_ms=2.0, jitter_ms=0.0, concurrency=8, per_node=True)
    assert t_node == pytest.approx(0.002)


def test_async_blocks_for_snapshot_plus_backlog():
    b = storage.block_time_s(mode_sync=False, write_s=100.0, snapshot_s=1.0, durable_s=2000.0, interval_s=1800.0)
    assert b == pytest.approx(201.0)
    assert (
        storage.block_time_s(mode_sync=True, write_s=100.0, snapshot_s=1.0, durable_s=100.0, interval_s=1800.0) == 100.0
    )


def test_young_daly_worked_example():
    # models.md 2.6: delta 60 s, M 11,135 s -> tau 1,156 s; W = 5.2% + 5.2% + R/M.
    tau = reliability.young_interval_s(60, 11135)
    assert tau == pytest.approx(1156, abs=1)
    w = reliability.waste_fraction(block_s=60, interval_s=tau, mttf_s=11135, restart_s=0)
    assert w == pytest.approx(0.052 + 0.052, abs=0.001)
    daly = reliability.daly_interval_s(60, 11135)
    assert 1090 < daly < tau


def test_failure_premises():
    assert reliability.job_mttf_s(50000, 100000) == pytest.approx(1800)  # MLCommons: every 30 min
    assert reliability.job_mttf_s(50000, 16384) / 3600 == pytest.approx(3.05, abs=0.01)  # Llama 3: ~3.1 h


def test_max_of_normals_exact_values():
    mean, var = max_normal_moments(np.array([1, 2, 100]))
    assert mean[0] == pytest.approx(0, abs=1e-6) and var[0] == pytest.approx(1, abs=1e-4)
    assert mean[1] == pytest.approx(1 / np.sqrt(np.pi), abs=1e-5)
    assert mean[2] == pytest.approx(2.50759, abs=1e-4)
    assert ndtr(1.96) == pytest.approx(0.9750021048517795, abs=2e-7)


def test_tail_at_scale():
    # Dean & Barroso: q = 1%, N = 100 -> 63% of requests slow.
    assert slow_step_probability(0.01, 100) == pytest.approx(0.634, abs=0.001)


SIGMA_C_S = 0.8 * 0.005  # compute_s x compute_cv of _tail
#: Accuracy of the barrier's trapezoid moments, in units of sigma_c (measured: 1.5e-4
#: for the mean and 7e-4 for the std against a grid ten times finer).
QUADRATURE_SIGMAS = 1e-3


def _tail(n=1024, jitter=2e-6, q=0.0, d=0.2):
    return step_tail(
        base_s=1.0,
        compute_s=0.8,
        compute_cv=0.005,
        num_ranks=n,
        dependent_steps=254,
        group_size=max(1, n // 8),
        jitter_s=jitter,
        hiccup_prob=q,
        hiccup_s=d,
    )


def test_barrier_without_hiccups_is_the_max_of_normals():
    n = np.array([1, 2, 100, 1024, 100_000])
    mean, var, p99 = barrier_stats(n, 0.0, 0.0)
    m, v = max_normal_moments(n)
    np.testing.assert_allclose(mean, m, atol=2e-5)
    np.testing.assert_allclose(var, v, rtol=5e-3)
    # p99 of the max of n: Phi^-1(0.99^(1/n)).
    np.testing.assert_allclose(p99, ndtri(0.99 ** (1.0 / n)), atol=1e-6)


def test_max_of_normals_stays_exact_at_1e5_ranks():
    # scipy.integrate.quad of 1 - Phi^N with log_ndtr: mean 4.384319, variance 0.0739092.
    mean, var = max_normal_moments(100_000)
    assert mean == pytest.approx(4.384319, abs=2e-5) and var == pytest.approx(0.0739092, rel=2e-3)
    assert normal_sf(6.0) == pytest.approx(9.865876450377e-10, rel=2e-7)


@pytest.mark.parametrize("n,q,d", [(1024, 1e-4, 23.0), (16, 1e-3, 5.0), (1024, 2e-3, 3.0), (50, 0.5, 2.0)])
def test_hiccup_barrier_matches_the_engine(n, q, d):
    # The engine draws max over ranks of (compute + hiccup) by a binomial split (exact).
    from gpufabric.sim import Hiccup, Normal, SimConfig, simulate

    r = simulate(
        SimConfig(
            num_ranks=n,
            compute=Normal(mu_s=100.0, sigma_s=1.0),
            hiccup=Hiccup(prob=q, delay_s=d),
            steps=200_000,
            seed=3,
        )
    )
    mean, var, p99 = barrier_stats(n, q, d)
    st = r.step_time_ms  # "ms" of seconds-valued draws: scale by 1e-3
    assert st.mean * 1e-3 - 100.0 == pytest.approx(float(mean), abs=4 * st.std * 1e-3 / np.sqrt(200_000))
    assert (st.std * 1e-3) ** 2 == pytest.approx(float(var), rel=0.03)
    assert st.p99 * 1e-3 - 100.0 == pytest.approx(float(p99), abs=0.05)


def test_a_hiccup_costs_only_its_excess_over_the_slowest_other_rank():
    # 1,024 ranks, sigma 8.7 ms, a 200 ms hiccup (d = 23 sigma): the hiccup rank ends
    # ~23 sigma above the mean, the others' max 3.25 sigma, so a slow step costs ~19.8
    # sigma, not 23, and the mean grows by P x 19.8 sigma.
    n, q, d = 1024, 1e-4, 23.0
    p = float(slow_step_probability(q, n))
    base = float(max_normal_moments(n)[0])
    mean = float(barrier_stats(n, q, d)[0])
    assert mean - base == pytest.approx(p * (d - base), rel=0.02)
    assert mean - base < 0.9 * p * d


def test_zero_length_hiccups_leave_the_barrier_alone():
    assert np.allclose(barrier_stats(1024, 0.05, 0.0), barrier_stats(1024, 0.0, 0.0))


def test_ndtri_known_values():
    q = np.array([1e-9, 0.01, 0.5, 0.975, 0.99])
    expect = np.array([-5.997807015, -2.326347874, 0.0, 1.959963985, 2.326347874])
    assert np.allclose(ndtri(q), expect, atol=1e-8)


def test_p99_is_gaussian_when_every_part_is():
    # One rank: the barrier is a normal, the collective sum too, so p99 = mean + 2.326 std.
    t = _tail(n=1, jitter=5e-5)
    assert t.p99_s == pytest.approx(t.mean_s + Z99 * t.std_s, abs=1e-3 * t.std_s)  # grid quadrature: 3e-4 in variance
    assert t.cv == pytest.approx(t.std_s / t.mean_s)
    # Without collective jitter the p99 is the barrier's own: sigma Phi^-1(0.99^(1/N)).
    t = _tail(n=1024, jitter=0.0)
    assert t.p99_s == pytest.approx(1.0 + 0.004 * float(ndtri(0.99 ** (1 / 1024))), abs=1e-8)


@settings(max_examples=150, deadline=None)
@given(j=st.floats(0, 1e-3), more=st.floats(1, 10), q=st.floats(0, 1e-2), n=st.integers(1, 100000), d=st.floats(0, 0.5))
def test_more_jitter_never_faster_at_p99(j, more, q, n, d):
    assert _tail(n, j * more, q, d).p99_s >= _tail(n, j, q, d).p99_s * (1 - 1e-9)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 50000), factor=st.integers(2, 8), j=st.floats(0, 1e-3), q=st.floats(0, 1e-2), d=st.floats(0, 0.5)
)
def test_more_ranks_never_shrink_p99_amplification(n, factor, j, q, d):
    # Amplification = p99 / deterministic step (base_s = 1 here).
    assert _tail(n * factor, j, q, d).p99_s >= _tail(n, j, q, d).p99_s * (1 - 1e-9)


def test_goodput_is_dalys_expectation_and_first_order_when_failures_are_rare():
    # Rare failures: the overhead wall/work - 1 = 1/goodput - 1 tends to the first-order
    # waste (models.md 2.6, Daly's leading term).
    kw = {"block_s": 60.0, "interval_s": 1156.0, "restart_s": 300.0, "lag_s": 30.0}
    w = reliability.waste_fraction(mttf_s=1e7, **kw)
    assert 1 / reliability.goodput(mttf_s=1e7, **kw) - 1 == pytest.approx(w, rel=2e-3)
    # 16k GPUs (M = 3.05 h, 30-min interval, 15.5-min restart): Daly's expectation by hand,
    # 1.6 points above the first-order 1 - W.
    m, tau, blk, r = 10986.3, 1800.0, 0.014, 931.5
    by_hand = tau / (m * math.exp(r / m) * math.expm1((tau + blk) / m))
    g = reliability.goodput(block_s=blk, interval_s=tau, mttf_s=m, restart_s=r)
    assert g == pytest.approx(by_hand, rel=1e-12)
    assert g - (1 - reliability.waste_fraction(block_s=blk, interval_s=tau, mttf_s=m, restart_s=r)) > 0.01
    # A durability lag L redoes the previous interval when a failure strikes within L.
    lagged = reliability.expected_segment_wall_s(block_s=blk, interval_s=tau, mttf_s=m, restart_s=r, lag_s=100.0)
    plain = reliability.expected_segment_wall_s(block_s=blk, interval_s=tau, mttf_s=m, restart_s=r)
    assert lagged - plain == pytest.approx((tau + blk) * math.exp((tau + blk) / m) * -math.expm1(-100.0 / m))
    assert reliability.goodput(block_s=1.0, interval_s=10.0, mttf_s=1e-3, restart_s=1.0) == 0.0


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 100000), j=st.floats(0, 1e-3), q=st.floats(0, 1e-2), d=st.floats(0, 0.5), more=st.floats(1, 10))
def test_longer_or_likelier_hiccups_never_make_a_step_faster(n, j, q, d, more):
    base = _tail(n, j, q, d)
    for t in (_tail(n, j, q, d * more), _tail(n, j, min(1.0, q * more), d)):
        # Mean and std are trapezoid integrals on a grid that moves with d; their error
        # (QUADRATURE_SIGMAS, checked below) bounds how far a tiny change in q or d can
        # appear to lower them.
        assert t.p99_s >= base.p99_s - QUADRATURE_SIGMAS * SIGMA_C_S
        assert t.mean_s >= base.mean_s - QUADRATURE_SIGMAS * SIGMA_C_S


def test_barrier_quadrature_accuracy_against_a_ten_times_finer_grid(monkeypatch):
    rng = np.random.default_rng(0)
    n = rng.integers(1, 100_000, 400).astype(float)
    q = 10 ** rng.uniform(-7, -2, 400)
    d = np.concatenate([rng.uniform(0, 1e-3, 100), rng.uniform(0, 125, 300)])
    coarse = tail._barrier_unique(n, q, d)
    fine_offsets = np.linspace(-tail._HALF, tail._HALF, 10 * tail._GRID - 9)
    fine_offsets[len(fine_offsets) // 2] = 0.0
    monkeypatch.setattr(tail, "_GRID", len(fine_offsets))
    monkeypatch.setattr(tail, "_OFFSETS", fine_offsets)
    fine = tail._barrier_unique(n, q, d)
    assert np.abs(coarse[0] - fine[0]).max() < QUADRATURE_SIGMAS  # mean
    assert np.abs(np.sqrt(coarse[1]) - np.sqrt(fine[1])).max() < QUADRATURE_SIGMAS  # std
    assert np.abs(coarse[2] - fine[2]).max() < 1e-9  # p99: bisection


def test_daly_interval_is_the_mttf_once_the_checkpoint_outlasts_two_mttfs():
    # Daly (2006) eq. 37: tau = M for delta >= 2M (the series diverges there).
    assert float(reliability.daly_interval_s(300.0, 100.0)) == pytest.approx(100.0)
    assert float(reliability.daly_interval_s(100.0, 100.0)) < 100.0


def test_min_interval_is_the_longest_of_write_durability_and_lag():
    assert float(reliability.min_interval_s(write_s=10.0, durable_s=47.0, lag_s=47.0)) == 47.0
    assert float(reliability.min_interval_s(write_s=30.0, durable_s=0.0, lag_s=5.0)) == 30.0


def test_drain_contention_costs_what_the_engine_draws():
    from gpufabric.sim import CheckpointPolicy, Constant, SimConfig
    from gpufabric.sim.timeline import run_time

    # 100 steps of 1 s, a 20 s drain at slowdown c: the engine's blocked time per
    # checkpoint equals block_time_s, when the drain fits and when it backs up.
    for every, c in ((50, 0.25), (10, 0.25)):
        cfg = SimConfig(
            num_ranks=8,
            compute=Constant(value_s=1.0),
            steps=1000,
            train_steps=1000,
            checkpoint=CheckpointPolicy(
                every_steps=every, write_s=20.0, mode="async", snapshot_s=0.5, drain_slowdown=c
            ),
        )
        rt = run_time(cfg, np.ones(1000), np.random.Generator(np.random.PCG64(0)))
        n = 1000 // every
        # The first checkpoint has no earlier drain and the last drain overlaps nothing.
        per = (rt.checkpoint_s - n * 0.5) / (n - 1) + 0.5
        want = float(
            storage.block_time_s(
                mode_sync=False, write_s=20.0, snapshot_s=0.5, durable_s=20.0, interval_s=float(every), slowdown=c
            )
        )
        assert per == pytest.approx(want, rel=1e-9)
    assert float(
        storage.block_time_s(
            mode_sync=False, write_s=20.0, snapshot_s=0.5, durable_s=20.0, interval_s=50.0, slowdown=0.25
        )
    ) == pytest.approx(0.5 + 20 * 0.25 / 1.25)


def test_drain_slowdown_grows_with_the_drains_share_of_the_nic():
    kw = dict(size_bytes=1e12, num_nodes=10, node_nic_gbps=400.0, comm_fraction=0.2)
    slow = storage.drain_slowdown(drain_s=1.0, **kw)  # 100 GB/s of 400: s = 1/4
    fast = storage.drain_slowdown(drain_s=10.0, **kw)  # 10 GB/s of 400
    assert float(slow) == pytest.approx(0.2 * 0.25 / 0.75)
    assert float(fast) < float(slow)
