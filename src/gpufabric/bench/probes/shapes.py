"""Probe shapes scaled from a spec: the training model and the checkpoint state dict.

The probes cannot run a 70B model on a test host; they keep the spec's *proportions*
(hidden : sequence, tensor count per layer, bytes per parameter) and divide the sizes by
``scale`` so the communication and I/O pattern looks like the user's at a size that fits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Defaults when no spec is given: a ~1M-parameter model that trains a step in ~10 ms on CPU.
DEFAULT_TRAIN = {"hidden": 128, "layers": 2, "heads": 4, "seq_len": 64, "vocab": 1024, "batch": 4}


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainShape:
    hidden: int
    layers: int
    heads: int
    seq_len: int
    vocab: int
    batch: int  # sequences per rank per step
    spec_layout: str  # the spec's parallel layout, for the record

    def as_config(self) -> dict[str, Any]:
        return asdict(self)


def train_shape(spec: Any | None, *, scale: int, blocks: int) -> TrainShape:
    """Model shape for the training probe: spec sizes divided by ``scale``, ``blocks`` layers."""
    if spec is None:
        return TrainShape(**{**DEFAULT_TRAIN, "layers": blocks}, spec_layout="none")
    m = spec.workload.model
    par = spec.workload.parallelism
    heads_full = m.heads or max(1, m.hidden // 128)
    hidden = max(32, m.hidden // scale)
    heads = max(1, min(heads_full, hidden // 32))
    hidden -= hidden % heads
    seq_len = max(16, m.seq_len // scale)
    dp = par.dp if isinstance(par.dp, int) else spec.num_gpus  # dp: auto (searched): the most replicas it can be
    per_replica_tokens = spec.workload.global_batch_tokens // dp
    batch = max(1, min(8, per_replica_tokens // m.seq_len // scale))
    return TrainShape(
        hidden=hidden,
        layers=min(blocks, m.layers),
        heads=heads,
        seq_len=seq_len,
        vocab=max(256, m.vocab // scale),
        batch=batch,
        spec_layout=f"tp={par.tp} pp={par.pp} dp={par.dp}",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointShape:
    total_bytes: int  # whole checkpoint across all ranks
    layers: int
    tensors_per_layer: int
    hidden: int

    def as_config(self) -> dict[str, Any]:
        return asdict(self)


def checkpoint_shape(spec: Any | None, *, scale: int, default_bytes: int = 64 << 20) -> CheckpointShape:
    """Checkpoint size = params x bytes_per_param / scale (MLPerf Storage: 14 B/param), per-layer tensors."""
    if spec is None:
        return CheckpointShape(total_bytes=default_bytes, layers=8, tensors_per_layer=4, hidden=256)
    m = spec.workload.model
    total = int(m.params * spec.workload.checkpoint.bytes_per_param / scale)
    # Weights, master copy and two Adam moments per layer: 4 tensors of equal size.
    return CheckpointShape(
        total_bytes=total, layers=min(m.layers, 32), tensors_per_layer=4, hidden=max(64, m.hidden // 16)
    )
