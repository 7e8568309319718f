"""Compute efficiency of a transformer layer from its GEMM shapes (docs/models.md, "Compute efficiency").

The compute part of a training step (executed FLOPs over peak while computing, the
quantity plan.anchor solves for) is predicted per layer and microbatch on one GPU:

- GEMMs: the layer's matmuls (QKV, output projection, MLP up/gate and down), forward
  and backward (3x), each on a roofline: ``t = max(2 M N K / (peak e_gemm), bytes / HBM)``
  with M = microbatch x sequence / cp tokens, the weight dimension split by tp, and
  ``e_gemm`` the best large-GEMM efficiency cuBLAS reaches on that generation and
  precision (``GEMM_EFFICIENCY``, from public GEMM benchmarks). FP8 GEMMs also pay the
  cast of their bf16 activation input (read 2 B, write 1 B per element: Transformer
  Engine's ``cast_to_fp8`` before each GEMM).
- Attention scores (QK^T and AV, the 12 L h s term of the MFU convention: PaLM, Chowdhery
  et al. 2022, arXiv:2204.02311, appendix B; Narayanan et al. SC'21 eq. 3): causal
  FlashAttention computes half of the counted FLOPs, at ``ATTENTION_EFFICIENCY`` of the
  bf16 peak (FP8 recipes keep attention in bf16: NVIDIA Transformer Engine FP8 recipe).
  Without FlashAttention (``workload.flash_attention: false``, Megatron before 2022) the
  scores are two batched GEMMs per head (s x s x d and s x d x s, all of them: the causal
  mask is applied after) on the roofline, and the softmax, mask and dropout make
  ``SOFTMAX_PASSES`` passes over the a s^2 scores (2 bytes each) at the HBM bandwidth.
- Memory-bound work (norms, residual adds, activation functions, rotary embedding,
  dropout): ``ELEMENTWISE_PASSES`` passes over the layer's stored activations
  (model.memory's count) at the HBM bandwidth.
- ``FRAMEWORK_EFFICIENCY`` covers what is neither (kernel launch gaps, the optimizer step,
  host synchronisation): one constant fitted on public per-run figures (docs/accuracy.md,
  "Training throughput": the fit and held-out rows and their errors).

The result never exceeds the GEMM efficiency of the generation (a ceiling, asserted in
tests): attention and memory-bound work only add time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Best large-GEMM efficiency (achieved / dense peak) by generation and precision.
#: [S] H100 fp8: 1,600-1,630 of 1,979 TFLOP/s for 8192^3 cuBLASLt E4M3 GEMMs (public
#: cross-check report reports_cublaslt_fp8_crosscheck_20260524.md, gitea.d-robotics.cc,
#: 2026-05). [U] A100 bf16 ~270 of 312 and H100 bf16 ~750 of 989 for large cuBLAS GEMMs:
#: public GEMM benchmark posts as commonly quoted (NVIDIA's cuBLAS 12.0 Hopper blog,
#: developer.nvidia.com/blog/new-cublas-12-0-features-and-matrix-multiplication-performance-
#: on-nvidia-hopper-gpus, 2023, shows the H100/A100 ratios), not re-measured here.
#: Blackwell [U, estimate]: the Hopper fractions (no public per-shape table found).
GEMM_EFFICIENCY = {
    "ampere": {"bf16": 0.87, "fp16": 0.87, "fp8": 0.87, "fp32": 0.80},
    "ada": {"bf16": 0.80, "fp16": 0.80, "fp8": 0.75, "fp32": 0.75},
    "hopper": {"bf16": 0.76, "fp16": 0.76, "fp8": 0.81, "fp32": 0.70},
    "blackwell": {"bf16": 0.76, "fp16": 0.76, "fp8": 0.78, "fp32": 0.70},
}
#: FlashAttention forward + backward efficiency against the bf16 peak, causal, head dim 128.
#: [S] A100: FlashAttention-2 (Dao 2023, arXiv:2307.08691, fig. 6) ~190 of 312 TFLOP/s
#: at 8k; H100: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608, figs. 5-6) forward
#: ~650, backward ~500 of 989 at 8k-16k; Blackwell [U]: the Hopper fraction.
ATTENTION_EFFICIENCY = {"ampere": 0.60, "ada": 0.50, "hopper": 0.55, "blackwell": 0.55}
#: HBM passes over the a s^2 attention scores without FlashAttention, forward and backward
#: (Megatron's fused scale-mask-softmax reads and writes them once each way): fitted by
#: scripts/training_accuracy.py --fit on the fit rows (grid 2-8).
SOFTMAX_PASSES = 2.0
#: HBM passes over the stored activations by the memory-bound kernels, forward and backward
#: (each stored tensor is written once forward and read once backward; fused kernels add
#: little more): fitted by scripts/training_accuracy.py --fit on the fit rows (grid 1-6).
ELEMENTWISE_PASSES = 2.0
#: Fraction of the layer time that is layer compute (launch gaps, optimizer, host):
#: fitted by scripts/training_accuracy.py on the fit rows of docs/accuracy.md.
FRAMEWORK_EFFICIENCY = 0.78
#: Fraction of the HBM bandwidth memory-bound kernels reach [S: STREAM-like copies reach
#: ~90% of H100's 3.35 TB/s, public H100 bandwidth benchmarks].
HBM_EFFICIENCY = 0.9
#: Idle fraction of a wave expected at the end of a GEMM, in SMs [U, estimate: half a wave
#: for a plain tiled kernel, less with cuBLAS's stream-K / persistent schedules].
TAIL_WAVE = 0.25
#: Output tile of the GEMM kernels (M x N) [S: CUTLASS 3 Hopper default 128 x 256 tiles].
TILE_M, TILE_N = 128.0, 256.0
#: Streaming multiprocessors per GPU by generation [S: NVIDIA architecture whitepapers: A100
#: 108, L40S 142, H100 SXM 132, B200 148].
SMS = {"ampere": 108, "ada": 142, "hopper": 132, "blackwell": 148}
#: GPU generation per catalog id (the catalog entry names the product; the generation sets
#: which published kernel efficiencies apply). Unknown ids are taken as Hopper.
GENERATION = {
    "a100-sxm": "ampere",
    "l40s": "ada",
    "h100-sxm": "hopper",
    "h200": "hopper",
    "b200": "blackwell",
    "b300": "blackwell",
    "gb200": "blackwell",
    "gb300": "blackwell",
}


def generation_of(gpu_id: str, declared: str | None = None) -> str:
    """The GPU generation: the catalog entry's ``generation`` when it declares one, else by id
    (``GENERATION``; Hopper when unknown)."""
    return declared or GENERATION.get(gpu_id, "hopper")


def gemm_efficiency(gpu: Any, generation: str, precision: str) -> float:
    """e_max of ``_gemm_time`` for ``gpu``: its measured bf16/fp16 figure where the catalog
    has one (``gpus.<id>.gemm_efficiency``, written by ``calibrate`` from a ``bench gpu`` run),
    else the published one of its generation (``GEMM_EFFICIENCY``; fp8 and fp32 always)."""
    measured = getattr(gpu, "gemm_efficiency", None)
    if measured is not None and precision in ("bf16", "fp16"):
        return float(measured)
    return GEMM_EFFICIENCY[generation][precision]


def implied_gemm_efficiency(*, m: int, n: int, k: int, seconds: float, peak_tflops: float, generation: str) -> float:
    """The e_max under which ``_gemm_time``'s compute term reproduces one measured forward GEMM:
    its achieved fraction of peak with the tail wave taken back out, at most 1."""
    tiles = np.ceil(m / TILE_M) * np.ceil(n / TILE_N)
    achieved = 2.0 * m * n * k / seconds / (peak_tflops * 1e12)
    return float(min(1.0, achieved * (tiles + TAIL_WAVE * SMS[generation]) / tiles))


def _gemm_time(M: Any, N: Any, K: Any, *, peak: Any, e_max: Any, hbm: Any, fp8: Any, sms: Any) -> np.ndarray:
    """Forward + backward time of one M x K x N GEMM (3 GEMMs of the same size) on a roofline, s."""
    flops = 2.0 * M * N * K
    tiles = np.ceil(M / TILE_M) * np.ceil(N / TILE_N)
    e_max = e_max * tiles / (tiles + TAIL_WAVE * sms)
    in_b = np.where(fp8, 1.0, 2.0)
    moved = in_b * (M * K + K * N) + 2.0 * M * N + np.where(fp8, 3.0 * M * K, 0.0)
    return 3.0 * np.maximum(flops / (peak * e_max), moved / hbm)


def layer_efficiency(
    *,
    hidden: Any,
    ffn_hidden: Any,
    kv_ratio: Any,
    gated: Any,
    seq_len: Any,
    microbatch_size: Any,
    tp: Any,
    cp: Any,
    layer_params: Any,
    activation_bytes: Any,
    recompute: Any,
    peak_tflops: Any,
    peak_bf16_tflops: Any,
    hbm_gbps: Any,
    gemm_efficiency: Any,
    attention_efficiency: Any,
    fp8: Any,
    sms: Any = SMS["hopper"],
    heads: Any = None,
    flash_attention: Any = True,
    expert_tokens: Any = 1.0,
    local_experts: Any = 1.0,
) -> np.ndarray:
    """Compute efficiency (executed FLOPs / (peak x compute time)) of one layer (module docstring).

    ``layer_params``: the layer's active parameters (its GEMM FLOPs: 6 per token each,
    forward and backward); ``activation_bytes``: what the layer stores for one microbatch on
    one GPU without recomputation (model.memory). ``recompute`` 0/1/2 as model.flops.
    ``expert_tokens``: tokens each local expert's GEMMs see per microbatch token (MoE:
    top_k x ep / experts, Megatron's grouped GEMM over the tokens the all-to-all brought; 1
    for a dense MLP); ``local_experts``: how many experts each GPU runs (experts / ep).
    """
    h, f, g = (np.asarray(x, dtype=float) for x in (hidden, ffn_hidden, kv_ratio))
    t, c = np.asarray(tp, dtype=float), np.asarray(cp, dtype=float)
    M = np.asarray(seq_len, dtype=float) * np.asarray(microbatch_size, dtype=float) / c
    peak = np.asarray(peak_tflops, dtype=float) * 1e12
    hbm = np.asarray(hbm_gbps, dtype=float) * 1e9 * HBM_EFFICIENCY
    e = np.asarray(gemm_efficiency, dtype=float)
    fp8 = np.asarray(fp8, dtype=bool)
    gate = np.where(np.asarray(gated, dtype=bool), 2.0, 1.0)
    kw = dict(peak=peak, e_max=e, hbm=hbm, fp8=fp8, sms=np.asarray(sms, dtype=float))
    Me = M * np.asarray(expert_tokens, dtype=float)
    shapes = (  # (M, N, K) of QKV, output projection, MLP in (gate + up), MLP out
        (M, h * (1.0 + 2.0 * g) / t, h),
        (M, h, h / t),
        (Me, f * gate / t, h),
        (Me, h, f / t),
    )
    # Time per FLOP of the layer's GEMMs, each weighted by its share of the GPU's work
    # (the MLP GEMMs once per local expert).
    le = np.asarray(local_experts, dtype=float)
    count: tuple[Any, ...] = (1.0, 1.0, le, le)
    shape_flops = sum(c * 6.0 * m * n * k for c, (m, n, k) in zip(count, shapes, strict=True))
    shape_time = sum(c * _gemm_time(m, n, k, **kw) for c, (m, n, k) in zip(count, shapes, strict=True))
    # The layer's real parameters (MoE, odd shapes) set the FLOPs; the four shapes set their speed.
    gemm_flops = 6.0 * M * np.asarray(layer_params, dtype=float) / t
    t_gemm = shape_time * gemm_flops / shape_flops
    s_k = np.asarray(seq_len, dtype=float)
    attn_flops = 12.0 * M * s_k * h / t
    bf16 = np.asarray(peak_bf16_tflops, dtype=float) * 1e12
    t_flash = 0.5 * attn_flops / (bf16 * np.asarray(attention_efficiency, dtype=float))
    a = h / 128.0 if heads is None else np.asarray(heads, dtype=float)
    d = h / a
    mb = np.asarray(microbatch_size, dtype=float)
    # Per head and sequence: QK^T (M_q x s_k x d) and AV (M_q x d x s_k), in bf16.
    kw16 = dict(peak=bf16, e_max=e, hbm=hbm, fp8=False, sms=np.asarray(sms, dtype=float))
    per_head = _gemm_time(M / mb, s_k, d, **kw16) + _gemm_time(M / mb, d, s_k, **kw16)
    softmax = SOFTMAX_PASSES * 2.0 * (M / mb) * s_k / hbm
    t_plain = (a / t) * mb * (per_head + softmax)
    t_attn = np.where(np.asarray(flash_attention, dtype=bool), t_flash, t_plain)
    t_elem = ELEMENTWISE_PASSES * np.asarray(activation_bytes, dtype=float) / hbm
    rc = np.asarray(recompute)
    # Recomputation re-runs a forward (1/3 of the GEMM and elementwise work; selective:
    # attention only) at the same efficiency as the first.
    redo_gemm = np.where(rc == 2, 1.0 / 3.0, 0.0)
    redo_attn = np.where(rc >= 1, 1.0 / 3.0, 0.0)
    flops = gemm_flops * (1 + redo_gemm) + attn_flops * (1 + redo_attn)
    time = (t_gemm + t_elem) * (1 + redo_gemm) + t_attn * (1 + redo_attn)
    return np.minimum(FRAMEWORK_EFFICIENCY * flops / (peak * time), e)
