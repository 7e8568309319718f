"""A run stopped at its first certain SLO miss (ServingConfig.stop_on_miss) gives the whole
run's verdict exactly, and a run that does not stop is the whole run, bit for bit (issue 32:
the serving search's sizing steps need only the verdict)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpufabric.catalog import load_catalog
from gpufabric.model import inference as m
from gpufabric.model.inference import KvTransfer
from gpufabric.sim.batching import EngineConfig, MissRule, _needed, run_engine
from gpufabric.sim.serving import ServingConfig, Tokens, simulate_serving
from tests.sim.shapes import LLAMA70_FP8

CAT = load_catalog([])
PERF = m.replica_perf(
    shape=LLAMA70_FP8,
    gpu=CAT.gpu("h100-sxm"),
    links=m.serving_links(CAT, "h100-sxm", "ib-ndr", 8),
    tp=2,
    pp=1,
    precision="fp8",
    mfu=0.5,
    hbm_efficiency=0.8,
    max_batch=256,
    jitter_cv=0.05,
)
KV = KvTransfer(grid_tokens=(1.0, 1e6), grid_s=(1e-3, 1.0), jitter_s=2e-3, hiccup_prob=0.01, hiccup_s=0.05)


def _cfg(**kw) -> ServingConfig:
    base = {
        "perf": PERF,
        "prefill_replicas": 2,
        "max_batch": 64,
        "kv_capacity_tokens": 4e5,
        "rate_rps": 6.0,
        "prompt": Tokens(mean=1500, cv=0.5),
        "output": Tokens(mean=200, cv=0.6),
        "requests": 600,
        "jitter_cv": 0.05,
        "request_overhead_s": 0.02,
        "api_s_per_token_rate": 2e-6,
        "seed": 4,
    }
    return ServingConfig(**{**base, **kw})


DESIGNS = {
    "colocated": {},
    "colocated, overloaded": {"rate_rps": 14.0},
    "disaggregated": {"decode_replicas": 1, "kv": KV, "rate_rps": 5.0},
    "disaggregated, small cache": {"decode_replicas": 1, "kv": KV, "kv_capacity_tokens": 6e4},
}
KEYS = {"ttft_p99_s": 0.99, "ttft_p50_s": 0.5, "tpot_p99_s": 0.99, "tpot_p50_s": 0.5}


def _limits(full: dict, key: str) -> list[float]:
    """Limits on both sides of the whole run's percentile, and exactly at it."""
    x = full[key]
    return [x * 0.9, np.nextafter(x, 0.0), x, np.nextafter(x, np.inf), x * 1.1]


@pytest.mark.parametrize("design", sorted(DESIGNS))
@pytest.mark.parametrize("key", sorted(KEYS))
def test_a_stopped_run_gives_the_whole_runs_verdict(design, key):
    cfg = _cfg(**DESIGNS[design])
    full = simulate_serving(cfg).summary()
    stopped = []
    for limit in _limits(full, key):
        s = simulate_serving(replace(cfg, stop_on_miss=((key, KEYS[key], float(limit)),))).summary()
        if "missed" in s:
            # Stopped: the whole run misses that limit too.
            assert full[key] > limit, (limit, full[key])
            assert s["missed"] == key and s[key] == float("inf") and np.isnan(s["duration_s"])
            stopped.append(limit)
        else:
            assert s == full  # not stopped: the whole run, bit for bit (its verdict included)
    assert stopped and stopped[0] == _limits(full, key)[0]  # 10% inside the whole run's figure: stopped


def test_an_overloaded_run_stops_early():
    rng = np.random.default_rng(1)
    n = 400
    arrival = np.cumsum(rng.exponential(1 / 20.0, n))  # far beyond what tp2 serves
    prompt, output = np.full(n, 2000), np.full(n, 200)
    cfg = EngineConfig(perf=PERF, kv_capacity_tokens=4e5, max_batch=64, token_budget=8192, jitter_cv=0.05)
    rule = MissRule(ttft_origin_s=arrival, ttft=(("ttft_p99_s", 0.99, 1.0),))
    r = run_engine(cfg, prompt=prompt, output=output, arrival_s=arrival, stop=rule)
    whole = run_engine(cfg, prompt=prompt, output=output, arrival_s=arrival)
    assert r.missed == "ttft_p99_s"
    assert np.isfinite(r.finish_s).sum() < n / 4  # stopped within its first quarter
    assert r.iterations < whole.iterations / 4
    # What it saw is what the whole run saw up to there (the counting changes nothing).
    first = r.first_token_s[np.isfinite(r.first_token_s)]
    assert np.array_equal(first, whole.first_token_s[: first.size])


@pytest.mark.parametrize("n", [1, 2, 3, 99, 100, 101, 200, 300, 2000, 100_000])
@pytest.mark.parametrize("q", [0.5, 0.99])
def test_needed_counts_put_the_numpy_percentile_above_the_limit(n, q):
    need = _needed(q, n)
    assert 1 <= need <= n
    x = np.zeros(n)
    x[n - need :] = 1.0  # exactly `need` values above a limit of 0.5
    assert np.percentile(x, 100 * q) > 0.5
