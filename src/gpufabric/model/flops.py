"""FLOPs of a training step: what the GPUs execute, and what a published figure counts.

Two conventions (docs/models.md, "Throughput and FLOPs"):

- ``6pt``: 6 x P x T (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
  arXiv:2001.08361, sec. 2.1): forward 2 P T, backward 4 P T; no attention scores, no
  recomputation. P is the active parameter count (MoE: what one token uses).
- ``megatron``: Narayanan et al. SC'21 ("Efficient Large-Scale Language Model Training
  on GPU Clusters Using Megatron-LM", arXiv:2104.04473), eq. 3: per token and layer
  the forward pass is 24 h^2 + 4 s h (matmuls + attention scores QK^T and AV over the
  full sequence), the logit layer 2 h V; training runs the forward once and the
  backward (2x forward) once, and full recomputation runs the layers' forward again:
  96 B s l h^2 (1 + s/(6h) + V/(16 l h)). We replace 24 l h^2 by 2 x the layers'
  active parameters (so GQA, SwiGLU and MoE shapes count what they hold) and count
  recomputation as configured: none adds nothing, selective (Korthikanti et al. 2022,
  arXiv:2205.05198, sec. 5) re-runs the attention scores (4 s h per token and layer),
  full re-runs the layers' forward.

The *executed* FLOPs, which set the compute time, are the megatron count with the
recomputation the layout actually uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Recomputation codes used in vectorised tables.
RECOMPUTE = ("none", "selective", "full")


def active_params(
    params: float, *, experts: int = 1, top_k: int = 1, expert_params: float | None = None, active: float | None = None
) -> float:
    """Parameters one token uses: the dense part plus top_k / experts of the expert part."""
    if active is not None:
        return float(active)
    if experts > 1 and expert_params is not None:
        return float(params - expert_params + expert_params * top_k / experts)
    return float(params)


def expert_params_of(
    params: float, *, experts: int = 1, top_k: int = 1, expert_params: float | None = None, active: float | None = None
) -> float:
    """Parameters held in experts (0 for a dense model); from active_params when that is what was given."""
    if experts <= 1:
        return 0.0
    if expert_params is not None:
        return float(expert_params)
    # active = dense + E_total k / E and params = dense + E_total  =>  E_total = (params - active) / (1 - k/E).
    return float((params - active) / (1.0 - top_k / experts)) if active is not None else 0.0


def layer_params(params_active: Any, hidden: Any, vocab: Any) -> np.ndarray:
    """Active parameters of the transformer layers: params less the (untied) input and output embeddings."""
    return np.maximum(np.asarray(params_active, dtype=float) - 2.0 * np.asarray(vocab) * np.asarray(hidden), 0.0)


def flops_per_token(
    *,
    params_active: Any,
    layers: Any,
    hidden: Any,
    seq_len: Any,
    vocab: Any,
    recompute: Any,
    convention: str = "megatron",
) -> np.ndarray:
    """Training FLOPs per token.

    Args:
        recompute: code per row (0 none, 1 selective, 2 full; ``RECOMPUTE``).
        convention: ``megatron`` (executed work) or ``6pt``.
    """
    if convention == "6pt":
        return 6.0 * np.asarray(params_active, dtype=float) + 0.0 * np.asarray(recompute)
    p_layers = layer_params(params_active, hidden, vocab)
    attn = 4.0 * np.asarray(seq_len, dtype=float) * np.asarray(hidden, dtype=float) * np.asarray(layers, dtype=float)
    fwd_layers = 2.0 * p_layers + attn
    logit = 2.0 * np.asarray(hidden, dtype=float) * np.asarray(vocab, dtype=float)
    rc = np.asarray(recompute)
    extra = np.where(rc == 2, fwd_layers, np.where(rc == 1, attn, 0.0))
    return 3.0 * (fwd_layers + logit) + extra


def attention_flops_per_token(*, layers: Any, hidden: Any, seq_len: Any, recompute: Any) -> np.ndarray:
    """The attention-score part (QK^T and AV, 4 s h per layer forward) of the executed count:
    forward, backward (2x) and what recomputation re-runs (both selective and full re-run it)."""
    fwd = 4.0 * np.asarray(seq_len, dtype=float) * np.asarray(hidden, dtype=float) * np.asarray(layers, dtype=float)
    return fwd * np.where(np.asarray(recompute) >= 1, 4.0, 3.0)


def megatron_eq3_flops(*, batch: float, seq_len: float, layers: float, hidden: float, vocab: float) -> float:
    """Narayanan et al. SC'21 eq. 3 verbatim (full recomputation, GPT shapes), for tests."""
    B, s, L, h, V = batch, seq_len, layers, hidden, vocab
    return 96.0 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
