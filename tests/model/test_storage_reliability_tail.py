"""Storage, reliability and tail formulas against models.md worked examples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.model import reliability, storage
from gpufabric.model.accuracy import MLPERF_SHAPES, MLPERF_SIZES
from gpufabric.model.tail import (
    max_normal_moments,
    mixture_quantile,
    ndtr,
    ndtri,
    separated_p99,
    slow_step_probability,
    step_tail,
)


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
        assert storage.write_time_s(size_bytes=5.29e12, bandwidth_gbps=bw, commit_s=0) == pytest.approx(expect, rel=0.02)


def test_commit_rounds():
    # 1024 shards, 32 concurrent commits of 2 ms, no jitter -> 32 rounds = 64 ms.
    t = storage.commit_time_s(shards=1024, nodes=128, commit_ms=2.0, jitter_ms=0.0, concurrency=32, per_node=False)
    assert t == pytest.approx(0.064)
    t_node = storage.commit_time_s(shards=1024, nodes=128, commit_ms=2.0, jitter_ms=0.0, concurrency=8, per_node=True)
    assert t_node == pytest.approx(0.002)


def test_async_blocks_for_snapshot_plus_backlog():
    b = storage.block_time_s(mode_sync=False, write_s=100.0, snapshot_s=1.0, durable_s=2000.0, interval_s=1800.0)
    assert b == pytest.approx(201.0)
    assert storage.block_time_s(mode_sync=True, write_s=100.0, snapshot_s=1.0, durable_s=100.0, interval_s=1800.0) == 100.0


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


def _tail(n=1024, jitter=2e-6, q=0.0, d=0.2):
    return step_tail(base_s=1.0, compute_s=0.8, compute_cv=0.005, num_ranks=n, dependent_steps=254,
                     group_size=max(1, n // 8), jitter_s=jitter, hiccup_prob=q, hiccup_s=d)


@pytest.mark.parametrize("p", [0.0, 0.004, 0.0099, 0.02, 0.1, 0.5, 0.9])
def test_separated_p99_matches_exact_mixture_when_hiccups_are_long(p):
    # D = 200 ms >> s0 = 1 ms: the closed form is the exact mixture quantile.
    assert separated_p99(1.0, 1e-3, 0.2, p) == pytest.approx(mixture_quantile(1.0, 1e-3, 0.2, p, 0.99), abs=2e-6)


def test_zero_length_hiccups_leave_the_gaussian_p99():
    assert separated_p99(1.0, 1e-3, 0.0, 0.05) == pytest.approx(1.0 + 2.3263e-3, abs=1e-7)


def test_ndtri_known_values():
    q = np.array([1e-9, 0.01, 0.5, 0.975, 0.99])
    expect = np.array([-5.997807015, -2.326347874, 0.0, 1.959963985, 2.326347874])
    assert np.allclose(ndtri(q), expect, atol=1e-8)


def test_exact_mixture_quantile_falls_with_jitter_where_the_closed_form_does_not():
    # P just above 1%: the exact p99 sits in the slow component's left tail; more spread lowers it.
    assert mixture_quantile(1.0, 2e-3, 0.2, 0.0105, 0.99) < mixture_quantile(1.0, 1e-3, 0.2, 0.0105, 0.99)
    assert separated_p99(1.0, 2e-3, 0.2, 0.0105) >= separated_p99(1.0, 1e-3, 0.2, 0.0105)


def test_gaussian_p99_without_hiccups():
    t = _tail()
    assert t.p99_s == pytest.approx(t.mean_s + 2.3263 * t.std_s, rel=1e-6)
    assert t.cv == pytest.approx(t.std_s / t.mean_s)


@settings(max_examples=150, deadline=None)
@given(j=st.floats(0, 1e-3), more=st.floats(1, 10), q=st.floats(0, 1e-2), n=st.integers(1, 100000), d=st.floats(0, 0.5))
def test_more_jitter_never_faster_at_p99(j, more, q, n, d):
    assert _tail(n, j * more, q, d).p99_s >= _tail(n, j, q, d).p99_s * (1 - 1e-9)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 50000), factor=st.integers(2, 8), j=st.floats(0, 1e-3), q=st.floats(0, 1e-2), d=st.floats(0, 0.5))
def test_more_ranks_never_shrink_p99_amplification(n, factor, j, q, d):
    # Amplification = p99 / deterministic step (base_s = 1 here).
    assert _tail(n * factor, j, q, d).p99_s >= _tail(n, j, q, d).p99_s * (1 - 1e-9)
