"""Per-GPU memory of a training layout (docs/models.md, "Memory").

- Model states (Rajbhandari et al., "ZeRO", SC'20, arXiv:1910.02054, sec. 3.1 and
  Table 1): mixed-precision Adam holds 2 bytes of weights, 2 of gradients and K = 12
  of optimizer state (fp32 master weights, momentum, variance) per parameter. ZeRO
  stage 1 shards the optimizer state over the data-parallel ranks, 2 the gradients
  too, 3 the weights too (PyTorch FSDP full sharding = stage 3). fp32 training keeps
  4 + 4 + 8. Parameters split over tp x pp (experts over tp x pp x ep, and ZeRO shards
  them over dp / ep).
- Activations per layer and microbatch (Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", MLSys 2023, arXiv:2205.05198, eqs. 1-2 and
  Table 2), 16-bit, s sequence, b microbatch, h hidden, a heads, t tp:
  none  s b h (34/t + 5 a s / (h t)) with sequence parallelism, s b h (10 + 24/t + 5 a s/(h t)) without;
  selective drops the 5 a s / h term (so does FlashAttention, which never stores the
  s x s scores: Dao et al. 2022, arXiv:2205.14135); full keeps the layer input only,
  2 s b h / t (sequence parallel) or 2 s b h.
- Pipeline in flight (Korthikanti sec. 4.2.3): with 1F1B the first stage holds min(pp, m)
  microbatches of its L/pp layers, i.e. about L layers' worth; interleaving with v
  virtual stages multiplies that by 1 + (pp - 1) / (pp v). The last stage holds one
  microbatch plus the fp32 logits of the loss, 4 s b V / t (Korthikanti sec. 4.1). The
  busier of the two is taken.
- A framework reserve (CUDA context, NCCL buffers, allocator fragmentation) is held back
  from the HBM: by default 10% of it [U, estimate; PyTorch's caching allocator and NCCL
  typically hold several GiB on an 80 GiB GPU].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

GIB = 2.0**30
#: Default framework reserve as a fraction of HBM [U, estimate].
RESERVE_FRACTION = 0.10
#: Bytes per parameter (weights, gradients, optimizer) by precision: ZeRO paper sec. 3.1
#: (mixed precision, K = 12); fp32 training: 4 + 4 + 8 (Adam m, v).
STATE_BYTES = {"bf16": (2.0, 2.0, 12.0), "fp16": (2.0, 2.0, 12.0), "fp8": (2.0, 2.0, 12.0), "fp32": (4.0, 4.0, 8.0)}


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
    bytes_per_param: tuple[Any, Any, Any] = STATE_BYTES["bf16"],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights, gradients and optimizer bytes per GPU under ZeRO ``zero_stage``."""
    tp, pp, dp, ep, z = (np.asarray(x, dtype=float) for x in (tp, pp, dp, ep, zero_stage))
    dense = np.asarray(dense_params, dtype=float) / (tp * pp)
    expert = np.asarray(expert_params, dtype=float) / (tp * pp * ep)
    dp_expert = np.maximum(dp / ep, 1.0)
    w, g, o = bytes_per_param

    def sharded(per_param: float, stage: int) -> np.ndarray:
        on = z >= stage
        return per_param * (np.where(on, dense / dp, dense) + np.where(on, expert / dp_expert, expert))

    return sharded(w, 3), sharded(g, 2), sharded(o, 1)


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
) -> np.ndarray:
    """Korthikanti et al. 2022 activation bytes of one layer for one microbatch (16-bit)."""
    s, b, h, a, t = (np.asarray(x, dtype=float) for x in (seq_len, microbatch_size, hidden, heads, tp))
    sp = np.asarray(sequence_parallel, dtype=bool)
    rc = np.asarray(recompute)
    sbh = s * b * h
    linear = np.where(sp, 34.0 / t, 10.0 + 24.0 / t)
    scores = np.where(np.asarray(flash_attention, dtype=bool) | (rc >= 1), 0.0, 5.0 * a * s / (h * t))
    full = np.where(sp, 2.0 / t, 2.0)
    return sbh * np.where(rc == 2, full, linear + scores)


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
    bytes_per_param: tuple[Any, Any, Any] = STATE_BYTES["bf16"],
) -> MemoryBreakdown:
    """Memory of the busiest pipeline stage per GPU (module docstring; arrays broadcast)."""
    w, g, o = model_state_bytes(
        dense_params=dense_params,
        expert_params=expert_params,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        zero_stage=zero_stage,
        bytes_per_param=bytes_per_param,
    )
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len,
        microbatch_size=microbatch_size,
        hidden=hidden,
        heads=heads,
        tp=tp,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        flash_attention=flash_attention,
    )
    pp_, v, m = (np.asarray(x, dtype=float) for x in (pp, virtual_stages, microbatches))
    # Layers of the busiest stage: Megatron needs whole layers per virtual stage.
    layers_stage = np.ceil(np.asarray(layers, dtype=float) / (pp_ * v)) * v
    interleave = np.where(v > 1, 1.0 + (pp_ - 1) / (pp_ * v), 1.0)
    first = per_layer * layers_stage * np.minimum(pp_, m) * interleave
    logits = (
        4.0
        * np.asarray(seq_len, dtype=float)
        * np.asarray(microbatch_size, dtype=float)
        * np.asarray(vocab)
        / np.asarray(tp, dtype=float)
    )
    last = per_layer * layers_stage + logits
    act = np.maximum(first, last)
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
