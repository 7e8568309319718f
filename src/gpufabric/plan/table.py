"""Enumerate candidate designs and lay them out as typed columns (one numpy array per input).

A *design* is fabric x topology x oversubscription x storage; a *row* is one layout
(plan/layouts.py) on one design. :class:`Table` holds every input the evaluator needs
for every row, so one vectorised pass evaluates them all; the benchmark and ``sweep``
concatenate tables of many workloads the same way.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.model.collectives import gpu_link_fields
from gpufabric.model.congestion import FRAGMENT_NODES
from gpufabric.model.cost import HOURS_PER_MONTH
from gpufabric.model.flops import RECOMPUTE, active_params, expert_params_of
from gpufabric.model.memory import reserve_gib, state_bytes
from gpufabric.model.step import ACT_BYTES, GRAD_BYTES
from gpufabric.plan.layouts import Layout, heads_of, spec_layout
from gpufabric.spec.models import Spec


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    """One point of the design space: a built fabric x topology x oversubscription x storage
    (with or without in-network reduction), or a rented offering x term x storage."""

    fabric: str
    topology: str
    oversubscription: float
    storage: str
    sharp: bool = False  # in-network reduction (SHARP) chosen; only on capable fabrics
    rental: str = ""  # catalog rentals id; "" for a built design
    term: str = ""  # on_demand | 1y | 3y for a rented design

    @property
    def rented(self) -> bool:
        return bool(self.rental)

    @property
    def capacity(self) -> str:
        return "rent" if self.rental else "build"

    @property
    def id(self) -> str:
        if self.rental:
            return f"rent/{self.rental}/{self.term}/{self.storage}"
        return f"{self.fabric}/{self.topology}/{self.oversubscription:g}:1/{self.storage}" + (
            "/sharp" if self.sharp else ""
        )


#: Topology name of a rented design: the provider's fabric, modelled as a non-blocking fat tree.
PROVIDER = "provider"


def rental_ids(spec: Any, catalog: Catalog) -> list[str]:
    """Offerings to consider: options.rentals, else every one with the cluster's GPU and GPUs per node
    (``spec``: a training Spec or an InferenceSpec; both have cluster and options)."""
    if spec.options.rentals is not None:
        return list(spec.options.rentals)
    return [k for k, r in catalog.rentals.items() if r.gpu == spec.cluster.gpu and r.gpus == spec.cluster.gpus_per_node]


def enumerate_designs(spec: Spec, catalog: Catalog | None = None) -> list[Design]:
    """Every design the spec's options allow.

    Built: fabric x topology x oversubscription x storage x in-network reduction (SHARP
    only on fabrics whose catalog entry can, when ``catalog`` is given). Rented (with
    ``options.capacity`` rent and a catalog): offering x term x the storage both the spec
    and the offering allow.
    """
    o = spec.options
    out: list[Design] = []
    if "build" in o.capacity:
        for f, t, r, s, sh in itertools.product(
            o.fabrics, o.topologies, o.oversubscription, o.storage, o.sharp_choices
        ):
            if sh and catalog is not None and not catalog.fabric(f).in_network_reduction:
                continue
            out.append(Design(fabric=f, topology=t, oversubscription=float(r), storage=s, sharp=sh))
    if "rent" in o.capacity and catalog is not None:
        for rid in rental_ids(spec, catalog):
            offer = catalog.rental(rid)
            for term, s in itertools.product(o.rent_terms, [s for s in o.storage if s in offer.storage]):
                out.append(
                    Design(
                        fabric=offer.fabric, topology=PROVIDER, oversubscription=1.0, storage=s, rental=rid, term=term
                    )
                )
    return out


A = np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    """Evaluator inputs, one array element per row (units in the names where not obvious)."""

    # Cluster and workload.
    nodes: A
    gpn: A
    tp: A
    cp: A  # context parallelism (ring attention)
    pp: A
    dp: A
    ep: A
    microbatches: A
    microbatch_size: A
    virtual_stages: A
    zero_stage: A
    recompute: A  # 0 none, 1 selective, 2 full (model.flops.RECOMPUTE)
    sequence_parallel: A
    tp_overlap: A
    flash_attention: A
    params: A
    params_active: A
    expert_params: A
    top_k: A
    capacity_factor: A
    layers: A
    hidden: A
    heads: A
    kv_ratio: A  # kv_heads / heads (grouped-query attention)
    ffn_hidden: A
    gated_mlp: A
    dropout: A
    nvl_domain: A  # GPUs of one NVLink domain (catalog nvlink_domain; 72 in an NVL72 rack)
    seq_len: A
    vocab: A
    batch_tokens: A
    total_tokens: A
    compute_eff: A  # executed FLOPs / (peak x compute time); solved by plan.anchor
    peak_tflops: A
    act_bytes: A
    grad_bytes: A
    w_bpp: A  # weights, gradient, optimizer bytes per parameter (model.memory)
    g_bpp: A
    o_bpp: A
    hbm_gib: A
    reserve_gib: A
    ckpt_bpp: A
    interval_s: A  # 0 with interval_auto
    interval_auto: A  # checkpoint.interval_min: auto (the optimal interval per row)
    sync: A
    dataset_tb: A
    bytes_per_token: A
    random_read: A
    mttf_h: A
    restart_s: A
    deterministic: A
    nvl_busbw: A
    intra_pci: A
    nvls_busbw: A
    nvls_lat: A
    nvl_line: A  # NVLink line rate per GPU per direction (the scale-up ceiling; model.collectives.build_links)
    nvl_lat_scale: A  # the generation's NVLink step latency / Hopper's
    nic_host: A  # what a NIC's PCIe slot carries (inf: not known)
    host_copy: A
    compute_cv: A
    node_usd: A
    node_kw: A
    launch_us: A
    usd_per_kwh: A
    pue: A
    years: A
    facility_usd_per_mw: A  # 0 unless site.tco (total cost of ownership)
    facility_years: A
    staff_usd_per_gpu_year: A
    other_networks_usd_per_node: A  # front-end + storage networks
    kept: A
    ckpt_target_s: A
    util: A  # mean utilisation over the horizon (options.utilisation or the pipeline's busy share)
    horizon_h: A  # hours the capacity is needed for (options.horizon_months; default the amortisation)
    residual: A  # share of capex recovered by resale at the end of a horizon shorter than the amortisation
    fragment_nodes: A  # placement: nodes per contiguous run under a leaf (inf: contiguous)
    replaced: A  # placement: share of nodes that replaced failed ones on other leaves
    duty_max: A  # largest share of time storage may write checkpoints (bounds the auto interval)
    restore_target_s: A  # storage sized to read a checkpoint back in this time
    other_read_gbps: A  # other consumers of the shared storage, GB/s for the whole cluster
    other_write_gbps: A
    retention_s: A  # storage.retention_hours: keep every checkpoint of this window (0: the catalog's count)
    # Design.
    nic_gbps: A
    net_scale: A
    jitter_us: A
    hiccup_q: A
    hiccup_ms: A
    sharp: A
    nic_usd: A
    nic_w: A
    radix: A
    switch_ns: A
    switch_usd: A
    switch_w: A
    nic_xcvr_usd: A
    nic_xcvr_w: A
    sw_xcvr_usd: A
    sw_xcvr_w: A
    sw_xcvr_ports: A
    cable_usd: A
    rail: A
    scattered: A  # options.placement == scattered (a job on leaves shared with others)
    oversub: A
    st_local: A
    st_client_w: A
    st_client_r: A
    st_unit_w: A
    st_unit_r: A
    st_unit_tb: A
    st_unit_usd: A
    st_unit_w_power: A
    st_commit_ms: A
    st_commit_jitter_ms: A
    st_concurrency: A
    st_per_node: A
    st_drain: A
    st_drain_gbps: A
    st_dwpd: A  # drive endurance of the building blocks, drive writes per day (0: not limited)
    st_warranty_years: A  # years the endurance rating covers
    sharp_switch_usd: A  # in-network reduction licence per switch (0 unless chosen)
    sharp_node_usd: A  # aggregation manager per node (0 unless chosen)
    rent: A  # a rented offering: no capex, priced per GPU-hour
    rent_committed: A  # 1y/3y: every hour of the term is paid
    rent_gpu_h: A  # catalog price per GPU-hour for the term
    rent_storage_tb_month: A  # the provider's durable storage, USD per TB-month
    rent_term_h: A  # hours of the commitment (0 on demand)

    def __len__(self) -> int:
        return len(self.nodes)

    def take(self, index: Any) -> Table:
        """Rows ``index`` (an index array or slice)."""
        return Table(**{f: getattr(self, f)[index] for f in FIELDS})

    def replace(self, **columns: Any) -> Table:
        """A copy with some columns replaced (scalars broadcast)."""
        n = len(self)
        return dataclasses.replace(self, **{k: np.broadcast_to(np.asarray(v), (n,)).copy() for k, v in columns.items()})


FIELDS = tuple(f.name for f in dataclasses.fields(Table))
_DESIGN_FIELDS = tuple(f for f in FIELDS[FIELDS.index("nic_gbps") :] if f != "scattered")
_LAYOUT_FIELDS = (
    "tp",
    "cp",
    "pp",
    "dp",
    "ep",
    "microbatches",
    "microbatch_size",
    "virtual_stages",
    "zero_stage",
    "recompute",
)
_NUMERIC_LAYOUT_FIELDS = tuple(k for k in _LAYOUT_FIELDS if k != "recompute")
#: Columns held as booleans (build_table casts them after filling floats).
BOOL_FIELDS = frozenset(
    {
        "sharp",
        "rent",
        "rent_committed",
        "rail",
        "scattered",
        "st_local",
        "st_per_node",
        "st_drain",
        "sync",
        "random_read",
        "deterministic",
        "intra_pci",
        "sequence_parallel",
        "flash_attention",
        "interval_auto",
        "gated_mlp",
        "dropout",
    }
)


def _peak(gpu: Any, precision: str) -> float:
    return {
        "bf16": gpu.peak_bf16_tflops,
        "fp16": gpu.peak_bf16_tflops,
        "fp8": gpu.peak_fp8_tflops,
        "fp32": gpu.peak_fp32_tflops,
    }[precision]


def nvlink_domain(spec: Spec, gpu: Any) -> int:
    """GPUs of the job in one NVLink domain: the catalog's domain (NVL72), else the spec's node."""
    return max(spec.cluster.gpus_per_node, min(gpu.nvlink_domain or 0, spec.num_gpus))


def model_scalars(spec: Spec) -> dict[str, Any]:
    """The model's derived sizes (part of ``workload_scalars``; all the efficiency model reads)."""
    m = spec.workload.model
    kw: dict[str, Any] = {
        "experts": m.experts,
        "top_k": m.top_k,
        "expert_params": m.expert_params,
        "active": m.active_params,
    }
    heads = heads_of(spec)
    return {
        "params_active": active_params(m.params, **kw),
        "expert_params": expert_params_of(m.params, **kw),
        "heads": heads,
        "kv_ratio": (m.kv_heads or heads) / heads,
        "ffn_hidden": m.ffn_hidden or 4 * m.hidden,
    }


#: The columns ``workload_values`` gives, in its order.
WORKLOAD_FIELDS = (
    "nodes",
    "gpn",
    "sequence_parallel",
    "tp_overlap",
    "flash_attention",
    "params",
    "params_active",
    "expert_params",
    "top_k",
    "capacity_factor",
    "layers",
    "hidden",
    "heads",
    "kv_ratio",
    "ffn_hidden",
    "gated_mlp",
    "dropout",
    "nvl_domain",
    "seq_len",
    "vocab",
    "batch_tokens",
    "total_tokens",
    "compute_eff",
    "peak_tflops",
    "act_bytes",
    "grad_bytes",
    "w_bpp",
    "g_bpp",
    "o_bpp",
    "hbm_gib",
    "reserve_gib",
    "ckpt_bpp",
    "interval_auto",
    "interval_s",
    "sync",
    "dataset_tb",
    "bytes_per_token",
    "random_read",
    "mttf_h",
    "restart_s",
    "deterministic",
    "nvl_busbw",
    "intra_pci",
    "nvls_busbw",
    "nvls_lat",
    "nvl_line",
    "nvl_lat_scale",
    "nic_host",
    "host_copy",
    "compute_cv",
    "node_usd",
    "node_kw",
    "launch_us",
    # The site's cost inputs: the spec's site section over the catalog's; TCO extras only with site.tco.
    "usd_per_kwh",
    "pue",
    "years",
    "facility_usd_per_mw",
    "facility_years",
    "staff_usd_per_gpu_year",
    "other_networks_usd_per_node",
    "kept",
    "ckpt_target_s",
    # Horizon, utilisation and resale (options.horizon_months, options.pipeline; docs/planner.md).
    "util",
    "horizon_h",
    "residual",
    "duty_max",
    "restore_target_s",
    "other_read_gbps",
    "other_write_gbps",
    "retention_s",
    # Placement: fragment run and replaced share of options.placement (model.congestion).
    "fragment_nodes",
    "replaced",
    "scattered",
)


def workload_scalars(spec: Spec, catalog: Catalog) -> dict[str, Any]:
    """Columns that are the same for every row of one spec (layout and design excluded)."""
    return dict(zip(WORKLOAD_FIELDS, workload_values(spec, catalog), strict=True))


def workload_values(spec: Spec, catalog: Catalog) -> list[Any]:
    """``workload_scalars``' values in ``WORKLOAD_FIELDS`` order (a list: a batch converts one per
    spec, without the dict)."""
    w = spec.workload
    m = w.model
    par = w.parallelism
    cl = spec.cluster
    gpu = catalog.gpu(cl.gpu)
    site = catalog.site
    ss = spec.site
    ds = w.dataset
    ck = w.checkpoint
    o = spec.options
    need = spec.storage
    wb, gb, ob = state_bytes(w.precision, w.main_grads)
    ms = model_scalars(spec)
    links = _gpu_links(gpu)
    years = float(ss.amortization_years or site.amortization_years)
    months, util = o.horizon_and_utilisation(years)
    left = max(0.0, 1.0 - months / (12.0 * years))  # book value left at the horizon (straight line)
    fragmented = o.placement == "fragmented"
    return [
        cl.nodes,
        cl.gpus_per_node,
        par.sequence_parallel,
        par.tp_overlap,
        w.flash_attention,
        m.params,
        ms["params_active"],
        ms["expert_params"],
        m.top_k,
        m.capacity_factor,
        m.layers,
        m.hidden,
        ms["heads"],
        ms["kv_ratio"],
        ms["ffn_hidden"],
        m.gated_mlp,
        m.dropout,
        nvlink_domain(spec, gpu),
        m.seq_len,
        m.vocab,
        w.global_batch_tokens,
        w.total_tokens,
        0.5,  # compute_eff: plan.anchor solves it
        _peak(gpu, w.precision),
        ACT_BYTES[w.precision],
        GRAD_BYTES[w.precision],
        wb,
        gb,
        ob,
        gpu.hbm_gb,
        w.memory_reserve_gb if w.memory_reserve_gb is not None else reserve_gib(gpu.hbm_gb),
        ck.bytes_per_param,
        ck.interval_min == "auto",
        0.0 if ck.interval_min == "auto" else ck.interval_min * 60.0,
        ck.mode == "sync",
        ds.size_tb if ds else 0.0,
        ds.bytes_per_token_for(m.seq_len) if ds else 0.0,
        bool(ds and ds.pattern == "random"),
        spec.reliability.gpu_mttf_hours,
        spec.reliability.restart_min * 60.0,
        spec.requirements.reproducibility == "bitwise",
        gpu.nvlink_busbw_gbps,
        gpu.intra_link == "pci",
        gpu.nvls_busbw_gbps if gpu.nvls else 0.0,
        gpu.nvls_latency_us,
        links["nvlink_line_gbps"],
        links["nvlink_latency_scale"],
        links["nic_host_gbps"],
        gpu.host_copy_gbps,
        gpu.compute_jitter_cv,
        gpu.node_usd * cl.gpus_per_node / gpu.gpus_per_node,
        gpu.node_power_kw * cl.gpus_per_node / gpu.gpus_per_node,
        site.launch_us,
        float(site.usd_per_kwh if ss.usd_per_kwh is None else ss.usd_per_kwh),
        float(site.pue if ss.pue is None else ss.pue),
        years,
        _tco(ss, "facility_usd_per_mw", site.facility_usd_per_mw),
        float(ss.facility_years or site.facility_years),
        _tco(ss, "staff_usd_per_gpu_year", site.staff_usd_per_gpu_year),
        _tco(ss, "frontend_network_usd_per_node", site.frontend_network_usd_per_node)
        + _tco(ss, "storage_network_usd_per_node", site.storage_network_usd_per_node),
        site.checkpoints_kept,
        site.checkpoint_write_target_s,
        util,
        months * HOURS_PER_MONTH,
        site.resale_fraction * left,
        site.checkpoint_duty_max,
        need.restore_min * 60.0 if need.restore_min is not None else site.restore_target_s,
        need.other_read_gbps_per_node * cl.nodes,
        need.other_write_gbps_per_node * cl.nodes,
        (need.retention_hours or 0.0) * 3600.0,
        FRAGMENT_NODES if fragmented else np.inf,
        _replaced(float(cl.gpus_per_node), float(spec.reliability.gpu_mttf_hours)) if fragmented else 0.0,
        o.placement == "scattered",
    ]


def _tco(ss: Any, name: str, catalog_value: float) -> float:
    """A TCO extra: the spec's site value, else the catalog's with site.tco, else 0."""
    given = getattr(ss, name)
    if given is not None:
        return float(given)
    return float(catalog_value) if ss.tco else 0.0


@lru_cache(maxsize=256)
def _replaced(gpus_per_node: float, gpu_mttf_hours: float) -> float:
    """``model.congestion.replaced_fraction`` of one spec, by its two inputs (numpy on two
    scalars costs ~10 us; a batch of specs asks for the same few values)."""
    from gpufabric.model.congestion import replaced_fraction

    return float(replaced_fraction(gpus_per_node=gpus_per_node, gpu_mttf_hours=gpu_mttf_hours))


#: ``gpu_link_fields`` by catalog GPU object (id -> (the object, its fields)): the object is
#: frozen and held here, so its id cannot be reused while its entry lives.
_GPU_LINKS: dict[int, tuple[Any, dict[str, Any]]] = {}


def _gpu_links(gpu: Any) -> dict[str, Any]:
    hit = _GPU_LINKS.get(id(gpu))
    if hit is None or hit[0] is not gpu:
        if len(_GPU_LINKS) >= 64:  # bounded: a few catalogs' GPUs
            _GPU_LINKS.clear()
        hit = _GPU_LINKS[id(gpu)] = (gpu, gpu_link_fields(gpu))
    return hit[1]


def design_columns(catalog: Catalog, designs: Sequence[Design]) -> dict[str, np.ndarray]:
    """Design columns, one element per design."""
    cols: dict[str, list[float]] = {k: [] for k in _DESIGN_FIELDS}
    for d in designs:
        f = catalog.fabric(d.fabric)
        sw = catalog.switches[f.switch]
        s = catalog.storage_backend(d.storage)
        offer = catalog.rental(d.rental) if d.rental else None
        sharp = bool(d.sharp and f.in_network_reduction)
        nic_x, sw_x, fib = catalog.optics[f.nic_optic], catalog.optics[f.switch_optic], catalog.optics[f.fiber]
        values = dict(
            nic_gbps=f.nic_line_gbps * f.nic_efficiency,
            net_scale=f.net_latency_scale,
            jitter_us=f.jitter_us,
            hiccup_q=f.hiccup_prob,
            hiccup_ms=f.hiccup_ms,
            sharp=sharp,
            nic_usd=f.nic_usd,
            nic_w=f.nic_power_w,
            radix=sw.radix,
            switch_ns=sw.latency_ns,
            switch_usd=sw.price_usd,
            switch_w=sw.power_w,
            nic_xcvr_usd=nic_x.price_usd,
            nic_xcvr_w=nic_x.power_w,
            sw_xcvr_usd=sw_x.price_usd,
            sw_xcvr_w=sw_x.power_w,
            sw_xcvr_ports=sw_x.ports_per_module,
            cable_usd=fib.price_usd,
            rail=d.topology == "rail-optimized",
            oversub=d.oversubscription,
            st_local=s.kind == "local",
            st_client_w=s.client_write_gbps,
            st_client_r=s.client_read_gbps,
            st_unit_w=s.unit_write_gbps,
            st_unit_r=s.unit_read_gbps,
            st_unit_tb=s.unit_capacity_tb,
            st_unit_usd=s.unit_usd,
            st_unit_w_power=s.unit_power_w,
            st_commit_ms=s.commit_latency_ms,
            st_commit_jitter_ms=s.commit_jitter_ms,
            st_concurrency=s.commit_concurrency,
            st_per_node=s.commit_scope == "node",
            st_drain=s.async_drain,
            st_drain_gbps=s.drain_gbps_per_node,
            st_dwpd=s.drive_dwpd,
            st_warranty_years=s.drive_warranty_years,
            sharp_switch_usd=f.sharp_usd_per_switch if sharp else 0.0,
            sharp_node_usd=f.sharp_usd_per_node if sharp else 0.0,
            rent=offer is not None,
            rent_committed=offer is not None and d.term != "on_demand",
            rent_gpu_h=offer.usd_per_gpu_hour(d.term) if offer else 0.0,
            rent_storage_tb_month=offer.storage_usd_per_tb_month if offer else 0.0,
            rent_term_h={"1y": 1.0, "3y": 3.0}.get(d.term, 0.0) * 8760.0,
        )
        for k in _DESIGN_FIELDS:
            cols[k].append(float(values[k]))
    return {k: np.array(v, dtype=float) for k, v in cols.items()}


_numeric_layout_fields = attrgetter(*_NUMERIC_LAYOUT_FIELDS)


def _layout_values(lay: Layout) -> np.ndarray:
    """One layout's columns (``layout_columns``' order), as a fields x 1 block."""
    return np.array([*_numeric_layout_fields(lay), RECOMPUTE.index(lay.recompute)], dtype=float)[:, None]


def layout_columns(layouts: Sequence[Layout]) -> dict[str, np.ndarray]:
    """Layout columns, one element per layout."""
    if len(layouts) == 1:  # a batch of specs meets a new layout per spec: one flat list
        return dict(zip((*_NUMERIC_LAYOUT_FIELDS, "recompute"), _layout_values(layouts[0]), strict=True))
    # One conversion of a fields x layouts list.
    values = np.array(
        [[getattr(lay, k) for lay in layouts] for k in _NUMERIC_LAYOUT_FIELDS]
        + [[RECOMPUTE.index(lay.recompute) for lay in layouts]],
        dtype=float,
    ).reshape(len(_NUMERIC_LAYOUT_FIELDS) + 1, len(layouts))
    return dict(zip((*_NUMERIC_LAYOUT_FIELDS, "recompute"), values, strict=True))


_INDEX = {f: i for i, f in enumerate(FIELDS)}
_BOOL_INDEX = tuple(_INDEX[f] for f in sorted(BOOL_FIELDS))
_WORKLOAD_ROWS = np.array([_INDEX[k] for k in WORKLOAD_FIELDS], dtype=np.intp)
_LAYOUT_ROWS = np.array([_INDEX[k] for k in (*_NUMERIC_LAYOUT_FIELDS, "recompute")], dtype=np.intp)
_DESIGN_ROWS = np.array([_INDEX[k] for k in _DESIGN_FIELDS], dtype=np.intp)
#: Where each field is in workload, design and layout values end to end (``table_block``'s one row).
_ONE_ROW_ORDER = np.argsort(np.concatenate((_WORKLOAD_ROWS, _DESIGN_ROWS, _LAYOUT_ROWS)))


def table_block(
    spec: Spec,
    catalog: Catalog,
    designs: Sequence[Design],
    layouts: Sequence[Layout] | None = None,
    *,
    pairs: tuple[np.ndarray, np.ndarray] | None = None,
    compute_efficiency: float | Sequence[float] | np.ndarray | None = None,
    memo: dict[Any, Any] | None = None,
) -> np.ndarray:
    """``build_table``'s columns as one float block, one row per field in ``FIELDS`` order
    (rows x columns transposed): blocks of many specs stack with one ``np.concatenate``.

    ``memo``: a dict the caller keeps for the blocks of one batch under one ``catalog``; the
    design and layout columns of designs and layouts seen before are read from it (they
    depend on nothing else), so a batch of specs with the same options builds them once.
    """
    layouts = tuple(layouts) if layouts is not None else (spec_layout(spec),)
    designs = tuple(designs)
    memo = {} if memo is None else memo
    scalar_rows, scalar_values = _workload_scalars(spec, catalog, memo)
    parts = [_columns(memo, designs, lambda: design_columns(catalog, designs))]
    if len(layouts) == 1:  # a batch of specs meets a new layout per spec: no memo entry (~5 us)
        parts.append((_LAYOUT_ROWS, _layout_values(layouts[0])))
    else:
        parts.append(_columns(memo, layouts, lambda: layout_columns(layouts)))
    one = len(designs) == 1 and len(layouts) == 1
    if one and pairs is not None:  # the pair (0, 0), or none: the same row as no pairs
        one = len(pairs[0]) == 1 and int(pairs[0][0]) == 0 and int(pairs[1][0]) == 0
    (design_rows, design_values), layout_values = parts[0], parts[1][1]
    if one and design_rows is _DESIGN_ROWS and design_values is not None and layout_values is not None:
        # One row (an anchor's measured point, a single-design spec): the three parts end to
        # end, put in field order by one take.
        column = np.concatenate((scalar_values, design_values[:, 0], layout_values[:, 0]))[_ONE_ROW_ORDER]
        if compute_efficiency is not None:
            column[_INDEX["compute_eff"]] = np.asarray(compute_efficiency, dtype=float).ravel()[0]
        return column[:, None]
    if one:
        column = np.empty(len(FIELDS))
        column[scalar_rows] = scalar_values
        for rows, values in parts:
            column[rows] = values[:, 0] if values is not None else 0.0
        if compute_efficiency is not None:
            column[_INDEX["compute_eff"]] = np.asarray(compute_efficiency, dtype=float).ravel()[0]
        return column[:, None]
    if pairs is None:
        li = np.repeat(np.arange(len(layouts)), len(designs))
        di = np.tile(np.arange(len(designs)), len(layouts))
    else:
        li, di = pairs
    block = np.empty((len(FIELDS), len(li)))
    block[scalar_rows] = scalar_values[:, None]
    if compute_efficiency is not None:
        ce = np.asarray(compute_efficiency, dtype=float)
        block[_INDEX["compute_eff"]] = ce[li] if ce.ndim else float(ce)
    for (rows, values), index in zip(parts, (di, li), strict=True):
        block[rows] = values[:, index] if values is not None else 0.0
    return block


def _columns(memo: dict[Any, Any], key: tuple[Any, ...], build: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """The block rows and values (fields x items) of ``design_columns`` or ``layout_columns``
    of the items ``key``, built once per batch (None: no items). Rows as an index array: numpy
    scatters through one ~15x faster than through a list."""
    hit = memo.get(key)
    if hit is None:
        cols = build()
        values = np.array(list(cols.values()), dtype=float) if all(len(v) for v in cols.values()) else None
        rows = tuple(cols)
        index = _DESIGN_ROWS if rows == _DESIGN_FIELDS else np.array([_INDEX[k] for k in rows], dtype=np.intp)
        hit = memo[key] = (index, values)
    return hit


def _workload_scalars(spec: Spec, catalog: Catalog, memo: dict[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``workload_values`` as (block rows, float values), once per spec object in a batch (the
    anchor's stage and the chosen rows read the same spec). The entry holds the spec, so its
    id cannot be reused meanwhile."""
    key = ("workload", id(spec))
    hit = memo.get(key)
    if hit is None or hit[0] is not spec:
        hit = memo[key] = (spec, np.array(workload_values(spec, catalog), dtype=float))
    return _WORKLOAD_ROWS, hit[1]


def table_from_block(block: np.ndarray) -> Table:
    """The :class:`Table` of a ``table_block`` (booleans cast; other columns are views of the block)."""
    cols: dict[str, np.ndarray] = dict(zip(FIELDS, block, strict=True))
    for i in _BOOL_INDEX:
        cols[FIELDS[i]] = block[i].astype(bool)
    return Table(**cols)


def build_table(
    spec: Spec,
    catalog: Catalog,
    designs: Sequence[Design],
    layouts: Sequence[Layout] | None = None,
    *,
    pairs: tuple[np.ndarray, np.ndarray] | None = None,
    compute_efficiency: float | Sequence[float] | np.ndarray | None = None,
) -> Table:
    """Columns of inputs under ``spec``.

    Rows are every layout x design (layout-major: row = layout index x len(designs) +
    design index), or exactly the (layout index, design index) ``pairs``. ``layouts``
    defaults to the spec's own; ``compute_efficiency`` (one value, or one per layout) to 0.5
    (plan.anchor solves it).
    """
    return table_from_block(
        table_block(spec, catalog, designs, layouts, pairs=pairs, compute_efficiency=compute_efficiency)
    )


def concat_tables(tables: Sequence[Table]) -> Table:
    """Stack tables row-wise."""
    return Table(**{k: np.concatenate([getattr(t, k) for t in tables]) for k in FIELDS})


def scale_table(t: Table, *, network_latency: float = 1.0, storage_latency: float = 1.0) -> Table:
    """A copy with network latency/jitter or storage commit latency/jitter multiplied.

    Network: NCCL NET step latencies, switch latency, per-step jitter and hiccup length
    (launch overhead and NVLink latencies stay). Storage: commit latency and its jitter.
    """
    return dataclasses.replace(
        t,
        net_scale=t.net_scale * network_latency,
        jitter_us=t.jitter_us * network_latency,
        switch_ns=t.switch_ns * network_latency,
        hiccup_ms=t.hiccup_ms * network_latency,
        st_commit_ms=t.st_commit_ms * storage_latency,
        st_commit_jitter_ms=t.st_commit_jitter_ms * storage_latency,
    )
