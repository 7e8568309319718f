"""FLOP conventions (model.flops) and per-GPU memory (model.memory) against published figures."""

from __future__ import annotations

import numpy as np
import pytest

from gpufabric.model.flops import active_params, expert_params_of, flops_per_token, megatron_eq3_flops
from gpufabric.model.memory import (
    MAIN_GRAD_BYTES,
    STATE_BYTES,
    activation_bytes_per_layer,
    first_stage_layers,
    in_flight_chunks,
    model_state_bytes,
    per_gpu_memory,
)


def test_full_recompute_count_is_megatron_eq3():
    # GPT-3 175B shape (Narayanan et al. SC'21 Table 1): 12 L h^2 layer parameters plus the
    # input and output embeddings (V h each, untied as model.flops assumes); eq. 3 counts
    # the logit layer's matmul once per pass and the input embedding (a lookup) not at all.
    L, h, s, V, B = 96, 12288, 2048, 51200, 1536
    params = 12 * L * h * h + 2 * V * h
    ours = flops_per_token(params_active=params, layers=L, hidden=h, seq_len=s, vocab=V, recompute=2) * B * s
    assert float(ours) == pytest.approx(megatron_eq3_flops(batch=B, seq_len=s, layers=L, hidden=h, vocab=V), rel=1e-12)


def test_recompute_and_attention_add_flops_and_6pt_ignores_them():
    kw = dict(params_active=70e9, layers=80, hidden=8192, seq_len=8192, vocab=128256)
    none, sel, full = (float(flops_per_token(**kw, recompute=r)) for r in (0, 1, 2))
    assert none < sel < full
    assert sel - none == pytest.approx(4 * 8192 * 8192 * 80)  # attention scores re-run
    assert float(flops_per_token(**kw, recompute=2, convention="6pt")) == 6 * 70e9
    # Attention grows with the sequence: at 8k it adds ~ 4 s h l x 3 over 6 P.
    short = float(flops_per_token(**{**kw, "seq_len": 2048}, recompute=0))
    assert none - short == pytest.approx(3 * 4 * (8192 - 2048) * 8192 * 80)


def test_moe_active_and_expert_params_are_consistent():
    # Mixtral 8x7B (Jiang et al. 2024, arXiv:2401.04088): 46.7B total, 12.9B active, top-2 of 8.
    e = expert_params_of(46.7e9, experts=8, top_k=2, active=12.9e9)
    assert active_params(46.7e9, experts=8, top_k=2, expert_params=e) == pytest.approx(12.9e9)
    assert e == pytest.approx((46.7e9 - 12.9e9) / 0.75)
    assert active_params(8e9) == 8e9 and expert_params_of(8e9) == 0.0


# Rajbhandari et al., "ZeRO" (SC'20, arXiv:1910.02054) Table 1: per-device model-state memory
# in GB for mixed-precision Adam (K = 12): baseline, P_os (ZeRO-1), P_os+g (2), P_os+g+p (3).
ZERO_TABLE1 = [
    (7.5e9, 64, (120, 31.4, 16.6, 1.88)),
    (7.5e9, 4, (120, 52.5, 41.3, 30)),
    (128e9, 64, (2048, 536, 284, 32)),
    (128e9, 1024, (2048, 513, 257, 2)),
    (1e12, 1024, (16000, 4011, 2013, 15.6)),
    (1e12, 16, (16000, 4750, 2875, 1000)),
]


@pytest.mark.parametrize(("params", "dp", "published"), ZERO_TABLE1)
def test_model_states_match_zero_paper_table1(params, dp, published):
    for stage, gb in enumerate(published):
        w, g, o = model_state_bytes(
            dense_params=params,
            expert_params=0,
            tp=1,
            pp=1,
            dp=dp,
            ep=1,
            zero_stage=stage,
            bytes_per_param=STATE_BYTES["bf16"],  # DeepSpeed's 16-bit gradients
        )
        assert float(w + g + o) / 1e9 == pytest.approx(gb, rel=0.10), f"stage {stage}"


def test_megatron_counts_18_bytes_per_param_and_6_plus_12_over_d_distributed():
    """Megatron Core docs (distributed optimizer): bf16 params + fp32 main grads = 18 B/param,
    6 + 12/d with the optimizer sharded over d data-parallel ranks."""
    for stage, per_param in ((0, 18.0), (1, 6.0 + 12.0 / 64)):
        w, g, o = model_state_bytes(
            dense_params=1e9,
            expert_params=0,
            tp=1,
            pp=1,
            dp=64,
            ep=1,
            zero_stage=stage,
            bytes_per_param=MAIN_GRAD_BYTES["bf16"],
        )
        assert float(w + g + o) == pytest.approx(1e9 * per_param)


def test_activations_follow_korthikanti():
    # Korthikanti et al. 2022 eq. 2 and Table 2: s b h (34 + 5 a s / h) without parallelism;
    # t-way TP + sequence parallelism divides all of it by t; full recomputation keeps 2 s b h / t.
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    base = dict(seq_len=s, microbatch_size=b, hidden=h, heads=a, flash_attention=False)
    none1 = activation_bytes_per_layer(**base, tp=1, sequence_parallel=False, recompute=0)
    assert float(none1) == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    sp = activation_bytes_per_layer(**base, tp=t, sequence_parallel=True, recompute=0)
    assert float(sp) == pytest.approx(float(none1) / t)
    tp_only = activation_bytes_per_layer(**base, tp=t, sequence_parallel=False, recompute=0)
    assert float(tp_only) == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    sel = activation_bytes_per_layer(**base, tp=t, sequence_parallel=True, recompute=1)
    assert float(sel) == pytest.approx(s * b * h * 34 / t)
    flash = activation_bytes_per_layer(**{**base, "flash_attention": True}, tp=t, sequence_parallel=True, recompute=0)
    assert float(flash) == float(sel)
    full = activation_bytes_per_layer(**base, tp=t, sequence_parallel=True, recompute=2)
    assert float(full) == pytest.approx(2 * s * b * h / t)


def _mem(**kw):
    base = dict(
        dense_params=70e9,
        expert_params=0,
        layers=80,
        hidden=8192,
        heads=64,
        seq_len=8192,
        vocab=128256,
        tp=8,
        pp=4,
        dp=32,
        ep=1,
        zero_stage=0,
        microbatch_size=1,
        microbatches=16,
        virtual_stages=1,
        sequence_parallel=True,
        recompute=0,
        flash_attention=True,
        hbm_gib=80,
        reserve_gib=8,
    )
    return per_gpu_memory(**{**base, **kw})


def test_70b_on_pure_data_parallelism_does_not_fit_without_zero():
    # Issue 14's bar: 70B at tp1 pp1 dp1024 needs ~1.1 TB of model states per GPU at ZeRO 0.
    m = _mem(tp=1, pp=1, dp=1024)
    assert float(m.weights_bytes + m.grads_bytes + m.optimizer_bytes) == pytest.approx(70e9 * 18)
    assert float(m.shortfall_bytes) > 1e12
    assert float(_mem().shortfall_bytes) == 0  # tp8 pp4 dp32 fits in 80 GiB


def test_pipeline_in_flight_and_interleaving_raise_the_first_stage():
    one = _mem(pp=4, microbatches=16)
    # The first stage holds min(pp, m) = 4 microbatches of its 20 layers: 80 layers' worth.
    per_layer = float(
        activation_bytes_per_layer(
            seq_len=8192,
            microbatch_size=1,
            hidden=8192,
            heads=64,
            tp=8,
            sequence_parallel=True,
            recompute=0,
            flash_attention=True,
        )
    )
    assert float(one.activations_bytes) == pytest.approx(per_layer * 80)
    inter = _mem(pp=4, microbatches=16, virtual_stages=2)
    assert float(inter.activations_bytes) == pytest.approx(per_layer * 80 * (1 + 3 / 8))
    assert float(_mem(pp=4, microbatches=2).activations_bytes) < float(one.activations_bytes)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_each_zero_stage_never_needs_more_memory(stage):
    lower = _mem(tp=1, pp=1, dp=1024, zero_stage=max(stage - 1, 0))
    higher = _mem(tp=1, pp=1, dp=1024, zero_stage=stage)
    assert float(higher.total_bytes) <= float(lower.total_bytes)
    if stage:
        assert float(higher.total_bytes) < float(lower.total_bytes)


def test_experts_shard_over_ep():
    dense = model_state_bytes(dense_params=10e9, expert_params=40e9, tp=1, pp=1, dp=64, ep=1, zero_stage=0)
    ep8 = model_state_bytes(dense_params=10e9, expert_params=40e9, tp=1, pp=1, dp=64, ep=8, zero_stage=0)
    assert float(np.sum(ep8)) == pytest.approx(18 * (10e9 + 40e9 / 8))
    assert float(np.sum(dense)) == pytest.approx(18 * 50e9)


def test_stage_balance_takes_the_remainder_from_the_first_and_last_stages():
    # Llama 3 405B: 126 layers over 16 stages = 7, 8 x 14, 7 (Llama 3 paper sec. 3.3.2).
    assert float(first_stage_layers(126, 16)) == 7.0
    assert float(first_stage_layers(128, 16)) == 8.0  # divisible: even
    assert float(first_stage_layers(80, 1)) == 80.0 and float(first_stage_layers(80, 2)) == 40.0


def test_interleaved_warm_up_follows_megatron_and_is_capped_by_the_chunks():
    # Megatron: warm-up (pp - 1) * 2 + (v - 1) * pp on rank 0, plus the one in flight,
    # at most m * v chunks.
    assert float(in_flight_chunks(16, 16, 4)) == 64.0  # capped: every chunk of 16 microbatches
    assert float(in_flight_chunks(4, 64, 2)) == (2 - 1) * 4 + 2 * 3 + 1
    assert float(in_flight_chunks(4, 64, 1)) == 4.0  # 1F1B: pp microbatches
    assert float(in_flight_chunks(4, 2, 1)) == 2.0
    assert float(in_flight_chunks(4, 64, 2, last=True)) == (2 - 1) * 4 + 1
    assert float(in_flight_chunks(4, 64, 1, last=True)) == 1.0


def test_llama_layer_activations_follow_its_shape():
    """SwiGLU (f = 3.25 h, gated), GQA 8 of 128 heads, no dropout: 6 + 0.25 + 21.5 + 4 = 31.75
    units of s b h, against the GPT 34 (f = 4h, dropout)."""
    base = dict(seq_len=8192, microbatch_size=1, hidden=16384, heads=128, tp=8, sequence_parallel=True, recompute=0)
    llama = activation_bytes_per_layer(
        **base, flash_attention=True, ffn_hidden=53248, kv_ratio=8 / 128, gated=True, dropout=False
    )
    assert float(llama) == pytest.approx(8192 * 16384 * 31.75 / 8)
    gpt = activation_bytes_per_layer(**base, flash_attention=True)
    assert float(gpt) == pytest.approx(8192 * 16384 * 34 / 8)
    cp = activation_bytes_per_layer(
        **base, flash_attention=True, ffn_hidden=53248, kv_ratio=8 / 128, gated=True, dropout=False, cp=16
    )
    assert float(cp) == pytest.approx(float(llama) / 16)


def test_zero3_holds_the_gathered_layers():
    z2 = _mem(tp=1, pp=1, dp=1024, zero_stage=2)
    z3 = _mem(tp=1, pp=1, dp=1024, zero_stage=3)
    layer = (70e9 - 2 * 128256 * 8192) / 80
    # Weights drop to 1/dp, but two gathered layers (current + prefetched) stay whole.
    assert float(z3.weights_bytes) == pytest.approx(2 * 70e9 / 1024 + 2 * 2 * layer, rel=1e-9)
    assert float(z3.weights_bytes) < float(z2.weights_bytes)


# Korthikanti et al. 2022 (arXiv:2205.05198) Figure 1: per-GPU memory (GiB) of parameters +
# optimizer and of activations, without (none) and with sequence parallelism + selective
# recomputation (seqsel), on A100 80GB; values and layouts as Calculon's validation
# (calculon-ai/calculon calculon/llm/validation.py and validation/seqsel/fig1/*.json [S]).
# (name, L, h, a, tp, pp, v, batch, microbatch, (par_opt, act none, act seqsel))
KORTHIKANTI_FIG1 = [
    ("22B", 48, 6144, 64, 8, 1, 1, 4, 4, (45.5625, 59.25, 9.5625)),
    ("175B", 96, 12288, 96, 8, 8, 3, 64, 1, (45.5625, 66.84375, 12.3515625)),
    ("530B", 105, 20480, 128, 8, 35, 3, 280, 1, (31.640625, 114.0234375, 23.076171875)),
    ("1T", 128, 25600, 160, 8, 64, 1, 512, 1, (32.958984375, 131.25, 26.5625)),
]


@pytest.mark.parametrize("row", KORTHIKANTI_FIG1, ids=lambda r: r[0])
def test_korthikanti_figure1_memory(row):
    _, L, h, a, tp, pp, v, batch, mbs, (par_opt, act_none, act_seqsel) = row
    params = 12 * L * h * h + 2 * 51200 * h
    kw = dict(
        dense_params=params,
        expert_params=0,
        layers=L,
        hidden=h,
        heads=a,
        seq_len=2048,
        vocab=51200,
        tp=tp,
        pp=pp,
        dp=1,
        ep=1,
        zero_stage=0,
        microbatch_size=mbs,
        microbatches=batch // mbs,
        virtual_stages=v,
        flash_attention=False,
        hbm_gib=80,
        reserve_gib=0,
        dropout=True,
        bytes_per_param=MAIN_GRAD_BYTES["bf16"],
    )
    none = per_gpu_memory(**kw, sequence_parallel=False, recompute=0)
    seqsel = per_gpu_memory(**kw, sequence_parallel=True, recompute=1)
    gib = 2.0**30
    # The figure spreads the layers' 12 L h^2 parameters evenly (18 B each, fp32 main
    # grads); Megatron's first stage also holds the input embedding, up to 9% more here.
    even = model_state_bytes(
        dense_params=12 * L * h * h,
        expert_params=0,
        tp=tp,
        pp=pp,
        dp=1,
        ep=1,
        zero_stage=0,
        bytes_per_param=MAIN_GRAD_BYTES["bf16"],
    )
    assert float(sum(even)) / gib == pytest.approx(par_opt, rel=0.01)
    first = float(none.weights_bytes + none.grads_bytes + none.optimizer_bytes) / gib
    assert par_opt * 0.99 <= first <= par_opt * 1.12
    # Activations of the busiest stage: the interleaved warm-up count (v = 3) and its cap;
    # with one stage the fp32 logits come on top (0.2 GiB for 22B), which the figure leaves out.
    assert float(none.activations_bytes) / gib == pytest.approx(act_none, rel=0.02)
    assert float(seqsel.activations_bytes) / gib == pytest.approx(act_seqsel, rel=0.025)
