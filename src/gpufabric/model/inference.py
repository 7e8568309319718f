"""Analytic model of LLM inference serving (docs/models.md, section "Inference serving").

Formulas, vectorisable with numpy (sizes in bytes, times in seconds):

- KV cache per token ``2 * layers * kv_heads * head_dim * kv_bytes`` (keys and values of
  every layer; Kwon et al., "Efficient Memory Management for LLM Serving with
  PagedAttention" (vLLM), SOSP'23, section 2). Llama-3-70B in bf16: 320 KiB per token.
- Prefill is compute-bound: ``2 P L + 2 layers hidden L^2`` FLOPs for a prompt of L
  tokens (2 FLOPs per parameter per token, Kaplan et al. 2020; causal attention scores
  and weighted sum, halved by the mask), at ``mfu`` of the TP group's peak, plus two
  tensor-parallel all-reduces per layer (Megatron-LM, Shoeybi et al. 2019).
  DistServe (Zhong et al., OSDI'24, section 2.2) and Splitwise (Patel et al., ISCA'24,
  section 3) both measure prefill as compute-bound and decode as memory-bound.
- A decode step is memory-bound: every step reads all weights and the batch's KV cache
  once from HBM, ``(W + b * ctx * kv_per_token) / (tp * HBM_GB/s * efficiency)``,
  floored by the compute roofline ``2 P b / (tp * peak * mfu)`` (Williams et al.,
  "Roofline", CACM 2009), plus two TP all-reduces per layer of ``b * hidden`` elements.
  Pipeline stages do not shorten a token's path (it crosses every stage), they let
  ``pp`` micro-batches decode at once.
- Disaggregated serving sends the prompt's KV cache from the prefill to the decode
  replica: each of the tp ranks sends its 1/tp share over its own NIC, one message per
  layer as vLLM's and Mooncake's connectors do (Qin et al., "Mooncake", FAST'25), timed
  with the project's point-to-point alpha-beta model (model/collectives.py ``send_recv``).
- Weight load (cold start, scale-out): the node's share of the weights read from the
  storage backend at its client bandwidth (or the shared system's bandwidth split
  among the replicas loading at once) plus the host-to-device copy.
- Cost per million output tokens: fleet $/hour over output tokens per hour.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpufabric.model.collectives import collective_times, links_for
from gpufabric.model.cost import usd_per_gpu_hour
from gpufabric.model.storage import DTYPE_BYTES, units_needed
from gpufabric.model.tail import expected_max_offset

#: Precision -> catalog peak FLOP/s field.
PEAK_FIELD = {
    "bf16": "peak_bf16_tflops",
    "fp16": "peak_bf16_tflops",
    "fp8": "peak_fp8_tflops",
    "fp32": "peak_fp32_tflops",
}
#: Tensor-parallel all-reduces per layer per forward pass: one after attention, one after
#: the MLP (Megatron-LM, Shoeybi et al. 2019, section 3).
TP_ALLREDUCES_PER_LAYER = 2
#: Switch ports one NIC uses in a non-blocking two-tier leaf/spine: a leaf downlink, a
#: leaf uplink and a spine port (models.md 2.7 fat-tree sizing, folded per NIC).
SWITCH_PORTS_PER_NIC = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelShape:
    """What the formulas need of a served model (from spec.inference.ServedModel)."""

    params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    weight_bytes_per_param: float
    kv_bytes_per_element: float

    @property
    def head_dim(self) -> float:
        return self.hidden / self.heads

    @property
    def kv_bytes_per_token(self) -> float:
        """Keys and values of every layer for one token (vLLM, SOSP'23)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes_per_element

    @property
    def weight_bytes(self) -> float:
        return self.params * self.weight_bytes_per_param


def shape_from_spec(model: Any) -> ModelShape:
    """:class:`ModelShape` of a spec ``ServedModel``."""
    return ModelShape(
        params=model.params,
        layers=model.layers,
        hidden=model.hidden,
        heads=model.heads,
        kv_heads=model.kv_heads,
        weight_bytes_per_param=DTYPE_BYTES[model.precision],
        kv_bytes_per_element=DTYPE_BYTES[model.kv_precision],
    )


def prefill_flops(shape: ModelShape, prompt_tokens: Any) -> Any:
    """Forward FLOPs of one prompt: 2 P L + 2 layers hidden L^2 (causal attention)."""
    L = np.asarray(prompt_tokens, dtype=float)
    return 2.0 * shape.params * L + 2.0 * shape.layers * shape.hidden * L * L


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaPerf:
    """Per-replica timing coefficients, the numbers the serving simulator consumes.

    prefill_s(L) = prefill_fixed_s + prefill_s_per_token L + prefill_s_per_token2 L^2
    decode_step_s(b, ctx) = max(decode_weights_s + b ctx decode_s_per_kv_token, b decode_flop_s_per_seq)
                            + decode_comm_s(b)
    """

    tp: int
    pp: int
    prefill_fixed_s: float
    prefill_s_per_token: float
    prefill_s_per_token2: float
    decode_weights_s: float
    decode_s_per_kv_token: float
    decode_flop_s_per_seq: float
    decode_comm_fixed_s: float
    decode_comm_s_per_seq: float
    straggler_factor: float
    max_batch: int

    def prefill_s(self, prompt_tokens: Any) -> Any:
        L = np.asarray(prompt_tokens, dtype=float)
        return self.prefill_fixed_s + self.prefill_s_per_token * L + self.prefill_s_per_token2 * L * L

    def decode_step_s(self, batch: Any, mean_context_tokens: Any) -> Any:
        b = np.asarray(batch, dtype=float)
        memory = self.decode_weights_s + b * np.asarray(mean_context_tokens, dtype=float) * self.decode_s_per_kv_token
        return (
            np.maximum(memory, b * self.decode_flop_s_per_seq)
            + self.decode_comm_fixed_s
            + b * self.decode_comm_s_per_seq
        )


def _tp_allreduce_s(small: float, large: float, tp: int, links: Any) -> tuple[float, float]:
    """Affine fit (fixed s, s per byte) through two sizes of one TP all-reduce inside a node."""
    if tp <= 1:
        return 0.0, 0.0
    t = collective_times("all_reduce", np.array([small, large]), 1, tp, links).time_us * 1e-6
    slope = (t[1] - t[0]) / (large - small)
    return float(t[0] - slope * small), float(slope)


def replica_perf(
    *,
    shape: ModelShape,
    gpu: Any,
    links: Any,
    tp: int,
    pp: int,
    precision: str,
    mfu: float,
    hbm_efficiency: float,
    max_batch: int,
    jitter_cv: float,
    act_bytes: float = 2.0,
) -> ReplicaPerf:
    """Timing coefficients of one replica of ``tp x pp`` GPUs.

    TP all-reduces are fitted as affine in bytes (their latency term plus bandwidth term
    from model/collectives.py) so per-token costs stay linear and vectorisable.
    """
    peak = getattr(gpu, PEAK_FIELD[precision]) * 1e12
    flop_rate = tp * peak * mfu
    n_ar = TP_ALLREDUCES_PER_LAYER * shape.layers
    row = shape.hidden * act_bytes
    # Fitted where each phase lives: decode moves one row per sequence, prefill whole prompts.
    dec_fixed, dec_per_byte = _tp_allreduce_s(row, row * max_batch, tp, links)
    pre_fixed, pre_per_byte = _tp_allreduce_s(row * 128, row * 16384, tp, links)
    hbm = tp * gpu.hbm_gbps * 1e9 * hbm_efficiency
    # A TP group waits for its slowest rank: mean of the max of tp per-rank times (model/tail.py).
    straggler = 1.0 + jitter_cv * float(expected_max_offset(tp)) if tp > 1 else 1.0
    return ReplicaPerf(
        tp=tp,
        pp=pp,
        prefill_fixed_s=n_ar * pre_fixed,
        prefill_s_per_token=2.0 * shape.params / flop_rate + n_ar * pre_per_byte * row,
        prefill_s_per_token2=2.0 * shape.layers * shape.hidden / flop_rate,
        decode_weights_s=shape.weight_bytes / hbm,
        decode_s_per_kv_token=shape.kv_bytes_per_token / hbm,
        decode_flop_s_per_seq=2.0 * shape.params / flop_rate,
        decode_comm_fixed_s=n_ar * dec_fixed,
        decode_comm_s_per_seq=n_ar * dec_per_byte * row,
        straggler_factor=straggler,
        max_batch=max_batch * pp,
    )


def kv_capacity_tokens(*, shape: ModelShape, gpu: Any, tp: int, pp: int, memory_fraction: float) -> float:
    """KV-cache tokens a replica can hold: usable HBM minus the weights (vLLM's block pool)."""
    usable = tp * pp * gpu.hbm_gb * 1e9 * memory_fraction - shape.weight_bytes
    return max(0.0, usable / shape.kv_bytes_per_token)


def auto_tp(
    *,
    shape: ModelShape,
    gpu: Any,
    pp: int,
    gpus_per_node: int,
    memory_fraction: float,
    context_tokens: float,
    batch: int,
) -> int:
    """Smallest power-of-two TP inside a node whose HBM holds the weights and ``batch`` contexts."""
    tp = 1
    while tp <= gpus_per_node:
        if (
            kv_capacity_tokens(shape=shape, gpu=gpu, tp=tp, pp=pp, memory_fraction=memory_fraction)
            >= context_tokens * batch
        ):
            return tp
        tp *= 2
    return 0


#: Prompt lengths at which the KV transfer is evaluated exactly; others interpolate
#: linearly (the time is piecewise linear in bytes between protocol switches).
KV_GRID_TOKENS = tuple(float(x) for x in np.unique(np.round(np.geomspace(1, 2**21, 64))))


@dataclass(frozen=True, slots=True, kw_only=True)
class KvTransfer:
    """KV-cache transfer of one prompt from a prefill to a decode replica."""

    grid_tokens: tuple[float, ...]
    grid_s: tuple[float, ...]
    jitter_s: float  # std of the summed per-message fabric jitter
    hiccup_prob: float  # probability that at least one of the messages hits a hiccup
    hiccup_s: float

    def time_s(self, prompt_tokens: Any) -> Any:
        """Mean transfer time, interpolated on the exact grid."""
        return np.interp(np.asarray(prompt_tokens, dtype=float), self.grid_tokens, self.grid_s)


def kv_transfer(*, shape: ModelShape, tp: int, links: Any, fabric: Any) -> KvTransfer:
    """Per-layer KV messages, each rank its 1/tp share over its own NIC (send_recv across 2 nodes).

    The per-message jitter and hiccups come from the fabric's catalog entry: jitter adds
    in quadrature over the layer messages, a hiccup hits if any message hits one.
    """
    grid = np.array(KV_GRID_TOKENS)
    messages = shape.layers
    return KvTransfer(
        grid_tokens=KV_GRID_TOKENS,
        grid_s=tuple(float(x) for x in kv_transfer_s(shape=shape, prompt_tokens=grid, tp=tp, links=links)),
        jitter_s=float(np.sqrt(messages) * fabric.jitter_us * 1e-6),
        hiccup_prob=float(1.0 - (1.0 - fabric.hiccup_prob) ** messages),
        hiccup_s=fabric.hiccup_ms * 1e-3,
    )


def kv_transfer_s(*, shape: ModelShape, prompt_tokens: Any, tp: int, links: Any) -> Any:
    """Mean KV transfer time of prompts of ``prompt_tokens`` (exact collective model, not the fit)."""
    L = np.asarray(prompt_tokens, dtype=float)
    msg = L * shape.kv_bytes_per_token / (tp * shape.layers)
    return collective_times("send_recv", msg, 2, tp, links).time_us * 1e-6 * shape.layers


def weight_load_s(
    *, shape: ModelShape, storage: Any, gpu: Any, tp: int, pp: int, gpus_per_node: int, concurrent_replicas: int = 1
) -> float:
    """Cold-start time to read a replica's weights and copy them to the GPUs.

    Each node of the replica reads its share at the backend's client bandwidth; a shared
    backend (one building block per ``unit_capacity_tb`` of weights, at least one) splits
    its bandwidth among every node loading at once. Local NVMe has no shared tier.
    """
    nodes = max(1, -(-tp * pp // gpus_per_node))
    per_node_bytes = shape.weight_bytes / nodes
    client = storage.client_read_gbps
    if storage.kind != "local" and storage.unit_read_gbps > 0:
        units = float(units_needed(shape.weight_bytes / 1e12, storage.unit_capacity_tb))
        client = min(client, units * storage.unit_read_gbps / (nodes * concurrent_replicas))
    read = per_node_bytes / (client * 1e9) + storage.commit_latency_ms * 1e-3
    h2d = shape.weight_bytes / (tp * pp) / (gpu.host_copy_gbps * 1e9)
    return float(read + h2d)


def fleet_usd_per_gpu_hour(*, gpu: Any, fabric: Any, switch: Any, nic_optic: Any, site: Any) -> float:
    """Owned cost of a GPU-hour: server, one NIC + optic + switch-port share per GPU, energy (model/cost.py)."""
    per_gpu_capex = (
        gpu.node_usd / gpu.gpus_per_node
        + fabric.nic_usd
        + nic_optic.price_usd
        + SWITCH_PORTS_PER_NIC * switch.price_usd / switch.radix
    )
    per_gpu_kw = (
        gpu.node_power_kw / gpu.gpus_per_node
        + (fabric.nic_power_w + SWITCH_PORTS_PER_NIC * switch.power_w / switch.radix) / 1e3
    )
    return float(
        usd_per_gpu_hour(
            capex_usd=per_gpu_capex,
            power_kw=per_gpu_kw,
            num_gpus=1,
            years=site.amortization_years,
            pue=site.pue,
            usd_per_kwh=site.usd_per_kwh,
        )
    )


def usd_per_million_tokens(*, usd_per_gpu_hour: Any, gpus: Any, tokens_per_s: Any) -> Any:
    """Fleet cost per million tokens served at ``tokens_per_s``."""
    return np.asarray(usd_per_gpu_hour) * np.asarray(gpus) / (np.asarray(tokens_per_s) * 3600.0) * 1e6


def serving_links(catalog: Any, gpu_id: str, fabric_id: str, gpus_per_node: int) -> Any:
    """Links of one GPU/fabric pair for a two-node KV transfer (one switch hop, rail-aligned)."""
    fabric = catalog.fabric(fabric_id)
    # KV transfer engines (Mooncake, NIXL) post many queue pairs per peer: one transfer fills
    # the NIC (Mooncake #813: ~42 GB/s on one 400G NIC), unlike NCCL's per-peer p2p channels.
    return replace(
        links_for(
            catalog.gpu(gpu_id), fabric, catalog.site, catalog.switches[fabric.switch], nics_per_node=gpus_per_node
        ),
        p2p_net_share=1.0,
    )


# Inputs of the request-level simulator (sim/serving.py). They live here, with the
# coefficients they carry, so the planner can build them without importing sim/.


@dataclass(frozen=True, slots=True, kw_only=True)
class Tokens:
    """Token-count distribution: lognormal with ``mean`` and ``cv``, clipped to [1, max]."""

    mean: float
    cv: float = 0.0
    max: float | None = None

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.cv == 0:
            return np.full(n, float(max(1, round(self.mean))))
        sigma2 = np.log1p(self.cv**2)
        x = rng.lognormal(np.log(self.mean) - sigma2 / 2, np.sqrt(sigma2), n)
        return np.clip(np.rint(x), 1, self.max if self.max is not None else 8 * self.mean)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingConfig:
    """One design under one load."""

    perf: ReplicaPerf
    prefill_replicas: int
    decode_replicas: int = 0  # 0: colocated, decode on the prefill replicas
    kv: KvTransfer | None = None  # required when decode_replicas > 0
    max_batch: int  # effective decode slots per replica (batching and KV limits)
    rate_rps: float
    prompt: Tokens
    output: Tokens
    requests: int = 100_000
    jitter_cv: float = 0.05
    ttft_slo_s: float = float("inf")
    tpot_slo_s: float = float("inf")
    seed: int = 0

    @property
    def disaggregated(self) -> bool:
        return self.decode_replicas > 0
