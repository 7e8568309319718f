"""The decode step of a stack of transformer layers on one GPU, as the serving model prices it.

``bench gpu`` builds a few layers of a spec-shaped model and times a decode step; this is
the prediction it is set beside and the one ``calibrate`` refits: model/inference.py's
replica at TP 1, for exactly the built layers' weights and KV cache.
"""

from __future__ import annotations

from typing import Any

from gpufabric.model.inference import ModelShape, replica_perf


def layer_params(layer: dict[str, Any]) -> float:
    """Weights of one built layer: QKV, output, gated MLP (the worker's ``Layer``)."""
    h, heads, kvh, f = layer["hidden"], layer["heads"], layer["kv_heads"], layer["ffn"]
    hd = h // heads
    return h * (heads + 2 * kvh) * hd + heads * hd * h + h * 2 * f + f * h


def predicted_decode_s(
    gpu: Any, *, batch: int, context: int, layer: dict[str, Any], mfu: float, hbm_efficiency: float
) -> float:
    """The serving model's decode step on one GPU for the layers the probe built (no LM head).

    model/inference.replica_perf at TP 1 and PP 1 (no all-reduce, no stage hop) for a model
    whose parameters are exactly the built layers' x the spec's layer count (bf16 weights and
    KV), so the measured and the predicted step cover the same weights and KV cache; without
    the engine's per-iteration and per-sequence overheads (scheduling, sampling: the probe
    times the layers' kernels alone).
    """
    shape = ModelShape(
        params=layer_params(layer) * layer["layers"],
        layers=layer["layers"],
        hidden=layer["hidden"],
        heads=layer["heads"],
        kv_heads=layer["kv_heads"],
        weight_bytes_per_param=2.0,
        kv_bytes_per_element=2.0,
    )
    perf = replica_perf(
        shape=shape,
        gpu=gpu,
        links=None,
        tp=1,
        pp=1,
        precision="bf16",
        mfu=mfu,
        hbm_efficiency=hbm_efficiency,
        max_batch=max(batch, 1),
        jitter_cv=0.0,
        step_overhead_s=0.0,
        seq_overhead_s=0.0,
    )
    return float(perf.decode_step_s(batch, context))
