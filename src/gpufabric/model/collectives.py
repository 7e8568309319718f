"""Alpha-beta model of NCCL collectives, vectorisable with numpy.

Time of one algorithm/protocol pair follows NCCL's own tuner (``src/graph/tuning.cc``,
older release, models.md 2.3 [V])::

    t_us = launch + baseLat[algo][proto] + latency_steps * hwLat[link][algo][proto]
           + bus_bytes / (busbw_hw * protocol_factor)

and the predicted time is the minimum over the enabled pairs, as NCCL picks. Small
messages land in the LL/LL128 regime (low latency, a fraction of the bandwidth), large
ones in Simple (full bandwidth, higher per-step latency): the two regimes come out of
the same formula. Algorithms:

- ``ring``: flat ring over all p = N*g ranks; 2(p-1) steps for all-reduce of which
  2(N-1) cross the network (tuning.cc). Thakur-Rabenseifner-Gropp 2005 cost
  ``2(p-1)a + 2(p-1)/p n b``.
- ``tree``: NCCL double binary tree (Sanders-Speck-Traff 2009; NCCL 2.4 blog);
  latency ``2((g-1) intraLat + log2(N) interLat)``; algbw = busbw/2 (tuning.cc ratio .5).
- ``hierarchical``: NVLink reduce-scatter, per-rail inter-node ring all-reduce of n/g,
  NVLink all-gather (models.md 2.1): ``2(g-1)a1 + 2(g-1)/g n b1 + 2(N-1)a2 + 2(N-1)/N (n/g) b2``.
- ``collnet``: in-network reduction (InfiniBand SHARP): every byte crosses the host
  link once up and once down (models.md 2.1), latency ``base + 2(g-1) intraLat + interLat``.
- ``nvls``: NVLink SHARP inside one node (NVSwitch reduction), Simple protocol only.
- ``nvls_tree``: NCCL's NVLSTree across nodes (NCCL >= 2.18): NVSwitch reduction inside
  each node, a tree across nodes, one slice per NIC. Its algbw is the tuner's min of the
  NVLS algbw and the tree's (the node's NICs, twice on 2 nodes), blended on 2 nodes by
  ``NVLS_TREE_SHARPNESS`` (fitted on one published table, docs/accuracy.md).

Every algorithm is capped by :func:`algbw_ceiling_gbps` (NICs at line x efficiency per
node, NVLink/PCIe per GPU, a NIC's PCIe slot; in-network reduction only with ``sharp``).

Timing (``timing``): ``graph`` is one CUDA-graph-captured op (the site's ``launch_us``,
the tuner's view); ``eager`` is what nccl-tests prints without ``-G`` and what almost
everyone posts: every op pays the GPU generation's eager launch and host overhead
(``Gpu.eager_launch_us``) and, across nodes, the network proxy thread's per-op cost per
tree level (``Fabric.proxy_us`` x log2 N). Both constants are fitted to public nccl-tests
tables (docs/accuracy.md lists the fit and held-out points).

Size terms: the algorithm's latency grows by ``LATENCY_GROWTH`` per doubling of the
message above 8 B up to ``GROWTH_SATURATION_BYTES`` (empirical, fitted with the launch
constants), and the tree all-reduce bandwidth carries NCCL's own correction by size
(``TREE_CORRECTION``).

In-network reduction (``collnet``, InfiniBand SHARP) is considered only with ``sharp=True``
and a SHARP-capable fabric: most clusters do not run the SHARP plugin, and points
measured with SHARP are compared with ``sharp=True`` predictions.

Bitwise reproducibility excludes nvls and collnet: NVLS "is known to be less
deterministic" (nccl #1497), and in-network reduction order is not under NCCL control.

Bus bandwidth follows nccl-tests ``doc/PERFORMANCE.md`` (models.md 2.2 [V]).
Units: sizes in bytes, bandwidths in GB/s (1e9 B/s), times in microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufabric.errors import InputError
from gpufabric.model.topology import nic_host_gbps, size_fabric, switch_hops

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
ALGORITHMS = ("ring", "tree", "hierarchical", "collnet", "nvls", "pairwise", "p2p", "nvls_tree")
TIMINGS = ("eager", "graph")
PROTOCOLS = ("LL", "LL128", "Simple")

# NCCL tuning.cc (commit 01afd20, models.md 2.3) [V]: {LL, LL128, Simple}, microseconds.
BASE_LAT_US = {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4), "collnet": (4.4, 4.4, 0.0)}
HW_LAT_US = {
    "nvlink": {"tree": (0.52, 1.2, 28.0), "ring": (0.47, 1.9, 3.4), "collnet": (0.5, 1.2, 4.0)},
    "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7), "collnet": (1.0, 1.9, 5.5)},
    "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6), "collnet": (5.0, 5.0, 10.7)},
}
#: tuning.cc: a multi-node ring Simple all-reduce above nRanks/16*64 KiB pays 1.9x latency.
RING_PLATEAU = 1.9
#: tuning.cc: intra-node LL latency is 1.8x when the job spans nodes.
LL_MULTINODE_INTRA = 1.8
#: NVLSTree blend of its two stages. NCCL's tuner (tuning.cc, v2.27+: ``bw = min(intraBw,
#: interBw)``, interBw doubled on 2 nodes) takes the slower of the NVSwitch reduction (the
#: NVLS algbw) and the tree across nodes (the node's NIC bandwidth, 2x on 2 nodes, converted
#: to algbw by nRanks/nsteps); measured tables sit below that min where the two are close.
#: The model blends them as a p-norm ``(A_nvls^-k + A_tree^-k)^(-1/k)`` (k -> inf is the
#: tuner's min). k is fitted (scripts/accuracy.py fit_constants) to the 16 GiB row of the
#: 2-node 8xH100 NDR table of NVIDIA/nccl-tests#309 (algbw 250.2 GB/s); the 4- and 8-node
#: tables of the same issue are held out (docs/accuracy.md). Empirical.
NVLS_TREE_SHARPNESS = 3.1
#: Share of one NIC's achievable bandwidth that one cross-node send/recv peer pair reaches.
#: NCCL gives a network peer NCCL_NCHANNELS_PER_NET_PEER channels (2 by default, init.cc /
#: paths.cc) and moves p2p data in 128 KiB chunks (P2P_NET_CHUNKSIZE, init.cc), so a single
#: pair does not fill a 400G NIC the way a collective's 16-32 channels do; PXN (NCCL >= 2.12)
#: routes through the peer-rail NIC and does not add channels. The NCCL maintainer states
#: that alltoall "cannot aggregate the bandwidth of multiple NICs" (nccl-tests#267), and
#: public sendrecv_perf tables across nodes show about half of the NIC rate [U, estimate:
#: 0.5, no fitting table that is not held out was found].
P2P_NET_SHARE = 0.5
#: Extra per-op launch cost of each additional GPU one thread drives (nccl-tests ``-g N``:
#: ncclGroupStart, N kernel launches and N proxy posts serialised on one host thread).
#: [U, estimate: 2.5 us per extra GPU = cudaLaunchKernel (~2-3 us, CUDA programming guide's
#: launch-overhead order) per device; the public A100 ``-g 8`` tables are 2-2.5x the
#: one-process-per-GPU small-message times (issue 25)]. Eager timing only.
SINGLE_PROCESS_US = 2.5
#: Extra per-op cost of timing a collective from torch.distributed with CUDA events (the
#: Python call, ProcessGroupNCCL work object, stream synchronisation between ops)
#: [U, estimate: ~10 us, the order of torch's eager op dispatch plus c10d bookkeeping].
TORCH_OVERHEAD_US = 10.0
HARNESSES = ("per-gpu", "single-process", "torch")
#: First NCCL release of an algorithm (NVIDIA/nccl release notes): NVLS (NVLink SHARP inside a
#: node) 2.17, NVLSTree (NVLS in the node, a tree across nodes) 2.18. An older NCCL's tuner
#: never picks them.
ALGORITHM_SINCE = {"nvls": (2, 17), "nvls_tree": (2, 18)}


def nccl_version_tuple(version: str) -> tuple[int, int]:
    """ "2.18.3" (or "2.18.3-1", "21803", nccl-tests' ``nccl-library=21803``) -> (2, 18).

    Raises:
        InputError: not an NCCL version.
    """
    text = version.strip()
    if text.isdigit() and len(text) >= 4:  # NCCL_VERSION_CODE: major*10000 + minor*100 + patch
        code = int(text)
        return code // 10000, code // 100 % 100
    parts = text.split("-")[0].split(".")
    if len(parts) >= 2 and all(x.isdigit() for x in parts[:2]) and len(parts[0]) <= 2 and len(parts[1]) <= 3:
        return int(parts[0]), int(parts[1])
    raise InputError(f"NCCL version {version!r} is not like 2.18.3 or 21803")


def algorithms_for_version(version: str | None) -> tuple[str, ...] | None:
    """The algorithms NCCL ``version`` has (None: the newest, every algorithm)."""
    if version is None:
        return None
    v = nccl_version_tuple(version)
    return tuple(a for a in ALGORITHMS if v >= ALGORITHM_SINCE.get(a, (0, 0)))


#: Growth of the algorithm latency term per doubling of the message above 8 B. Published
#: nccl-tests times rise 35-50% from 8 B to 64 KiB on 1, 2 and 4 nodes where the tuner's
#: constants are flat (NCCL widens threads, then channels, as the size grows; each step
#: synchronises more of them). Empirical: fitted by scripts/accuracy.py (fit_constants) on
#: the fit rows only, with eager_launch_us and proxy_us; docs/accuracy.md has the
#: held-out error.
LATENCY_GROWTH = 0.03
#: Size where the growth stops: NCCL stops adding threads and channels once every one of
#: its (up to 32) channels has a full thread block's work, nChannels x nThreads x
#: threadThreshold = 32 x 512 x 64 B = 1 MiB for ring/tree Simple and ring LL on 8 ranks
#: (enqueue.cc topoGetAlgoInfo, tuning.cc threadThresholds, NCCL 2.26).
GROWTH_SATURATION_BYTES = 2.0**20
#: NCCL tuning.cc ``treeCorrectionFactor`` (v2.26.2-1; the same in v2.30.7-1): "Trees are
#: not perfectly sticking to the model for medium sizes", a measured factor on the tree
#: all-reduce bandwidth per protocol (LL, LL128, Simple), indexed by floor(log2(bytes / 64))
#: from 64 B; 1.0 outside the table.
# fmt: off
TREE_CORRECTION = np.array([
    [1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0],
    [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9],
])
# fmt: on


def busbw_factor(op: str, num_ranks: Any, *, in_network: bool = False) -> Any:
    """nccl-tests bus-bandwidth factor: busbw = algbw * factor (models.md 2.2 [V]).

    AllReduce 2(n-1)/n; with in-network reduction (n-1)/(n+1); ReduceScatter, AllGather,
    AlltoAll (n-1)/n; Broadcast, Reduce and SendRecv 1.
    """
    n = np.asarray(num_ranks, dtype=float)
    if op == "all_reduce":
        return (n - 1) / (n + 1) if in_network else 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "send_recv"):
        return n / n  # 1, shaped like n (a numpy scalar for a scalar n)
    raise InputError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")


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
    proxy_us: Any = 0.0  # per-op network proxy overhead per log2(nodes), eager only
    latency_growth: Any = LATENCY_GROWTH  # latency term growth per doubling of the size above 8 B
    nvlink_line_gbps: Any = np.inf  # scale-up line rate per GPU per direction (the NVLink/PCIe ceiling)
    nvls_tree_sharpness: Any = NVLS_TREE_SHARPNESS  # p-norm of the NVLSTree min(NVLS, tree) blend
    p2p_net_share: Any = P2P_NET_SHARE  # share of one NIC a cross-node send/recv peer pair reaches
    nvlink_latency_scale: Any = 1.0  # the GPU generation's NVLink step latency / Hopper's (tuner constants)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveTimes:
    """Vectorised result: best time and the algorithm/protocol that achieves it."""

    time_us: np.ndarray
    algorithm: np.ndarray  # index into ALGORITHMS
    protocol: np.ndarray  # index into PROTOCOLS
    latency_steps: np.ndarray  # dependent inter-node latency steps of the chosen algorithm
    launch_us: np.ndarray  # breakdown of time_us: launch/host/proxy overhead,
    latency_us: np.ndarray  # the algorithm's latency term
    bandwidth_us: np.ndarray  # and its bandwidth term


def algbw_gbps(size_bytes: int, time_s: float) -> float:
    """algbw = S / t in GB/s (1e9 bytes/s); S is the nccl-tests ``size`` column for the op."""
    return size_bytes / time_s / 1e9


def busbw_gbps(op: str, size_bytes: int, time_s: float, num_ranks: int) -> float:
    """busbw = algbw x the nccl-tests bus factor of ``op`` (:func:`busbw_factor`)."""
    return algbw_gbps(size_bytes, time_s) * float(busbw_factor(op, num_ranks))


def tree_correction(proto: int, size_bytes: Any) -> Any:
    """NCCL's tree bandwidth factor (TREE_CORRECTION) at ``size_bytes``."""
    log_size = np.floor(np.log2(np.maximum(np.asarray(size_bytes, dtype=float), 1.0) / 64.0))
    inside = (log_size >= 0) & (log_size < TREE_CORRECTION.shape[1])
    index = np.clip(log_size, 0, TREE_CORRECTION.shape[1] - 1).astype(int)
    return np.where(inside, TREE_CORRECTION[proto][index], 1.0)


def algbw_ceiling_gbps(
    op: str,
    nodes: Any,
    gpus_per_node: Any,
    links: Links,
    *,
    in_network: bool = False,
    switch_reduction: bool = False,
) -> Any:
    """Most algbw (GB/s, nccl-tests S / t) the hierarchy can carry for ``op``: a hard ceiling.

    Across nodes each node's NICs carry ``nic_gbps x nics_per_node`` (line rate x NCCL's
    efficiency) per direction, and every byte that must leave or enter a node crosses them
    (the bandwidth lower bounds of Patarasuk and Yuan, JPDC 2009, per node):

    - all_reduce: each node sends and receives at least 2(N-1)/N of S, so algbw <=
      N/(2(N-1)) x node NIC bandwidth; with in-network reduction (SHARP, ``in_network``)
      each node sends S up once and receives it once, algbw <= node NIC bandwidth.
    - all_gather / reduce_scatter: (N-1)/N of S enters (leaves) each node: N/(N-1).
    - broadcast: every other node receives all of S: 1.
    - all_to_all: each of a node's g ranks sends (p-g)/p of its S off the node: p/(g(p-g)).
    - send_recv (nccl-tests: rank r sends S to r+1): one pair per node crosses, over one NIC.

    Inside a node every GPU's NVLink (or PCIe) port carries ``nvlink_line_gbps`` per
    direction: all_reduce algbw <= g/(2(g-1)) x line (1 x line when the NVSwitch reduces,
    ``switch_reduction``), all_gather / reduce_scatter / all_to_all g/(g-1), broadcast and
    send_recv 1. ``inf`` where a term does not bind (one rank).
    """
    N = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    p = N * g
    node_net = np.asarray(links.nic_gbps, dtype=float) * np.asarray(links.nics_per_node, dtype=float)
    line = np.asarray(links.nvlink_line_gbps, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if op == "all_reduce":
            net = node_net if in_network else node_net * N / (2 * (N - 1))
            nvl = line if switch_reduction else line * g / (2 * (g - 1))
        elif op in ("all_gather", "reduce_scatter"):
            net, nvl = node_net * N / (N - 1), line * g / (g - 1)
        elif op == "all_to_all":
            net, nvl = node_net * p / (g * (p - g)), line * g / (g - 1)
        elif op == "broadcast":
            net, nvl = node_net + 0 * N, line + 0 * g
        elif op == "send_recv":
            net, nvl = np.asarray(links.nic_gbps, dtype=float) + 0 * N, line + 0 * g
        else:
            raise InputError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")
    net = np.where(N > 1, net, np.inf)
    nvl = np.where(g > 1, nvl, np.inf)
    return np.minimum(net, nvl)


def _hw(algo: str, proto: int, is_pci: Any, scale: Any = 1.0) -> Any:
    """Intra-node hardware latency of ``algo``/``proto``: NVLink (x the GPU generation's
    ``scale``), or PCIe where ``is_pci``."""
    return np.where(is_pci, HW_LAT_US["pci"][algo][proto], HW_LAT_US["nvlink"][algo][proto] * scale)


def collective_times(
    op: str,
    size_bytes: Any,
    nodes: Any,
    gpus_per_node: Any,
    links: Links,
    *,
    deterministic: bool = False,
    algorithms: tuple[str, ...] | None = None,
    sharp: bool = False,
    timing: str = "graph",
    protocols: tuple[str, ...] | None = None,
    harness: str = "per-gpu",
) -> CollectiveTimes:
    """Best predicted time of ``op`` for every design in the broadcast of the inputs.

    Args:
        op: one of OPS.
        size_bytes: nccl-tests size S (the whole array for all-gather/reduce-scatter,
            the bytes each rank sends in total for all-to-all).
        nodes, gpus_per_node: N and g; p = N * g ranks.
        links: link parameters.
        deterministic: exclude algorithms whose reduction order is not reproducible.
        algorithms: restrict to these algorithms (like NCCL_ALGO).
        sharp: allow in-network reduction (collnet) where the fabric supports it.
        timing: "graph" (one CUDA-graph launch, the default here for the planner) or "eager"
            (nccl-tests without -G).
        protocols: restrict to these protocols (like NCCL_PROTO); None lets the tuner choose.
        harness: how the op is launched and timed (HARNESSES): "per-gpu" (one process per
            GPU), "single-process" (one thread drives every GPU of its node, nccl-tests -g N:
            SINGLE_PROCESS_US per extra GPU, eager only) or "torch" (torch.distributed timed
            with CUDA events: TORCH_OVERHEAD_US per op).

    Every candidate's bandwidth term is at least S over :func:`algbw_ceiling_gbps`, so no
    prediction carries more than the NICs, NVLink or PCIe can.
    """
    if timing not in TIMINGS:
        raise InputError(f"unknown timing {timing!r}; choose from {', '.join(TIMINGS)}")
    if op not in OPS:
        raise InputError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")
    if harness not in HARNESSES:
        raise InputError(f"unknown harness {harness!r}; choose from {', '.join(HARNESSES)}")
    for proto in protocols or ():
        if proto not in PROTOCOLS:
            raise InputError(f"unknown protocol {proto!r}; choose from {', '.join(PROTOCOLS)}")
    S = np.asarray(size_bytes, dtype=float)
    N = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    p = N * g
    multi = N > 1
    L = links
    nvl = np.asarray(L.nvl_busbw_gbps, dtype=float) * 1e3  # bytes per microsecond
    net_node = np.asarray(L.nic_gbps, dtype=float) * np.asarray(L.nics_per_node, dtype=float) * 1e3
    # In a multi-node ring only (g-1)/g of a GPU's ring edges are NVLink (one leaves per channel).
    nvl_ring = np.where(multi & (g > 1), nvl * g / np.maximum(g - 1, 1), nvl)
    b_ring = np.where(multi, np.minimum(nvl_ring, net_node), nvl)
    scale = np.asarray(L.net_latency_scale, dtype=float)
    hop = np.asarray(L.extra_hop_us, dtype=float)
    graph_launch = np.asarray(L.launch_us, dtype=float)
    if timing == "eager":
        eager = np.asarray(L.eager_launch_us, dtype=float)
        launch = np.where(eager > 0, eager, graph_launch) + np.asarray(L.proxy_us, dtype=float) * np.log2(
            np.maximum(N, 1)
        )
        if harness == "single-process":
            launch = launch + SINGLE_PROCESS_US * np.maximum(g - 1, 0)
    else:
        launch = graph_launch + 0 * N
    if harness == "torch":
        launch = launch + TORCH_OVERHEAD_US
    # Hard ceilings (bytes/us): plain algorithms, NVSwitch reduction, in-network reduction.
    switch_ok = np.asarray(L.nvls_busbw_gbps, dtype=float) > 0
    cap_plain = algbw_ceiling_gbps(op, N, g, L) * 1e3
    cap_nvls = algbw_ceiling_gbps(op, N, g, L, switch_reduction=True) * 1e3
    cap_collnet = (
        np.where(
            switch_ok & (not deterministic),
            algbw_ceiling_gbps(op, N, g, L, in_network=True, switch_reduction=True),
            algbw_ceiling_gbps(op, N, g, L, in_network=True),
        )
        * 1e3
    )
    caps = {"nvls": cap_nvls, "nvls_tree": cap_nvls, "collnet": cap_collnet}
    factor = busbw_factor(op, p)
    grow = 1.0 + np.asarray(L.latency_growth, dtype=float) * np.log2(np.clip(S, 8.0, GROWTH_SATURATION_BYTES) / 8.0)
    log2n = np.floor(np.log2(np.maximum(N, 1)))

    cands: list[tuple[int, int, Any, Any, Any, Any]] = []  # (algo, proto, time, steps, latency, bandwidth)

    def add(algo: str, proto: int, lat: Any, bw: Any, steps: Any, valid: Any = True) -> None:
        if algorithms is not None and algo not in algorithms:
            return
        if deterministic and algo in ("nvls", "collnet", "nvls_tree"):
            return
        if protocols is not None and PROTOCOLS[proto] not in protocols:
            return
        bw = np.maximum(bw, S / caps.get(algo, cap_plain))
        lat = lat * grow
        if proto == 1 and protocols is None:
            # tuning.cc enables LL128 by default only over NVLink inside the node (typeIntra
            # <= PATH_NVB); NCCL_PROTO=LL128 still forces it.
            valid = valid & ~np.asarray(L.intra_is_pci, dtype=bool)
        t = np.where(valid, launch + lat + bw, np.inf)
        cands.append((ALGORITHMS.index(algo), proto, t, steps, lat, bw))

    for pi in range(3):
        intra = _hw("ring", pi, L.intra_is_pci, L.nvlink_latency_scale) * np.where(
            multi & (pi == 0), LL_MULTINODE_INTRA, 1.0
        )
        inter = HW_LAT_US["net"]["ring"][pi] * scale + hop
        base = BASE_LAT_US["ring"][pi]
        pf: np.ndarray | float  # protocol efficiency: per-element where it depends on the layout
        if pi == 0:
            pf = np.where(multi | (op == "all_reduce"), 0.25, 1 / 3)
        elif pi == 1:
            pf = np.where(g < 2, 0.7, 0.92)
        else:
            pf = 1.0
        if op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
            if op == "all_reduce":
                nsteps, ninter = 2 * (p - 1), 2 * (N - 1)
            else:
                nsteps, ninter = p - 1, N - 1
            lat = base + (nsteps - ninter) * intra + ninter * inter
            if op == "all_reduce" and pi == 2:
                plateau_bytes = p / 16 * 65536
                lat = np.where(multi & (plateau_bytes <= S), lat * RING_PLATEAU, lat)
            add("ring", pi, lat, S * factor / (b_ring * pf), ninter)
        if op == "all_reduce":
            # Double binary tree.
            t_intra = _hw("tree", pi, L.intra_is_pci, L.nvlink_latency_scale) * np.where(
                multi & (pi == 0), LL_MULTINODE_INTRA, 1.0
            )
            t_inter = HW_LAT_US["net"]["tree"][pi] * scale + hop
            tpf = (1 / 3.8, np.where(multi, 0.915, 7 / 9), 1.0)[pi] * 0.9
            lat_t = BASE_LAT_US["tree"][pi] + 2 * ((g - 1) * t_intra + log2n * t_inter)
            add("tree", pi, lat_t, 2 * S / (b_ring * tpf * tree_correction(pi, S)), 2 * log2n, p > 1)
            # Hierarchical: NVLink RS, per-rail ring AR of S/g, NVLink AG (not pipelined).
            lat_h = base + 2 * (g - 1) * intra + 2 * (N - 1) * inter
            bw_h = 2 * (g - 1) / g * S / (nvl * pf) + 2 * (N - 1) / N * S / (net_node * pf)
            add("hierarchical", pi, lat_h, bw_h, 2 * (N - 1), multi & (g > 1))
            # In-network reduction (SHARP); LL128 unsupported (tuning.cc).
            if pi != 1:
                c_intra = _hw("collnet", pi, L.intra_is_pci, L.nvlink_latency_scale)
                c_inter = HW_LAT_US["net"]["collnet"][pi] * scale + hop
                cpf = (0.9 / 6, 0.0, 0.9)[pi]
                intra_bw = np.maximum(
                    nvl, np.where(deterministic, 0.0, np.asarray(L.nvls_busbw_gbps, dtype=float) * 1e3)
                )
                bw_c = np.maximum(S / net_node, 2 * (g - 1) / g * S / intra_bw) / cpf
                lat_c = BASE_LAT_US["collnet"][pi] + 2 * (g - 1) * c_intra + c_inter
                add(
                    "collnet",
                    pi,
                    lat_c,
                    bw_c,
                    2 + 0 * N,
                    multi & np.asarray(L.in_network_reduction, dtype=bool) & bool(sharp),
                )
            if pi == 2:
                nvls_bw = np.asarray(L.nvls_busbw_gbps, dtype=float) * 1e3
                # The tuner's NVLS latency (tuning.cc hwLatencies NVLS, 25 us); launch is separate.
                nvls_lat = np.asarray(L.nvls_latency_us, dtype=float) + 0 * N
                add(
                    "nvls",
                    pi,
                    nvls_lat,
                    S * factor / np.maximum(nvls_bw, 1e-9),
                    0 * N,
                    (~multi) & (nvls_bw > 0) & (g > 1),
                )
                # NVLSTree: NVSwitch reduction in the node, tree across nodes (one slice per NIC):
                # the slower stage, blended (NVLS_TREE_SHARPNESS); the tree carries the node's
                # NICs, twice that on 2 nodes (tuning.cc), as busbw -> algbw by p/(2(p-1)).
                a_nvls = np.maximum(nvls_bw / np.maximum(2 * (g - 1) / np.maximum(g, 1), 1e-9), 1e-9)
                a_tree = net_node * np.where(N <= 2, 2.0, 1.0) * p / np.maximum(2 * (p - 1), 1e-9)
                k = np.asarray(L.nvls_tree_sharpness, dtype=float)
                # The blend where the tuner doubles the tree (2 nodes: the two stages carry
                # about the same); beyond, the tuner's min: NIC-bound, NVLSTree carries what
                # a ring carries, with log2 N instead of N network steps.
                algbw_nt = np.where(N <= 2, (a_nvls ** (-k) + a_tree ** (-k)) ** (-1.0 / k), np.minimum(a_nvls, a_tree))
                lat_nt = nvls_lat + 2 * log2n * (HW_LAT_US["net"]["tree"][2] * scale + hop)
                add("nvls_tree", pi, lat_nt, S / algbw_nt, 2 * log2n, multi & (nvls_bw > 0) & (g > 1))
        if op == "all_to_all" and pi != 0:
            # Pairwise exchange (models.md 2.1): (p-1) alpha + bytes over the slowest link class.
            lat_a = base + (g - 1) * intra + (p - g) * inter
            per_gpu_net = net_node / g
            f_x = np.clip((p - np.asarray(L.ranks_per_leaf, dtype=float)) / p, 0, 1)
            penalty = np.maximum(1.0, np.asarray(L.oversubscription, dtype=float) * f_x)
            bw_a = np.maximum(S * (g - 1) / p / (nvl * pf), S * (p - g) / p / (per_gpu_net * pf) * penalty)
            add("pairwise", pi, lat_a, bw_a, p - g)
        if op == "send_recv":
            lat_s = base + np.where(multi, inter, intra)
            # Across nodes one peer pair gets NCCL's per-peer channels, not a whole NIC.
            nics = np.asarray(L.nics_per_node, dtype=float)
            b_p2p = np.where(multi, net_node / nics * np.asarray(L.p2p_net_share, dtype=float), nvl)
            add("p2p", pi, lat_s, S / (b_p2p * pf), np.where(multi, 1, 0))

    if not cands:
        raise InputError(
            f"no algorithm {algorithms or ''} applies to {op}".replace("  ", " ")
            + (f" with protocol {'/'.join(protocols)}" if protocols else "")
            + (" with bitwise reproducibility" if deterministic else "")
        )
    times = np.stack([np.broadcast_to(c[2], np.broadcast(S, N, g, nvl, net_node).shape) for c in cands])
    best = np.argmin(times, axis=0)
    algo_idx = np.array([c[0] for c in cands])[best]
    proto_idx = np.array([c[1] for c in cands])[best]
    shape = times.shape[1:]
    steps = np.stack([np.broadcast_to(np.asarray(c[3], dtype=float), shape) for c in cands])
    chosen = np.take_along_axis(times, best[None, ...], axis=0)[0]
    dep = np.take_along_axis(steps, best[None, ...], axis=0)[0]

    def pick(k: int) -> np.ndarray:
        stack = np.stack([np.broadcast_to(np.asarray(c[k], dtype=float), shape) for c in cands])
        return np.take_along_axis(stack, best[None, ...], axis=0)[0]

    lat_part, bw_part = pick(4), pick(5)
    return CollectiveTimes(
        time_us=chosen,
        algorithm=algo_idx,
        protocol=proto_idx,
        latency_steps=dep,
        launch_us=chosen - lat_part - bw_part,
        latency_us=lat_part,
        bandwidth_us=bw_part,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectivePrediction:
    """What nccl-tests should report for one collective (GB/s = 1e9 B/s)."""

    op: str
    size_bytes: int
    num_ranks: int
    algorithm: str
    protocol: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    switch_hops: int
    timing: str = "graph"
    launch_us: float = 0.0  # launch, host and proxy overhead of the op
    latency_us: float = 0.0  # the algorithm's latency term (tuner constants x steps)
    bandwidth_us: float = 0.0  # bytes over the bottleneck link class
    sharp: bool = False
    harness: str = "per-gpu"
    ceiling_algbw_gbps: float = float("inf")  # the hard ceiling of this op and algorithm (algbw_ceiling_gbps)


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


def predict_collective(
    *,
    op: str,
    size_bytes: int,
    nodes: int,
    gpus_per_node: int,
    gpu: str,
    fabric: str,
    catalog: Any,
    algorithm: str | None = None,
    deterministic: bool = False,
    oversubscription: float = 1.0,
    sharp: bool = False,
    timing: str = "eager",
    protocol: str | None = None,
    harness: str = "per-gpu",
    nccl_version: str | None = None,
) -> CollectivePrediction:
    """Predict nccl-tests time, algbw and busbw of one collective.

    The scale-out fabric is sized as a non-blocking rail-optimized fat tree for
    ``nodes`` (models.md 2.7); its worst same-rail path sets the switch hops.

    Args:
        algorithm: force one algorithm (like NCCL_ALGO), e.g. "ring".
        deterministic: only algorithms with a fixed reduction order (bitwise runs).
        sharp: allow in-network reduction (InfiniBand SHARP) where the fabric supports it.
        timing: "eager" (nccl-tests without -G, the default) or "graph" (CUDA-graph capture).
        protocol: force one protocol (like NCCL_PROTO): LL, LL128 or Simple; None: the tuner.
        harness: "per-gpu" (default), "single-process" (nccl-tests -g N) or "torch".
        nccl_version: the NCCL release (e.g. "2.16.5"): algorithms it does not have yet
            (ALGORITHM_SINCE) are not considered; None: the newest.

    Raises:
        InputError: unknown op or algorithm, or non-positive sizes/counts.
        CatalogError: unknown gpu or fabric id.
    """
    if nodes < 1 or gpus_per_node < 1:
        raise InputError(f"nodes and gpus-per-node must be >= 1, got {nodes} and {gpus_per_node}")
    if size_bytes < 1:
        raise InputError(f"size must be at least 1 byte, got {size_bytes}")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise InputError(f"unknown algorithm {algorithm!r}; choose from {', '.join(ALGORITHMS)}")
    if protocol is not None and protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; choose from {', '.join(PROTOCOLS)}")
    available = algorithms_for_version(nccl_version)
    if algorithm is not None and available is not None and algorithm not in available:
        since = ".".join(map(str, ALGORITHM_SINCE[algorithm]))
        raise InputError(f"algorithm {algorithm!r} needs NCCL >= {since}, not {nccl_version}")
    g = catalog.gpu(gpu)
    f = catalog.fabric(fabric)
    sw = catalog.switches[f.switch]
    size = size_fabric(nodes=nodes, nics_per_node=gpus_per_node, radix=sw.radix, oversubscription=oversubscription)
    hops = int(switch_hops(nodes, size)) if nodes > 1 else 0
    links = links_for(
        g,
        f,
        catalog.site,
        sw,
        nics_per_node=gpus_per_node,
        hops=max(hops, 1),
        oversubscription=oversubscription,
        ranks_per_leaf=float(size.nodes_per_leaf) * gpus_per_node,
    )
    res = collective_times(
        op,
        size_bytes,
        nodes,
        gpus_per_node,
        links,
        deterministic=deterministic,
        algorithms=(algorithm,) if algorithm else available,
        sharp=sharp,
        timing=timing,
        protocols=(protocol,) if protocol else None,
        harness=harness,
    )
    t_us = float(res.time_us)
    if not np.isfinite(t_us):
        forced = f"algorithm {algorithm!r}" if algorithm else f"protocol {protocol!r}"
        if algorithm and protocol:
            forced = f"algorithm {algorithm!r} with protocol {protocol!r}"
        raise InputError(f"{forced} does not apply to {op} on {nodes} node(s) of {gpu} over {fabric}")
    ranks = nodes * gpus_per_node
    algbw = size_bytes / (t_us * 1e3)
    chosen = ALGORITHMS[int(res.algorithm)]
    return CollectivePrediction(
        op=op,
        size_bytes=int(size_bytes),
        num_ranks=ranks,
        algorithm=chosen,
        protocol=PROTOCOLS[int(res.protocol)],
        time_us=t_us,
        algbw_gbps=algbw,
        busbw_gbps=float(algbw * busbw_factor(op, ranks)),
        switch_hops=hops,
        timing=timing,
        launch_us=float(res.launch_us),
        latency_us=float(res.latency_us),
        bandwidth_us=float(res.bandwidth_us),
        sharp=sharp,
        harness=harness,
        ceiling_algbw_gbps=float(
            algbw_ceiling_gbps(
                op,
                nodes,
                gpus_per_node,
                links,
                in_network=chosen == "collnet",
                switch_reduction=chosen in ("nvls", "nvls_tree", "collnet") and bool(g.nvls),
            )
        ),
    )
