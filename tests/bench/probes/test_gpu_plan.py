"""bench gpu's measurement plan: the GEMM shapes of a layout, the CPU scale-down, the FFN width."""

from __future__ import annotations

import pytest

from gpufabric.bench.probes.gpu_plan import CPU_GEMM_FLOPS, ffn_width, plan_for_spec
from gpufabric.spec.inference import load_inference_spec, read_located
from gpufabric.spec.loader import load_spec
from tests.conftest import EXAMPLES


def _serving():
    return load_inference_spec(read_located(EXAMPLES / "serving" / "llama3-70b-serving.yaml"))


def test_llama3_ffn_widths_from_their_parameter_counts():
    # config.json of Meta-Llama-3-8B / -70B: (params, layers, hidden, kv heads x 128, ffn)
    assert ffn_width(params=8.03e9, layers=32, hidden=4096, kv_width=1024, vocab=128256) == 14336
    assert ffn_width(params=70.55e9, layers=80, hidden=8192, kv_width=1024, vocab=128256) == 28672


def test_gpu_gemms_are_the_megatron_split_of_the_spec_layer():
    spec = _serving()
    plan = plan_for_spec(spec, device="cuda")
    tp = spec.workload.replica.tp
    h, kv = (
        spec.workload.model.hidden,
        spec.workload.model.kv_heads * (spec.workload.model.hidden // spec.workload.model.heads),
    )
    by_name = {g.name: g for g in plan.gemms if g.tp == tp}
    tokens = int(spec.workload.traffic.prompt_tokens.mean)
    assert (by_name["qkv"].m, by_name["qkv"].n, by_name["qkv"].k) == (tokens, (h + 2 * kv) // tp, h)
    assert (by_name["attn_out"].n, by_name["attn_out"].k) == (h, h // tp)
    assert by_name["mlp_up"].n == 2 * by_name["mlp_down"].k
    assert all((g.m, g.n, g.k) == (g.spec_m, g.spec_n, g.spec_k) for g in plan.gemms)  # nothing scaled on a GPU
    assert plan.layer.layers_built == 2 and plan.layer.hidden == h


def test_cpu_plan_scales_each_gemm_to_the_budget_and_keeps_the_spec_shape():
    spec = load_spec(EXAMPLES / "llama3-70b-1k.yaml").spec
    plan = plan_for_spec(spec, device="cpu")
    assert plan.gemms and all(g.flops <= CPU_GEMM_FLOPS * 1.25 for g in plan.gemms)
    assert all(g.spec_m == spec.workload.model.seq_len for g in plan.gemms)
    assert {g.dtype for g in plan.gemms} == {"fp32"}
    assert plan.layer.hidden <= 512 and plan.layer.layers_spec == spec.workload.model.layers


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_describe_lists_every_measurement_kind(device):
    lines = plan_for_spec(_serving(), device=device).describe()
    for kind in ("gemm ", "hbm copy", "hbm read", "decode batch", "prefill", "copy h2d", "copy d2h"):
        assert any(line.startswith(kind) for line in lines), kind
    assert any("pinned" in line for line in lines) == (device == "cuda")
