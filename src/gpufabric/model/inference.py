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

from collections.abc import Callable
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
    active_params: float | None = None  # MoE: parameters one token passes through
    experts: int = 1
    experts_per_token: int = 1

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

    @property
    def active(self) -> float:
        return self.params if self.active_params is None else self.active_params

    @property
    def expert_params(self) -> float:
        """Routed-expert parameters: active = dense + expert_params x k / E, params = dense + expert_params."""
        if self.experts <= 1 or self.experts_per_token >= self.experts:
            return 0.0
        frac = self.experts_per_token / self.experts
        return max(0.0, (self.params - self.active) / (1.0 - frac))


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
        active_params=getattr(model, "active_params", None),
        experts=getattr(model, "experts", 1),
        experts_per_token=getattr(model, "experts_per_token", 1),
    )


def prefill_flops(shape: ModelShape, prompt_tokens: Any) -> Any:
    """Forward FLOPs of one prompt: 2 P_active L + 2 layers hidden L^2 (causal attention)."""
    L = np.asarray(prompt_tokens, dtype=float)
    return 2.0 * shape.active * L + 2.0 * shape.layers * shape.hidden * L * L


#: Engine cost of one iteration beside the kernels' HBM and FLOP time: scheduling, input
#: preparation, kernel launches between CUDA graphs, sampling setup and the TP broadcast of
#: the step's metadata. vLLM's own profile of Llama 3 8B on one H100 (blog.vllm.ai
#: 2024-09-05, "vLLM v0.6.0 ... 5x latency reduction") found scheduling and output
#: processing at 29% of the step before v0.6; the value is the least-squares fit of the
#: fitting rows in docs/accuracy.md (serving section), as_of 2026-12.
STEP_OVERHEAD_S = 0.93e-3
#: Extra cost per running sequence per iteration (sampling, detokenising, stop checks,
#: block-table updates): same fit, same rows.
SEQ_OVERHEAD_S = 43e-6
#: API-server time inside every TTFT a client measures (HTTP, chat template, tokenisation,
#: the engine-core hand-off and streaming the first token): fitted with API_S_PER_TOKEN_RATE
#: as the intercept of the fitting rows' TTFT over the simulated engine TTFT
#: (benchmarks/fit_serving.py; docs/accuracy.md, serving section; vLLM 0.23 on a 4-vCPU
#: host), as_of 2026-12. Overridable: engine.request_overhead_s.
REQUEST_OVERHEAD_S = 0.0162
#: TTFT the API server adds per output token per second its replica streams, seconds per
#: (token/s): incremental detokenising and one SSE event per token share the server's event
#: loop with request intake, so a new request's TTFT grows with the stream it has to get
#: past. The published TTFTs rise linearly with output tokens/s up to the highest
#: concurrency measured (ai.wmx.dev, vLLM 0.23, L4: +108 ms at 4,500 tokens/s, with the
#: engine's ITL unchanged), which a single-server queue (overhead / (1 - load)) does not:
#: it saturates before the server does. vLLM's profile put the HTTP API server at 33% of
#: the step before v0.6 (blog.vllm.ai 2024-09-05). The value is the least-squares fit of
#: the relative TTFT errors of the fitting rows (benchmarks/fit_serving.py), as_of 2026-12.
API_S_PER_TOKEN_RATE = 31.2e-6
#: Share of the KV cache an engine keeps free when admitting a request: vLLM's block-manager
#: ``watermark`` default 0.01 (vllm/config CacheConfig, as_of 2026-12).
KV_WATERMARK = 0.01
#: Closed loop: mean delay between a response's end and the same client's next request at
#: the engine (client parsing, connection reuse, tokenisation) [U] estimate; it only breaks
#: the lock-step of identical clients (docs/inference.md).
CLIENT_DELAY_S = 0.003
#: Cold start beside the weight read, seconds (vLLM start-up logs):
#: process start, imports, distributed init, API server: vllm-project/vllm#20264 (2025-06:
#: ~25 s unlogged before the first response of 59 s) ; range 15-60 s.
ENGINE_START_S = 25.0
#: torch.compile from its cache (7.5 s) + CUDA-graph capture (17 s): vllm#20264; 8B without
#: compile 10 s, with -O3 19 s + 15 s (vllm PR #11005, 2024-12); range 10-50 s.
GRAPH_CAPTURE_S = 25.0
#: Profile run, KV-cache allocation and warm-up: vllm#20264 init engine 34 s minus the two
#: above (~10 s); gateway-api-inference-extension PR #550 (2025-03) memory profiling 34 s
#: including a 29 s compile. Range 5-15 s.
WARMUP_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaPerf:
    """Per-replica timing coefficients, the numbers the serving simulators consume.

    One iteration of a continuous-batching engine runs ``b`` decoding sequences (each
    ``1 + draft_tokens`` query tokens) and ``P`` prefill tokens together (vLLM V1 and
    SGLang mixed chunks); its time is

        GPU = max(weights read for T tokens / HBM, 2 P_active T / FLOP/s)   (linear layers)
            + KV bytes read / HBM + prefill attention FLOPs / FLOP/s          (attention)
            + 2 layers TP all-reduces of T rows (+ MoE all-to-alls)           (communication)
            + draft cost                                                     (speculative)
        t = GPU x straggler + step_overhead + b x seq_overhead

    with T = b (1 + k) + P. A pipeline-parallel replica is ``pp`` such lanes, each with
    the whole model's path (every stage in turn) and 1/pp of the replica's traffic.
    """

    tp: int
    pp: int
    ep: int = 1
    hbm_bytes_per_s: float
    flop_per_s: float
    dense_weight_bytes: float
    expert_weight_bytes: float
    expert_fraction: float  # experts_per_token / experts (0 for dense)
    flop_per_token: float  # 2 x active params
    attn_flop_per_token2: float  # 4 x layers x hidden: FLOPs per query token per context token
    kv_read_bytes_per_token: float  # HBM bytes one context token costs a decoding sequence
    ar_count: int  # TP all-reduces per forward
    ar_small_fixed_s: float
    ar_small_s_per_token: float
    ar_large_fixed_s: float
    ar_large_s_per_token: float
    ar_switch_tokens: float
    a2a_fixed_s: float = 0.0
    a2a_s_per_token: float = 0.0
    stage_hops_s: float = 0.0
    step_overhead_s: float = STEP_OVERHEAD_S
    seq_overhead_s: float = SEQ_OVERHEAD_S
    straggler_factor: float = 1.0
    max_batch: int
    draft_tokens: int = 0
    acceptance_rate: float = 0.0
    draft_cost_fraction: float = 0.0

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens a decoding sequence emits per iteration (Leviathan et al., ICML 2023, eq. 1)."""
        k, a = self.draft_tokens, self.acceptance_rate
        if k == 0:
            return 1.0
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)

    def iteration_s(
        self, decode_seqs: Any, context_tokens: Any, prefill_tokens: Any = 0.0, prefill_attn: Any = 0.0
    ) -> Any:
        """Time of one iteration.

        Args:
            decode_seqs: sequences decoding this iteration.
            context_tokens: their summed context (KV tokens read).
            prefill_tokens: prompt tokens (chunks) computed this iteration.
            prefill_attn: sum over chunks of c (offset + c / 2): query x key pairs of causal attention.
        """
        b = np.asarray(decode_seqs, dtype=float)
        q = 1.0 + self.draft_tokens
        tokens = b * q + np.asarray(prefill_tokens, dtype=float)
        # Experts a batch touches under uniform routing: 1 - (1 - k/E)^T of them.
        touched = 1.0 - (1.0 - self.expert_fraction) ** tokens if self.expert_weight_bytes else 0.0
        weights_s = (self.dense_weight_bytes + self.expert_weight_bytes * touched) / self.hbm_bytes_per_s
        linear = np.maximum(weights_s, tokens * self.flop_per_token / self.flop_per_s)
        attn = (
            np.asarray(context_tokens, dtype=float) * self.kv_read_bytes_per_token / self.hbm_bytes_per_s
            + np.asarray(prefill_attn, dtype=float) * self.attn_flop_per_token2 / self.flop_per_s
        )
        small = tokens <= self.ar_switch_tokens
        comm = self.ar_count * np.where(
            small,
            self.ar_small_fixed_s + self.ar_small_s_per_token * tokens,
            self.ar_large_fixed_s + self.ar_large_s_per_token * tokens,
        )
        comm = comm + np.where(tokens > 0, self.a2a_fixed_s + self.a2a_s_per_token * tokens, 0.0)
        draft = np.where(b > 0, self.draft_tokens * self.draft_cost_fraction * weights_s, 0.0)
        gpu = (linear + attn + comm + draft + self.stage_hops_s) * self.straggler_factor
        return gpu + self.step_overhead_s + b * self.seq_overhead_s

    def iteration_scalar_s(self, b: float, context_tokens: float, prefill_tokens: float, prefill_attn: float) -> float:
        """:meth:`iteration_s` for Python floats."""
        return self.iteration_scalar_fn()(b, context_tokens, prefill_tokens, prefill_attn)

    def _batch_coefficients(self) -> tuple[float, ...]:
        """The coefficients of an iteration's weight, linear, all-reduce, all-to-all and draft
        terms, in the order iteration_scalar_fn and decode_scalar_fn bind them to locals."""
        return (
            1.0 + self.draft_tokens,
            self.dense_weight_bytes,
            self.expert_weight_bytes,
            self.expert_fraction,
            self.flop_per_token,
            self.flop_per_s,
            self.ar_count,
            self.ar_switch_tokens,
            self.ar_small_fixed_s,
            self.ar_small_s_per_token,
            self.ar_large_fixed_s,
            self.ar_large_s_per_token,
            self.a2a_fixed_s,
            self.a2a_s_per_token,
            self.draft_tokens * self.draft_cost_fraction,
        )

    def iteration_scalar_fn(self) -> Callable[[float, float, float, float], float]:
        """:meth:`iteration_scalar_s` with every coefficient bound once: the engine simulator
        calls it per iteration, and attribute reads were a third of its cost."""
        q, dense, expert, frac, fpt, flops, ar, switch, small0, small1, large0, large1, a2a0, a2a1, draft_k = (
            self._batch_coefficients()
        )
        hbm = self.hbm_bytes_per_s
        kv_read, attn_flop = self.kv_read_bytes_per_token, self.attn_flop_per_token2
        hops, straggler, step, seq = self.stage_hops_s, self.straggler_factor, self.step_overhead_s, self.seq_overhead_s

        def scalar(b: float, context_tokens: float, prefill_tokens: float, prefill_attn: float) -> float:
            tokens = b * q + prefill_tokens
            touched = 1.0 - (1.0 - frac) ** tokens if expert else 0.0
            weights_s = (dense + expert * touched) / hbm
            compute_s = tokens * fpt / flops
            linear = compute_s if compute_s > weights_s else weights_s  # max(), without the call
            attn = (context_tokens * kv_read) / hbm + (prefill_attn * attn_flop) / flops
            comm = ar * (small0 + small1 * tokens) if tokens <= switch else ar * (large0 + large1 * tokens)
            if tokens > 0:
                comm += a2a0 + a2a1 * tokens
            draft = draft_k * weights_s if b > 0 else 0.0
            gpu = (linear + attn + comm + draft + hops) * straggler
            return gpu + step + b * seq

        return scalar

    def decode_scalar_fn(self) -> Callable[[int, float], float]:
        """``iteration_scalar_fn()(b, context_tokens, 0.0, 0.0)`` (a decode-only iteration), bit
        for bit, with the terms that depend on the batch alone tabulated per batch size: the
        engine simulator's decode jumps call it once per jump."""
        kv_read, hbm, hops = self.kv_read_bytes_per_token, self.hbm_bytes_per_s, self.stage_hops_s
        straggler, step = self.straggler_factor, self.step_overhead_s
        # b -> (linear, comm, draft, b * seq): scalar()'s terms that do not depend on the context.
        table: dict[int, tuple[float, float, float, float]] = {}
        q, dense, expert, frac, fpt, flops, ar, switch, small0, small1, large0, large1, a2a0, a2a1, draft_k = (
            self._batch_coefficients()
        )
        seq = self.seq_overhead_s

        def terms(b: int) -> tuple[float, float, float, float]:
            # The lines of scalar() above with prefill_tokens = 0.0, in the same order.
            tokens = b * q + 0.0
            touched = 1.0 - (1.0 - frac) ** tokens if expert else 0.0
            weights_s = (dense + expert * touched) / hbm
            linear = max(weights_s, tokens * fpt / flops)
            comm = ar * (small0 + small1 * tokens) if tokens <= switch else ar * (large0 + large1 * tokens)
            if tokens > 0:
                comm += a2a0 + a2a1 * tokens
            draft = draft_k * weights_s if b > 0 else 0.0
            return linear, comm, draft, b * seq

        def decode(b: int, context_tokens: float) -> float:
            t = table.get(b)
            if t is None:
                t = table[b] = terms(b)
            # scalar()'s attn is (ctx kv_read) / hbm + 0.0, which adds nothing bit for bit.
            return (t[0] + (context_tokens * kv_read) / hbm + t[1] + t[2] + hops) * straggler + step + t[3]

        return decode

    def prefill_s(self, prompt_tokens: Any, cached_tokens: int = 0) -> Any:
        """One prompt prefilled alone in one iteration; ``cached_tokens`` of it (a shared prefix)
        come from the prefix cache: only the rest is computed, attending to the whole prompt."""
        L = np.asarray(prompt_tokens, dtype=float)
        if cached_tokens <= 0:
            return self.iteration_s(0.0, 0.0, L, L * L / 2.0)
        c = np.minimum(float(cached_tokens), L - 1.0)
        rest = L - c
        return self.iteration_s(0.0, 0.0, rest, rest * (c + rest / 2.0))

    def decode_step_s(self, batch: Any, mean_context_tokens: Any) -> Any:
        """One decode-only iteration of ``batch`` sequences of ``mean_context_tokens`` each."""
        b = np.asarray(batch, dtype=float)
        return self.iteration_s(b, b * np.asarray(mean_context_tokens, dtype=float))

    @property
    def decode_weights_s(self) -> float:
        return float((self.dense_weight_bytes + self.expert_weight_bytes) / self.hbm_bytes_per_s)

    @property
    def decode_s_per_kv_token(self) -> float:
        return self.kv_read_bytes_per_token / self.hbm_bytes_per_s

    @property
    def decode_flop_s_per_seq(self) -> float:
        return self.flop_per_token / self.flop_per_s

    @property
    def prefill_s_per_token(self) -> float:
        return self.flop_per_token / self.flop_per_s + self.ar_count * self.ar_large_s_per_token

    @property
    def decode_comm_fixed_s(self) -> float:
        return self.ar_count * self.ar_small_fixed_s

    @property
    def decode_comm_s_per_seq(self) -> float:
        return self.ar_count * self.ar_small_s_per_token


def _tp_allreduce_s(small: float, large: float, tp: int, links: Any, op: str = "all_reduce") -> tuple[float, float]:
    """Affine fit (fixed s, s per byte) through two sizes of one TP collective inside a node."""
    return _affine_fits((small, large), tp, links, op)[0]


def _affine_fits(sizes: tuple[float, ...], tp: int, links: Any, op: str = "all_reduce") -> list[tuple[float, float]]:
    """Affine fits (fixed s, s per byte) between consecutive sizes of one TP collective inside
    a node, from one call of the collective model (it is element-wise: the same times as a
    call per pair, and each call costs ~1 ms of a serving plan's layout search)."""
    if tp <= 1:
        return [(0.0, 0.0)] * (len(sizes) - 1)
    t = collective_times(op, np.array(sizes), 1, tp, links).time_us * 1e-6
    fits = []
    for i in range(len(sizes) - 1):
        slope = (t[i + 1] - t[i]) / (sizes[i + 1] - sizes[i])
        fits.append((float(t[i] - slope * sizes[i]), float(slope)))
    return fits


def kv_replication(kv_heads: int, tp: int, dp_attention: bool) -> float:
    """HBM copies of each KV head: TP beyond kv_heads replicates heads (vLLM), DP attention does not (SGLang)."""
    return 1.0 if dp_attention else max(1.0, tp / kv_heads)


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
    ep: int = 1,
    dp_attention: bool = False,
    step_overhead_s: float | None = None,
    seq_overhead_s: float | None = None,
    draft_tokens: int = 0,
    acceptance_rate: float = 0.0,
    draft_cost_fraction: float = 0.0,
) -> ReplicaPerf:
    """Timing coefficients of one lane of a replica of ``tp x pp`` GPUs.

    TP all-reduces are fitted as affine in bytes in two ranges (decode rows and prefill
    chunks) from model/collectives.py, so the iteration time stays vectorisable. A lane
    holds all weights across its pp stages and reads them from tp GPUs' HBM per token.
    """
    peak = getattr(gpu, PEAK_FIELD[precision]) * 1e12
    flop_rate = tp * peak * mfu
    n_ar = TP_ALLREDUCES_PER_LAYER * shape.layers
    row = shape.hidden * act_bytes
    small_hi = max(2, max_batch)
    (s_fixed, s_per_byte), (l_fixed, l_per_byte) = _affine_fits((row, row * small_hi, row * 16384), tp, links)
    hbm = tp * gpu.hbm_gbps * 1e9 * hbm_efficiency
    # A TP group waits for its slowest rank: mean of the max of tp per-rank times (model/tail.py).
    straggler = 1.0 + jitter_cv * float(expected_max_offset(tp)) if tp > 1 else 1.0
    expert_bytes = shape.expert_params * shape.weight_bytes_per_param
    a2a_fixed = a2a_per_tok = 0.0
    if shape.experts > 1 and ep > 1:
        # Dispatch and combine: two all-to-alls of each token's hidden row per MoE layer (GShard).
        f, per = _tp_allreduce_s(row, row * small_hi, ep, links, "all_to_all")
        a2a_fixed, a2a_per_tok = 2 * shape.layers * f, 2 * shape.layers * per * row
    # Stage hops of a pipeline: one activation row crossing NVLink per boundary (latency-bound).
    hops = (
        (pp - 1) * float(collective_times("send_recv", np.array([row * 64.0]), 1, 2, links).time_us[0]) * 1e-6
        if pp > 1
        else 0.0
    )
    return ReplicaPerf(
        tp=tp,
        pp=pp,
        ep=ep,
        hbm_bytes_per_s=hbm,
        flop_per_s=flop_rate,
        dense_weight_bytes=shape.weight_bytes - expert_bytes,
        expert_weight_bytes=expert_bytes,
        expert_fraction=shape.experts_per_token / shape.experts if shape.experts > 1 else 0.0,
        flop_per_token=2.0 * shape.active,
        attn_flop_per_token2=4.0 * shape.layers * shape.hidden,
        kv_read_bytes_per_token=shape.kv_bytes_per_token * kv_replication(shape.kv_heads, tp, dp_attention),
        ar_count=n_ar if tp > 1 else 0,
        ar_small_fixed_s=s_fixed,
        ar_small_s_per_token=s_per_byte * row,
        ar_large_fixed_s=l_fixed,
        ar_large_s_per_token=l_per_byte * row,
        ar_switch_tokens=float(small_hi),
        a2a_fixed_s=a2a_fixed,
        a2a_s_per_token=a2a_per_tok,
        stage_hops_s=hops,
        step_overhead_s=STEP_OVERHEAD_S if step_overhead_s is None else step_overhead_s,
        seq_overhead_s=SEQ_OVERHEAD_S if seq_overhead_s is None else seq_overhead_s,
        straggler_factor=straggler,
        max_batch=max_batch,
        draft_tokens=draft_tokens,
        acceptance_rate=acceptance_rate,
        draft_cost_fraction=draft_cost_fraction,
    )


def kv_capacity_tokens(
    *, shape: ModelShape, gpu: Any, tp: int, pp: int, memory_fraction: float, dp_attention: bool = False
) -> float:
    """KV-cache tokens a replica can hold: usable HBM minus the weights (vLLM's block pool).

    KV heads replicated by TP beyond kv_heads take their copies' room; DP attention keeps
    one copy of the attention weights per GPU instead (about 4 hidden^2 per layer for GQA).
    """
    weights = shape.weight_bytes
    if dp_attention and tp > 1:
        attn = shape.layers * (2.0 * shape.hidden**2 + 2.0 * shape.hidden * shape.kv_heads * shape.head_dim)
        weights += attn * shape.weight_bytes_per_param * (tp - 1)
    usable = tp * pp * gpu.hbm_gb * 1e9 * memory_fraction - weights
    per_token = shape.kv_bytes_per_token * kv_replication(shape.kv_heads, tp, dp_attention)
    return max(0.0, usable / per_token)


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
#: (The geometric grid is increasing, so rounding only repeats neighbours: dropped in order,
#: the values np.unique gave, without its import of numpy.ma, ~10 ms of every serving start-up.)
KV_GRID_TOKENS = tuple(dict.fromkeys(np.round(np.geomspace(1, 2**21, 64)).tolist()))


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
    """One design under one load (open loop at ``rate_rps`` or closed loop of ``concurrency`` clients)."""

    perf: ReplicaPerf
    prefill_replicas: int
    decode_replicas: int = 0  # 0: colocated, decode on the prefill replicas
    kv: KvTransfer | None = None  # required when decode_replicas > 0
    max_batch: int  # running sequences per engine (max_num_seqs)
    kv_capacity_tokens: float = float("inf")  # KV tokens per replica
    token_budget: int = 8192  # tokens per iteration (max_num_batched_tokens)
    mixed: bool = True
    rate_rps: float | None = None
    concurrency: int | None = None
    prompt: Tokens
    output: Tokens
    requests: int = 100_000
    engine_requests: int | None = None  # most requests one simulated engine runs (None: the simulator's cap)
    jitter_cv: float = 0.05
    request_overhead_s: float = 0.0  # API server time in every TTFT (parse, tokenise, stream)
    api_s_per_token_rate: float = 0.0  # TTFT per output token/s the replica streams (API server)
    prefix_tokens: int = 0  # shared prompt prefix served from each engine's prefix cache
    client_delay_s: float = 0.0  # closed loop: mean delay before a client's next request
    ttft_slo_s: float = float("inf")
    tpot_slo_s: float = float("inf")
    seed: int = 0
    # (summary key, quantile, limit): an open-loop run stops as soon as one of these TTFT or
    # TPOT percentile limits is missed whatever its remaining requests do (a sizing step
    # needs the verdict only); its summary then has that key at +inf and no other figures.
    stop_on_miss: tuple[tuple[str, float, float], ...] = ()

    @property
    def disaggregated(self) -> bool:
        return self.decode_replicas > 0
