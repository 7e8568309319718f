"""Link parameters of the collective model (model.collectives) and the one place they are built.

:class:`Links` holds what a GPU generation and a fabric give the NCCL model (achievable
NVLink and NIC bandwidths, tuner latency scales, line-rate ceilings, launch costs), as
scalars or row arrays. :func:`build_links` is the only constructor the library uses:
``predict`` (:func:`links_for`, from catalog entries), the planner (its table columns)
and serving all go through it, so the two cannot disagree on a field. The empirical
constants that are ``Links`` defaults live here too, each with how it was fitted.
Units: bandwidths GB/s (1e9 B/s), times microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufabric.model.topology import nic_host_gbps

#: NVLSTree blend of its two stages. NCCL's tuner (tuning.cc, v2.27+: ``bw = min(intraBw,
#: interBw)``, interBw doubled on 2 nodes) takes the slower of the NVSwitch reduction (the
#: NVLS algbw) and the tree across nodes (the node's NIC bandwidth, 2x on 2 nodes, converted
#: to algbw by nRanks/nsteps); measured tables sit below that min where the two are close.
#: The model blends them as a p-norm ``(A_nvls^-k + A_tree^-k)^(-1/k)`` (k -> inf is the
#: tuner's min). k is fitted (scripts/accuracy.py fit_constants) to the 16 GiB row of the
#: 2-node 8xH100 NDR table of NVIDIA/nccl-tests#309 (algbw 250.2 GB/s); the 4- and 8-node
#: tables of the same issue are held out (docs/accuracy.md). Empirical.
NVLS_TREE_SHARPNESS = 3.1
#: Growth of the algorithm latency term per doubling of the message above 8 B. Published
#: nccl-tests times rise 35-50% from 8 B to 64 KiB on 1, 2 and 4 nodes where the tuner's
#: constants are flat (NCCL widens threads, then channels, as the size grows; each step
#: synchronises more of them). Empirical: fitted by scripts/accuracy.py (fit_constants) on
#: the fit rows only, with eager_launch_us and proxy_us; docs/accuracy.md has the
#: held-out error.
LATENCY_GROWTH = 0.025
#: Size where the growth stops: NCCL stops adding threads and channels once every one of
#: its (up to 32) channels has a full thread block's work, nChannels x nThreads x
#: threadThreshold = 32 x 512 x 64 B = 1 MiB for ring/tree Simple and ring LL on 8 ranks
#: (enqueue.cc topoGetAlgoInfo, tuning.cc threadThresholds, NCCL 2.26).
GROWTH_SATURATION_BYTES = 2.0**20


@dataclass(frozen=True, slots=True, kw_only=True)
class Links:
    """Link-class parameters of one or many designs (scalars or broadcastable arrays)."""

    nvl_busbw_gbps: Any  # achievable intra-node ring busbw per GPU
    intra_is_pci: Any  # bool: PCIe (no NVLink) inside the node
    nvls_busbw_gbps: Any  # NVLS busbw; 0 where absent
    nvls_latency_us: Any
    nic_gbps: Any  # achievable bandwidth per NIC
    nics_per_node: Any
    net_latency_scale: Any  # multiplier on tuning.cc NET latencies (1 for IB)
    extra_hop_us: Any  # added per inter-node step for switch hops beyond the first
    in_network_reduction: Any  # bool: SHARP-capable fabric
    launch_us: Any = 1.0
    oversubscription: Any = 1.0
    ranks_per_leaf: Any = 1e18  # ranks under one leaf (all-to-all cross-leaf fraction)
    eager_launch_us: Any = 0.0  # per-op launch + host overhead without CUDA graphs; 0 = launch_us
    proxy_us: Any = 0.0  # per-op network proxy overhead across nodes (once per op), eager only
    latency_growth: Any = LATENCY_GROWTH  # latency term growth per doubling of the size above 8 B
    nvlink_line_gbps: Any = np.inf  # scale-up line rate per GPU per direction (the NVLink/PCIe ceiling)
    nvls_tree_sharpness: Any = NVLS_TREE_SHARPNESS  # p-norm of the NVLSTree min(NVLS, tree) blend
    p2p_net_share: Any = (
        np.nan
    )  # share of one NIC a cross-node send/recv pair reaches; NaN: NCCL's channels (model.p2p)
    nvlink_latency_scale: Any = 1.0  # the GPU generation's NVLink step latency / Hopper's (tuner constants)


def build_links(
    *,
    nvl_busbw_gbps: Any,
    intra_is_pci: Any,
    nvls_busbw_gbps: Any,
    nvls_latency_us: Any,
    nvlink_line_gbps: Any,
    nvlink_latency_scale: Any,
    nic_gbps: Any,
    nic_host_gbps: Any,
    nics_per_node: Any,
    net_latency_scale: Any,
    switch_latency_ns: Any,
    hops: Any,
    in_network_reduction: Any,
    launch_us: Any,
    oversubscription: Any = 1.0,
    ranks_per_leaf: Any = 1e18,
    eager_launch_us: Any = 0.0,
    proxy_us: Any = 0.0,
    nic_slowdown: Any = 1.0,
) -> Links:
    """The one place :class:`Links` are built from a GPU generation and a fabric (scalars or
    row arrays): ``predict`` (:func:`links_for`), the planner (plan/evaluate.py) and serving
    all come through here, so a generation's NVLink line rate (the scale-up ceiling) and its
    NVLink step-latency factor cannot be left out by one caller and kept by another (they
    have no default). ``nic_gbps`` is one NIC's line rate x efficiency; a NIC moves at most
    what its PCIe slot carries (``nic_host_gbps``, :func:`nic_host_gbps`; inf where the
    server's slot is not known): an 800G NIC in a Gen5 x16 slot delivers ~54 GB/s.
    ``nic_slowdown`` divides the result (the planner's congestion above the leaf); ``hops``
    is the switch hops of the worst path (>= 1).
    """
    nic = np.minimum(np.asarray(nic_gbps, dtype=float), np.asarray(nic_host_gbps, dtype=float))
    return Links(
        nvl_busbw_gbps=nvl_busbw_gbps,
        intra_is_pci=intra_is_pci,
        nvls_busbw_gbps=nvls_busbw_gbps,
        nvls_latency_us=nvls_latency_us,
        nic_gbps=nic / np.asarray(nic_slowdown, dtype=float),
        nics_per_node=nics_per_node,
        net_latency_scale=net_latency_scale,
        extra_hop_us=(np.asarray(hops, dtype=float) - 1) * np.asarray(switch_latency_ns, dtype=float) / 1e3,
        in_network_reduction=in_network_reduction,
        launch_us=launch_us,
        oversubscription=oversubscription,
        ranks_per_leaf=ranks_per_leaf,
        eager_launch_us=eager_launch_us,
        proxy_us=proxy_us,
        nvlink_line_gbps=nvlink_line_gbps,
        nvlink_latency_scale=nvlink_latency_scale,
    )


def links_for(
    gpu: Any,
    fabric: Any,
    site: Any,
    switch: Any,
    *,
    nics_per_node: Any,
    hops: Any = 1,
    oversubscription: Any = 1.0,
    ranks_per_leaf: Any = 1e18,
) -> Links:
    """Links of one GPU/fabric pair from catalog entries (scalars or arrays for hops): the
    catalog fields :func:`build_links` takes (:func:`gpu_link_fields` for the GPU)."""
    return build_links(
        **gpu_link_fields(gpu),
        nic_gbps=fabric.nic_line_gbps * fabric.nic_efficiency,
        nics_per_node=nics_per_node,
        net_latency_scale=fabric.net_latency_scale,
        switch_latency_ns=switch.latency_ns,
        hops=hops,
        in_network_reduction=fabric.in_network_reduction,
        launch_us=site.launch_us,
        oversubscription=oversubscription,
        ranks_per_leaf=ranks_per_leaf,
        proxy_us=getattr(fabric, "proxy_us", 0.0),
    )


def gpu_link_fields(gpu: Any) -> dict[str, float]:
    """The :func:`build_links` arguments a catalog GPU sets (the planner stores them as
    table columns, ``predict`` passes them straight on)."""
    pcie_gen, lanes = getattr(gpu, "nic_pcie_gen", None), getattr(gpu, "nic_pcie_lanes", None)
    return {
        "nvl_busbw_gbps": gpu.nvlink_busbw_gbps,
        "intra_is_pci": gpu.intra_link == "pci",
        "nvls_busbw_gbps": gpu.nvls_busbw_gbps if gpu.nvls else 0.0,
        "nvls_latency_us": gpu.nvls_latency_us,
        "nvlink_line_gbps": getattr(gpu, "nvlink_gbps", np.inf),
        "nvlink_latency_scale": getattr(gpu, "nvlink_latency_scale", 1.0),
        "nic_host_gbps": nic_host_gbps(pcie_gen, lanes) if pcie_gen is not None and lanes is not None else np.inf,
        "eager_launch_us": getattr(gpu, "eager_launch_us", 0.0),
    }
