"""Serving simulator: closed forms (M/M/c via Erlang C, M/D/1, no-queue) and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.errors import InputError
from gpufabric.model.inference import KvTransfer, ReplicaPerf
from gpufabric.sim.serving import ServingConfig, Tokens, fcfs_starts, max_concurrency, mean_active, simulate_serving


def _perf(*, tp: int = 1, straggler: float = 1.0, fixed: float = 0.01, per_token: float = 1e-4) -> ReplicaPerf:
    return ReplicaPerf(
        tp=tp,
        pp=1,
        prefill_fixed_s=fixed,
        prefill_s_per_token=per_token,
        prefill_s_per_token2=0.0,
        decode_weights_s=0.008,
        decode_s_per_kv_token=1e-8,
        decode_flop_s_per_seq=2e-4,
        decode_comm_fixed_s=0.001,
        decode_comm_s_per_seq=1e-6,
        straggler_factor=straggler,
        max_batch=64,
    )


def _kv(scale: float = 1.0) -> KvTransfer:
    grid = (1.0, 1e6)
    return KvTransfer(
        grid_tokens=grid,
        grid_s=(1e-4 * scale, 1e-4 * scale + 1e6 * 1e-6 * scale),
        jitter_s=0.0,
        hiccup_prob=0.0,
        hiccup_s=0.0,
    )


def erlang_c(c: int, a: float) -> float:
    """Probability of waiting in M/M/c with offered load a = lambda/mu (Erlang C)."""
    below = sum(a**k / math.factorial(k) for k in range(c))
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (below + top)


@pytest.mark.parametrize("servers", [1, 2])
def test_mmc_waiting_percentiles_match_erlang_c(servers):
    lam, mu = 0.5 * servers, 1.0
    waits = []
    for seed in range(4):  # independent replications cut the autocorrelation of queue waits
        rng = np.random.default_rng(seed)
        n = 1_000_000
        arrival = np.cumsum(rng.standard_exponential(n)) / lam
        start, _ = fcfs_starts(arrival, rng.standard_exponential(n) / mu, servers)
        waits.append((start - arrival)[1000:])
    w = np.concatenate(waits)
    c_prob = erlang_c(servers, lam / mu)
    for q in (0.9, 0.99):
        exact = math.log(c_prob / (1 - q)) / (servers * mu - lam)  # P(W > t) = C exp(-(c mu - lam) t)
        assert np.quantile(w, q) == pytest.approx(exact, rel=0.01)
    assert w.mean() == pytest.approx(c_prob / (servers * mu - lam), rel=0.01)


def test_fcfs_multi_server_matches_brute_force():
    rng = np.random.default_rng(3)
    arrival = np.cumsum(rng.standard_exponential(300))
    service = rng.standard_exponential(300) * 2.5
    start, who = fcfs_starts(arrival, service, 3)
    free = [0.0, 0.0, 0.0]
    for i in range(300):
        k = int(np.argmin(free))
        assert start[i] == pytest.approx(max(arrival[i], free[k]))
        assert free[who[i]] == pytest.approx(free[k])  # the server used was an earliest-free one
        free[k] = max(arrival[i], free[k]) + service[i]


def md1_wait_cdf(t: float, lam: float, d: float) -> float:
    """Erlang's M/D/1 waiting-time CDF: (1-rho) sum_k (lam(kD - t))^k / k! e^{-lam(kD - t)}."""
    rho = lam * d
    return (1 - rho) * sum(
        (lam * (k * d - t)) ** k / math.factorial(k) * math.exp(-lam * (k * d - t)) for k in range(int(t // d) + 1)
    )


def md1_quantile(q: float, lam: float, d: float) -> float:
    lo, hi = 0.0, 8 * d  # the alternating sum loses precision far out; p99 at rho 0.5 is ~2.3 D
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if md1_wait_cdf(mid, lam, d) < q else (lo, mid)
    return (lo + hi) / 2


def test_deterministic_service_matches_md1_through_the_simulator():
    # One colocated replica, fixed prompts, no jitter: prefill is an M/D/1 queue.
    perf = _perf()
    service = float(perf.prefill_s(1000))  # 0.11 s
    rate = 0.5 / service
    cfg = ServingConfig(
        perf=perf,
        prefill_replicas=1,
        max_batch=64,
        rate_rps=rate,
        prompt=Tokens(mean=1000),
        output=Tokens(mean=10),
        requests=2_000_000,
        jitter_cv=0.0,
        seed=5,
    )
    ttft = simulate_serving(cfg).ttft_s
    wait = ttft - service
    rho = rate * service
    assert wait.mean() == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.01)  # Pollaczek-Khinchine
    for q in (0.9, 0.99):
        assert np.quantile(wait, q) == pytest.approx(md1_quantile(q, rate, service), rel=0.01)


def test_no_queue_single_request_is_the_model_exactly():
    perf = _perf()
    cfg = ServingConfig(
        perf=perf,
        prefill_replicas=4,
        decode_replicas=2,
        kv=_kv(),
        max_batch=8,
        rate_rps=1e-3,
        prompt=Tokens(mean=512),
        output=Tokens(mean=101),
        requests=50,
        jitter_cv=0.0,
    )
    res = simulate_serving(cfg)
    assert res.ttft_s == pytest.approx(np.full(50, perf.prefill_s(512)))
    kv = _kv().time_s(512)
    step = perf.decode_step_s(1.0, 512 + 101 / 2)
    assert res.tpot_s == pytest.approx(np.full(50, (100 * step + kv) / 100))


def test_colocated_prefill_stalls_decode_but_disaggregated_does_not():
    base = dict(
        perf=_perf(),
        max_batch=64,
        rate_rps=4.0,
        prompt=Tokens(mean=2000, cv=0.3),
        output=Tokens(mean=200, cv=0.3),
        requests=20_000,
        jitter_cv=0.0,
    )
    colo = simulate_serving(ServingConfig(prefill_replicas=2, **base)).summary()
    disagg = simulate_serving(ServingConfig(prefill_replicas=1, decode_replicas=1, kv=_kv(), **base)).summary()
    assert colo["tpot_p99_s"] > disagg["tpot_p99_s"] * 1.2


def test_slot_limit_queues_decode():
    base = dict(
        perf=_perf(),
        prefill_replicas=8,
        decode_replicas=1,
        kv=_kv(),
        rate_rps=20.0,
        prompt=Tokens(mean=100),
        output=Tokens(mean=500),
        requests=5000,
        jitter_cv=0.0,
    )
    wide = simulate_serving(ServingConfig(max_batch=512, **base)).summary()
    narrow = simulate_serving(ServingConfig(max_batch=4, **base)).summary()
    assert narrow["tpot_p99_s"] > 2 * wide["tpot_p99_s"]
    assert narrow["mean_decode_batch"] <= 4.0


def test_tp_stragglers_raise_prefill_time():
    base = dict(
        prefill_replicas=1,
        max_batch=64,
        rate_rps=0.01,
        prompt=Tokens(mean=1000),
        output=Tokens(mean=5),
        requests=20_000,
        jitter_cv=0.2,
    )
    one = simulate_serving(ServingConfig(perf=_perf(tp=1), **base)).ttft_s.mean()
    eight = simulate_serving(ServingConfig(perf=_perf(tp=8), **base)).ttft_s.mean()
    # The group runs at the slowest of 8 mean-one lognormals: E[exp(sigma M - sigma^2/2)],
    # M the max of 8 standard normals (density 8 phi(x) Phi(x)^7), integrated numerically.
    sigma = math.sqrt(math.log1p(0.2**2))
    x = np.linspace(-8, 8, 20001)
    phi = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = np.cumsum(phi) * (x[1] - x[0])
    expected = float(np.sum(np.exp(sigma * x - sigma**2 / 2) * 8 * phi * cdf**7) * (x[1] - x[0]))
    assert expected > 1.25  # a straggler-free model would say 1
    assert eight / one == pytest.approx(expected, rel=0.01)


def test_mean_active_and_concurrency():
    starts = np.array([0.0, 1.0, 2.0])
    ends = np.array([4.0, 3.0, 6.0])
    assert max_concurrency(starts, ends) == 3
    # Over [0, 4]: 1 on [0,1], 2 on [1,2], 3 on [2,3], 2 on [3,4] -> 8 / 4.
    assert mean_active(starts, ends)[0] == pytest.approx(2.0)


def test_bad_configs_are_input_errors():
    with pytest.raises(InputError, match="KV-transfer"):
        simulate_serving(
            ServingConfig(
                perf=_perf(),
                prefill_replicas=1,
                decode_replicas=1,
                max_batch=4,
                rate_rps=1,
                prompt=Tokens(mean=10),
                output=Tokens(mean=10),
            )
        )
    with pytest.raises(InputError, match="at least one"):
        simulate_serving(
            ServingConfig(
                perf=_perf(),
                prefill_replicas=0,
                max_batch=4,
                rate_rps=1,
                prompt=Tokens(mean=10),
                output=Tokens(mean=10),
            )
        )


@settings(max_examples=15, deadline=None)
@given(rate=st.floats(0.5, 8.0), factor=st.floats(1.01, 3.0), replicas=st.integers(1, 3), disagg=st.booleans())
def test_more_load_never_lowers_ttft_p99(rate, factor, replicas, disagg):
    def p99(r: float) -> float:
        cfg = ServingConfig(
            perf=_perf(),
            prefill_replicas=replicas,
            decode_replicas=2 if disagg else 0,
            kv=_kv(),
            max_batch=32,
            rate_rps=r,
            prompt=Tokens(mean=800, cv=0.5),
            output=Tokens(mean=50, cv=0.5),
            requests=3000,
            jitter_cv=0.1,
            seed=11,
        )
        return simulate_serving(cfg).summary()["ttft_p99_s"]

    assert p99(rate * factor) >= p99(rate) - 1e-12


@settings(max_examples=15, deadline=None)
@given(speedup=st.floats(1.0, 20.0), rate=st.floats(0.5, 5.0))
def test_faster_fabric_never_slows_kv_transfer_in_the_simulator(speedup, rate):
    def kv(scale: float) -> np.ndarray:
        cfg = ServingConfig(
            perf=_perf(),
            prefill_replicas=2,
            decode_replicas=2,
            kv=_kv(scale),
            max_batch=32,
            rate_rps=rate,
            prompt=Tokens(mean=800, cv=0.5),
            output=Tokens(mean=50),
            requests=2000,
            seed=3,
        )
        return simulate_serving(cfg).kv_transfer_s

    assert np.all(kv(1.0 / speedup) <= kv(1.0) + 1e-15)
