"""Training-step model.

``StepBreakdown`` is the contract between the planner (which computes it for every
candidate design) and the simulator (which draws step-time distributions from it).
Below it, the step-time formulas the planner evaluates (docs/models.md "Training step").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True, kw_only=True)
class StepBreakdown:
    """Where the time of one synchronous training step goes, for one candidate design.

    All times are means without jitter; the jitter fields say how much the
    latency-bound parts vary per dependent step, ``compute_cv`` how much per-rank compute
    varies, and the hiccup fields how often one rank is delayed by how much. The planner's
    tail and goodput closed forms and the simulator (``sim.config_from_breakdown``) read
    the same fields, so they describe the same step (docs/simulation.md, agreement).
    """

    step_time_s: float  # deterministic mean step time (compute + bubble + exposed comm)
    compute_s: float  # per-rank compute per step
    bubble_s: float  # pipeline bubble per step
    comm_exposed_s: float  # communication not hidden behind compute
    dependent_latency_steps: int  # latency-bound dependent steps on the critical path per step
    latency_per_step_s: float  # mean per-dependent-step latency (alpha) of the scale-out fabric
    jitter_per_step_s: float  # std-dev of that per-step latency (fabric jitter)
    num_ranks: int
    num_nodes: int
    nodes_per_leaf: int  # nodes sharing one leaf switch (correlated-jitter group)
    checkpoint_write_s: float  # time to write one checkpoint to the storage backend
    checkpoint_block_s: float  # time one checkpoint blocks training (sync: write; async: snapshot)
    checkpoint_interval_s: float  # wall time between checkpoints
    checkpoint_async: bool  # async: block = snapshot (+ backlog), the write drains in the background
    restart_s: float  # time from a failure to training again
    job_mttf_s: float  # mean time between failures of the whole job
    compute_cv: float  # per-rank compute-time coefficient of variation (std / compute_s)
    hiccup_prob: float  # per rank per step: probability of a hiccup (congestion included)
    hiccup_s: float  # extra delay of the one rank that hiccups
    checkpoint_lag_s: float  # from the end of a checkpoint's block until it is durable (a
    # failure inside it also loses the previous interval)
    checkpoint_drain_slowdown: float = 0.0  # async: fractional step slowdown while a drain runs


# ---------------------------------------------------------------------------------
# Step-time formulas (vectorisable). Sources in docs/models.md.

#: Bytes per activation/gradient element by precision (fp8 training keeps bf16 grads).
ACT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
GRAD_BYTES = {"bf16": 2, "fp16": 2, "fp8": 2, "fp32": 4}
#: Fraction of the last microbatch's backward that the bucketed DP gradient reduction
#: can hide behind (PyTorch DDP / Megatron overlap_grad_reduce) [U, estimate].
DP_OVERLAP_EFFICIENCY = 0.8


def training_flops_per_step(params: np.ndarray | float, tokens: np.ndarray | float) -> np.ndarray:
    """Model FLOPs of one step: 6 P T (Kaplan et al. 2020; the MFU convention of the spec)."""
    return 6.0 * np.asarray(params, dtype=float) * np.asarray(tokens, dtype=float)


def compute_time_s(flops: object, num_gpus: object, peak_tflops: object, efficiency: object) -> np.ndarray:
    """Per-rank compute time of one step: executed F / (N peak efficiency)."""
    return np.asarray(flops) / (np.asarray(num_gpus) * np.asarray(peak_tflops) * 1e12 * np.asarray(efficiency))


def tp_collectives_per_layer(recompute: object) -> np.ndarray:
    """Tensor-parallel collectives per layer and microbatch on Megatron's schedule.

    Forward: one after attention, one after the MLP (the g operators of Shoeybi et al.
    2019, "Megatron-LM", arXiv:1909.08053, fig. 4); backward: the two conjugate f
    operators; full recomputation runs the forward's two again (Korthikanti et al. 2022,
    sec. 4.2.2: "6 all-reduces" per layer). With sequence parallelism each all-reduce is
    an all-gather + reduce-scatter pair of the same bytes (Korthikanti sec. 4.2.2).
    """
    return np.where(np.asarray(recompute) == 2, 6.0, 4.0)


def ep_all_to_alls_per_layer(recompute: object) -> np.ndarray:
    """Expert-parallel all-to-alls per MoE layer and microbatch: dispatch and combine in the
    forward and again in the backward (Lepikhin et al. 2020, "GShard", arXiv:2006.16668,
    sec. 2.2; Fedus et al. 2022, "Switch Transformers"), plus the forward's pair again
    under full recomputation."""
    return np.where(np.asarray(recompute) == 2, 6.0, 4.0)


def zero_dp_factor(zero_stage: object) -> np.ndarray:
    """Data-parallel traffic relative to an all-reduce of the gradients: ZeRO 1 and 2
    (reduce-scatter + all-gather) move the same bytes, ZeRO 3 gathers the weights once
    more for the backward: 1.5x (Rajbhandari et al. 2020, arXiv:1910.02054, sec. 7)."""
    return np.where(np.asarray(zero_stage) >= 3, 1.5, 1.0)


#: Compute slowdown while collectives run beside it: NCCL kernels hold SMs and HBM
#: bandwidth, so a GEMM overlapped with communication runs 18.9% slower on average
#: (max 40%) on H100, A100, MI250 and MI210, against the same GEMM with no communication
#: beside it (Lee et al., "Characterizing Compute-Communication Overlap in GPU-Accelerated
#: Distributed Deep Learning", arXiv:2507.03114, as_of 2025-07) [S]. A hidden reduction is
#: therefore not free: a slower (congested) one keeps the compute slowed for longer.
OVERLAP_COMPUTE_SLOWDOWN = 0.189


def overlap_interference_s(hidden_s: object) -> np.ndarray:
    """Extra compute time from ``hidden_s`` of communication overlapped with it (first order:
    the compute beside the collective runs OVERLAP_COMPUTE_SLOWDOWN slower)."""
    return OVERLAP_COMPUTE_SLOWDOWN * np.maximum(0.0, np.asarray(hidden_s, dtype=float))


def exposed_with_interference_s(dp_time_s: object, exposed_s: object) -> np.ndarray:
    """Time a DP reduction adds to the step once the compute it overlaps is slowed.

    ``exposed_s`` is what outlasts the overlap window (``exposed_dp_s``, ``exposed_zero3_s``),
    ``dp_time_s - exposed_s`` the part hidden in it. The window's compute runs slower while
    the reduction runs beside it (``overlap_interference_s`` of the hidden part), but the
    reduction's exposed tail and that extra compute run at the same time, one after the
    window's nominal end: the step waits for the later of the two, not for their sum. A
    reduction that is all hidden costs its interference; one that outlasts its window by
    more than the interference costs only its exposed tail (the slowed compute finishes
    while the reduction is still on the wire, off the critical path).
    """
    exposed = np.maximum(0.0, np.asarray(exposed_s, dtype=float))
    return np.maximum(exposed, overlap_interference_s(np.asarray(dp_time_s, dtype=float) - exposed))


def bubble_time_s(compute_s: object, pp: object, microbatches: object, virtual_stages: object = 1) -> np.ndarray:
    """1F1B pipeline bubble: compute * (pp - 1) / (v m), v interleaved stages (Narayanan et al. SC'21)."""
    return np.asarray(compute_s) * (np.asarray(pp) - 1) / (np.asarray(virtual_stages) * np.asarray(microbatches))


def exposed_dp_s(dp_time_s: object, compute_s: object, microbatches: object) -> np.ndarray:
    """DP reduction not hidden behind the last microbatch's backward (2/3 of its compute)."""
    window = DP_OVERLAP_EFFICIENCY * (2.0 / 3.0) * np.asarray(compute_s) / np.asarray(microbatches)
    return np.maximum(0.0, np.asarray(dp_time_s) - window)


def zero3_dp_s(*, weights_allreduce_s: object, grads_allreduce_s: object, microbatches: object) -> np.ndarray:
    """ZeRO 3 / FSDP data-parallel time per step: every microbatch all-gathers the weights for
    its forward and again for its backward and reduce-scatters its gradients (PyTorch FSDP
    without no_sync, torchtitan's default; Zhao et al. 2023, "PyTorch FSDP", arXiv:2304.11277,
    sec. 3). A ring all-gather or reduce-scatter moves half an all-reduce's bytes
    (nccl-tests PERFORMANCE.md bus factors (n-1)/n against 2(n-1)/n)."""
    per_mb = 0.5 * (2.0 * np.asarray(weights_allreduce_s) + np.asarray(grads_allreduce_s))
    return per_mb * np.asarray(microbatches)


def exposed_zero3_s(dp_time_s: object, compute_s: object) -> np.ndarray:
    """ZeRO 3 traffic not hidden behind compute: FSDP prefetches the next unit's gather during
    the current unit's compute, so each microbatch hides up to DP_OVERLAP_EFFICIENCY of its
    compute (the same overlap fraction as the bucketed reduction)."""
    return np.maximum(0.0, np.asarray(dp_time_s) - DP_OVERLAP_EFFICIENCY * np.asarray(compute_s))


def ring_attention_exposed_s(*, kv_hop_s: object, cp: object, attention_fwd_s: object) -> np.ndarray:
    """Exposed ring-attention traffic per layer and microbatch (Liu et al. 2023, "Ring
    Attention", arXiv:2310.01889; Megatron Core context parallelism): the forward passes
    each rank's K and V chunk cp - 1 times around the ring, the backward the K, V and their
    gradients (2x); each pass overlaps the attention of one chunk (attention / cp), so only
    what exceeds it is exposed."""
    c = np.asarray(cp, dtype=float)
    per_chunk = np.asarray(attention_fwd_s) / c
    fwd = (c - 1.0) * np.maximum(0.0, np.asarray(kv_hop_s) - per_chunk)
    bwd = (c - 1.0) * np.maximum(0.0, 2.0 * np.asarray(kv_hop_s) - 2.0 * per_chunk)
    return fwd + bwd
