"""Per-GPU memory of a training layout, counted as the frameworks count it (docs/models.md, "Memory").

- Model states per parameter. Megatron Core's mixed precision keeps bf16 weights (2 B),
  fp32 main gradients (4 B) and fp32 master weights, Adam momentum and variance (12 B):
  18 B/param; its distributed optimizer shards the 12 over the data-parallel group,
  6 + 12/d (Megatron Core docs, "Distributed Optimizer", docs.nvidia.com/megatron-core,
  as_of 2025; Korthikanti et al. 2022 use the same 18). DeepSpeed and the ZeRO paper
  (Rajbhandari et al., SC'20, arXiv:1910.02054, sec. 3.1, Table 1) keep 16-bit gradients:
  2 + 2 + 12 = 16 (``workload.main_grads: bf16``). ZeRO 1 shards the optimizer, 2 also
  the gradients, 3 (FSDP full sharding) also the weights, over dp x cp (Megatron's
  gradient group); fp32 training keeps 4 + 4 + 8. Experts shard over ep as well.
- Stages are balanced as Meta's Llama 3 405B run did (Dubey et al. 2024, arXiv:2407.21783,
  sec. 3.3.2: "reducing one Transformer layer each from the first and the last stages";
  Megatron's --decoder-first/last-pipeline-num-layers): when the layers do not divide,
  the middle stages take ceil(L/pp) and the first and last share the rest; the first
  also holds the input embedding, the last the output layer, V h / tp each.
- Activations per layer and microbatch (Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", MLSys 2023, arXiv:2205.05198, sec. 4.1),
  generalised to the layer's shape: attention 6 + 4 g (g = kv_heads / heads) + the
  dropout mask, MLP 2 + 2 f/h (x 2 gated) + 2 f/h + the mask, two norms 4, in units of
  s b h bytes; GPT (f = 4h, g = 1, dropout) gives their 34. The s x s scores (5 a s / h
  with dropout, 2 a s / h without) are dropped by FlashAttention (Dao et al. 2022) and by
  selective recomputation; full recomputation keeps the layer input, 2 s b h. Tensor +
  sequence parallelism divides all of it by t; without sequence parallelism the norms, the
  two block inputs and the masks (8 + 2 x dropout) stay whole. Context parallelism splits
  the sequence: everything / cp.
- Pipeline in flight: 1F1B's first stage holds min(pp, m) microbatches of its layers;
  the interleaved schedule (v model chunks) runs (v - 1) pp + 2 (pp - 1) warm-up chunks
  on the first rank, capped at the m v chunks it has (Megatron-LM
  ``get_pipeline_parallel_schedule``/``forward_backward_pipelining_with_interleaving``
  warm-up count, core/pipeline_parallel/schedules.py), each L1 / v layers. The last stage
  runs (v - 1) pp warm-up chunks (one microbatch without interleaving) plus the fp32
  logits of the loss, 4 s b V / t (Korthikanti sec. 4.1). The busier stage is reported.
- ZeRO 3 / FSDP gathers each layer's weights for its forward and backward: one gathered
  unit plus the prefetched next (PyTorch FSDP ``forward_prefetch``/``backward_prefetch``),
  and one unsharded gradient unit being reduced.
- A framework reserve (CUDA context, cuBLAS workspaces, NCCL buffers, allocator
  fragmentation) is held back: by default 2 GiB + 3% of the HBM [U, estimate; PyTorch's
  CUDA context is ~0.5-1 GiB, NCCL's buffers a few hundred MiB per communicator].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

GIB = 2.0**30
#: Default framework reserve: a fixed part (GiB) and a fraction of HBM [U, estimate].
RESERVE_FIXED_GIB = 2.0
RESERVE_FRACTION = 0.03
#: Bytes per parameter (weights, gradients, optimizer) by precision with 16-bit gradients:
#: the ZeRO paper's mixed precision (K = 12); fp32 training: 4 + 4 + 8 (Adam m, v).
STATE_BYTES = {"bf16": (2.0, 2.0, 12.0), "fp16": (2.0, 2.0, 12.0), "fp8": (2.0, 2.0, 12.0), "fp32": (4.0, 4.0, 8.0)}
#: Megatron Core's mixed precision: fp32 main gradients (18 B/param). FP8 recipes keep
#: bf16 weights and fp32 main grads too (Transformer Engine keeps FP8 copies transient).
MAIN_GRAD_BYTES = {"bf16": (2.0, 4.0, 12.0), "fp16": (2.0, 4.0, 12.0), "fp8": (2.0, 4.0, 12.0), "fp32": (4.0, 4.0, 8.0)}


def reserve_gib(hbm_gib: float) -> float:
    """Default framework reserve for a GPU with ``hbm_gib`` of HBM (module docstring)."""
    return RESERVE_FIXED_GIB + RESERVE_FRACTION * hbm_gib


def state_bytes(precision: str, main_grads: str) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per parameter for a precision and main-gradient type."""
    return (MAIN_GRAD_BYTES if main_grads == "fp32" else STATE_BYTES)[precision]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    """Bytes per GPU of the busiest pipeline stage (arrays, one value per row)."""

    weights_bytes: Any
    grads_bytes: Any
    optimizer_bytes: Any
    activations_bytes: Any
    reserve_bytes: Any
    total_bytes: Any
    capacity_bytes: Any

    @property
    def shortfall_bytes(self) -> Any:
        return np.maximum(np.asarray(self.total_bytes) - np.asarray(self.capacity_bytes), 0.0)


def model_state_bytes(
    *,
    dense_params: Any,
    expert_params: Any,
    tp: Any,
    pp: Any,
    dp: Any,
    ep: Any,
    zero_stage: Any,
    bytes_per_param: tuple[Any, Any, Any] = MAIN_GRAD_BYTES["bf16"],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights, gradients and optimizer bytes per GPU under ZeRO ``zero_stage`` (an even pp split).

    ``dp`` is the gradient group (dp x cp with context parallelism).
    """
    tp, pp, dp, ep, z = (np.asarray(x, dtype=float) for x in (tp, pp, dp, ep, zero_stage))
    return _sharded_states(
        np.asarray(dense_params, dtype=float) / (tp * pp),
        np.asarray(expert_params, dtype=float) / (tp * pp * ep),
        dp,
        ep,
        z,
        bytes_per_param,
    )


def _sharded_states(
    dense: np.ndarray, expert: np.ndarray, dp: np.ndarray, ep: np.ndarray, z: np.ndarray, bpp: tuple[Any, Any, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dp_expert = np.maximum(dp / ep, 1.0)
    w, g, o = bpp

    def sharded(per_param: Any, stage: int) -> np.ndarray:
        on = z >= stage
        return np.asarray(per_param) * (np.where(on, dense / dp, dense) + np.where(on, expert / dp_expert, expert))

    return sharded(w, 3), sharded(g, 2), sharded(o, 1)


def activation_units(
    *, hidden: Any, ffn_hidden: Any, kv_ratio: Any, gated: Any, dropout: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(sharded, replicated) activation bytes of one layer per token, in units of h bytes (16-bit).

    Korthikanti's GPT count generalised (module docstring); sharded is divided by t under
    tensor parallelism, replicated only with sequence parallelism.
    """
    h = np.asarray(hidden, dtype=float)
    f = np.asarray(ffn_hidden, dtype=float) / h
    g = np.asarray(kv_ratio, dtype=float)
    d = np.asarray(dropout, dtype=float)
    gate = np.where(np.asarray(gated, dtype=bool), 2.0, 1.0)
    attn = 6.0 + 4.0 * g + d
    mlp = 2.0 + 2.0 * f * gate + 2.0 * f + d
    total = attn + mlp + 4.0
    replicated = 8.0 + 2.0 * d  # two norm inputs, two block inputs, two dropout masks
    return total - replicated, replicated


def activation_bytes_per_layer(
    *,
    seq_len: Any,
    microbatch_size: Any,
    hidden: Any,
    heads: Any,
    tp: Any,
    sequence_parallel: Any,
    recompute: Any,
    flash_attention: Any,
    ffn_hidden: Any = None,
    kv_ratio: Any = 1.0,
    gated: Any = False,
    dropout: Any = True,
    cp: Any = 1,
) -> np.ndarray:
    """Activation bytes of one layer for one microbatch on one GPU (module docstring; 16-bit).

    Defaults are Korthikanti et al.'s GPT (f = 4h, multi-head attention, dropout).
    """
    s, b, h, a, t, c = (np.asarray(x, dtype=float) for x in (seq_len, microbatch_size, hidden, heads, tp, cp))
    f = 4.0 * h if ffn_hidden is None else np.asarray(ffn_hidden, dtype=float)
    sp = np.asarray(sequence_parallel, dtype=bool)
    rc = np.asarray(recompute)
    sbh = s * b * h / c
    shard, rep = activation_units(hidden=h, ffn_hidden=f, kv_ratio=kv_ratio, gated=gated, dropout=dropout)
    linear = np.where(sp, (shard + rep) / t, rep + shard / t)
    score_units = 2.0 + 3.0 * np.asarray(dropout, dtype=float)  # softmax out (+ mask and dropout out)
    scores = np.where(np.asarray(flash_attention, dtype=bool) | (rc >= 1), 0.0, score_units * a * s / (h * t))
    full = np.where(sp, 2.0 / t, 2.0)
    return sbh * np.where(rc == 2, full, linear + scores)


def first_stage_layers(layers: Any, pp: Any) -> np.ndarray:
    """Layers of the first (and last) pipeline stage under the balanced split (module docstring)."""
    L, p = np.asarray(layers, dtype=float), np.asarray(pp, dtype=float)
    middle = np.ceil(L / p)
    ends = (L - (p - 2.0) * middle) / 2.0
    return np.where(p <= 1, L, np.where(p == 2, L / 2.0, np.where(ends >= 1.0, ends, np.floor(L / p))))


def in_flight_chunks(pp: Any, microbatches: Any, virtual_stages: Any, *, last: bool = False) -> np.ndarray:
    """Model chunks whose activations the first (or last) rank holds at its peak (module docstring)."""
    p, m, v = (np.asarray(x, dtype=float) for x in (pp, microbatches, virtual_stages))
    warm = (v - 1.0) * p + (0.0 if last else 2.0 * (p - 1.0)) + 1.0
    interleaved = np.minimum(m * v, warm)
    plain = np.minimum(1.0 if last else p, m) + 0.0 * p  # (+ 0 p: the shape of p for scalar m)
    return np.where(v > 1, interleaved, plain)


def per_gpu_memory(
    *,
    dense_params: Any,
    expert_params: Any,
    layers: Any,
    hidden: Any,
    heads: Any,
    seq_len: Any,
    vocab: Any,
    tp: Any,
    pp: Any,
    dp: Any,
    ep: Any,
    zero_stage: Any,
    microbatch_size: Any,
    microbatches: Any,
    virtual_stages: Any,
    sequence_parallel: Any,
    recompute: Any,
    flash_attention: Any,
    hbm_gib: Any,
    reserve_gib: Any,
    bytes_per_param: tuple[Any, Any, Any] = MAIN_GRAD_BYTES["bf16"],
    cp: Any = 1,
    ffn_hidden: Any = None,
    kv_ratio: Any = 1.0,
    gated: Any = False,
    dropout: Any = True,
) -> MemoryBreakdown:
    """Memory of the busiest pipeline stage per GPU (module docstring; arrays broadcast)."""
    tp_, pp_, dp_, ep_, z, c = (np.asarray(x, dtype=float) for x in (tp, pp, dp, ep, zero_stage, cp))
    L, h, V = (np.asarray(x, dtype=float) for x in (layers, hidden, vocab))
    dense = np.asarray(dense_params, dtype=float)
    embed = V * h  # one untied embedding (input on the first stage, output on the last)
    layer_dense = np.maximum(dense - 2.0 * embed, 0.0) / L
    L1 = first_stage_layers(L, pp_)
    single = pp_ <= 1
    stage_dense = (L1 * layer_dense + np.where(single, 2.0, 1.0) * np.minimum(embed, dense / 2.0)) / tp_
    stage_expert = np.asarray(expert_params, dtype=float) * L1 / L / (tp_ * ep_)
    w, g, o = _sharded_states(stage_dense, stage_expert, dp_ * c, ep_, z, bytes_per_param)
    # ZeRO 3: the gathered unit and the prefetched next, and one unsharded gradient unit.
    wb, gb, _ = bytes_per_param
    unit = (layer_dense + np.asarray(expert_params, dtype=float) / L / ep_) / tp_
    w = w + np.where(z >= 3, 2.0 * unit * np.asarray(wb), 0.0)
    g = g + np.where(z >= 3, unit * np.asarray(gb), 0.0)
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len,
        microbatch_size=microbatch_size,
        hidden=hidden,
        heads=heads,
        tp=tp,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        flash_attention=flash_attention,
        ffn_hidden=ffn_hidden,
        kv_ratio=kv_ratio,
        gated=gated,
        dropout=dropout,
        cp=cp,
    )
    v = np.asarray(virtual_stages, dtype=float)
    first = per_layer * in_flight_chunks(pp_, microbatches, v) * L1 / v
    logits = 4.0 * np.asarray(seq_len, dtype=float) * np.asarray(microbatch_size, dtype=float) * V / (tp_ * c)
    last = per_layer * in_flight_chunks(pp_, microbatches, v, last=True) * L1 / v + logits
    act = np.where(single, first + logits, np.maximum(first, last))
    cap = np.asarray(hbm_gib, dtype=float) * GIB
    reserve = np.asarray(reserve_gib, dtype=float) * GIB
    total = w + g + o + act + reserve
    return MemoryBreakdown(
        weights_bytes=w,
        grads_bytes=g,
        optimizer_bytes=o,
        activations_bytes=act,
        reserve_bytes=reserve,
        total_bytes=total,
        capacity_bytes=cap,
    )
