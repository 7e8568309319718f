"""Evaluate every candidate design in one vectorised pass (formulas: docs/models.md).

``evaluate_table`` maps a :class:`~gpufabric.plan.table.Table` to an :class:`Evaluation`;
``plan.candidates.to_records`` turns them into :class:`Candidate` records, each with its
:class:`StepBreakdown`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufabric.model import cost, reliability, storage
from gpufabric.model.collectives import HW_LAT_US, Links, build_links, collective_times
from gpufabric.model.congestion import cross_fraction, uplink_slowdown
from gpufabric.model.flops import attention_flops_per_token, flops_per_token
from gpufabric.model.memory import GIB, MemoryBreakdown, per_gpu_memory
from gpufabric.model.rows import unique_rows
from gpufabric.model.step import (
    StepBreakdown,
    bubble_time_s,
    compute_time_s,
    ep_all_to_alls_per_layer,
    exposed_dp_s,
    exposed_with_interference_s,
    exposed_zero3_s,
    ring_attention_exposed_s,
    tp_collectives_per_layer,
    zero3_dp_s,
    zero_dp_factor,
)
from gpufabric.model.tail import TailStats, step_tail
from gpufabric.model.topology import leaf_ports, size_fabric, switch_hops
from gpufabric.plan.layouts import Layout
from gpufabric.plan.table import Table
from gpufabric.spec.models import MAX_INTERVAL_MIN, MIN_INTERVAL_MIN


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    """Model outputs, one array element per table row (units in the names)."""

    step_time_s: np.ndarray
    step_time_det_s: np.ndarray
    step_time_p99_s: np.ndarray
    step_time_cv: np.ndarray
    compute_s: np.ndarray
    bubble_s: np.ndarray
    comm_exposed_s: np.ndarray
    tp_exposed_s: np.ndarray
    dp_exposed_s: np.ndarray
    pp_exposed_s: np.ndarray
    ep_exposed_s: np.ndarray
    cp_exposed_s: np.ndarray
    dp_allreduce_s: np.ndarray
    dp_algorithm: np.ndarray
    dependent_steps: np.ndarray
    latency_per_step_s: np.ndarray
    jitter_per_step_s: np.ndarray
    nodes_per_leaf: np.ndarray
    compute_cv: np.ndarray
    hiccup_prob: np.ndarray
    hiccup_s: np.ndarray
    checkpoint_lag_s: np.ndarray
    checkpoint_bytes: np.ndarray
    checkpoint_write_s: np.ndarray
    checkpoint_block_s: np.ndarray
    checkpoint_durable_s: np.ndarray
    checkpoint_stall_fraction: np.ndarray
    checkpoint_duty_cycle: np.ndarray
    """Share of time the storage writes checkpoints (model.storage.duty_cycle)."""
    endurance_interval_s: np.ndarray
    """Shortest interval within the drives' rated endurance (model.storage)."""
    restore_s: np.ndarray
    restart_s: np.ndarray
    job_mttf_s: np.ndarray
    young_interval_s: np.ndarray
    daly_interval_s: np.ndarray
    """Daly's interval for the block without the feasibility bound."""
    min_interval_s: np.ndarray
    """Shortest feasible interval: write, time to durability, durability lag."""
    checkpoint_drain_slowdown: np.ndarray
    """Fractional step slowdown while an async checkpoint drains (model.storage)."""
    checkpoint_interval_s: np.ndarray
    optimal_interval_s: np.ndarray
    goodput_at_optimal: np.ndarray
    failure_usd: np.ndarray
    failures_expected: np.ndarray
    goodput: np.ndarray
    time_to_train_days: np.ndarray
    dataset_read_gbps_needed: np.ndarray
    storage_read_gbps: np.ndarray
    storage_write_gbps: np.ndarray
    storage_units: np.ndarray
    tiers: np.ndarray
    switches: np.ndarray
    transceivers: np.ndarray
    cables: np.ndarray
    server_capex_usd: np.ndarray
    network_capex_usd: np.ndarray
    storage_capex_usd: np.ndarray
    capex_usd: np.ndarray
    power_kw: np.ndarray
    usd_per_gpu_hour: np.ndarray
    opex_usd_per_gpu_hour: np.ndarray  # built: energy, facility, staff (capex excluded); 0 rented
    rent_storage_usd_per_gpu_hour: np.ndarray  # rented: the provider's storage per GPU and clock hour
    sharp_usd: np.ndarray  # in-network reduction licences and manager (in network capex)
    rent_commitment_usd: np.ndarray  # rented: the run on demand, the whole term committed
    run_cost_usd: np.ndarray
    network_wait_usd: np.ndarray
    storage_wait_usd: np.ndarray
    dp_congestion: np.ndarray
    ep_congestion: np.ndarray
    storage_congestion: np.ndarray
    memory_bytes: np.ndarray
    memory_capacity_bytes: np.ndarray
    memory_weights_bytes: np.ndarray
    memory_grads_bytes: np.ndarray
    memory_optimizer_bytes: np.ndarray
    memory_activations_bytes: np.ndarray
    memory_reserve_bytes: np.ndarray
    model_flops_6pt: np.ndarray
    executed_flops: np.ndarray

    def take(self, index: Any) -> Evaluation:
        """Rows ``index``."""
        return Evaluation(**{f: getattr(self, f)[index] for f in EVAL_FIELDS})


EVAL_FIELDS = tuple(f.name for f in dataclasses.fields(Evaluation))


#: Candidate checkpoint intervals: 64 geometric steps from the larger of Daly's / 4 and
#: the feasibility bound (model.reliability.min_interval_s) to 4x the larger of Daly's
#: and the durability lag (the exact goodput is flat near its optimum).
_TAU_GRID = np.linspace(0.0, 1.0, 64)


def _optimal_interval(
    *,
    sync: np.ndarray,
    write_s: np.ndarray,
    snapshot_s: np.ndarray,
    durable_s: np.ndarray,
    mttf_s: np.ndarray,
    restart_s: np.ndarray,
    lag_s: np.ndarray,
    slowdown: np.ndarray,
    min_s: np.ndarray,
    blocks: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Interval maximising the useful work per dollar at or above ``min_s``, its goodput, and
    the unbounded Daly interval, per row (on _TAU_GRID).

    Without ``blocks`` that is the exact goodput. With it (the inputs of
    model.storage.units_at_interval plus ``units``, the blocks bought anyway, and
    ``unit_share``, one block's price over the design's other capex), a shorter interval
    also pays for the blocks its wear and retention oblige: the objective is goodput /
    (1 + extra blocks x unit_share), the hourly cost taken as proportional to capex.
    The inputs depend on the design, not the layout: computed once per distinct row.
    """
    names = tuple(sorted(blocks or {}))
    extra = tuple(np.asarray((blocks or {})[k], dtype=float) for k in names)
    cols = (sync, write_s, snapshot_s, durable_s, mttf_s, restart_s, lag_s, slowdown, min_s, *extra)
    first, inv = unique_rows(*cols)
    picked = [np.asarray(a)[first] for a in cols]
    sync, write_s, snapshot_s, durable_s, mttf_s, restart_s, lag_s, slowdown, min_s = picked[:9]
    block_free = storage.block_time_s(
        mode_sync=sync,
        write_s=write_s,
        snapshot_s=snapshot_s,
        durable_s=durable_s,
        interval_s=np.inf,
        slowdown=slowdown,
    )
    daly = np.maximum(reliability.daly_interval_s(np.maximum(block_free, 1e-9), mttf_s), 1.0)
    # Async: the durability lag also prices short intervals, so the grid reaches 4x it too.
    lo = np.maximum(0.25 * daly, min_s)
    hi = np.maximum(np.maximum(4.0 * daly, 4.0 * lag_s), 2.0 * lo)
    hi = np.maximum(np.minimum(hi, MAX_INTERVAL_MIN * 60.0), lo)
    rows = dict(
        sync=sync,
        write_s=write_s,
        snapshot_s=snapshot_s,
        durable_s=durable_s,
        mttf_s=mttf_s,
        restart_s=restart_s,
        lag_s=lag_s,
        slowdown=slowdown,
        lo=lo,
        hi=hi,
    )
    # Rows in chunks of about _GRID_CELLS grid points: every row's grid is its own, so the
    # numbers are those of one pass.
    per_row = dict(zip(names, picked[9:], strict=True))
    per = max(1, _GRID_CELLS // (len(_TAU_GRID) + (len(_TAU_GRID[1::2]) if blocks else 0)))
    tau, good = np.empty(len(lo)), np.empty(len(lo))
    for a in range(0, len(lo), per):
        tau[a : a + per], good[a : a + per] = _best_on_grid(
            {k: v[a : a + per] for k, v in rows.items()},
            {k: v[a : a + per] for k, v in per_row.items()} if blocks else None,
        )
    return tau[inv], good[inv], daly[inv]


#: Grid points (rows x intervals) ``_optimal_interval`` evaluates at once: each temporary is
#: then ~100 KiB, under glibc's 128 KiB mmap threshold, so it is reused heap rather than fresh
#: pages faulted in and given back every time. Measured on 1,000 rows x 96 intervals
#: (api.evaluate's batch): 9.6 ms in one pass, ~4 ms in chunks.
_GRID_CELLS = 12_288


def _best_on_grid(r: dict[str, np.ndarray], blocks: dict[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """``_optimal_interval``'s grid search on the distinct rows ``r`` (its columns by name, and
    ``blocks``' of the same rows): the best interval of each row and its goodput."""
    lo, hi = r["lo"], r["hi"]
    taus = lo[:, None] * (hi / lo)[:, None] ** _TAU_GRID[None, :]
    if blocks:
        # Blocks can make a longer interval cheaper than the goodput optimum: a coarser grid
        # on to 16x the fine grid's end (within the accepted range).
        far = np.maximum(np.minimum(16.0 * hi, MAX_INTERVAL_MIN * 60.0), hi)
        taus = np.concatenate([taus, hi[:, None] * (far / hi)[:, None] ** _TAU_GRID[None, 1::2]], axis=1)
    goods = reliability.goodput(
        block_s=storage.block_time_s(
            mode_sync=r["sync"][:, None],
            write_s=r["write_s"][:, None],
            snapshot_s=r["snapshot_s"][:, None],
            durable_s=r["durable_s"][:, None],
            interval_s=taus,
            slowdown=r["slowdown"][:, None],
        ),
        interval_s=taus,
        mttf_s=r["mttf_s"][:, None],
        restart_s=r["restart_s"][:, None],
        lag_s=r["lag_s"][:, None],
    )
    goods = np.where(np.isfinite(goods), goods, 0.0)
    value = goods
    if blocks:
        at = {k: v[:, None] for k, v in blocks.items() if k not in ("units", "unit_share")}
        need = storage.units_at_interval(interval_s=taus, **at)
        value = goods / (1.0 + np.maximum(0.0, need - blocks["units"][:, None]) * blocks["unit_share"][:, None])
    best = np.argmax(value, axis=1)
    tau = np.take_along_axis(taus, best[:, None], axis=1)[:, 0]
    return tau, np.take_along_axis(goods, best[:, None], axis=1)[:, 0]


def _links(t: Table, hops: np.ndarray, nics: np.ndarray, ranks_per_leaf: np.ndarray, slowdown: Any = 1.0) -> Links:
    """Link parameters (model.collectives.build_links, as ``predict``); ``slowdown`` divides
    the NIC bandwidth (congestion above the leaf)."""
    return build_links(
        nvl_busbw_gbps=t.nvl_busbw,
        intra_is_pci=t.intra_pci,
        nvls_busbw_gbps=t.nvls_busbw,
        nvls_latency_us=t.nvls_lat,
        nvlink_line_gbps=t.nvl_line,
        nvlink_latency_scale=t.nvl_lat_scale,
        nic_gbps=t.nic_gbps,
        nic_host_gbps=t.nic_host,
        nic_slowdown=slowdown,
        nics_per_node=nics,
        net_latency_scale=t.net_scale,
        switch_latency_ns=t.switch_ns,
        hops=hops,
        in_network_reduction=t.sharp,
        launch_us=t.launch_us,
        oversubscription=t.oversub,
        ranks_per_leaf=ranks_per_leaf,
    )


def _coll(
    op: str, size: np.ndarray, nodes: np.ndarray, gpn: np.ndarray, links: Links, det: np.ndarray, active: np.ndarray
):
    """Collective time in seconds (0 where inactive); deterministic rows exclude NVLS/SHARP;
    SHARP (collnet) only on rows that chose it."""
    if not np.any(active):  # e.g. no expert parallelism anywhere: skip the whole model
        zero = np.zeros(np.broadcast(size, nodes).shape)
        return zero, zero, zero.astype(int)
    key = _coll_key(op, (size, nodes, gpn, det, active), links)
    if key is not None:
        with _COLL_LOCK:
            hit = _COLL_MEMO.get(key)
            if hit is not None:
                _COLL_MEMO.move_to_end(key)
                return hit
    # sharp=True lets collnet compete only where the row chose in-network reduction
    # (links.in_network_reduction = Table.sharp: the option and a capable fabric).
    free = collective_times(op, size, nodes, gpn, links, sharp=True)
    fixed = collective_times(op, size, nodes, gpn, links, deterministic=True) if det.any() else free
    time = np.where(det, fixed.time_us, free.time_us) * 1e-6
    steps = np.where(det, fixed.latency_steps, free.latency_steps)
    algo = np.where(det, fixed.algorithm, free.algorithm)
    out = (np.where(active, time, 0.0), np.where(active, steps, 0.0), algo)
    if key is not None:
        _remember(key, out)
    return out


#: ``_coll``'s results by its inputs (``_coll_key``): the throughput anchor's solve evaluates
#: one measured point at several compute efficiencies, which no collective reads, and the
#: chosen rows then repeat its inputs (issue 32: the collectives were ~half of a single
#: design's evaluation). Least recently used first; bounded by the bytes the keys and
#: results hold. The results are read-only: every caller shares them.
_COLL_MEMO: OrderedDict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = OrderedDict()
_COLL_MEMO_BYTES = 32 << 20
_coll_memo_size = [0]
_COLL_LOCK = threading.Lock()
_LINK_FIELDS: dict[type, tuple[str, ...]] = {}
_SCALARS = frozenset((float, int, bool, np.float64, np.int64, np.bool_))


def _coll_key(op: str, arrays: tuple[Any, ...], links: Links) -> tuple[Any, ...] | None:
    """Every input of one ``_coll`` call: the op, then each array's dtype, shape and bytes,
    then every field of ``links`` the same way (a field added to Links is keyed too); a
    scalar keys as its type and value. None (not memoised) for anything else, or an array
    of Python objects, whose bytes are only addresses."""
    names = _LINK_FIELDS.get(type(links))
    if names is None:
        names = _LINK_FIELDS[type(links)] = tuple(f.name for f in dataclasses.fields(links))
    key: list[Any] = [op]
    add = key.append
    for value in (*arrays, *(getattr(links, name) for name in names)):
        kind = type(value)
        if kind is np.ndarray:
            if value.dtype.hasobject:
                return None
            add(value.dtype.char)
            add(value.shape)
            add(value.tobytes())
        elif kind in _SCALARS:  # a Python or numpy number: itself, with its type (True is not 1.0)
            add(kind)
            add(value)
        else:
            return None
    return tuple(key)


def _key_bytes(key: tuple[Any, ...]) -> int:
    return sum(len(part) for part in key if type(part) is bytes)


def _remember(key: tuple[Any, ...], out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    size = _key_bytes(key) + sum(a.nbytes for a in out)
    if size > _COLL_MEMO_BYTES // 8:  # a large batch's pass: not worth holding
        return
    for a in out:
        a.setflags(write=False)
    with _COLL_LOCK:  # threads planning at once share the memo
        if key in _COLL_MEMO:
            return
        _COLL_MEMO[key] = out
        _coll_memo_size[0] += size
        while _coll_memo_size[0] > _COLL_MEMO_BYTES:
            old_key, old = _COLL_MEMO.popitem(last=False)
            _coll_memo_size[0] -= _key_bytes(old_key) + sum(a.nbytes for a in old)


def memory_of(t: Table) -> MemoryBreakdown:
    """Per-GPU memory of the busiest pipeline stage for every row (model.memory)."""
    return per_gpu_memory(
        dense_params=t.params - t.expert_params,
        expert_params=t.expert_params,
        layers=t.layers,
        hidden=t.hidden,
        heads=t.heads,
        seq_len=t.seq_len,
        vocab=t.vocab,
        tp=t.tp,
        pp=t.pp,
        dp=t.dp,
        ep=t.ep,
        zero_stage=t.zero_stage,
        microbatch_size=t.microbatch_size,
        microbatches=t.microbatches,
        virtual_stages=t.virtual_stages,
        sequence_parallel=t.sequence_parallel,
        recompute=t.recompute,
        flash_attention=t.flash_attention,
        hbm_gib=t.hbm_gib,
        reserve_gib=t.reserve_gib,
        bytes_per_param=(t.w_bpp, t.g_bpp, t.o_bpp),
        cp=t.cp,
        ffn_hidden=t.ffn_hidden,
        kv_ratio=t.kv_ratio,
        gated=t.gated_mlp,
        dropout=t.dropout,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Compute:
    """Stage 1: compute (executed FLOPs: attention and recomputation included) and bubble."""

    flops_tok: np.ndarray
    compute_s: np.ndarray
    bubble_s: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class _Comm:
    """Stage 2: communication per parallelism dimension, each part exposed per step."""

    dp_allreduce_s: np.ndarray
    dp_steps: np.ndarray
    dp_algorithm: np.ndarray
    dp_groups: np.ndarray  # nodes one data-parallel group spans
    dp_exposed_s: np.ndarray
    tp_exposed_s: np.ndarray
    pp_exposed_s: np.ndarray
    ep_exposed_s: np.ndarray
    cp_exposed_s: np.ndarray
    ep_steps: np.ndarray
    ep_all_to_alls: np.ndarray  # per layer
    layers_stage: np.ndarray
    dp_congestion: np.ndarray
    ep_congestion: np.ndarray
    dp_extra_hop_us: np.ndarray

    @property
    def exposed_s(self) -> np.ndarray:
        return self.tp_exposed_s + self.dp_exposed_s + self.pp_exposed_s + self.ep_exposed_s + self.cp_exposed_s


@dataclass(frozen=True, slots=True, kw_only=True)
class CommFixed:
    """Stage 2 without what the compute time sets (the data-parallel and context-parallel
    exposures): every collective and the exposures compute cannot hide. The throughput
    anchor's solve evaluates one table at many compute efficiencies, which none of these
    read, so it computes them once (``comm_fixed``) and takes rows of them."""

    dp_allreduce_s: np.ndarray
    dp_steps: np.ndarray
    dp_algorithm: np.ndarray
    dp_groups: np.ndarray
    tp_exposed_s: np.ndarray
    pp_exposed_s: np.ndarray
    ep_exposed_s: np.ndarray
    ep_steps: np.ndarray
    ep_all_to_alls: np.ndarray
    layers_stage: np.ndarray
    dp_congestion: np.ndarray
    ep_congestion: np.ndarray
    dp_extra_hop_us: np.ndarray
    zero3: np.ndarray  # ZeRO 3: the weights gathered per microbatch (model.step.zero3_dp_s)
    zero3_s: np.ndarray
    kv_hop_s: np.ndarray  # context parallelism: one ring hop of key/value chunks
    attention_flops_tok: np.ndarray

    def take(self, index: Any) -> CommFixed:
        """Rows ``index`` (every part is elementwise in the rows)."""
        return CommFixed(**{f: v[index] if np.ndim(v) else v for f in _COMM_FIXED_FIELDS for v in (getattr(self, f),)})


_COMM_FIXED_FIELDS = tuple(f.name for f in dataclasses.fields(CommFixed))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Storage:
    """Stage 3: checkpoints and data loading."""

    ckpt_bytes: np.ndarray
    units: np.ndarray  # sized for bandwidth and capacity (endurance and retention: stage 5)
    need_gbps: np.ndarray
    write_gbps: np.ndarray
    read_gbps: np.ndarray
    write_s: np.ndarray
    drain_s: np.ndarray
    snapshot_s: np.ndarray
    durable_s: np.ndarray
    lag_s: np.ndarray
    restore_s: np.ndarray
    congestion: np.ndarray
    step_det_s: np.ndarray  # the deterministic step, stretched by a slow data loader


@dataclass(frozen=True, slots=True, kw_only=True)
class _Reliability:
    """Stage 5: goodput at the spec's interval and at the optimal one."""

    mttf_s: np.ndarray
    restart_s: np.ndarray
    drain_slowdown: np.ndarray
    min_interval_s: np.ndarray
    optimal_interval_s: np.ndarray
    goodput_at_optimal: np.ndarray
    daly_interval_s: np.ndarray
    interval_s: np.ndarray
    units: np.ndarray
    endurance_interval_s: np.ndarray
    block_s: np.ndarray
    goodput: np.ndarray
    young_interval_s: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class _Cost:
    """Stage 6: capex, power and the cost of a useful GPU-hour, built or rented."""

    server_usd: np.ndarray
    network_usd: np.ndarray
    storage_usd: np.ndarray
    capex_usd: np.ndarray
    power_kw: np.ndarray
    usd_per_gpu_hour: np.ndarray
    opex_usd_per_gpu_hour: np.ndarray
    rent_storage_usd_per_gpu_hour: np.ndarray
    sharp_usd: np.ndarray
    rent_commitment_usd: np.ndarray
    run_usd: np.ndarray


def _slowdown(t: Table, size: Any, cross: np.ndarray, demand: Any = 1.0) -> np.ndarray:
    """Congestion above the leaf (model.congestion): ECMP collisions and oversubscription."""
    down, up = leaf_ports(t.radix, t.oversub)
    s = uplink_slowdown(nics_per_leaf=down, uplinks=up, cross=cross, demand=demand)
    return np.where(size.tiers > 1, s, 1.0)


def _compute_stage(t: Table) -> _Compute:
    flops_tok = flops_per_token(
        params_active=t.params_active,
        layers=t.layers,
        hidden=t.hidden,
        seq_len=t.seq_len,
        vocab=t.vocab,
        recompute=t.recompute,
    )
    compute = compute_time_s(flops_tok * t.batch_tokens, t.nodes * t.gpn, t.peak_tflops, t.compute_eff)
    return _Compute(
        flops_tok=flops_tok, compute_s=compute, bubble_s=bubble_time_s(compute, t.pp, t.microbatches, t.virtual_stages)
    )


def _comm_fixed(t: Table, size: Any) -> CommFixed:
    """Communication per parallelism dimension (data parallel first, then tp, pp, ep, cp), but
    the two exposures that depend on the compute time (``_comm_stage``)."""
    N, g = t.nodes, t.gpn
    G = N * g
    tp, pp, dp, ep, m, cp = t.tp, t.pp, t.dp, t.ep, t.microbatches, t.cp
    det, rc = t.deterministic, t.recompute
    tokens_mb = t.batch_tokens / (dp * m)
    act = tokens_mb * t.hidden * t.act_bytes / cp  # one context-parallel rank's slice
    layers_stage = t.layers / pp
    # Megatron rank order tp, cp, dp, pp. Gradients reduce over dp x cp (cp ranks hold the
    # same weights), tp apart: dom // tp of them share an NVLink domain (a node, or an NVL72
    # rack whose trays' NICs then act as one node's), the rest cross the fabric.
    dpc = dp * cp
    dom = t.nvl_domain
    g_dp = np.maximum(1, np.minimum(dpc, np.floor(dom / tp)))
    n_dp = np.ceil(dpc / g_dp)
    hops_dp = switch_hops(n_dp, size)
    ranks_leaf = size.nodes_per_leaf * g
    cong_dp = _slowdown(
        t,
        size,
        cross_fraction(
            group_nodes=n_dp,
            nodes_per_leaf=size.nodes_per_leaf,
            scattered=t.scattered,
            fragment_nodes=t.fragment_nodes,
            replaced=t.replaced,
        ),
    )
    links_dp = _links(t, hops_dp, g_dp, ranks_leaf, cong_dp)
    grad = ((t.params - t.expert_params) / (tp * pp) + t.expert_params / (tp * pp * ep)) * t.grad_bytes
    t_dp, steps_dp, algo_dp = _coll("all_reduce", grad, n_dp, g_dp, links_dp, det, dpc > 1)
    # ZeRO 1-2: reduce-scatter + all-gather move what an all-reduce moves, once per step;
    # ZeRO 3 / FSDP gathers the weights for every microbatch's forward and backward and
    # reduce-scatters its gradients (model.step.zero3_dp_s), hidden behind that microbatch.
    z3 = t.zero_stage >= 3
    weights_b = grad / t.grad_bytes * t.w_bpp
    t_w, _, _ = _coll("all_reduce", weights_b, n_dp, g_dp, links_dp, det, z3 & (dpc > 1))
    t_z3 = zero3_dp_s(weights_allreduce_s=t_w, grads_allreduce_s=t_dp, microbatches=m)
    t_dp = np.where(z3, t_z3, t_dp * zero_dp_factor(t.zero_stage))

    # A group inside the NVLink domain (a node, or an NVL72 rack of trays) runs on NVLink
    # as one node of that many GPUs; beyond it, over the NICs.
    # (a group that does not tile the domain, 16 of an NVL72 rack's 72, straddles two racks)
    tp_in = (tp <= dom) & ((np.mod(dom, tp) == 0) | (dom >= G))
    tp_nodes = np.where(tp_in, 1.0, np.maximum(1, np.ceil(tp / g)))
    tp_g = np.where(tp_in, tp, np.minimum(tp, g))
    links_tp = _links(t, np.ones_like(N), tp_g, ranks_leaf)
    sp = t.sequence_parallel
    t_ar, _, _ = _coll("all_reduce", act, tp_nodes, tp_g, links_tp, det, (tp > 1) & ~sp)
    t_ag, _, _ = _coll("all_gather", act, tp_nodes, tp_g, links_tp, det, (tp > 1) & sp)
    t_rs, _, _ = _coll("reduce_scatter", act, tp_nodes, tp_g, links_tp, det, (tp > 1) & sp)
    t_tp1 = np.where(sp, t_ag + t_rs, t_ar)
    tp_exp = t_tp1 * tp_collectives_per_layer(rc) * layers_stage * m * (1 - t.tp_overlap)

    hops_pp = switch_hops(np.minimum(N, 2 * np.ceil(N / pp)), size)
    links_pp = _links(t, hops_pp, np.ones_like(N), ranks_leaf)
    # Stage neighbours are tp x cp x dp ranks apart: inside one NVLink domain while that fits.
    pp_in = tp * cp * dp < dom
    t_pp1, _, _ = _coll(
        "send_recv", act / tp, np.where(pp_in, 1.0, 2.0), np.where(pp_in, 2.0, 1.0), links_pp, det, pp > 1
    )

    g_ep = np.where(tp * cp * ep <= dom, ep, np.maximum(1, np.minimum(ep, g_dp)))
    n_ep = np.ceil(ep / g_ep)
    cross_ep = cross_fraction(
        group_nodes=n_ep,
        nodes_per_leaf=size.nodes_per_leaf,
        scattered=t.scattered,
        fragment_nodes=t.fragment_nodes,
        all_to_all=True,
    )
    # The all-to-all model already divides by max(1, r x cross): add only the collisions.
    cong_ep = np.maximum(1.0, _slowdown(t, size, cross_ep) / np.maximum(1.0, t.oversub * cross_ep))
    links_ep = _links(t, switch_hops(n_ep, size), g_ep, ranks_leaf, cong_ep)
    a2a = act * t.top_k * t.capacity_factor / np.where(sp, tp, 1.0)
    t_ep1, steps_ep, _ = _coll("all_to_all", a2a, n_ep, g_ep, links_ep, det, ep > 1)
    n_a2a = ep_all_to_alls_per_layer(rc)

    # Context parallelism: ring attention passes key/value chunks around the cp ranks
    # (tp apart in the rank order), hidden behind each chunk's attention (model.step).
    cp_in = tp * cp <= dom
    links_cp = _links(t, np.where(cp_in, 1.0, hops_pp), np.ones_like(N), ranks_leaf)
    kv = act * 2.0 * t.kv_ratio / tp  # K and V of one rank's slice, heads split over tp
    pair_nodes, pair_g = np.where(cp_in, 1.0, 2.0), np.where(cp_in, 2.0, 1.0)
    t_kv, _, _ = _coll("send_recv", kv, pair_nodes, pair_g, links_cp, det, cp > 1)
    return CommFixed(
        dp_allreduce_s=t_dp,
        dp_steps=steps_dp,
        dp_algorithm=algo_dp,
        dp_groups=n_dp,
        tp_exposed_s=tp_exp,
        pp_exposed_s=2 * (pp - 1) * t_pp1,
        ep_exposed_s=t_ep1 * n_a2a * layers_stage * m,
        ep_steps=steps_ep,
        ep_all_to_alls=n_a2a,
        layers_stage=layers_stage,
        dp_congestion=cong_dp,
        ep_congestion=cong_ep,
        dp_extra_hop_us=links_dp.extra_hop_us,
        zero3=z3,
        zero3_s=t_z3,
        kv_hop_s=t_kv,
        attention_flops_tok=attention_flops_per_token(
            layers=t.layers, hidden=t.hidden, seq_len=t.seq_len, recompute=rc
        ),
    )


def _comm_stage(t: Table, size: Any, c: _Compute, fixed: CommFixed | None = None) -> _Comm:
    """Communication per parallelism dimension (data parallel first, then tp, pp, ep, cp), each
    part exposed per step (``fixed``: ``comm_fixed(t)``, when the caller has it)."""
    f = _comm_fixed(t, size) if fixed is None else fixed
    m, cp, compute = t.microbatches, t.cp, c.compute_s
    dp_exp = np.where(f.zero3, exposed_zero3_s(f.zero3_s, compute), exposed_dp_s(f.dp_allreduce_s, compute, m))
    # The hidden part slows the compute it overlaps (model.step.OVERLAP_COMPUTE_SLOWDOWN);
    # that extra compute and the exposed tail run together (model.step.exposed_with_interference_s).
    dp_exp = exposed_with_interference_s(f.dp_allreduce_s, dp_exp)
    layers_stage = f.layers_stage
    attn_fwd_s = (
        compute * f.attention_flops_tok / c.flops_tok / (3.0 * m * layers_stage)
    )  # one layer's forward attention
    cp_exp = np.where(
        cp > 1, ring_attention_exposed_s(kv_hop_s=f.kv_hop_s, cp=cp, attention_fwd_s=attn_fwd_s) * layers_stage * m, 0.0
    )
    return _Comm(
        dp_allreduce_s=f.dp_allreduce_s,
        dp_steps=f.dp_steps,
        dp_algorithm=f.dp_algorithm,
        dp_groups=f.dp_groups,
        dp_exposed_s=dp_exp,
        tp_exposed_s=f.tp_exposed_s,
        pp_exposed_s=f.pp_exposed_s,
        ep_exposed_s=f.ep_exposed_s,
        cp_exposed_s=cp_exp,
        ep_steps=f.ep_steps,
        ep_all_to_alls=f.ep_all_to_alls,
        layers_stage=layers_stage,
        dp_congestion=f.dp_congestion,
        ep_congestion=f.ep_congestion,
        dp_extra_hop_us=f.dp_extra_hop_us,
    )


def comm_fixed(t: Table) -> CommFixed:
    """Stage 2's parts that do not depend on the compute time, for ``step_time_s(..., fixed=)``."""
    return _comm_fixed(t, _size(t))


def _size(t: Table) -> Any:
    return size_fabric(
        nodes=t.nodes,
        nics_per_node=t.gpn,
        radix=t.radix,
        oversubscription=t.oversub,
        rail_optimized=t.rail,
        switch_ports_per_module=t.sw_xcvr_ports,
    )


def _storage_stage(t: Table, size: Any, step_det: np.ndarray) -> _Storage:
    """Checkpoints and data loading: storage sized, write, drain, restore and loader times."""
    N, g = t.nodes, t.gpn
    G = N * g
    ckpt = storage.checkpoint_bytes(t.params, t.ckpt_bpp)
    local = t.st_local  # local NVMe: units are the durable tier it drains to, sized for capacity
    need_gbps = storage.dataset_read_gbps(
        tokens_per_s=t.batch_tokens / step_det, bytes_per_token=t.bytes_per_token, random=t.random_read
    )
    # Shared storage is sized for every bandwidth it must deliver (model.storage): capacity,
    # the checkpoint write target plus other writers, the data loader plus other readers and
    # the restore target (the drives' endurance is bought once the interval is known, below).
    units = np.maximum(
        storage.units_needed(t.kept * ckpt / 1e12 + t.dataset_tb, t.st_unit_tb),
        np.where(
            local,
            0.0,
            np.maximum(
                np.maximum(
                    storage.units_for_bandwidth(ckpt / t.ckpt_target_s / 1e9 + t.other_write_gbps, t.st_unit_w),
                    storage.units_for_bandwidth(need_gbps + t.other_read_gbps, t.st_unit_r),
                ),
                storage.units_for_bandwidth(ckpt / t.restore_target_s / 1e9, t.st_unit_r),
            ),
        ),
    )
    # Remote storage traffic leaves every leaf; each NIC asks for its share of the client rate.
    cong_st = np.where(local, 1.0, _slowdown(t, size, np.ones_like(N), demand=t.st_client_w / (g * t.nic_gbps)))
    write_bw = np.where(local, N * t.st_client_w, np.minimum(N * t.st_client_w / cong_st, units * t.st_unit_w))
    read_bw = np.where(local, N * t.st_client_r, np.minimum(N * t.st_client_r / cong_st, units * t.st_unit_r))
    commit = storage.commit_time_s(
        shards=G,
        nodes=N,
        commit_ms=t.st_commit_ms,
        jitter_ms=t.st_commit_jitter_ms,
        concurrency=t.st_concurrency,
        per_node=t.st_per_node,
    )
    write_s = storage.write_time_s(size_bytes=ckpt, bandwidth_gbps=write_bw, commit_s=commit)
    drain_bw = np.minimum(N * np.maximum(t.st_drain_gbps, 1e-9), units * t.st_unit_w)
    drain_s = np.where(t.st_drain, ckpt / (drain_bw * 1e9), 0.0)
    durable = write_s + drain_s
    restore_bw = np.where(local, np.minimum(N * np.maximum(t.st_drain_gbps, 1e-9), units * t.st_unit_r), read_bw)
    # A data loader slower than the step stretches it.
    load_s = np.where(t.bytes_per_token > 0, need_gbps * step_det / read_bw, 0.0)
    return _Storage(
        ckpt_bytes=ckpt,
        units=units,
        need_gbps=need_gbps,
        write_gbps=write_bw,
        read_gbps=read_bw,
        write_s=write_s,
        drain_s=drain_s,
        snapshot_s=storage.snapshot_time_s(size_bytes=ckpt, num_gpus=G, host_copy_gbps=t.host_copy),
        durable_s=durable,
        lag_s=np.where(t.sync, drain_s, write_s + drain_s),
        restore_s=ckpt / (restore_bw * 1e9) + commit,
        congestion=cong_st,
        step_det_s=np.maximum(step_det, load_s),
    )


def _reliability_stage(t: Table, st: _Storage, comm_s: np.ndarray) -> _Reliability:
    """Goodput at the spec's interval and at the optimal one (exact goodput maximised on a
    geometric grid around Daly's interval; interval_min: auto uses it)."""
    N = t.nodes
    mttf = reliability.job_mttf_s(t.mttf_h, N * t.gpn)
    restart = t.restart_s + st.restore_s
    ckpt, durable, lag, write_s = st.ckpt_bytes, st.durable_s, st.lag_s, st.write_s
    # Async drains contend with the step's exposed communication for the node's NICs.
    drain_c = np.where(
        t.sync,
        0.0,
        storage.drain_slowdown(
            size_bytes=ckpt,
            num_nodes=N,
            drain_s=durable,
            node_nic_gbps=t.gpn * t.nic_gbps,
            comm_fraction=comm_s / np.maximum(st.step_det_s, 1e-12),
        ),
    )
    # Sync: the interval must cover the write and the later drain (the lag), not their sum.
    tau_min = reliability.min_interval_s(write_s=write_s, durable_s=np.where(t.sync, 0.0, durable), lag_s=lag)
    at_interval = dict(
        size_bytes=ckpt,
        unit_capacity_tb=t.st_unit_tb,
        dwpd=np.where(t.rent, 0.0, t.st_dwpd),  # a provider's drives are its own concern
        warranty_years=t.st_warranty_years,
        years=t.years,
        kept=t.kept,
        retention_s=t.retention_s,
        dataset_tb=t.dataset_tb,
    )
    # The auto interval also keeps the storage's checkpoint duty cycle within its bound and
    # stays inside the spec's accepted range (spec.models).
    tau_auto_min = np.clip(np.maximum(tau_min, durable / t.duty_max), MIN_INTERVAL_MIN * 60.0, MAX_INTERVAL_MIN * 60.0)
    tau_opt, good_opt, daly = _optimal_interval(
        sync=t.sync,
        write_s=write_s,
        snapshot_s=st.snapshot_s,
        durable_s=durable,
        mttf_s=mttf,
        restart_s=restart,
        lag_s=lag,
        slowdown=drain_c,
        min_s=tau_auto_min,
        blocks=at_interval
        | {
            "units": st.units,
            # Rented: the provider's storage, no endurance to buy (its capacity is priced per TB-month).
            "unit_share": np.where(t.rent, 0.0, t.st_unit_usd / (N * t.node_usd + st.units * t.st_unit_usd)),
        },
    )
    interval = np.where(t.interval_auto, tau_opt, t.interval_s)
    # Drive endurance (catalog DWPD over the warranty) and retention (the catalog's count, or
    # every checkpoint of storage.retention_hours): the blocks the interval obliges; more
    # blocks than bandwidth needed are charged (capex, power) without crediting their
    # bandwidth (conservative).
    units = np.maximum(st.units, storage.units_at_interval(interval_s=interval, **at_interval))
    block = storage.block_time_s(
        mode_sync=t.sync,
        write_s=write_s,
        snapshot_s=st.snapshot_s,
        durable_s=durable,
        interval_s=interval,
        slowdown=drain_c,
    )
    good = reliability.goodput(block_s=block, interval_s=interval, mttf_s=mttf, restart_s=restart, lag_s=lag)
    return _Reliability(
        mttf_s=mttf,
        restart_s=restart,
        drain_slowdown=drain_c,
        min_interval_s=tau_min,
        optimal_interval_s=tau_opt,
        goodput_at_optimal=good_opt,
        daly_interval_s=daly,
        interval_s=interval,
        units=units,
        endurance_interval_s=storage.endurance_interval_s(
            size_bytes=ckpt,
            capacity_tb=units * t.st_unit_tb,
            dwpd=t.st_dwpd,
            warranty_years=t.st_warranty_years,
            years=t.years,
        ),
        block_s=block,
        goodput=good,
        young_interval_s=reliability.young_interval_s(np.maximum(block, 1e-9), mttf),
    )


def _cost_stage(t: Table, size: Any, units: np.ndarray, train_s: np.ndarray) -> _Cost:
    """Capex, power, the cost of a useful GPU-hour (built or rented) and of the run."""
    N = t.nodes
    G = N * t.gpn
    nics = G  # one scale-out NIC per GPU
    net_usd = cost.network_capex_usd(
        switches=size.switches,
        switch_usd=t.switch_usd,
        nic_xcvrs=size.nic_transceivers,
        nic_xcvr_usd=t.nic_xcvr_usd,
        switch_xcvrs=size.switch_transceivers,
        switch_xcvr_usd=t.sw_xcvr_usd,
        cables=size.cables,
        cable_usd=t.cable_usd,
        nics=nics,
        nic_usd=t.nic_usd,
    )
    # In-network reduction when chosen: licence per switch + aggregation manager per node.
    sharp_usd = np.where(t.sharp, size.switches * t.sharp_switch_usd + N * t.sharp_node_usd, 0.0)
    net_usd = net_usd + sharp_usd
    storage_usd = units * t.st_unit_usd
    server_usd = N * t.node_usd
    capex = server_usd + net_usd + storage_usd + N * t.other_networks_usd_per_node
    power_kw = (
        N * t.node_kw
        + (
            size.switches * t.switch_w
            + nics * t.nic_w
            + size.nic_transceivers * t.nic_xcvr_w
            + size.switch_transceivers * t.sw_xcvr_w
            + units * t.st_unit_w_power
        )
        / 1e3
    )
    tco = dict(
        power_kw=power_kw,
        num_gpus=G,
        years=t.years,
        pue=t.pue,
        usd_per_kwh=t.usd_per_kwh,
        facility_usd_per_mw=t.facility_usd_per_mw,
        facility_years=t.facility_years,
        staff_usd_per_gpu_year=t.staff_usd_per_gpu_year,
    )
    # A built cluster is paid (and powered) whether busy or not: a useful GPU-hour costs the
    # hourly cost over the utilisation (1 by default, the figure of earlier plans). Over a
    # horizon shorter than the amortisation the capex less its resale is spread over the
    # horizon (model.cost.horizon_capex_usd); at the default horizon it is the amortisation.
    build_h = (
        cost.tco_usd_per_gpu_hour(
            capex_usd=cost.horizon_capex_usd(capex_usd=capex, residual_fraction=t.residual),
            **(tco | {"years": t.horizon_h / cost.HOURS_PER_YEAR}),
        )
        / t.util
    )
    opex_h = cost.tco_usd_per_gpu_hour(capex_usd=0.0, **tco)  # energy, facility, staff per GPU-hour
    # Rented: the catalog price (over the utilisation when committed) plus the provider's
    # durable storage for the capacity the design needs, paid every hour.
    rent_storage_h = units * t.st_unit_tb * t.rent_storage_tb_month / cost.HOURS_PER_MONTH / G  # per clock hour
    rent_h = (
        cost.rented_usd_per_gpu_hour(
            usd_per_gpu_hour=t.rent_gpu_h,
            committed=t.rent_committed,
            utilisation=t.util,
            term_h=t.rent_term_h,
            horizon_h=t.horizon_h,
        )
        + rent_storage_h / t.util
    )
    rent = t.rent
    per_gpu_h = np.where(rent, rent_h, build_h)
    run_usd = cost.run_cost_usd(usd_per_gpu_hour=per_gpu_h, num_gpus=G, wall_hours=train_s / 3600)
    # What renting obliges the user to pay (checked against requirements.budget_usd like a
    # built design's capex): the run on demand, the whole term when committed.
    commitment = np.where(t.rent_committed, t.rent_gpu_h * G * t.rent_term_h, run_usd)
    return _Cost(
        server_usd=np.where(rent, 0.0, server_usd),
        network_usd=np.where(rent, 0.0, net_usd),
        storage_usd=np.where(rent, 0.0, storage_usd),
        capex_usd=np.where(rent, 0.0, capex),
        power_kw=np.where(rent, N * t.node_kw, power_kw),  # the instances' draw (in the rental price)
        usd_per_gpu_hour=per_gpu_h,
        opex_usd_per_gpu_hour=np.where(rent, 0.0, opex_h),
        rent_storage_usd_per_gpu_hour=np.where(rent, rent_storage_h, 0.0),
        sharp_usd=np.where(rent, 0.0, sharp_usd),
        rent_commitment_usd=np.where(rent, commitment, 0.0),
        run_usd=run_usd,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Tail:
    """Stage 4: the step's tail (mean, p99, CV) and the figures it came from."""

    stats: TailStats
    dependent_steps: np.ndarray
    hiccup_prob: np.ndarray
    jitter_s: np.ndarray


def _tail_stage(
    t: Table, size: Any, c: _Compute, comm: _Comm, st: _Storage, *, quantise: bool, mean_only: bool = False
) -> _Tail:
    """Jitter on dependent inter-node steps, compute barrier, hiccups (model.tail)."""
    N = t.nodes
    # DP peers off the leaf: beyond one leaf (contiguous), one run (fragmented), all (scattered).
    run = np.where(t.scattered, 1.0, np.minimum(size.nodes_per_leaf, t.fragment_nodes))
    cross = np.clip(1 - run / comm.dp_groups + 2 * t.replaced, 0, 1)
    congestion = 1 + (t.oversub - 1) * cross  # [U] queueing grows with oversubscribed cross-leaf traffic
    dep_steps = (
        comm.dp_steps + 2 * (t.pp - 1) + comm.ep_steps * comm.ep_all_to_alls * comm.layers_stage * t.microbatches
    )
    hiccup_q = np.minimum(1.0, t.hiccup_q * congestion)
    stats = step_tail(
        base_s=st.step_det_s,
        compute_s=c.compute_s,
        compute_cv=t.compute_cv,
        num_ranks=N * t.gpn,
        dependent_steps=dep_steps,
        group_size=N,
        jitter_s=t.jitter_us * 1e-6 * congestion,
        hiccup_prob=hiccup_q,
        hiccup_s=t.hiccup_ms * 1e-3,
        quantise=quantise,
        mean_only=mean_only,
    )
    return _Tail(stats=stats, dependent_steps=dep_steps, hiccup_prob=hiccup_q, jitter_s=t.jitter_us * 1e-6 * congestion)


def _step_stages(
    t: Table, *, quantise: bool, mean_only: bool = False, fixed: CommFixed | None = None
) -> tuple[_Compute, Any, _Comm, _Storage, _Tail]:
    """The stages the step time depends on: compute, fabric sizing, communication, storage, tail
    (``mean_only``: the tail's mean alone, ``model.tail.step_tail``; ``fixed``: ``comm_fixed(t)``)."""
    c = _compute_stage(t)
    size = _size(t)
    comm = _comm_stage(t, size, c, fixed)
    st = _storage_stage(t, size, c.compute_s + c.bubble_s + comm.exposed_s)
    return c, size, comm, st, _tail_stage(t, size, c, comm, st, quantise=quantise, mean_only=mean_only)


def step_time_s(t: Table, *, fixed: CommFixed | None = None) -> np.ndarray:
    """``evaluate_table(t).step_time_s`` without the memory, reliability and cost stages, which
    the step time does not depend on (the throughput anchor's solve needs only this).

    ``fixed``: ``comm_fixed`` of ``t`` at any compute efficiency (or the same rows of a larger
    table's), computed once for many passes."""
    return _step_stages(t, quantise=False, mean_only=True, fixed=fixed)[4].stats.mean_s


def step_and_compute_s(
    t: Table, *, quantise_tail: bool = False, fixed: CommFixed | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``step_time_s(t)`` and the part of it that scales as 1 / compute efficiency (compute and bubble)."""
    c, _, _, _, tail = _step_stages(t, quantise=quantise_tail, mean_only=True, fixed=fixed)
    return tail.stats.mean_s, c.compute_s + c.bubble_s


def evaluate_table(t: Table, *, quantise_tail: bool = False) -> Evaluation:
    """All model outputs for every row of ``t``, stage by stage: compute, fabric sizing,
    communication, storage, tail, reliability, cost (each a function of the table and the
    stages before it).

    Args:
        quantise_tail: round the tail's hiccup-to-jitter ratio to a 2% grid so rows share
            one quadrature (the layout search; ``model.tail.barrier_stats``).
    """
    c, size, comm, st, tail_ = _step_stages(t, quantise=quantise_tail)
    mem = memory_of(t)
    tail = tail_.stats
    rel = _reliability_stage(t, st, comm.exposed_s)
    good, interval = rel.goodput, rel.interval_s
    train_s = t.total_tokens / t.batch_tokens * tail.mean_s / np.maximum(good, 1e-9)
    money = _cost_stage(t, size, rel.units, train_s)
    run_usd = money.run_usd
    net_frac = (comm.exposed_s + tail.mean_s - st.step_det_s) / tail.mean_s * good
    # Wall-time shares: blocked on checkpoints (good x block / interval) and lost to failures
    # (the rest of 1 - goodput: redone work, half an interval plus the durability lag on
    # average, and restart + restore each time), as the simulator's timeline splits them.
    storage_frac = good * rel.block_s / interval
    failure_frac = np.maximum(0.0, 1.0 - good - storage_frac)
    return Evaluation(
        step_time_s=tail.mean_s,
        step_time_det_s=st.step_det_s,
        step_time_p99_s=tail.p99_s,
        step_time_cv=tail.cv,
        compute_s=c.compute_s,
        bubble_s=c.bubble_s,
        comm_exposed_s=comm.exposed_s,
        tp_exposed_s=comm.tp_exposed_s,
        dp_exposed_s=comm.dp_exposed_s,
        pp_exposed_s=comm.pp_exposed_s,
        ep_exposed_s=comm.ep_exposed_s,
        cp_exposed_s=comm.cp_exposed_s,
        dp_allreduce_s=comm.dp_allreduce_s,
        dp_algorithm=comm.dp_algorithm,
        dependent_steps=tail_.dependent_steps,
        latency_per_step_s=(HW_LAT_US["net"]["ring"][2] * t.net_scale + comm.dp_extra_hop_us) * 1e-6,
        jitter_per_step_s=tail_.jitter_s,
        nodes_per_leaf=size.nodes_per_leaf,
        compute_cv=t.compute_cv,
        hiccup_prob=tail_.hiccup_prob,
        hiccup_s=t.hiccup_ms * 1e-3,
        checkpoint_lag_s=st.lag_s,
        checkpoint_bytes=st.ckpt_bytes,
        checkpoint_write_s=st.write_s,
        checkpoint_block_s=rel.block_s,
        checkpoint_durable_s=st.write_s + st.drain_s,
        checkpoint_stall_fraction=reliability.stall_fraction(block_s=rel.block_s, interval_s=interval),
        checkpoint_duty_cycle=storage.duty_cycle(durable_s=st.durable_s, interval_s=interval),
        endurance_interval_s=rel.endurance_interval_s,
        restore_s=st.restore_s,
        restart_s=rel.restart_s,
        job_mttf_s=rel.mttf_s,
        young_interval_s=rel.young_interval_s,
        daly_interval_s=rel.daly_interval_s,
        min_interval_s=rel.min_interval_s,
        checkpoint_drain_slowdown=rel.drain_slowdown,
        checkpoint_interval_s=interval,
        optimal_interval_s=rel.optimal_interval_s,
        goodput_at_optimal=rel.goodput_at_optimal,
        failure_usd=run_usd * failure_frac,
        failures_expected=train_s / rel.mttf_s,
        goodput=good,
        time_to_train_days=train_s / 86400,
        dataset_read_gbps_needed=st.need_gbps,
        storage_read_gbps=st.read_gbps,
        storage_write_gbps=st.write_gbps,
        storage_units=rel.units,
        tiers=size.tiers,
        switches=size.switches,
        transceivers=size.nic_transceivers + size.switch_transceivers,
        cables=size.cables,
        server_capex_usd=money.server_usd,
        network_capex_usd=money.network_usd,
        storage_capex_usd=money.storage_usd,
        capex_usd=money.capex_usd,
        power_kw=money.power_kw,
        usd_per_gpu_hour=money.usd_per_gpu_hour,
        opex_usd_per_gpu_hour=money.opex_usd_per_gpu_hour,
        rent_storage_usd_per_gpu_hour=money.rent_storage_usd_per_gpu_hour,
        sharp_usd=money.sharp_usd,
        rent_commitment_usd=money.rent_commitment_usd,
        run_cost_usd=run_usd,
        network_wait_usd=run_usd * net_frac,
        storage_wait_usd=run_usd * storage_frac,
        dp_congestion=comm.dp_congestion,
        ep_congestion=comm.ep_congestion,
        storage_congestion=st.congestion,
        memory_bytes=mem.total_bytes,
        memory_capacity_bytes=mem.capacity_bytes,
        memory_weights_bytes=mem.weights_bytes,
        memory_grads_bytes=mem.grads_bytes,
        memory_optimizer_bytes=mem.optimizer_bytes,
        memory_activations_bytes=mem.activations_bytes,
        memory_reserve_bytes=mem.reserve_bytes,
        model_flops_6pt=6.0 * t.params_active * t.batch_tokens,
        executed_flops=c.flops_tok * t.batch_tokens,
    )


def row(source: str | None = None, *, per: float = 1.0, kind: type = float, default: Any = dataclasses.MISSING) -> Any:
    """A :class:`Candidate` field copied from the evaluated row: ``kind(row.<source>) / per``
    (``source`` defaults to the field's own name); ``to_records`` fills every such field."""
    return field(default=default, metadata={"row": (source, per, kind)})


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One evaluated design with its best layout (JSON keys of ``gpufabric plan``; docs/spec.md lists them).

    ``mfu`` and ``tflops_per_gpu`` are end to end (model FLOPs of the spec's throughput
    convention per step / (GPUs x peak x mean step time)); ``memory_gb`` is the busiest
    stage's per-GPU memory in GiB against ``memory_capacity_gb``.
    """

    id: str
    fabric: str
    topology: str
    storage: str
    oversubscription: float
    tiers: int = row(kind=int)
    step_time_s: float = row()
    step_time_p99_s: float = row()
    step_time_cv: float = row()
    comm_exposed_s: float = row()
    checkpoint_write_s: float = row()
    checkpoint_stall_fraction: float = row()
    goodput: float = row()
    time_to_train_days: float = row()
    capex_usd: float = row()
    network_capex_usd: float = row()
    storage_capex_usd: float = row()
    usd_per_gpu_hour: float = row()
    run_cost_usd: float = row()
    network_wait_usd: float = row()
    storage_wait_usd: float = row()
    dp_algorithm: str
    switches: int = row(kind=int)
    transceivers: int = row(kind=int)
    cables: int = row(kind=int)
    power_kw: float = row()
    dataset_read_gbps_needed: float = row()
    storage_read_gbps: float = row()
    young_interval_min: float = row("young_interval_s", per=60)
    daly_interval_min: float = row("daly_interval_s", per=60)
    min_interval_min: float = row("min_interval_s", per=60)
    checkpoint_interval_min: float = row("checkpoint_interval_s", per=60)
    optimal_interval_min: float = row("optimal_interval_s", per=60)
    goodput_at_optimal: float = row()
    failure_usd: float = row()
    failures_expected: float = row()
    meets_requirements: bool
    violations: tuple[str, ...]
    layout: Layout
    layout_runner_up: str | None
    layout_note: str
    memory_gb: float = row("memory_bytes", per=GIB)
    memory_capacity_gb: float = row("memory_capacity_bytes", per=GIB)
    mfu: float
    tflops_per_gpu: float
    compute_efficiency: float
    breakdown: StepBreakdown = field(repr=False)
    capacity: str = "build"  # build | rent
    rental: str | None = None  # catalog rentals id of a rented design
    term: str | None = None  # on_demand | 1y | 3y
    in_network_reduction: bool = False  # SHARP chosen (and the fabric can)
    sharp_usd: float = row(default=0.0)  # its licences and aggregation manager
    opex_usd_per_gpu_hour: float = row(default=0.0)  # built: energy, facility, staff per GPU-hour (capex excluded)
    rent_storage_usd_per_gpu_hour: float = row(default=0.0)
    break_even_utilisation: float | None = None  # rented on demand: building is cheaper above this
    break_even_months: float | None = None  # rented: months of use after which building is cheaper
    build_reference: str | None = None  # the built design the break-even compares with
    rent_commitment_usd: float = row(
        default=0.0
    )  # rented: what renting obliges (the run on demand, the term committed)
    storage_units: int = row(
        kind=int, default=0
    )  # building blocks bought (local NVMe: of the durable tier it drains to)
    storage_read_gbps_per_node: float = 0.0  # designed shared-storage read bandwidth per node (bench SLOs)
    storage_write_gbps_per_node: float = 0.0  # designed write bandwidth per node
    checkpoint_duty_cycle: float = row(default=0.0)  # share of time the storage writes checkpoints


#: Keys of each candidate in JSON, in order (DESIGN.md command contract first, then extras):
#: the record's own fields, its breakdown written after them.
CANDIDATE_KEYS = tuple(f.name for f in dataclasses.fields(Candidate) if f.name != "breakdown")
#: The fields copied from the evaluated row (``row``): name -> (Evaluation field, divisor, type).
ROW_FIELDS: dict[str, tuple[str, float, type]] = {
    f.name: (f.metadata["row"][0] or f.name, f.metadata["row"][1], f.metadata["row"][2])
    for f in dataclasses.fields(Candidate)
    if "row" in f.metadata
}
