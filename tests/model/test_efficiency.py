"""The compute-efficiency model (model.efficiency): ceilings, shapes, precision, attention."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.model import efficiency as eff
from gpufabric.model.memory import activation_bytes_per_layer

H100 = dict(peak_tflops=989.0, peak_bf16_tflops=989.0, hbm_gbps=3350.0, sms=eff.SMS["hopper"])


def _layer(**kw):
    base = dict(
        hidden=8192,
        ffn_hidden=28672,
        kv_ratio=0.125,
        gated=True,
        seq_len=8192,
        microbatch_size=1,
        tp=8,
        cp=1,
        heads=64,
        recompute=0,
        fp8=False,
        flash_attention=True,
        gemm_efficiency=eff.GEMM_EFFICIENCY["hopper"]["bf16"],
        attention_efficiency=eff.ATTENTION_EFFICIENCY["hopper"],
        **H100,
    )
    base.update(kw)
    h, f = base["hidden"], base["ffn_hidden"]
    base.setdefault("layer_params", h * h * (2 + 2 * base["kv_ratio"]) + 3 * h * f)
    act = activation_bytes_per_layer(
        seq_len=base["seq_len"],
        microbatch_size=base["microbatch_size"],
        hidden=h,
        heads=base["heads"],
        tp=base["tp"],
        sequence_parallel=True,
        recompute=0,
        flash_attention=True,
        ffn_hidden=f,
        kv_ratio=base["kv_ratio"],
        gated=base["gated"],
        dropout=False,
        cp=base["cp"],
    )
    base.setdefault("activation_bytes", act)
    return float(eff.layer_efficiency(**base))


def test_a_large_layer_runs_near_but_below_the_gemm_ceiling():
    e = _layer()
    ceiling = eff.GEMM_EFFICIENCY["hopper"]["bf16"]
    assert 0.5 * ceiling < e < ceiling * eff.FRAMEWORK_EFFICIENCY


@settings(max_examples=60, deadline=None)
@given(
    hidden=st.sampled_from([1024, 2048, 4096, 8192, 16384]),
    seq=st.sampled_from([256, 1024, 4096, 16384, 131072]),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    cp=st.sampled_from([1, 2, 8]),
    mbs=st.sampled_from([1, 2, 8]),
    fp8=st.booleans(),
    flash=st.booleans(),
    recompute=st.sampled_from([0, 1, 2]),
)
def test_efficiency_is_a_fraction_below_the_gemm_ceiling(hidden, seq, tp, cp, mbs, fp8, flash, recompute):
    prec = "fp8" if fp8 else "bf16"
    e = _layer(
        hidden=hidden,
        ffn_hidden=4 * hidden,
        seq_len=seq,
        tp=tp,
        cp=cp,
        microbatch_size=mbs,
        heads=max(hidden // 128, tp),
        fp8=fp8,
        flash_attention=flash,
        recompute=recompute,
        peak_tflops=1979.0 if fp8 else 989.0,
        gemm_efficiency=eff.GEMM_EFFICIENCY["hopper"][prec],
    )
    assert 0.0 < e <= eff.GEMM_EFFICIENCY["hopper"][prec]


def test_small_gemms_are_slower_than_large_ones():
    # A thin slice of a small model (h/tp = 128, 256 tokens) against a wide one: memory and
    # tail-wave bound, so the efficiency drops.
    small = _layer(hidden=1024, ffn_hidden=4096, seq_len=256, tp=8, heads=8, kv_ratio=1.0, gated=False)
    large = _layer()
    assert small < 0.8 * large


def test_fp8_gains_less_than_its_peak_ratio():
    """FP8 doubles the GEMM peak but attention stays bf16 and casts cost bandwidth: the
    efficiency against the FP8 peak is lower than bf16's against its own."""
    bf16 = _layer()
    fp8 = _layer(fp8=True, peak_tflops=1979.0, gemm_efficiency=eff.GEMM_EFFICIENCY["hopper"]["fp8"])
    assert fp8 < bf16
    assert fp8 * 1979 > bf16 * 989  # still faster in absolute terms


def test_long_sequences_spend_time_in_attention():
    short = _layer(seq_len=4096)
    long = _layer(seq_len=131072, cp=16)
    # Causal FlashAttention runs half the counted FLOPs at its own efficiency, so counted
    # efficiency can rise; it stays within the ceiling either way and differs from short.
    assert long != short and long <= eff.GEMM_EFFICIENCY["hopper"]["bf16"]


def test_without_flash_attention_the_scores_cost_bandwidth():
    flash = _layer(seq_len=2048, hidden=2304, ffn_hidden=4 * 2304, heads=24, kv_ratio=1.0, gated=False, tp=1)
    plain = _layer(
        seq_len=2048, hidden=2304, ffn_hidden=4 * 2304, heads=24, kv_ratio=1.0, gated=False, tp=1, flash_attention=False
    )
    assert plain < flash


def test_every_catalog_gpu_has_a_generation_with_constants():
    from gpufabric.catalog import load_catalog

    for gid in load_catalog().gpus:
        gen = eff.generation_of(gid)
        assert gen in eff.GEMM_EFFICIENCY and gen in eff.ATTENTION_EFFICIENCY and gen in eff.SMS, gid
        assert all(0 < v <= 1 for v in eff.GEMM_EFFICIENCY[gen].values())
    assert np.isclose(eff.FRAMEWORK_EFFICIENCY, 0.78)


def test_many_small_experts_run_slower_gemms():
    """MoE: the MLP GEMMs of each local expert see top_k x ep / experts of the tokens; with
    many experts and little expert parallelism they are thin and lose efficiency."""
    dense = _layer(tp=1, seq_len=4096)
    few = _layer(tp=1, seq_len=4096, expert_tokens=2 * 4 / 8, local_experts=2)  # Mixtral-like: top 2, ep 4
    many = _layer(tp=1, seq_len=4096, expert_tokens=8 * 1 / 256, local_experts=256)  # 256 experts, ep 1
    assert few == pytest.approx(dense, rel=0.01)  # each expert sees M tokens: dense-like GEMMs
    assert many < 0.9 * dense
