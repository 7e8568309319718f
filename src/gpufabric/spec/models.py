"""Pydantic models of the gpufabric spec (v1 contract in DESIGN.md).

Field docstrings are the documentation: they feed ``gpufabric schema``, ``gpufabric
init`` and the docs. Units are in the field names. Every model forbids unknown keys so a
typo is an error with a did-you-mean, never a silently ignored setting.
"""

# No `from __future__ import annotations` in a module of pydantic models: pydantic would
# compile and evaluate each field's annotation string when it defines the class, ~10% of
# defining them at every start (issue 32). A method returning its own class quotes the name.

import math
from typing import Annotated, Any, Literal, cast

from pydantic import Field, PlainValidator, WithJsonSchema, model_validator

from gpufabric.spec.security import SecurityPolicy
from gpufabric.spec.types import CatalogId, Description, FieldsError, Slug, StrictModel

# Physical upper bounds: far above any real job, low enough that arithmetic on them stays
# finite and a typo (an extra 1e9) is an error rather than an answer.
#: Ranks: the largest announced clusters are ~1e5-1e6 GPUs.
MAX_RANKS = 1 << 24
#: Minutes in ten years: checkpoint intervals and restart times beyond it are typos.
MAX_MINUTES = 10 * 365 * 24 * 60.0
#: GPU MTTF: 1e8 h is ~11,000 years; MLPerf Storage v2.0 assumes 5e4 h.
MAX_MTTF_HOURS = 1e8
#: Tokens: 1e18 is ~5 orders of magnitude above the largest published runs (~1e13-1e14).
MAX_TOKENS = 1e18
#: Parameters: 1e15 is ~3 orders of magnitude above the largest published models.
MAX_PARAMS = 1e15
#: Dataset size, TB (1e9 TB = a zettabyte).
MAX_DATASET_TB = 1e9
#: Design-space lists: each list multiplies the candidates the planner evaluates.
MAX_OPTIONS = 64
#: Checkpoint interval range, minutes. Below a minute the device-to-host snapshot (seconds
#: per GPU at PCIe rates) and the step itself (seconds at scale) make the interval
#: meaningless; above 30 days no job on this many GPUs runs without a failure, and the
#: exact goodput's exp(interval / MTTF) leaves floating point. Production intervals are
#: minutes to hours (Llama 3 Herd of Models, arXiv:2407.21783, sec. 3.3.4, as_of 2024-07).
MIN_INTERVAL_MIN = 1.0
MAX_INTERVAL_MIN = 30 * 24 * 60.0
#: GPU MTTF floor, hours: Llama 3's 16k-GPU run saw 419 interruptions in 54 days
#: (arXiv:2407.21783 sec. 3.3.4), about 50,000 GPU-hours each; 100 h is 500 times worse.
MIN_MTTF_HOURS = 100.0

_P = "workload.parallelism."


class SpecModel(StrictModel):
    """Base for every spec section: frozen, no unknown keys, finite numbers, docstrings as descriptions."""

    __gf_docstrings__ = True


class Cluster(SpecModel):
    """The machines: how many, and which GPU."""

    nodes: int = Field(gt=0, le=MAX_RANKS)
    """Number of GPU servers (nodes) in the training job."""
    gpus_per_node: int = Field(8, gt=0, le=1024)
    """GPUs per node (a server, or a compute tray: 4 in a GB200 NVL72 rack); the NVLink domain may span nodes (catalog nvlink_domain)."""
    gpu: CatalogId = "h100-sxm"
    """GPU model id from the catalog (for example a100-sxm, h100-sxm, h200, b200, b300, gb200, gb300, l40s)."""


class ModelShape(SpecModel):
    """Shape of the transformer being trained."""

    params: float = Field(gt=0, le=MAX_PARAMS)
    """Total parameter count, embeddings and every expert included (for example 70e9)."""
    layers: int = Field(gt=0, le=100_000)
    """Number of transformer layers."""
    hidden: int = Field(gt=0, le=10_000_000)
    """Hidden (model) dimension."""
    seq_len: int = Field(gt=0, le=1 << 30)
    """Training sequence length in tokens (attention FLOPs and activation memory grow with it)."""
    heads: int | None = Field(None, gt=0, le=1_000_000)
    """Attention heads; defaults to hidden/128."""
    vocab: int = Field(128256, gt=0, le=1 << 30)
    """Vocabulary size (default: Llama 3's 128,256); embeddings are taken as untied (input and output)."""
    experts: int = Field(1, gt=0, le=1_000_000)
    """Experts per MoE layer; 1 for a dense model."""
    top_k: int = Field(1, gt=0)
    """Experts each token is routed to (MoE)."""
    expert_params: float | None = Field(None, ge=0)
    """Parameters in all experts together (MoE); the rest of params is dense. Give this or active_params."""
    active_params: float | None = Field(None, gt=0)
    """Parameters one token uses (MoE; FLOPs follow these). Give this or expert_params."""
    capacity_factor: float = Field(1.0, ge=1, le=16)
    """MoE expert capacity factor: all-to-all volume is top_k x capacity_factor x the tokens (1 = dropless)."""
    ffn_hidden: int | None = Field(None, gt=0, le=100_000_000)
    """MLP inner dimension (per expert for MoE); defaults to 4 x hidden (GPT); Llama 3 70B: 28672, 405B: 53248."""
    kv_heads: int | None = Field(None, gt=0, le=1_000_000)
    """Key/value heads (grouped-query attention); defaults to heads (multi-head attention); Llama 3: 8."""
    gated_mlp: bool = False
    """The MLP is gated (SwiGLU: gate and up projections, Llama) rather than one GeLU projection (GPT)."""
    dropout: bool = False
    """The layers apply dropout (stores masks: Korthikanti et al.'s GPT count); current recipes train without."""

    @model_validator(mode="after")
    def _moe_consistent(self) -> "ModelShape":
        if self.top_k > self.experts:
            raise ValueError(f"top_k = {self.top_k} exceeds experts = {self.experts}; route to at most every expert")
        if self.experts > 1 and self.expert_params is None and self.active_params is None:
            raise ValueError("an MoE model (experts > 1) needs model.expert_params or model.active_params")
        if self.expert_params is not None and self.expert_params >= self.params:
            raise ValueError(f"expert_params = {self.expert_params:g} must be below params = {self.params:g}")
        if self.active_params is not None and self.active_params > self.params:
            raise ValueError(f"active_params = {self.active_params:g} exceeds params = {self.params:g}")
        heads = self.heads or max(1, self.hidden // 128)  # the planner's default (plan.layouts.heads_of)
        if self.kv_heads is not None and heads % self.kv_heads:
            raise ValueError(
                f"heads = {heads}{'' if self.heads else ' (hidden / 128)'} is not a multiple of"
                f" kv_heads = {self.kv_heads} (GQA groups)"
            )
        return self


AUTO = "auto"


def _number_or_auto(*, integer: bool, lo: float, hi: float | None = None, strict_lo: bool = False) -> Any:
    """A validator for 'a number in range, or auto', whose errors name the field alone
    (a plain union would add its member's tag, 'constrained-int', to the field path)."""
    kind = "an integer" if integer else "a number"
    bound = f"{'>' if strict_lo else '>='} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")

    def check(value: Any) -> Any:
        if value == AUTO:
            return AUTO
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok or not math.isfinite(value):
            raise ValueError(f"expected {kind} {bound}, or auto")
        if (value <= lo if strict_lo else value < lo) or (hi is not None and value > hi):
            raise ValueError(f"expected {kind} {bound}, or auto")
        return value if integer else float(value)

    schema = {
        "anyOf": [
            {
                "type": "integer" if integer else "number",
                ("exclusiveMinimum" if strict_lo else "minimum"): lo,
                **({"maximum": hi} if hi is not None else {}),
            },
            {"const": AUTO},
        ]
    }
    return (PlainValidator(check), WithJsonSchema(schema))


PosIntOrAuto = Annotated[int | Literal["auto"], *_number_or_auto(integer=True, lo=1)]
ZeroStage = Annotated[int | Literal["auto"], *_number_or_auto(integer=True, lo=0, hi=3)]
IntervalOrAuto = Annotated[
    float | Literal["auto"], *_number_or_auto(integer=False, lo=MIN_INTERVAL_MIN, hi=MAX_INTERVAL_MIN)
]


class Parallelism(SpecModel):
    """How the model is split across GPUs (Megatron-style); any field may be ``auto`` to search it."""

    tp: PosIntOrAuto = 1
    """Tensor-parallel degree; must fit inside the GPU's NVLink domain (catalog nvlink_domain: 8 on HGX, 72 on GB200 NVL72) unless allow_cross_node_tp. auto: searched within the NVLink domain."""
    pp: PosIntOrAuto = 1
    """Pipeline-parallel degree (number of stages)."""
    dp: PosIntOrAuto = 1
    """Data-parallel degree. tp x cp x pp x dp must equal the GPU count."""
    cp: PosIntOrAuto = 1
    """Context-parallel degree (ring attention, Megatron --context-parallel-size): each sequence is split over cp GPUs, which pass key/value chunks around a ring."""
    ep: int = Field(1, gt=0, le=MAX_RANKS)
    """Expert-parallel degree; carved out of dp (as in Megatron), so it must divide dp."""
    microbatch_size: PosIntOrAuto = 1
    """Sequences per microbatch."""
    microbatches: int | None = Field(None, gt=0, le=1 << 24)
    """Microbatches per step per pipeline; defaults to the sequences each data-parallel replica gets over microbatch_size."""
    virtual_stages: PosIntOrAuto = 1
    """Interleaved (virtual) pipeline stages per rank; the 1F1B bubble shrinks to (pp-1)/(virtual_stages x microbatches)."""
    zero_stage: ZeroStage = 0
    """ZeRO sharding over data-parallel ranks: 0 none, 1 optimizer state (Megatron distributed optimizer), 2 + gradients, 3 + weights (FSDP)."""
    sequence_parallel: bool = True
    """Megatron sequence parallelism with tp: TP all-reduces become all-gather + reduce-scatter and activations shard by tp."""
    tp_overlap: float = Field(0.0, ge=0, le=1)
    """Fraction of tensor-parallel communication hidden behind compute (0: Megatron-LM without --tp-comm-overlap)."""
    allow_cross_node_tp: bool = False
    """Allow a tensor-parallel group to span nodes (slow: TP traffic then crosses the NIC)."""

    @property
    def searched(self) -> tuple[str, ...]:
        """Names of the fields set to auto."""
        return tuple(
            k
            for k in ("tp", "cp", "pp", "dp", "microbatch_size", "virtual_stages", "zero_stage")
            if getattr(self, k) == AUTO
        )


class Checkpoint(SpecModel):
    """How often and how checkpoints are written."""

    interval_min: IntervalOrAuto = 30.0
    """Minutes between checkpoints (1 to 43,200: a minute to 30 days); auto: the interval that maximises goodput for each design (Young/Daly, exact goodput) within the storage's duty cycle and drive endurance."""
    mode: Literal["sync", "async"] = "async"
    """sync blocks training for the whole write; async blocks only for the snapshot copy."""
    bytes_per_param: float = Field(14, gt=0, le=1024)
    """Checkpoint bytes per parameter: 14 for bf16 weights + fp32 master + Adam m, v (MLPerf Storage sizes)."""


class Dataset(SpecModel):
    """Training data as the storage sees it."""

    size_tb: float = Field(gt=0, le=MAX_DATASET_TB)
    """Dataset size in TB (1e12 bytes)."""
    pattern: Literal["sequential", "random"] = "sequential"
    """Read pattern of the data loader."""
    bytes_per_token: float = Field(4, gt=0, le=1e6)
    """Bytes read from storage per training token (tokenised data: 2-4); ignored when bytes_per_sample is given."""
    bytes_per_sample: float | None = Field(None, gt=0, le=1e12)
    """Bytes read per training sample for images, video or audio (for example 1.5e5 for a JPEG, 5e7 for a video clip); the loader then reads samples/s x this."""
    tokens_per_sample: float | None = Field(None, gt=0, le=1 << 30)
    """Training tokens one sample becomes (image patches, video frames x patches); default the model's seq_len."""

    def bytes_per_token_for(self, seq_len: int) -> float:
        """Storage bytes read per training token: by samples when bytes_per_sample is given, else bytes_per_token."""
        if self.bytes_per_sample is None:
            return self.bytes_per_token
        return self.bytes_per_sample / (self.tokens_per_sample or seq_len)


class MeasuredAt(SpecModel):
    """The layout and fabric a throughput figure was measured on."""

    gpus: int = Field(gt=0)
    """GPUs of the measurement (a multiple of cluster.gpus_per_node)."""
    tp: int = Field(gt=0)
    """Tensor-parallel degree of the measurement."""
    pp: int = Field(gt=0)
    """Pipeline-parallel degree of the measurement."""
    dp: int = Field(gt=0)
    """Data-parallel degree of the measurement (tp x cp x pp x dp = gpus)."""
    cp: int = Field(1, gt=0, le=MAX_RANKS)
    """Context-parallel degree of the measurement."""
    global_batch_tokens: int | None = Field(None, gt=0, le=int(MAX_TOKENS))
    """Tokens per step of the measurement; defaults to the spec's workload.global_batch_tokens."""
    seq_len: int | None = Field(None, gt=0, le=1 << 30)
    """Sequence length of the measurement; defaults to the spec's workload.model.seq_len."""
    microbatches: int | None = Field(None, gt=0)
    """Microbatches per step; defaults to the global batch over dp and the microbatch size."""
    virtual_stages: int = Field(1, gt=0)
    """Interleaved pipeline stages of the measurement."""
    fabric: str | None = None
    """Fabric id of the measurement; defaults to the first of options.fabrics."""
    microbatch_size: int = Field(1, gt=0)
    """Sequences per microbatch of the measurement."""
    zero_stage: int | None = Field(None, ge=0, le=3)
    """ZeRO stage of the measurement; defaults to the spec's (0 when that is auto)."""
    recompute: Literal["none", "selective", "full"] | None = None
    """Recomputation of the measurement; defaults to the spec's (when auto: full for megatron FLOPs, else none)."""

    @model_validator(mode="after")
    def _product(self) -> "MeasuredAt":
        if self.tp * self.cp * self.pp * self.dp != self.gpus:
            raise ValueError(
                f"tp x cp x pp x dp = {self.tp * self.cp * self.pp * self.dp} but gpus = {self.gpus}; make them equal"
            )
        return self


class Throughput(SpecModel):
    """A throughput figure as it is published: give exactly one of mfu, tflops_per_gpu, compute_efficiency."""

    mfu: float | None = Field(None, gt=0, le=1)
    """End-to-end model FLOPs utilisation (the published convention: model FLOPs per step / (GPUs x peak x step time))."""
    tflops_per_gpu: float | None = Field(None, gt=0, le=1e5)
    """End-to-end model TFLOP/s per GPU (same convention, in TFLOP/s)."""
    compute_efficiency: float | None = Field(None, gt=0, le=1)
    """Efficiency of the compute part only (executed FLOPs / peak while computing); bubble and communication come on top."""
    flops: Literal["6pt", "megatron"] = "6pt"
    """FLOP convention of the figure: 6pt = 6 x params x tokens (Kaplan et al. 2020); megatron = Narayanan et al. SC'21 eq. 3 (attention and recomputation counted)."""
    measured_at: MeasuredAt | None = None
    """Layout and fabric the figure was measured on; omitted: the spec's own layout on the first of options.fabrics."""

    @model_validator(mode="after")
    def _exactly_one(self) -> "Throughput":
        given = [k for k in ("mfu", "tflops_per_gpu", "compute_efficiency") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of mfu, tflops_per_gpu, compute_efficiency (got {', '.join(given) or 'none'})"
            )
        return self

    @property
    def kind(self) -> str:
        """Which figure was given."""
        return next(k for k in ("mfu", "tflops_per_gpu", "compute_efficiency") if getattr(self, k) is not None)

    @property
    def value(self) -> float:
        """The figure given (MFU, TFLOP/s per GPU or compute efficiency)."""
        return float(getattr(self, self.kind))


class Workload(SpecModel):
    """The training job."""

    kind: Literal["training"] = "training"
    """Workload kind; ``inference`` specs are validated by spec/inference.py (InferenceSpec)."""
    model: ModelShape
    """Shape of the model."""
    parallelism: Parallelism = Parallelism()
    """Parallel layout; ``auto`` searches every field (see docs/planner.md)."""
    global_batch_tokens: int = Field(gt=0, le=int(MAX_TOKENS))
    """Tokens per optimizer step across all data-parallel replicas."""
    precision: Literal["bf16", "fp16", "fp8", "fp32"] = "bf16"
    """Compute precision; selects the GPU's peak FLOP/s from the catalog."""
    throughput: Throughput = Throughput(mfu=0.40)
    """Achieved throughput as published (end-to-end MFU or TFLOP/s per GPU) or the compute efficiency; omitted: each layout's compute efficiency comes from the compute-efficiency model (model/efficiency.py)."""
    recompute: Literal["none", "selective", "full", "auto"] = "none"
    """Activation recomputation (Korthikanti et al. 2022): none, selective (attention core), full (every layer), auto (searched)."""
    flash_attention: bool = True
    """Attention kernels that never store the seq x seq scores (FlashAttention; Dao et al. 2022)."""
    memory_reserve_gb: float | None = Field(None, ge=0, le=1e4)
    """HBM (GiB) held by the framework (CUDA context, NCCL buffers, allocator fragmentation); default 2 GiB + 3% of the GPU's HBM."""
    main_grads: Literal["fp32", "bf16"] = "fp32"
    """Gradient accumulation precision: fp32 main grads (Megatron Core, FSDP reduce_dtype fp32: 18 B/param, 6 + 12/dp with the distributed optimizer) or bf16 (DeepSpeed / the ZeRO paper: 16 B/param)."""
    total_tokens: float = Field(gt=0, le=MAX_TOKENS)
    """Tokens to train on in total (for example 15e12)."""
    checkpoint: Checkpoint = Checkpoint()
    """Checkpoint policy."""
    dataset: Dataset | None = None
    """Dataset; omit to ignore data-loading bandwidth."""
    notes: tuple[str, ...] = Field(default=(), exclude=True)
    """(read-only) notes the loader adds, for example how an old field was read."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_mfu(cls, data: object) -> object:
        if isinstance(data, dict) and "notes" in data:
            raise ValueError("workload.notes is read-only (the loader's notes on how it read the spec); remove it")
        # Specs before issue 14 gave a bare workload.mfu (then the compute-only efficiency
        # under a misleading name); read it as the published convention, with a note.
        if isinstance(data, dict) and "mfu" in data:
            data = dict(data)
            if "throughput" in data:
                raise ValueError("give workload.throughput or the old workload.mfu, not both")
            mfu = data.pop("mfu")
            data["throughput"] = {"mfu": mfu}
            data["notes"] = (
                f"workload.mfu: {mfu} read as workload.throughput.mfu (end-to-end"
                " MFU, 6PT FLOPs); write throughput: {compute_efficiency: ...} for the old compute-only meaning",
            )
        if isinstance(data, dict) and data.get("parallelism") == AUTO:
            data = dict(data)
            data["parallelism"] = {
                k: AUTO for k in ("tp", "cp", "pp", "dp", "microbatch_size", "virtual_stages", "zero_stage")
            }
            data.setdefault("recompute", AUTO)
        return data


class Reliability(SpecModel):
    """Failure assumptions."""

    gpu_mttf_hours: float = Field(50000, ge=MIN_MTTF_HOURS, le=MAX_MTTF_HOURS)
    """Mean time to failure per GPU in hours (MLPerf Storage v2.0 premise: 50,000 h)."""
    restart_min: float = Field(10, ge=0, le=MAX_MINUTES)
    """Minutes from a failure to training again (detect, reschedule, reload)."""


class Requirements(SpecModel):
    """What a design must achieve; omit a field to leave it unconstrained."""

    max_step_time_cv: float | None = Field(None, gt=0, le=100)
    """Largest acceptable coefficient of variation of step time."""
    max_checkpoint_stall_fraction: float | None = Field(None, gt=0, le=1)
    """Largest acceptable fraction of wall time blocked on checkpoints."""
    max_time_to_train_days: float | None = Field(None, gt=0, le=36_500)
    """Deadline for the whole run, in days."""
    budget_usd: float | None = Field(None, gt=0, le=1e13)
    """Largest acceptable capex of the cluster in US dollars."""
    reproducibility: Literal["bitwise", "statistical", "none"] = "statistical"
    """bitwise pins NCCL algorithms and deterministic kernels (costs some bandwidth)."""
    objective: Literal["run_cost", "capex", "time_to_train"] = "run_cost"
    """What the recommendation minimises among designs meeting every requirement: run_cost (default: the cheapest run within budget and deadline), capex, or time_to_train."""


Topology = Literal["rail-optimized", "fat-tree"]
Capacity = Literal["build", "rent"]
RentTerm = Literal["on_demand", "1y", "3y"]


# Named factories, not lambdas: a lambda's list literal is inferred as list[str], which
# mypy will not accept as a list of Literal values.
def _default_topologies() -> list[Topology]:
    return ["rail-optimized"]


def _default_capacity() -> list[Capacity]:
    return ["build"]


def _default_rent_terms() -> list[RentTerm]:
    return ["on_demand", "1y", "3y"]


class Work(SpecModel):
    """One stretch of the work planned on the capacity."""

    months: float = Field(gt=0, le=600)
    """How long it runs, months."""
    utilisation: float = Field(1.0, gt=0, le=1)
    """Share of the capacity's hours it keeps busy."""
    name: Description = ""
    """What it is (free text, for the reader)."""


class Options(SpecModel):
    """The design space the planner enumerates."""

    fabrics: list[CatalogId] = Field(
        default_factory=lambda: ["ib-ndr", "roce-400g", "tcp-100g"], min_length=1, max_length=MAX_OPTIONS
    )
    """Scale-out fabric ids from the catalog."""
    storage: list[CatalogId] = Field(
        default_factory=lambda: ["nvmeof-rdma", "nvmeof-tcp", "nfs", "local-nvme"], min_length=1, max_length=MAX_OPTIONS
    )
    """Checkpoint/dataset storage backend ids from the catalog."""
    oversubscription: list[float] = Field(default_factory=lambda: [1.0], min_length=1, max_length=MAX_OPTIONS)
    """Leaf downlink:uplink ratios to consider (1 = non-blocking)."""
    topologies: list[Topology] = Field(default_factory=_default_topologies, min_length=1, max_length=2)
    """Topologies to consider."""
    placement: Literal["fragmented", "contiguous", "scattered"] = "fragmented"
    """How the job's nodes sit under leaf switches: fragmented (default: what a busy scheduler delivers, runs of a few nodes per leaf and failed nodes replaced from other leaves), contiguous (whole leaves: topology-aware scheduling on a free cluster), or scattered (every ring neighbour on another leaf)."""
    in_network_reduction: bool | list[bool] = False
    """In-network reduction (InfiniBand SHARP): true uses it (SHARP-capable fabrics only, licence and aggregation manager costed), false does not (most clusters), [true, false] enumerates both to show what it buys."""
    capacity: list[Capacity] = Field(default_factory=_default_capacity, min_length=1)
    """build: designs the user buys; rent: the catalog's rentable offerings (catalog rentals) beside them, with break-even."""
    rentals: list[str] | None = None
    """Rental offering ids (catalog rentals) to consider with capacity rent; default: every offering with the cluster's GPU and GPUs per node."""
    rent_terms: list[RentTerm] = Field(default_factory=_default_rent_terms, min_length=1)
    """Rental terms to price: on_demand (paid per hour used), 1y or 3y commitment (paid for every hour of the term)."""
    utilisation: float = Field(1.0, gt=0, le=1)
    """Fraction of owned or committed hours that do useful work: a built or committed GPU-hour of useful work costs its hourly price over this; on-demand hours are paid only when used. With pipeline, the months it does not cover count as idle."""
    horizon_months: float | None = Field(None, gt=0, le=600)
    """Months the capacity is needed for; default the amortisation period (site.amortization_years). A build shorter than its amortisation pays the capex less the resale of what is left (catalog site.resale_fraction); a commitment longer than the horizon is paid in full."""
    pipeline: list[Work] | None = Field(None, min_length=1, max_length=MAX_OPTIONS)
    """The work planned on the capacity over the horizon, in order (this run among it): each entry months and utilisation; hours outside it are idle. Overrides utilisation."""

    @model_validator(mode="after")
    def _pipeline_fits(self) -> "Options":
        if self.pipeline is not None and self.horizon_months is not None:
            total = sum(w.months for w in self.pipeline)
            if total > self.horizon_months * (1 + 1e-9):
                raise FieldsError(
                    f"the pipeline covers {total:g} months, more than horizon_months = {self.horizon_months:g};"
                    " lengthen the horizon or shorten the pipeline",
                    fields=("horizon_months", "pipeline"),
                )
        return self

    def horizon_and_utilisation(self, amortization_years: float) -> tuple[float, float]:
        """(horizon in months, mean utilisation over it): the pipeline's busy share, else utilisation."""
        if self.pipeline is None:
            return (self.horizon_months or amortization_years * 12.0), self.utilisation
        busy = sum(w.months * w.utilisation for w in self.pipeline)
        horizon = self.horizon_months or sum(w.months for w in self.pipeline)
        return horizon, busy / horizon

    @model_validator(mode="after")
    def _oversubscription_at_least_one(self) -> "Options":
        for n, ratio in enumerate(self.oversubscription):
            if not 1 <= ratio <= 64:
                raise FieldsError(
                    f"oversubscription ratios are down:up and must be 1-64, got {ratio:g}",
                    fields=(f"oversubscription[{n}]",),
                )
        return self

    @property
    def sharp_choices(self) -> tuple[bool, ...]:
        """The in-network reduction settings to enumerate (no duplicates, in the given order)."""
        given = self.in_network_reduction
        return tuple(dict.fromkeys(given if isinstance(given, list) else [given])) or (False,)


class StorageNeeds(SpecModel):
    """What the storage must deliver besides this job's checkpoints and data loading."""

    other_read_gbps_per_node: float = Field(0, ge=0, le=1e4)
    """Read bandwidth other consumers take from the same storage, GB/s per node of this cluster (evaluation, data preparation, other tenants)."""
    other_write_gbps_per_node: float = Field(0, ge=0, le=1e4)
    """Write bandwidth other consumers take, GB/s per node (data preparation, logs, other tenants' checkpoints)."""
    retention_hours: float | None = Field(None, gt=0, le=87600)
    """Keep every checkpoint written in the last this many hours (time-based retention); default the catalog's count (site.checkpoints_kept). Shorter intervals then keep more checkpoints, and the storage is sized for them."""
    restore_min: float | None = Field(None, gt=0, le=MAX_MINUTES)
    """Minutes to read the last checkpoint back after a failure; default the catalog's site.restore_target_s."""
    reference_tiers: bool = True
    """Show the published reference storage tiers (NVIDIA DGX SuperPOD guidance, Meta's Llama 3 storage) priced beside the plan's choice."""


class Site(SpecModel):
    """Site cost inputs; omitted fields come from the catalog's site entry (sources there)."""

    tco: bool = False
    """Price $/GPU-hour as a total cost of ownership: add the facility, staff, front-end and storage networks."""
    usd_per_kwh: float | None = Field(None, gt=0, le=10)
    """Electricity price, USD per kWh."""
    pue: float | None = Field(None, ge=1, le=5)
    """Power usage effectiveness of the data centre."""
    amortization_years: float | None = Field(None, gt=0, le=50)
    """Years over which the cluster's capex is amortised."""
    facility_usd_per_mw: float | None = Field(None, ge=0, le=1e9)
    """Data-centre build cost per MW of IT load, USD (with tco)."""
    facility_years: float | None = Field(None, gt=0, le=100)
    """Years over which the facility is amortised (with tco)."""
    staff_usd_per_gpu_year: float | None = Field(None, ge=0, le=1e6)
    """Operations staff cost per GPU and year, USD (with tco)."""
    frontend_network_usd_per_node: float | None = Field(None, ge=0, le=1e7)
    """Front-end network per node, USD (with tco)."""
    storage_network_usd_per_node: float | None = Field(None, ge=0, le=1e7)
    """Separate storage network per node, USD (with tco)."""


class Spec(SpecModel):
    """A gpufabric spec: the cluster, the job, and what the design must achieve."""

    name: Slug
    """A short name for the design study: a slug (lower-case letters, digits, '.', '_', '-'), used in file and job names."""
    description: Description = ""
    """Free text about the study (one line); it only ever lands in comments."""
    cluster: Cluster
    """The machines."""
    workload: Workload
    """The training job."""
    reliability: Reliability = Reliability()
    """Failure assumptions."""
    requirements: Requirements = Requirements()
    """What a design must achieve."""
    options: Options = Options()
    """The design space to enumerate."""
    site: Site = Site()
    """Site cost inputs (power price, PUE, amortisation; facility, staff and other networks for a TCO)."""
    storage: StorageNeeds = StorageNeeds()
    """What the shared storage must deliver besides this job (other consumers, restore time) and whether to show reference tiers."""
    security: SecurityPolicy | None = None
    """Planes, roles and allowed flows; a least-privilege default when omitted."""

    @property
    def num_gpus(self) -> int:
        return self.cluster.nodes * self.cluster.gpus_per_node

    @property
    def searched(self) -> bool:
        """True when any layout field is auto (the planner searches layouts)."""
        return bool(self.workload.parallelism.searched) or self.workload.recompute == AUTO

    @property
    def sequences_per_replica(self) -> int:
        """Whole sequences each data-parallel replica gets per step (fixed layouts only)."""
        dp = cast(int, self.workload.parallelism.dp)
        return self.workload.global_batch_tokens // (self.workload.model.seq_len * dp)

    @property
    def microbatches(self) -> int:
        """Microbatches per step: the spec's, else the sequences per replica over the microbatch size."""
        par = self.workload.parallelism
        if par.microbatches is not None:
            return par.microbatches
        return max(1, self.sequences_per_replica // cast(int, par.microbatch_size))

    @model_validator(mode="after")
    def _parallelism_fits(self) -> "Spec":
        par = self.workload.parallelism
        gpus = self.num_gpus
        if par.searched:
            product = math.prod(cast(int, getattr(par, k)) for k in ("tp", "cp", "pp", "dp") if getattr(par, k) != AUTO)
            if gpus % product:
                raise ValueError(
                    f"the fixed parallel degrees multiply to {product}, which does not divide the {gpus} GPUs"
                )
            return self
        # Fully fixed from here on (no auto field).
        tp, pp, dp, cp = cast(int, par.tp), cast(int, par.pp), cast(int, par.dp), cast(int, par.cp)
        mbs, vs = cast(int, par.microbatch_size), cast(int, par.virtual_stages)
        if tp * cp * pp * dp != gpus:
            shown = (
                f"tp x pp x dp = {tp} x {pp} x {dp}" if cp == 1 else f"tp x cp x pp x dp = {tp} x {cp} x {pp} x {dp}"
            )
            raise FieldsError(
                f"{shown} = {tp * cp * pp * dp}"
                f" but the cluster has {gpus} GPUs ({self.cluster.nodes} nodes x {self.cluster.gpus_per_node});"
                " make the product equal the GPU count",
                fields=(_P + "tp", _P + "cp", _P + "pp", _P + "dp", "cluster.nodes", "cluster.gpus_per_node"),
            )
        if self.workload.model.seq_len % cp:
            raise FieldsError(
                f"cp = {cp} does not divide seq_len = {self.workload.model.seq_len}; each context-parallel rank"
                " takes an equal slice of the sequence",
                fields=(_P + "cp", "workload.model.seq_len"),
            )
        if dp % par.ep:
            raise FieldsError(
                f"ep = {par.ep} must divide dp = {dp} (experts are sharded across data-parallel ranks)",
                fields=(_P + "ep", _P + "dp"),
            )
        sequences_per_replica = self.sequences_per_replica
        if sequences_per_replica < 1:
            raise FieldsError(
                f"global_batch_tokens = {self.workload.global_batch_tokens} gives each of the dp = {dp} replicas"
                f" less than one sequence of {self.workload.model.seq_len} tokens; raise the batch or lower dp",
                fields=("workload.global_batch_tokens", "workload.model.seq_len", _P + "dp"),
            )
        if mbs > sequences_per_replica:
            raise FieldsError(
                f"microbatch_size = {mbs} exceeds the {sequences_per_replica} sequences each data-parallel"
                " replica gets per step; lower microbatch_size",
                fields=(_P + "microbatch_size", "workload.global_batch_tokens", _P + "dp"),
            )
        if par.microbatches is not None and par.microbatches > sequences_per_replica:
            raise FieldsError(
                f"microbatches = {par.microbatches} exceeds the {sequences_per_replica} sequences each data-parallel"
                " replica gets per step (global_batch_tokens / seq_len / dp); lower microbatches",
                fields=(_P + "microbatches", "workload.global_batch_tokens", "workload.model.seq_len", _P + "dp"),
            )
        if pp * vs > self.workload.model.layers:
            raise FieldsError(
                f"pp x virtual_stages = {pp * vs} exceeds layers = {self.workload.model.layers};"
                " every virtual stage needs at least one layer",
                fields=(_P + "pp", _P + "virtual_stages", "workload.model.layers"),
            )
        # tp against the NVLink domain is checked by the planner (plan.layouts.check_nvlink_domain):
        # the domain is a catalog property (72 GPUs in a GB200 NVL72 rack of 4-GPU trays).
        return self
