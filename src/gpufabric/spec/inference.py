"""Pydantic models of an inference-serving spec (``workload.kind: inference``).

A serving spec shares ``name``, ``cluster``, ``options`` and ``security`` with a
training spec (spec/models.py); its workload describes the model to serve, the traffic,
the SLOs, the replica layout, the batching limits and whether prefill and decode run on
separate replicas (DistServe, OSDI'24; Splitwise, ISCA'24; Mooncake, FAST'25).
Field docstrings are the documentation; units are in the field names.
"""

from __future__ import annotations

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
    """KV-cache element precision."""

    @model_validator(mode="after")
    def _heads_divide(self) -> ServedModel:
        if self.hidden % self.heads:
            raise ValueError(f"hidden = {self.hidden} is not a multiple of heads = {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads = {self.heads} is not a multiple of kv_heads = {self.kv_heads} (GQA groups)")
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
    """The request stream (Poisson arrivals)."""

    rate_rps: float = Field(gt=0, le=1e7)
    """Mean request arrival rate, requests per second, across the whole service."""
    prompt_tokens: TokenDistribution
    """Prompt (input) length distribution."""
    output_tokens: TokenDistribution
    """Output (generated) length distribution."""


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


class Replica(SpecModel):
    """Layout of one model replica (one copy of the weights)."""

    tp: int | Literal["auto"] = "auto"
    """Tensor-parallel degree, or auto (smallest power of two inside a node that fits weights + KV)."""
    pp: int = Field(1, gt=0, le=64)
    """Pipeline-parallel degree (stages)."""

    @model_validator(mode="after")
    def _tp_positive(self) -> Replica:
        if isinstance(self.tp, int) and not 0 < self.tp <= 64:
            raise ValueError(f"tp must be between 1 and 64 or 'auto', got {self.tp}")
        return self


class Batching(SpecModel):
    """Continuous-batching limits of one replica (vLLM-style scheduler)."""

    max_batch: int = Field(256, gt=0, le=65536)
    """Most sequences decoding at once on one replica (vLLM max_num_seqs)."""
    max_batch_tokens: int = Field(8192, gt=0, le=10_000_000)
    """Most prompt tokens in one prefill iteration (vLLM max_num_batched_tokens)."""
    kv_memory_fraction: float = Field(0.9, gt=0, le=1)
    """Fraction of HBM the server may use for weights + KV cache (vLLM gpu_memory_utilization)."""


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
    disaggregation: Literal["none", "prefill-decode", "both"] = "both"
    """none: prefill and decode share replicas; prefill-decode: separate pools, KV cache sent over the fabric; both: plan both."""
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
    def _fits(self) -> InferenceSpec:
        tp = self.workload.replica.tp
        if isinstance(tp, int) and tp > self.cluster.gpus_per_node:
            raise ValueError(
                f"replica tp = {tp} exceeds gpus_per_node = {self.cluster.gpus_per_node}; serving keeps TP inside a node"
            )
        if self.workload.replica.pp > self.workload.model.layers:
            raise ValueError(f"replica pp = {self.workload.replica.pp} exceeds layers = {self.workload.model.layers}")
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
