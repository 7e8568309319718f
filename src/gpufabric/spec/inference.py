"""Pydantic models of an inference-serving spec (``workload.kind: inference``).

A serving spec shares ``name``, ``cluster``, ``options`` and ``security`` with a
training spec (spec/models.py); its workload describes the model to serve, the traffic,
the SLOs, the replica layout, the batching limits and whether prefill and decode run on
separate replicas (DistServe, OSDI'24; Splitwise, ISCA'24; Mooncake, FAST'25).
Field docstrings are the documentation; units are in the field names.
"""

# No `from __future__ import annotations` in a module of pydantic models: pydantic would
# compile and evaluate each field's annotation string when it defines the class, ~10% of
# defining them at every start (issue 32). A method returning its own class quotes the name.

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from gpufabric.spec.loader import Located, check_ids, parse_yaml, read_text, validate_model
from gpufabric.spec.models import Cluster, Options, SpecModel
from gpufabric.spec.security import SecurityPolicy
from gpufabric.spec.types import Description, Slug

Precision = Literal["bf16", "fp16", "fp8", "fp32"]


class ServedModel(SpecModel):
    """Shape of the decoder-only transformer being served (Llama-style, GQA)."""

    params: float = Field(gt=0, le=1e14)
    """Total parameter count (for example 70e9)."""
    layers: int = Field(gt=0, le=10000)
    """Number of transformer layers."""
    hidden: int = Field(gt=0, le=1_000_000)
    """Hidden (model) dimension."""
    heads: int = Field(gt=0, le=10000)
    """Query attention heads; head_dim = hidden / heads."""
    kv_heads: int = Field(gt=0, le=10000)
    """Key/value heads (grouped-query attention; = heads for multi-head attention)."""
    precision: Precision = "bf16"
    """Weight and compute precision; selects bytes per weight and the GPU's peak FLOP/s."""
    kv_precision: Precision = "bf16"
    """KV-cache element precision (fp8 halves the cache of bf16: vLLM --kv-cache-dtype fp8)."""
    active_params: float | None = Field(None, gt=0, le=1e14)
    """Parameters one token passes through (mixture of experts); default: params (a dense model)."""
    experts: int = Field(1, gt=0, le=100_000)
    """Routed experts per MoE layer (1: dense)."""
    experts_per_token: int = Field(1, gt=0, le=1024)
    """Routed experts each token activates (top-k)."""

    @model_validator(mode="after")
    def _heads_divide(self) -> "ServedModel":
        if self.hidden % self.heads:
            raise ValueError(f"hidden = {self.hidden} is not a multiple of heads = {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads = {self.heads} is not a multiple of kv_heads = {self.kv_heads} (GQA groups)")
        if self.active_params is not None and self.active_params > self.params:
            raise ValueError(f"active_params = {self.active_params:g} exceeds params = {self.params:g}")
        if self.experts_per_token > self.experts:
            raise ValueError(f"experts_per_token = {self.experts_per_token} exceeds experts = {self.experts}")
        if self.experts > 1 and (self.active_params is None or self.active_params >= self.params):
            raise ValueError("a mixture of experts (experts > 1) needs active_params below params")
        return self


class TokenDistribution(SpecModel):
    """Token counts per request: fixed, or lognormal with a mean and a coefficient of variation."""

    mean: float = Field(gt=0, le=10_000_000)
    """Mean tokens per request."""
    cv: float = Field(0.0, ge=0, le=10)
    """Coefficient of variation (std/mean); 0 means every request has exactly ``mean`` tokens."""
    max: int | None = Field(None, gt=0, le=10_000_000)
    """Largest token count (longer draws are clipped); default 8 x mean."""


class Traffic(SpecModel):
    """The request stream: open loop (Poisson arrivals at ``rate_rps``) or closed loop (``concurrency`` clients)."""

    rate_rps: float | None = Field(None, gt=0, le=1e7)
    """Mean request arrival rate, requests per second, across the whole service (open loop, Poisson)."""
    concurrency: int | None = Field(None, gt=0, le=1_000_000)
    """Clients across the whole service, each sending its next request when its previous one completes (closed loop, as AIPerf, genai-perf and `vllm bench serve --max-concurrency` measure); instead of rate_rps."""
    prompt_tokens: TokenDistribution
    """Prompt (input) length distribution."""
    output_tokens: TokenDistribution
    """Output (generated) length distribution."""
    prefix_tokens: int = Field(0, ge=0, le=10_000_000)
    """Tokens at the start of every prompt that all requests share (a system prompt or few-shot examples): each engine's prefix cache holds them once (vLLM automatic prefix caching, SGLang RadixAttention) and prefill computes only the rest of the prompt; 0: no shared prefix."""

    @model_validator(mode="after")
    def _one_load(self) -> "Traffic":
        if (self.rate_rps is None) == (self.concurrency is None):
            raise ValueError("set exactly one of rate_rps (open loop) and concurrency (closed loop)")
        if self.prefix_tokens and self.prefix_tokens >= self.prompt_tokens.mean:
            raise ValueError(
                f"prefix_tokens = {self.prefix_tokens} must be below prompt_tokens.mean = {self.prompt_tokens.mean:g}"
                " (the shared prefix is part of every prompt)"
            )
        return self


class Slo(SpecModel):
    """Latency objectives; omit a field to leave it unconstrained."""

    ttft_p50_s: float | None = Field(None, gt=0, le=3600)
    """Median time to first token, seconds (arrival to first token)."""
    ttft_p99_s: float | None = Field(None, gt=0, le=3600)
    """99th-percentile time to first token, seconds."""
    tpot_p50_s: float | None = Field(None, gt=0, le=60)
    """Median time per output token after the first, seconds."""
    tpot_p99_s: float | None = Field(None, gt=0, le=60)
    """99th-percentile time per output token after the first, seconds."""
    itl_p99_s: float | None = Field(None, gt=0, le=60)
    """99th-percentile inter-token latency (every gap between two tokens of a stream), seconds."""


class Replica(SpecModel):
    """Layout of one model replica (one copy of the weights); auto fields are searched by the planner."""

    tp: int | Literal["auto"] = "auto"
    """Tensor-parallel degree, or auto (searched: powers of two inside the NVLink domain that fit weights + KV)."""
    pp: int | Literal["auto"] = "auto"
    """Pipeline-parallel degree (stages), or auto (searched; tp x pp stays inside the NVLink domain)."""
    ep: int | Literal["auto"] = "auto"
    """Expert-parallel degree of a mixture of experts (experts spread over ep of the replica's GPUs, all-to-all per MoE layer), or auto (every GPU of the replica; 1 for a dense model)."""
    dp_attention: Literal["auto", "on", "off"] = "auto"
    """Data-parallel attention (SGLang --enable-dp-attention): each GPU keeps whole sequences' KV instead of replicating KV heads when tp exceeds kv_heads; auto searches it where tp > kv_heads."""

    @model_validator(mode="after")
    def _positive(self) -> "Replica":
        for key in ("tp", "pp", "ep"):
            value = getattr(self, key)
            if isinstance(value, int) and not 0 < value <= 64:
                raise ValueError(f"{key} must be between 1 and 64 or 'auto', got {value}")
        return self


class Batching(SpecModel):
    """Continuous-batching limits of one replica (vLLM V1 / SGLang scheduler); auto fields are searched."""

    max_batch: int | Literal["auto"] = "auto"
    """Most sequences running at once on one replica (vLLM max_num_seqs), or auto (searched: 64, 128, 256)."""
    max_batch_tokens: int | Literal["auto"] = "auto"
    """Token budget of one iteration, decode tokens and prefill chunks together (vLLM max_num_batched_tokens, SGLang chunked_prefill_size), or auto (searched: 2048, 8192)."""
    mixed: bool = True
    """Prefill chunks ride in decode iterations (vLLM V1; SGLang --enable-mixed-chunk); false: prefill iterations run alone and stall decoding (SGLang's default)."""
    kv_memory_fraction: float = Field(0.9, gt=0, le=1)
    """Fraction of HBM the server may use for weights + KV cache (vLLM gpu_memory_utilization)."""


class Engine(SpecModel):
    """Engine overheads of one iteration (scheduling, sampling, detokenising, launch and TP sync)."""

    step_overhead_s: float | None = Field(None, ge=0, le=1)
    """Fixed cost of one iteration beside the kernels' HBM/FLOP time; default fitted (model/inference.py)."""
    seq_overhead_s: float | None = Field(None, ge=0, le=0.1)
    """Extra cost per sequence in an iteration (sampling, output processing); default fitted."""
    request_overhead_s: float | None = Field(None, ge=0, le=60)
    """API-server time inside every TTFT (HTTP, tokenisation, first-token streaming); default fitted."""


class ColdStart(SpecModel):
    """Start-up of a serving replica after its weights are read (vLLM's start-up log phases)."""

    engine_start_s: float | None = Field(None, ge=0, le=3600)
    """Process start, imports, distributed init and the profile run; default model/inference.py ENGINE_START_S."""
    graph_capture_s: float | None = Field(None, ge=0, le=3600)
    """torch.compile (cached) and CUDA-graph capture; default GRAPH_CAPTURE_S (0 with enforce_eager)."""
    warmup_s: float | None = Field(None, ge=0, le=3600)
    """Warm-up requests before the replica takes traffic; default WARMUP_S."""


class Speculative(SpecModel):
    """Speculative decoding (Leviathan et al., ICML 2023): k draft tokens verified per step."""

    draft_tokens: int = Field(gt=0, le=64)
    """Tokens the draft proposes per step (vLLM num_speculative_tokens)."""
    acceptance_rate: float = Field(ge=0, le=1)
    """Probability that each draft token is accepted (measured for the draft/model/data)."""
    draft_cost_fraction: float = Field(0.05, ge=0, le=1)
    """Cost of one draft token relative to one decode step of the served model (an EAGLE head is one decoder layer: ~1/layers, Li et al., ICML 2024; 0.05 leaves room for a small draft model)."""


class InferenceWorkload(SpecModel):
    """The serving job."""

    kind: Literal["inference"]
    """Workload kind: inference (a serving deployment)."""
    model: ServedModel
    """Shape of the served model."""
    traffic: Traffic
    """The request stream."""
    slo: Slo = Slo()
    """Latency objectives."""
    replica: Replica = Replica()
    """Parallel layout of one replica."""
    batching: Batching = Batching()
    """Batching limits."""
    disaggregation: Literal["none", "prefill-decode", "both", "auto"] = "auto"
    """none: prefill and decode share replicas; prefill-decode: separate pools, KV cache sent over the fabric; both or auto: search both (with the prefill:decode ratio)."""
    engine: Engine | None = None
    """Per-iteration engine costs beside the GPU kernels (fitted defaults, docs/accuracy.md)."""
    cold_start: ColdStart | None = None
    """Start-up of a new replica beside its weight load (sourced defaults, docs/inference.md)."""
    speculative: Speculative | None = None
    """Speculative decoding (a draft proposes tokens, the model verifies them in one step); none by default."""
    mfu_prefill: float = Field(0.5, gt=0, le=1)
    """Achieved FLOPs utilisation of prefill (compute-bound)."""
    hbm_efficiency: float = Field(0.8, gt=0, le=1)
    """Achieved fraction of HBM bandwidth in decode (memory-bound)."""
    jitter_cv: float = Field(0.05, ge=0, le=2)
    """Per-request service-time coefficient of variation (lognormal) from clocks, kernels and host noise."""


class InferenceSpec(SpecModel):
    """A gpufabric serving spec: the fleet, the served model, the traffic and its SLOs."""

    name: Slug
    """A short name for the design study: a slug (lower-case letters, digits, '.', '_', '-'), used in file and job names."""
    description: Description = ""
    """Free text about the study (one line); it only ever lands in comments."""
    cluster: Cluster
    """The machines (nodes is the fleet size the plan checks the design against)."""
    workload: InferenceWorkload
    """The serving job."""
    options: Options = Options()
    """The design space to enumerate (fabrics for KV transfer, storage for weight loads)."""
    security: SecurityPolicy | None = None
    """Planes, roles and allowed flows; a least-privilege default when omitted."""

    @property
    def num_gpus(self) -> int:
        return self.cluster.nodes * self.cluster.gpus_per_node

    @model_validator(mode="after")
    def _fits(self) -> "InferenceSpec":
        r = self.workload.replica
        gpn = self.cluster.gpus_per_node
        if isinstance(r.tp, int) and r.tp > gpn:
            raise ValueError(f"replica tp = {r.tp} exceeds gpus_per_node = {gpn}; serving keeps TP inside a node")
        if isinstance(r.pp, int) and r.pp > self.workload.model.layers:
            raise ValueError(f"replica pp = {r.pp} exceeds layers = {self.workload.model.layers}")
        if isinstance(r.tp, int) and isinstance(r.pp, int) and r.tp * r.pp > gpn:
            raise ValueError(f"replica tp x pp = {r.tp * r.pp} exceeds gpus_per_node = {gpn} (the NVLink domain)")
        b = self.workload.batching
        if isinstance(b.max_batch, int) and isinstance(b.max_batch_tokens, int) and b.max_batch_tokens < b.max_batch:
            raise ValueError(
                f"batching.max_batch_tokens = {b.max_batch_tokens} is below max_batch = {b.max_batch}: every running"
                " sequence needs a token of the budget each iteration (vLLM refuses it too); raise max_batch_tokens"
            )
        if isinstance(r.ep, int) and r.ep > 1 and self.workload.model.experts == 1:
            raise ValueError(f"replica ep = {r.ep} needs a mixture of experts (model.experts > 1)")
        return self


def workload_kind(located: Located) -> str:
    """``workload.kind`` of a parsed spec: training (the default) or inference."""
    data = located.data
    workload = data.get("workload") if isinstance(data, dict) else None
    kind = workload.get("kind", "training") if isinstance(workload, dict) else "training"
    if kind not in ("training", "inference"):
        raise located.error(("workload", "kind"), f"unknown workload kind {kind!r}", "choose training or inference")
    return str(kind)


def load_inference_spec(located: Located, *, known_ids: dict[str, set[str]] | None = None) -> InferenceSpec:
    """Validate a parsed YAML document as an :class:`InferenceSpec` (errors located in the file)."""
    spec = validate_model(located, InferenceSpec)
    if known_ids:
        check_ids(located, known_ids)
    return spec


def read_located(path: str | Path) -> Located:
    """Read and parse a spec file keeping positions (for kind dispatch before validation)."""
    # The spec reader: size cap, UTF-8 with the line of a bad byte, bounded alias expansion.
    return parse_yaml(read_text(path), str(path))
