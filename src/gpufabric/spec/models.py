"""Pydantic models of the gpufabric spec (v1 contract in DESIGN.md).

Field docstrings are the documentation: they feed ``gpufabric schema``, ``gpufabric
init`` and the docs. Units are in the field names. Every model forbids unknown keys so a
typo is an error with a did-you-mean, never a silently ignored setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpufabric.spec.security import SecurityPolicy


class SpecModel(BaseModel):
    """Base for every spec section: frozen, no unknown keys, docstrings as descriptions."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Cluster(SpecModel):
    """The machines: how many, and which GPU."""

    nodes: int = Field(gt=0)
    """Number of GPU servers (nodes) in the training job."""
    gpus_per_node: int = Field(8, gt=0)
    """GPUs per node, all joined by the node's NVLink/NVSwitch domain."""
    gpu: str = "h100-sxm"
    """GPU model id from the catalog (for example a100-sxm, h100-sxm, h200, b200, l40s)."""


class ModelShape(SpecModel):
    """Shape of the transformer being trained."""

    params: float = Field(gt=0)
    """Total parameter count (for example 70e9)."""
    layers: int = Field(gt=0)
    """Number of transformer layers."""
    hidden: int = Field(gt=0)
    """Hidden (model) dimension."""
    seq_len: int = Field(gt=0)
    """Training sequence length in tokens."""
    heads: int | None = Field(None, gt=0)
    """Attention heads; defaults to hidden/128."""
    vocab: int = Field(128256, gt=0)
    """Vocabulary size (default: Llama 3's 128,256)."""
    experts: int = Field(1, gt=0)
    """Experts per MoE layer; 1 for a dense model."""


class Parallelism(SpecModel):
    """How the model is split across GPUs (Megatron-style)."""

    tp: int = Field(1, gt=0)
    """Tensor-parallel degree; must fit inside a node unless allow_cross_node_tp."""
    pp: int = Field(1, gt=0)
    """Pipeline-parallel degree (number of stages)."""
    dp: int = Field(1, gt=0)
    """Data-parallel degree. tp x pp x dp must equal the GPU count."""
    ep: int = Field(1, gt=0)
    """Expert-parallel degree; carved out of dp (as in Megatron), so it must divide dp."""
    microbatches: int | None = Field(None, gt=0)
    """Microbatches per step per pipeline; defaults to 4 x pp, capped at the sequences each data-parallel replica gets."""
    virtual_stages: int = Field(1, gt=0)
    """Interleaved (virtual) pipeline stages per rank; the 1F1B bubble shrinks to (pp-1)/(virtual_stages x microbatches)."""
    allow_cross_node_tp: bool = False
    """Allow a tensor-parallel group to span nodes (slow: TP traffic then crosses the NIC)."""


class Checkpoint(SpecModel):
    """How often and how checkpoints are written."""

    interval_min: float = Field(30, gt=0)
    """Minutes between checkpoints."""
    mode: Literal["sync", "async"] = "async"
    """sync blocks training for the whole write; async blocks only for the snapshot copy."""
    bytes_per_param: float = Field(14, gt=0)
    """Checkpoint bytes per parameter: 14 for bf16 weights + fp32 master + Adam m, v (MLPerf Storage sizes)."""


class Dataset(SpecModel):
    """Training data as the storage sees it."""

    size_tb: float = Field(gt=0)
    """Dataset size in TB (1e12 bytes)."""
    pattern: Literal["sequential", "random"] = "sequential"
    """Read pattern of the data loader."""
    bytes_per_token: float = Field(4, gt=0)
    """Bytes read from storage per training token (tokenised data: 2-4)."""


class Workload(SpecModel):
    """The training job."""

    kind: Literal["training"] = "training"
    """Workload kind; ``inference`` specs are validated by spec/inference.py (InferenceSpec)."""
    model: ModelShape
    """Shape of the model."""
    parallelism: Parallelism = Parallelism()
    """Parallel layout."""
    global_batch_tokens: int = Field(gt=0)
    """Tokens per optimizer step across all data-parallel replicas."""
    precision: Literal["bf16", "fp16", "fp8", "fp32"] = "bf16"
    """Compute precision; selects the GPU's peak FLOP/s from the catalog."""
    mfu: float = Field(0.40, gt=0, le=1)
    """Achieved model FLOPs utilisation of the compute part of a step (0-1)."""
    total_tokens: float = Field(gt=0)
    """Tokens to train on in total (for example 15e12)."""
    checkpoint: Checkpoint = Checkpoint()
    """Checkpoint policy."""
    dataset: Dataset | None = None
    """Dataset; omit to ignore data-loading bandwidth."""


class Reliability(SpecModel):
    """Failure assumptions."""

    gpu_mttf_hours: float = Field(50000, gt=0)
    """Mean time to failure per GPU in hours (MLPerf Storage v2.0 premise: 50,000 h)."""
    restart_min: float = Field(10, ge=0)
    """Minutes from a failure to training again (detect, reschedule, reload)."""


class Requirements(SpecModel):
    """What a design must achieve; omit a field to leave it unconstrained."""

    max_step_time_cv: float | None = Field(None, gt=0)
    """Largest acceptable coefficient of variation of step time."""
    max_checkpoint_stall_fraction: float | None = Field(None, gt=0, le=1)
    """Largest acceptable fraction of wall time blocked on checkpoints."""
    max_time_to_train_days: float | None = Field(None, gt=0)
    """Deadline for the whole run, in days."""
    budget_usd: float | None = Field(None, gt=0)
    """Largest acceptable capex of the cluster in US dollars."""
    reproducibility: Literal["bitwise", "statistical", "none"] = "statistical"
    """bitwise pins NCCL algorithms and deterministic kernels (costs some bandwidth)."""


class Options(SpecModel):
    """The design space the planner enumerates."""

    fabrics: list[str] = Field(default_factory=lambda: ["ib-ndr", "roce-400g", "tcp-100g"], min_length=1)
    """Scale-out fabric ids from the catalog."""
    storage: list[str] = Field(
        default_factory=lambda: ["nvmeof-rdma", "nvmeof-tcp", "nfs", "local-nvme"], min_length=1
    )
    """Checkpoint/dataset storage backend ids from the catalog."""
    oversubscription: list[float] = Field(default_factory=lambda: [1.0], min_length=1)
    """Leaf downlink:uplink ratios to consider (1 = non-blocking)."""
    topologies: list[Literal["rail-optimized", "fat-tree"]] = Field(
        default_factory=lambda: ["rail-optimized"], min_length=1
    )
    """Topologies to consider."""

    @model_validator(mode="after")
    def _oversubscription_at_least_one(self) -> Options:
        for ratio in self.oversubscription:
            if ratio < 1:
                raise ValueError(f"oversubscription ratios are down:up and must be >= 1, got {ratio}")
        return self


class Spec(SpecModel):
    """A gpufabric spec: the cluster, the job, and what the design must achieve."""

    name: str = Field(min_length=1)
    """A short name for the design study."""
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
    security: SecurityPolicy | None = None
    """Planes, roles and allowed flows; a least-privilege default when omitted."""

    @property
    def num_gpus(self) -> int:
        return self.cluster.nodes * self.cluster.gpus_per_node

    @property
    def sequences_per_replica(self) -> int:
        """Whole sequences each data-parallel replica gets per step."""
        return self.workload.global_batch_tokens // (self.workload.model.seq_len * self.workload.parallelism.dp)

    @property
    def microbatches(self) -> int:
        """Microbatches per step: the spec's, else 4 x pp capped at the sequences per replica."""
        par = self.workload.parallelism
        if par.microbatches is not None:
            return par.microbatches
        return max(1, min(4 * par.pp, self.sequences_per_replica))

    @model_validator(mode="after")
    def _parallelism_fits(self) -> Spec:
        par = self.workload.parallelism
        gpus = self.num_gpus
        if par.tp * par.pp * par.dp != gpus:
            raise ValueError(
                f"tp x pp x dp = {par.tp} x {par.pp} x {par.dp} = {par.tp * par.pp * par.dp}"
                f" but the cluster has {gpus} GPUs ({self.cluster.nodes} nodes x {self.cluster.gpus_per_node});"
                " make the product equal the GPU count"
            )
        if par.dp % par.ep:
            raise ValueError(f"ep = {par.ep} must divide dp = {par.dp} (experts are sharded across data-parallel ranks)")
        sequences_per_replica = self.sequences_per_replica
        if sequences_per_replica < 1:
            raise ValueError(
                f"global_batch_tokens = {self.workload.global_batch_tokens} gives each of the dp = {par.dp} replicas"
                f" less than one sequence of {self.workload.model.seq_len} tokens; raise the batch or lower dp"
            )
        if par.microbatches is not None and par.microbatches > sequences_per_replica:
            raise ValueError(
                f"microbatches = {par.microbatches} exceeds the {sequences_per_replica} sequences each data-parallel"
                " replica gets per step (global_batch_tokens / seq_len / dp); lower microbatches"
            )
        if par.pp * par.virtual_stages > self.workload.model.layers:
            raise ValueError(
                f"pp x virtual_stages = {par.pp * par.virtual_stages} exceeds layers = {self.workload.model.layers};"
                " every virtual stage needs at least one layer"
            )
        if par.tp > self.cluster.gpus_per_node and not par.allow_cross_node_tp:
            raise ValueError(
                f"tp = {par.tp} exceeds gpus_per_node = {self.cluster.gpus_per_node};"
                " reduce tp or set parallelism.allow_cross_node_tp: true"
            )
        return self
