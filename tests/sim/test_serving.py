"""Serving simulator: the engine's scheduling (budget, chunks, admission, preemption), closed forms, properties."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError
from gpufabric.model import inference as m
from gpufabric.model.inference import KvTransfer
from gpufabric.sim.batching import EngineConfig, run_engine
from gpufabric.sim.serving import ServingConfig, Tokens, simulate_serving
from tests.sim.shapes import LLAMA70_FP8, MOE

CAT = load_catalog([])
H100 = CAT.gpu("h100-sxm")


def _perf(tp: int = 2, **kw) -> m.ReplicaPerf:
    return m.replica_perf(
        shape=LLAMA70_FP8,
        gpu=H100,
        links=m.serving_links(CAT, "h100-sxm", "ib-ndr", 8),
        tp=tp,
        pp=1,
        precision="fp8",
        mfu=0.5,
        hbm_efficiency=0.8,
        max_batch=256,
        jitter_cv=0.0,
        **kw,
    )


def _engine(**kw) -> EngineConfig:
    base = {"perf": _perf(), "kv_capacity_tokens": 1e6, "max_batch": 256, "token_budget": 8192}
    base.update(kw)
    return EngineConfig(**base)


def _closed(cfg: EngineConfig, conc: int, n: int, prompt: int = 1000, out: int = 200, **kw):
    return run_engine(cfg, prompt=np.full(n, prompt), output=np.full(n, out), concurrency=conc, **kw)


def test_one_request_alone_is_the_model_exactly():
    perf = _perf()
    r = _closed(_engine(perf=perf), 1, 1, prompt=1000, out=50)
    assert r.first_token_s[0] == pytest.approx(float(perf.prefill_s(1000)))
    # 49 decode iterations over contexts 1001 .. 1049 (the first token came out of prefill).
    steps = sum(float(perf.decode_step_s(1, 1001 + i)) for i in range(49))
    assert r.finish_s[0] - r.first_token_s[0] == pytest.approx(steps, rel=1e-9)


def test_prefill_only_engine_is_an_md1_queue():
    # Budget = one prompt, one output token, no mixing: FCFS single server, deterministic service.
    perf = _perf()
    s = float(perf.prefill_s(512))
    lam = 0.7 / s
    rng = np.random.default_rng(1)
    n = 60_000
    arrival = np.cumsum(rng.standard_exponential(n)) / lam
    r = run_engine(
        _engine(perf=perf, token_budget=512, mixed=False),
        prompt=np.full(n, 512),
        output=np.ones(n),
        arrival_s=arrival,
    )
    wait = (r.first_token_s - r.arrival_s - s)[1000:]
    rho = lam * s
    assert wait.mean() == pytest.approx(rho * s / (2 * (1 - rho)), rel=0.05)  # Pollaczek-Khinchine


def test_chunked_prefill_splits_a_long_prompt_over_the_budget():
    perf = _perf()
    r = _closed(_engine(perf=perf, token_budget=2048), 1, 1, prompt=8192, out=2)
    assert r.iterations == 4 + 1  # 4 chunks of 2048, then one decode iteration
    whole = float(perf.prefill_s(8192))
    # Chunks re-read the weights each time but do the same attention work: slower than one pass.
    assert r.first_token_s[0] > whole


def test_prefills_ride_in_decode_iterations_and_stretch_them():
    cfg = _engine()
    busy = _closed(cfg, 32, 320, prompt=2000, out=200, client_delay_s=0.003)
    quiet = _closed(cfg, 32, 320, prompt=10, out=200, client_delay_s=0.003)
    tpot = lambda r: np.median((r.finish_s - r.first_token_s) / 199)  # noqa: E731
    assert tpot(busy) > 1.1 * tpot(quiet)
    # TTFT grows with the load on the engine (published closed-loop sweeps do the same).
    one = _closed(cfg, 1, 20, prompt=2000, out=200)
    ttft = lambda r: np.median(r.first_token_s - r.arrival_s)  # noqa: E731
    assert ttft(busy) > 1.3 * ttft(one)


def test_full_kv_cache_waits_in_ttft_not_tpot():
    perf = _perf()
    roomy = _closed(_engine(perf=perf), 64, 640, prompt=1000, out=200, client_delay_s=0.003)
    tight = _closed(
        _engine(perf=perf, kv_capacity_tokens=16 * 1200), 64, 640, prompt=1000, out=200, client_delay_s=0.003
    )
    ttft = lambda r: np.median(r.first_token_s - r.arrival_s)  # noqa: E731
    tpot = lambda r: np.median((r.finish_s - r.first_token_s) / 199)  # noqa: E731
    assert ttft(tight) > 5 * ttft(roomy)
    assert tpot(tight) < tpot(roomy)  # a smaller running batch steps faster
    assert tight.mean_batch <= 16.5


def test_preemption_when_decodes_outgrow_the_cache():
    # Admission needs room for the prompt only; outputs then grow past the cache: vLLM preempts.
    r = _closed(_engine(kv_capacity_tokens=8 * 1150), 8, 64, prompt=1000, out=400, client_delay_s=0.003)
    assert r.preemptions > 0
    assert np.all(np.isfinite(r.finish_s)) and np.all(r.finish_s >= r.first_token_s)


def test_max_batch_caps_running_requests():
    r = _closed(_engine(max_batch=4), 16, 64, client_delay_s=0.001)
    assert r.mean_batch <= 4.01


def test_speculative_decoding_emits_more_tokens_per_step():
    plain = _closed(_engine(), 1, 1, prompt=100, out=401)
    spec_perf = _perf(draft_tokens=3, acceptance_rate=0.7, draft_cost_fraction=0.05)
    fast = _closed(_engine(perf=spec_perf), 1, 1, prompt=100, out=401)
    assert spec_perf.tokens_per_step == pytest.approx((1 - 0.7**4) / 0.3)
    assert fast.finish_s[0] < 0.6 * plain.finish_s[0]


def test_moe_touches_fewer_weights_at_small_batch():
    perf = m.replica_perf(
        shape=MOE,
        gpu=H100,
        links=m.serving_links(CAT, "h100-sxm", "ib-ndr", 8),
        tp=2,
        pp=1,
        precision="bf16",
        mfu=0.5,
        hbm_efficiency=0.8,
        max_batch=256,
        jitter_cv=0.0,
        ep=2,
    )
    one, many = float(perf.decode_step_s(1, 1000)), float(perf.decode_step_s(64, 1000))
    assert one < 0.5 * perf.decode_weights_s  # top-2 of 8 experts: a quarter of the expert weights
    assert many > perf.decode_weights_s * 0.9  # a batch of 64 touches every expert
    assert perf.a2a_fixed_s > 0


def _kv(scale: float = 1.0) -> KvTransfer:
    return KvTransfer(
        grid_tokens=(1.0, 1e6), grid_s=(1e-4 * scale, 1e-4 * scale + scale), jitter_s=0.0, hiccup_prob=0.0, hiccup_s=0.0
    )


def _cfg(**kw) -> ServingConfig:
    base = {
        "perf": _perf(),
        "prefill_replicas": 2,
        "max_batch": 128,
        "kv_capacity_tokens": 4e5,
        "rate_rps": 4.0,
        "prompt": Tokens(mean=1000, cv=0.5),
        "output": Tokens(mean=200, cv=0.5),
        "requests": 2000,
    }
    base.update(kw)
    return ServingConfig(**base)


def test_closed_loop_and_open_loop_report_the_benchmark_metrics():
    s = simulate_serving(_cfg(rate_rps=None, concurrency=16)).summary()
    for key in (
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "itl_p50_s",
        "itl_p99_s",
        "output_tokens_per_s",
    ):
        assert s[key] > 0
    assert s["ttft_p99_s"] >= s["ttft_p50_s"] and s["itl_p99_s"] >= s["itl_p50_s"]
    o = simulate_serving(_cfg()).summary()
    # Open loop at 4 requests/s x 200 tokens: the service delivers what arrives.
    assert o["output_tokens_per_s"] == pytest.approx(4.0 * 200, rel=0.15)


def test_disaggregated_kv_transfer_counts_in_ttft():
    fast = simulate_serving(_cfg(decode_replicas=1, kv=_kv(1.0))).summary()
    slow = simulate_serving(_cfg(decode_replicas=1, kv=_kv(100.0))).summary()
    assert slow["ttft_p50_s"] > fast["ttft_p50_s"] + 0.05
    assert slow["kv_transfer_p50_s"] > fast["kv_transfer_p50_s"]


def test_bad_configs_are_input_errors():
    with pytest.raises(InputError):
        simulate_serving(_cfg(prefill_replicas=0))
    with pytest.raises(InputError):
        simulate_serving(_cfg(decode_replicas=1, kv=None))
    with pytest.raises(InputError):
        simulate_serving(_cfg(concurrency=4))  # both loads
    with pytest.raises(InputError, match="KV cache"):
        _closed(_engine(kv_capacity_tokens=500), 1, 1, prompt=1000, out=10)


def test_more_load_raises_ttft_p99():
    lo = simulate_serving(_cfg(rate_rps=2.0, requests=1500)).summary()
    hi = simulate_serving(_cfg(rate_rps=6.0, requests=1500)).summary()
    assert hi["ttft_p99_s"] > lo["ttft_p99_s"] and hi["tpot_p50_s"] > lo["tpot_p50_s"]


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 512), ctx=st.floats(1, 1e5), p=st.floats(0, 16384))
def test_iteration_scalar_equals_vector_and_is_physical(b, ctx, p):
    perf = _perf()
    vec = float(perf.iteration_s(b, b * ctx, p, p * p / 2))
    assert perf.iteration_scalar_s(b, b * ctx, p, p * p / 2) == pytest.approx(vec, rel=1e-12)
    # Never faster than reading the weights once from HBM at the datasheet rate.
    assert vec >= LLAMA70_FP8.weight_bytes / (2 * H100.hbm_gbps * 1e9)


def test_closed_loop_ttft_rises_with_concurrency_without_lock_step():
    # 70B fp8 on 2 x H100 (tp 2), 1,000 in / 1,000 out: independent client phases keep each
    # new prompt's prefill mostly alone in a mixed iteration, so TTFT grows with the decode
    # batch it rides with instead of jumping to a whole clump's prefill.
    def run(c: int) -> dict:
        cfg = _cfg(
            prefill_replicas=1,
            rate_rps=None,
            concurrency=c,
            kv_capacity_tokens=4e5,
            max_batch=256,
            prompt=Tokens(mean=1000),
            output=Tokens(mean=1000),
            requests=max(10 * c, 40),
            client_delay_s=0.003,
        )
        return simulate_serving(cfg).summary()

    one, fifty = run(1), run(50)
    assert 1.1 < fifty["ttft_p50_s"] / one["ttft_p50_s"] < 3.0
    assert 1.2 < fifty["tpot_p50_s"] / one["tpot_p50_s"] < 2.0
    assert fifty["output_tokens_per_s"] > 20 * one["output_tokens_per_s"]


@settings(max_examples=8, deadline=None)
@given(
    rate=st.floats(0.5, 40.0),
    mean_out=st.integers(2, 300),
    batch=st.integers(1, 256),
    replicas=st.integers(1, 4),
)
def test_engine_never_beats_the_hbm_ceiling_and_fractions_stay_fractions(rate, mean_out, batch, replicas):
    cfg = _cfg(
        prefill_replicas=replicas,
        rate_rps=rate,
        max_batch=batch,
        output=Tokens(mean=mean_out, cv=0.5),
        requests=300 * replicas,
    )
    s = simulate_serving(cfg).summary()
    perf = cfg.perf
    # Every iteration reads all weights once: at most max_batch tokens per weight read per engine.
    ceiling = replicas * batch * perf.tokens_per_step / (LLAMA70_FP8.weight_bytes / (2 * H100.hbm_gbps * 1e9))
    assert 0 < s["output_tokens_per_s"] <= ceiling
    assert 0.0 <= s["slo_attainment"] <= 1.0 and 0.0 <= s["prefill_utilisation"] <= 1.0 + 1e-9
    assert s["ttft_p99_s"] >= s["ttft_p50_s"] > 0


def test_dp_attention_keeps_one_kv_copy_where_tp_exceeds_kv_heads():
    mla_like = m.ModelShape(
        params=70e9, layers=60, hidden=7168, heads=128, kv_heads=1, weight_bytes_per_param=1, kv_bytes_per_element=1
    )
    tp_cap = m.kv_capacity_tokens(shape=mla_like, gpu=H100, tp=8, pp=1, memory_fraction=0.9)
    dpa_cap = m.kv_capacity_tokens(shape=mla_like, gpu=H100, tp=8, pp=1, memory_fraction=0.9, dp_attention=True)
    assert m.kv_replication(1, 8, False) == 8 and m.kv_replication(1, 8, True) == 1
    assert dpa_cap > 4 * tp_cap  # 8 copies of the one KV head vs one, less the replicated attention weights


def test_a_cached_prefix_is_not_prefilled_again_and_holds_its_kv_once():
    perf = _perf()
    r = _closed(_engine(perf=perf, prefix_tokens=1500), 1, 1, prompt=2000, out=2)
    # Only the last 500 tokens are computed, attending to all 2,000: the model's cached prefill.
    assert r.first_token_s[0] == pytest.approx(float(perf.prefill_s(2000, 1500)))
    assert float(perf.prefill_s(2000, 1500)) < 0.5 * float(perf.prefill_s(2000))
    assert float(perf.prefill_s(2000, 0)) == float(perf.prefill_s(2000))
    # A cache that holds 8 full requests holds about 3x as many when 1,500 of 2,200 tokens are shared.
    cap = 8 * 2200 / 0.98
    plain = _closed(_engine(kv_capacity_tokens=cap), 32, 320, prompt=2000, out=200, client_delay_s=0.003)
    shared = _closed(
        _engine(kv_capacity_tokens=cap, prefix_tokens=1500), 32, 320, prompt=2000, out=200, client_delay_s=0.003
    )
    assert plain.mean_batch <= 8.5 and shared.mean_batch > 2.5 * plain.mean_batch
    ttft = lambda r: np.median(r.first_token_s - r.arrival_s)  # noqa: E731
    assert ttft(shared) < 0.5 * ttft(plain)
    # Preemption recomputes only the uncached part and still finishes every request.
    tight = _closed(
        _engine(kv_capacity_tokens=1500 + 8 * 700, prefix_tokens=1500),
        8,
        64,
        prompt=2000,
        out=400,
        client_delay_s=0.003,
    )
    assert tight.preemptions > 0 and np.all(tight.finish_s >= tight.first_token_s)


def test_prefix_caching_through_the_planner(tmp_path):
    from gpufabric.plan.inference import make_serving_plan
    from gpufabric.spec.inference import load_inference_spec, read_located
    from tests.conftest import EXAMPLES

    text = (EXAMPLES / "serving" / "llama3-70b-fp8-h100-closed-loop.yaml").read_text()
    assert "prompt_tokens:" in text
    path = tmp_path / "prefix.yaml"
    path.write_text(text.replace("prompt_tokens:", "prefix_tokens: 800\n    prompt_tokens:", 1))
    spec = load_inference_spec(read_located(path), known_ids=CAT.known_ids())
    base = load_inference_spec(read_located(EXAMPLES / "serving" / "llama3-70b-fp8-h100-closed-loop.yaml"))
    ttft = lambda s: next(c for c in make_serving_plan(s, CAT, simulate=simulate_serving).candidates).ttft_p99_s  # noqa: E731
    assert spec.workload.traffic.prefix_tokens == 800 and ttft(spec) < 0.7 * ttft(base)
    path.write_text(text.replace("prompt_tokens:", "prefix_tokens: 1000\n    prompt_tokens:", 1))
    from gpufabric.errors import SpecError

    with pytest.raises(SpecError, match="prefix_tokens = 1000 must be below"):
        load_inference_spec(read_located(path))


def test_the_prefill_engine_memo_changes_no_figure(monkeypatch):
    """A disaggregated run whose prefill engine comes from the memo (an earlier run with another
    decode pool drew the same requests) equals one that runs it afresh, figure for figure."""
    from gpufabric.sim import serving

    cfg = _cfg(decode_replicas=1, kv=_kv(1.0), requests=600)
    serving._PREFILL_MEMO.clear()
    simulate_serving(replace(cfg, decode_replicas=2))  # fills the memo for this prefill engine
    assert len(serving._PREFILL_MEMO) == 1
    calls = []
    real = serving.run_engine
    monkeypatch.setattr(serving, "run_engine", lambda *a, **k: calls.append(k) or real(*a, **k))
    memo = simulate_serving(cfg).summary()
    assert [k["seed"] for k in calls] == [cfg.seed + 1]  # only the decode engine ran (the prefill one: + 2)
    serving._PREFILL_MEMO.clear()
    fresh = simulate_serving(cfg).summary()
    assert len(calls) == 3
    assert memo == fresh
    (sojourn,) = serving._PREFILL_MEMO.values()
    assert not sojourn.flags.writeable
