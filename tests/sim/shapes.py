"""Model shapes the serving-engine tests share (public configs: Llama 3 70B in FP8 weights
and KV; a Mixtral-8x7B-like MoE, 47B total, 13B active, top-2 of 8)."""

from gpufabric.model import inference as m

LLAMA70_FP8 = m.ModelShape(
    params=70.6e9, layers=80, hidden=8192, heads=64, kv_heads=8, weight_bytes_per_param=1, kv_bytes_per_element=1
)
MOE = m.ModelShape(
    params=47e9,
    layers=32,
    hidden=4096,
    heads=32,
    kv_heads=8,
    weight_bytes_per_param=2,
    kv_bytes_per_element=2,
    active_params=13e9,
    experts=8,
    experts_per_token=2,
)
