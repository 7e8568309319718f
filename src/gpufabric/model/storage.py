"""Checkpoint and dataset storage (models.md 2.6), vectorisable with numpy.

- Checkpoint size ``S = P * b`` with b = 14 B/param for bf16 weights + fp32 master +
  Adam m, v. MLPerf Storage v2.0 sizes (105 GB / 912 GB / 5.29 TB / 18 TB) match
  14 B/param of the DLIO model shapes when read as GiB/TiB (docs/accuracy.md).
- Shared storage is bought in building blocks: enough to hold the kept checkpoints and
  the dataset, and to write one checkpoint in the site's target time (60 s [U]).
- Write time ``t = S / min(B_backend, N B_client) + rounds * t_commit + sigma m(shards)``:
  a bandwidth term plus the per-shard commit latency (create + fsync + rename), run in
  rounds of ``concurrency`` commits, plus the slowest shard's commit jitter.
- Sync checkpoints block for the whole write; async block only for the device-to-host
  snapshot (bytes per GPU / copy bandwidth), but become durable only after the write
  (or, for local NVMe, after the background drain). If the write outlasts the
  interval, the next checkpoint waits: the excess also blocks.
- Drain contention (async): while a checkpoint drains, its bytes cross each node's
  scale-out NICs (GPUDirect-less host buffer -> NIC over the same PCIe switch), taking a
  share ``s = (S / N / t_drain) / (g B_nic)`` of the node's bandwidth; the exposed
  communication of each overlapped step stretches by ``1 / (1 - s)``, so steps run
  ``1 + c`` times slower with ``c = (comm_exposed / step) * s / (1 - s)`` (the
  simulator's ``drain_slowdown``, sim/timeline.py). Per checkpoint that costs
  ``t_drain c / (1 + c)`` of wall time if the drain fits in the interval; otherwise the
  next checkpoint waits for the rest: ``max(t_drain c / (1 + c), t_drain - tau)``.
- Restore time = S / read bandwidth + one commit round.
- Dataset read bandwidth needed = tokens/s * bytes/token (x2 for random reads [U]); for
  images or video bytes/token = bytes per sample / tokens per sample.
- Shared storage is bought for every bandwidth it must deliver, whichever needs the most
  building blocks: capacity (kept checkpoints + dataset), the checkpoint write in the
  site's target time plus other writers, the data loader plus other readers, and the
  restore of a checkpoint in the restore target.
- Duty cycle: the share of time the storage spends writing checkpoints, ``t_durable /
  tau`` (capped at 1). The ``auto`` interval keeps it under ``site.checkpoint_duty_max``.
- Endurance: drives are rated for ``DWPD`` full writes a day over their warranty ``W``;
  over an amortisation of ``Y`` years the checkpoints may write ``DWPD x C x W / Y`` bytes a
  day onto capacity C, so ``tau >= S x 86400 / (DWPD x C x W / Y)``; a fixed interval
  buys the blocks that keep it so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpufabric.model.tail import expected_max_offset

#: Read amplification of random-access data loading versus sequential [U, estimate].
RANDOM_READ_AMPLIFICATION = 2.0


#: Bytes per element of checkpointed tensors.
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
#: Optimizer state elements per parameter (fp32): Adam/AdamW keep m and v, SGD momentum one.
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "sgd": 1, "none": 0}


def bytes_per_param(*, weights: str = "bf16", master_fp32: bool = True, optimizer: str = "adam") -> float:
    """Checkpoint bytes per parameter: weights + fp32 master copy + fp32 optimizer states.

    bf16 weights + fp32 master + Adam m, v = 2 + 4 + 8 = 14 B (models.md 2.6).
    """
    master = 4 if master_fp32 and weights != "fp32" else 0
    return float(DTYPE_BYTES[weights] + master + 4 * OPTIMIZER_STATES[optimizer])


def checkpoint_bytes(params: Any, bytes_per_param: Any = 14.0) -> Any:
    """Checkpoint size in bytes: P * b (models.md 2.6)."""
    return np.asarray(params, dtype=float) * np.asarray(bytes_per_param, dtype=float)


def llama_params(*, layers: int, hidden: int, ffn: int, vocab: int, heads: int, kv_heads: int) -> float:
    """Parameter count of a Llama-style decoder (GQA attention, SwiGLU MLP, untied embeddings)."""
    head_dim = hidden / heads
    attn = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim
    mlp = 3 * hidden * ffn
    norms = 2 * hidden
    return float(layers * (attn + mlp + norms) + 2 * vocab * hidden + hidden)


def units_needed(capacity_tb: Any, unit_capacity_tb: Any) -> Any:
    """Building blocks to hold ``capacity_tb`` (at least one)."""
    return np.maximum(1.0, np.ceil(np.asarray(capacity_tb, dtype=float) / np.asarray(unit_capacity_tb, dtype=float)))


def units_for_bandwidth(target_gbps: Any, unit_gbps: Any) -> Any:
    """Building blocks to reach ``target_gbps`` (0 where the unit has no shared bandwidth)."""
    unit = np.asarray(unit_gbps, dtype=float)
    return np.where(unit > 0, np.ceil(np.asarray(target_gbps) / np.where(unit > 0, unit, 1.0)), 0.0)


def commit_time_s(*, shards: Any, nodes: Any, commit_ms: Any, jitter_ms: Any, concurrency: Any, per_node: Any) -> Any:
    """Commit latency of ``shards`` shard files: rounds * latency + slowest-shard jitter."""
    slots = np.asarray(concurrency, dtype=float) * np.where(per_node, np.asarray(nodes, dtype=float), 1.0)
    rounds = np.ceil(np.asarray(shards, dtype=float) / slots)
    return (rounds * np.asarray(commit_ms) + np.asarray(jitter_ms) * expected_max_offset(shards)) / 1e3


def write_time_s(*, size_bytes: Any, bandwidth_gbps: Any, commit_s: Any) -> Any:
    """Bandwidth term plus commit latency."""
    return np.asarray(size_bytes) / (np.asarray(bandwidth_gbps) * 1e9) + np.asarray(commit_s)


def snapshot_time_s(*, size_bytes: Any, num_gpus: Any, host_copy_gbps: Any) -> Any:
    """Async checkpoint block: each GPU copies its shard to host memory in parallel."""
    return np.asarray(size_bytes) / np.asarray(num_gpus) / (np.asarray(host_copy_gbps) * 1e9)


def drain_slowdown(*, size_bytes: Any, num_nodes: Any, drain_s: Any, node_nic_gbps: Any, comm_fraction: Any) -> Any:
    """Fractional step slowdown ``c`` while an async checkpoint drains (module docstring).

    ``comm_fraction`` is the exposed communication's share of the step; the drain's share
    of the node's NIC bandwidth is capped below 1 (a drain that needs the whole NIC would
    stall communication: c large, the interval bound then dominates).
    """
    rate_gbps = (
        np.asarray(size_bytes, dtype=float)
        / np.asarray(num_nodes, dtype=float)
        / np.maximum(np.asarray(drain_s, dtype=float), 1e-9)
        / 1e9
    )
    share = np.minimum(rate_gbps / np.asarray(node_nic_gbps, dtype=float), 0.9)
    return np.asarray(comm_fraction, dtype=float) * share / (1 - share)


def block_time_s(
    *, mode_sync: Any, write_s: Any, snapshot_s: Any, durable_s: Any, interval_s: Any, slowdown: Any = 0.0
) -> Any:
    """Time one checkpoint costs training: sync = write; async = snapshot plus the larger of
    the drain's contention and the wait for a drain that outlasts the interval."""
    durable = np.asarray(durable_s, dtype=float)
    c = np.asarray(slowdown, dtype=float)
    extra = np.maximum(durable * c / (1 + c), durable - np.asarray(interval_s, dtype=float))
    return np.where(mode_sync, write_s, np.asarray(snapshot_s) + np.maximum(0.0, extra))


def dataset_read_gbps(*, tokens_per_s: Any, bytes_per_token: Any, random: Any) -> Any:
    """Storage read bandwidth the data loader needs, GB/s."""
    amp = np.where(random, RANDOM_READ_AMPLIFICATION, 1.0)
    return np.asarray(tokens_per_s) * np.asarray(bytes_per_token) * amp / 1e9


def duty_cycle(*, durable_s: Any, interval_s: Any) -> Any:
    """Share of time the storage writes checkpoints, in [0, 1]."""
    return np.clip(np.asarray(durable_s, dtype=float) / np.asarray(interval_s, dtype=float), 0.0, 1.0)


def endurance_bytes_per_day(*, capacity_tb: Any, dwpd: Any, warranty_years: Any, years: Any) -> Any:
    """Bytes a day the drives of ``capacity_tb`` take and still last the amortisation (inf: unrated)."""
    rate = np.asarray(dwpd, dtype=float) * np.asarray(capacity_tb, dtype=float) * 1e12
    rate = rate * np.asarray(warranty_years, dtype=float) / np.asarray(years, dtype=float)
    return np.where(rate > 0, rate, np.inf)


def endurance_interval_s(*, size_bytes: Any, capacity_tb: Any, dwpd: Any, warranty_years: Any, years: Any) -> Any:
    """Shortest interval whose checkpoint writes stay within the drives' rated endurance."""
    per_day = endurance_bytes_per_day(capacity_tb=capacity_tb, dwpd=dwpd, warranty_years=warranty_years, years=years)
    return np.asarray(size_bytes, dtype=float) * 86400.0 / per_day


def units_for_endurance(
    *, size_bytes: Any, interval_s: Any, unit_capacity_tb: Any, dwpd: Any, warranty_years: Any, years: Any
) -> Any:
    """Building blocks whose drives take a checkpoint every ``interval_s`` for the amortisation (0: unrated)."""
    per_unit = endurance_bytes_per_day(
        capacity_tb=unit_capacity_tb, dwpd=dwpd, warranty_years=warranty_years, years=years
    )
    written = np.asarray(size_bytes, dtype=float) * 86400.0 / np.asarray(interval_s, dtype=float)
    return np.ceil(written / per_unit)


def units_at_interval(
    *,
    interval_s: Any,
    size_bytes: Any,
    unit_capacity_tb: Any,
    dwpd: Any,
    warranty_years: Any,
    years: Any,
    kept: Any,
    retention_s: Any,
    dataset_tb: Any,
) -> Any:
    """Building blocks an interval obliges: the drives' endurance and the retained checkpoints
    (the catalog's count, or every one of a ``retention_s`` window), whichever is more."""
    tau = np.asarray(interval_s, dtype=float)
    wear = units_for_endurance(
        size_bytes=size_bytes,
        interval_s=tau,
        unit_capacity_tb=unit_capacity_tb,
        dwpd=dwpd,
        warranty_years=warranty_years,
        years=years,
    )
    count = np.maximum(np.asarray(kept, dtype=float), np.ceil(np.asarray(retention_s, dtype=float) / tau))
    held = units_needed(count * np.asarray(size_bytes, dtype=float) / 1e12 + np.asarray(dataset_tb), unit_capacity_tb)
    return np.maximum(wear, held)
