"""Alpha-beta model of NCCL collectives, vectorisable with numpy.

Time of one algorithm/protocol pair follows NCCL's own tuner (``src/graph/tuning.cc``,
older release, models.md 2.3 [V])::

    t_us = launch + baseLat[algo][proto] + latency_steps * hwLat[link][algo][proto]
           + bus_bytes / (busbw_hw * protocol_factor)

and the pair with the smallest tuner estimate is chosen, as NCCL picks (then timed with
the size growth and the channels the message fills). Small
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
  Not an NCCL algorithm: predicted only when forced (``FORCED_ONLY``), never the tuner's pick.
- ``collnet``: in-network reduction (InfiniBand SHARP): every byte crosses the host
  link once up and once down (models.md 2.1), latency ``base + 2(g-1) intraLat + interLat``.
- ``nvls``: NVLink SHARP inside one node (NVSwitch reduction), Simple protocol only.
- ``nvls_tree``: NCCL's NVLSTree across nodes (NCCL >= 2.18): NVSwitch reduction inside
  each node, a tree across nodes, one slice per NIC. Its algbw is the tuner's min of the
  NVLS algbw and the tree's (the node's NICs, twice on 2 nodes), blended on 2 nodes by
  ``NVLS_TREE_SHARPNESS`` (fitted on one published table, docs/accuracy.md).

- ``p2p`` (send_recv) and ``pairwise`` (all_to_all): NCCL's p2p ops, which its tuner never
  times: they run the protocol NCCL's p2p rule gives them (LL up to 16 KiB x a channel count
  that depends on the release, Simple above, never LL128; model.p2p.uses_ll), with the
  tuner's ring baseLat and one link step of that protocol, no size growth, and an
  all-to-all's batches of 8 ops per channel and per-remote-peer proxy posts (model.p2p).

Every algorithm is capped by :func:`algbw_ceiling_gbps` (NICs at line x efficiency per
node, NVLink/PCIe per GPU, a NIC's PCIe slot; in-network reduction only with ``sharp``).

Timing (``timing``): ``graph`` is one CUDA-graph-captured op (the site's ``launch_us``,
the tuner's view); ``eager`` is what nccl-tests prints without ``-G`` and what almost
everyone posts: every op pays the GPU generation's eager launch and host overhead
(``Gpu.eager_launch_us``) and, across nodes, the network proxy path's per-op cost once
(``Fabric.proxy_us``; the per-hop cost is the tuner's NET step latency). Both constants are fitted to public nccl-tests
tables (docs/accuracy.md lists the fit and held-out points).

Size terms: the algorithm's latency grows by ``LATENCY_GROWTH`` per doubling of the
message above 8 B up to ``GROWTH_SATURATION_BYTES`` (empirical, fitted with the launch
constants), and the tree all-reduce bandwidth carries NCCL's own correction by size
(``TREE_CORRECTION``). NCCL's own tuner figures live in :mod:`gpufabric.model.nccl_tuner`.

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
from gpufabric.model import p2p
from gpufabric.model.collectives_links import GROWTH_SATURATION_BYTES, Links, links_for

# Re-exported: callers and tests read the link record, its builders and its fitted
# defaults from model.collectives.
from gpufabric.model.collectives_links import LATENCY_GROWTH as LATENCY_GROWTH
from gpufabric.model.collectives_links import NVLS_TREE_SHARPNESS as NVLS_TREE_SHARPNESS
from gpufabric.model.collectives_links import build_links as build_links
from gpufabric.model.collectives_links import gpu_link_fields as gpu_link_fields
from gpufabric.model.nccl_tuner import (
    ALGORITHM_SINCE,
    ALGORITHMS,
    BASE_LAT_US,
    FORCED_ONLY,
    HW_LAT_US,
    LL_CPU_VENDOR,
    N_CHANNELS,
    NET_OVERHEAD_SIMPLE_FACTOR,
    NET_OVERHEAD_US,
    RING_PLATEAU,
    RING_PLATEAU_MIN_BYTES_PER_CHANNEL_RANK,
    algorithms_for_version,
    channel_cap_gbps,
    ll_max_busbw_gbps,
    nccl_version_tuple,
    per_channel_simple_gbps,
    tree_correction,
)
from gpufabric.model.topology import size_fabric, switch_hops

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
TIMINGS = ("eager", "graph")
PROTOCOLS = ("LL", "LL128", "Simple")

#: Extra per-op launch cost of each additional GPU one thread drives (nccl-tests ``-g N``:
#: ncclGroupStart, N kernel launches and N proxy posts serialised on one host thread).
#: [D, fitted by scripts/accuracy.py ``fit_single_process`` on the rows <= 64 KiB of the two
#: public ``-g 8`` tables: a 2 x 8 H100 note (tests/data/nccl-tests/
#: public_h100_2node_mpirun_g8.txt, fabric not stated, taken as ib-ndr), flat at 60-62 us from
#: 8 B to 8 KiB, gives 4.7 us per extra GPU; Red Hat's 2 x 8 H200 Spectrum-X run (NCCL 2.30.4,
#: public_h200_roce_2node_g8_spectrumx.txt) 1.9 us. The mean of the two, since the cost is the
#: host thread's (CPU and release), and either table alone is one host's figure.]
#: Eager timing only.
SINGLE_PROCESS_US = 3.3
#: Extra per-op cost of timing a collective from torch.distributed with CUDA events (the
#: Python call, ProcessGroupNCCL work object, stream synchronisation between ops)
#: [U, estimate: ~10 us, the order of torch's eager op dispatch plus c10d bookkeeping].
TORCH_OVERHEAD_US = 10.0
HARNESSES = ("per-gpu", "single-process", "torch")


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


def _check_choices(op: str, timing: str, harness: str, protocols: tuple[str, ...] | None) -> None:
    """InputError for an unknown op, timing, harness or protocol."""
    for value, allowed, what in (
        (timing, TIMINGS, "timing"),
        (op, OPS, "collective"),
        (harness, HARNESSES, "harness"),
        *((proto, PROTOCOLS, "protocol") for proto in protocols or ()),
    ):
        if value not in allowed:
            raise InputError(f"unknown {what} {value!r}; choose from {', '.join(allowed)}")


def _launch_us(links: Links, N: Any, g: Any, timing: str, harness: str) -> Any:
    """Per-op overhead outside the algorithm: the launch (graph or eager), the eager proxy
    cost (once per op across nodes), and the harness's own cost (HARNESSES)."""
    graph_launch = np.asarray(links.launch_us, dtype=float)
    if timing == "eager":
        eager = np.asarray(links.eager_launch_us, dtype=float)
        # The proxy's per-op cost is paid once per op across nodes, not per tree level: the
        # network proxy threads of all ranks progress in parallel, and the per-hop wire and
        # completion cost is the tuner's per-step NET latency (Fabric.net_latency_scale).
        # Charging it per log2(nodes) as well counted the hops twice (issue 25: an EFA 8 KiB
        # all_reduce on 16 nodes came out at 1 ms against ~250 us measured).
        launch = np.where(eager > 0, eager, graph_launch) + np.asarray(links.proxy_us, dtype=float) * (N > 1)
        if harness == "single-process":
            launch = launch + SINGLE_PROCESS_US * np.maximum(g - 1, 0)
    else:
        launch = graph_launch + 0 * N
    if harness == "torch":
        launch = launch + TORCH_OVERHEAD_US
    return launch


@dataclass(frozen=True, slots=True, kw_only=True)
class _Setup:
    """The broadcast inputs of one :func:`collective_times` call and the terms every
    candidate shares, computed once (:meth:`of`; bandwidths in bytes per microsecond)."""

    op: str
    S: Any  # size, bytes
    N: Any  # nodes
    g: Any  # GPUs per node
    p: Any  # ranks
    multi: Any  # N > 1
    links: Links
    deterministic: bool
    sharp: bool
    nvl: Any  # achievable intra-node ring busbw per GPU
    net_node: Any  # a node's NICs together
    b_ring: Any  # a ring's bottleneck busbw
    scale: Any  # NET latency scale of the fabric
    hop: Any  # extra switch-hop latency of the worst path (hops beyond the first)
    cross_ring: Any  # share of a ring's inter-node steps that leave a leaf (per-tier latency)
    cross_tree: Any  # share of a tree's levels that leave a leaf
    log2n: Any  # tree levels across nodes

    @classmethod
    def of(
        cls, op: str, size_bytes: Any, nodes: Any, gpus_per_node: Any, links: Links, *, deterministic: bool, sharp: bool
    ) -> _Setup:
        S = np.asarray(size_bytes, dtype=float)
        N = np.asarray(nodes, dtype=float)
        g = np.asarray(gpus_per_node, dtype=float)
        multi = N > 1
        nvl = np.asarray(links.nvl_busbw_gbps, dtype=float) * 1e3
        net_node = np.asarray(links.nic_gbps, dtype=float) * np.asarray(links.nics_per_node, dtype=float) * 1e3
        # In a multi-node ring only (g-1)/g of a GPU's ring edges are NVLink (one leaves the
        # node per channel), and the node's NICs carry the rest.
        nvl_ring = np.where(multi & (g > 1), nvl * g / np.maximum(g - 1, 1), nvl)
        return cls(
            op=op,
            S=S,
            N=N,
            g=g,
            p=N * g,
            multi=multi,
            links=links,
            deterministic=deterministic,
            sharp=sharp,
            nvl=nvl,
            net_node=net_node,
            b_ring=np.where(multi, np.minimum(nvl_ring, net_node), nvl),
            scale=np.asarray(links.net_latency_scale, dtype=float),
            hop=np.asarray(links.extra_hop_us, dtype=float),
            log2n=np.floor(np.log2(np.maximum(N, 1))),
            **_tier_crossings(N, g, links),
        )

    def intra(self, algo: str, proto: int) -> Any:
        """Intra-node step latency (NVLink x the generation's scale, or PCIe)."""
        L = self.links
        return np.where(
            L.intra_is_pci,
            HW_LAT_US["pci"][algo][proto],
            HW_LAT_US["nvlink"][algo][proto] * np.asarray(L.nvlink_latency_scale, dtype=float),
        )

    def inter(self, algo: str, proto: int, cross: Any = 1.0) -> Any:
        """Inter-node step latency: the tuner's NET figure x the fabric's scale, plus the extra
        switch hops of the worst path on the ``cross`` share of steps that take it (1: every
        step, the default where the pattern is not modelled)."""
        return HW_LAT_US["net"][algo][proto] * self.scale + self.hop * cross


def _tier_crossings(N: Any, g: Any, links: Links) -> dict[str, Any]:
    """Per-tier latency: which inter-node steps climb above the leaf (models.md 2.7: 1 switch
    inside a leaf, 3 through a spine, 5 through a core). The job's nodes sit contiguously under
    leaves of ``ranks_per_leaf / g`` nodes each. A ring visits them in order, so of its N
    inter-node hops per pass only one per leaf (ceil(N / nodes_per_leaf)) crosses to the next
    leaf; NCCL's tree pairs nodes 2^k apart at level k, so the levels at and above
    log2(nodes_per_leaf) cross (Sanders-Speck-Traff 2009 double binary tree over the node
    ranks). Both are 0 inside one leaf and grow with the node count: at 128 nodes under 64-node
    leaves 2 of 128 ring hops and 1 of 7 tree levels go through the spine."""
    per_leaf = np.maximum(np.asarray(links.ranks_per_leaf, dtype=float) / np.maximum(g, 1), 1.0)
    leaves = np.ceil(N / per_leaf)
    log2n = np.log2(np.maximum(N, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ring = np.where(leaves > 1, np.minimum(leaves / np.maximum(N, 1), 1.0), 0.0)
        tree = np.where((leaves > 1) & (log2n > 0), np.clip((log2n - np.log2(per_leaf)) / log2n, 0.0, 1.0), 0.0)
    return {"cross_ring": ring, "cross_tree": tree}


class _Candidates:
    """Every enabled (algorithm, protocol) pair with its time, as the tuner lists them before
    taking the fastest. ``add`` applies the user's restrictions (NCCL_ALGO, NCCL_PROTO,
    bitwise reproducibility), the hard ceilings and the latency's size growth."""

    def __init__(
        self,
        c: _Setup,
        *,
        launch: Any,
        algorithms: tuple[str, ...] | None,
        protocols: tuple[str, ...] | None,
    ) -> None:
        self.c = c
        self.launch = launch
        self.algorithms = algorithms
        self.protocols = protocols
        L, N, g = c.links, c.N, c.g
        # Hard ceilings (bytes/us): plain algorithms, NVSwitch reduction, in-network reduction.
        switch_ok = np.asarray(L.nvls_busbw_gbps, dtype=float) > 0
        self.cap_plain = algbw_ceiling_gbps(c.op, N, g, L) * 1e3
        cap_nvls = algbw_ceiling_gbps(c.op, N, g, L, switch_reduction=True) * 1e3
        cap_collnet = (
            np.where(
                switch_ok & (not c.deterministic),
                algbw_ceiling_gbps(c.op, N, g, L, in_network=True, switch_reduction=True),
                algbw_ceiling_gbps(c.op, N, g, L, in_network=True),
            )
            * 1e3
        )
        self.caps = {"nvls": cap_nvls, "nvls_tree": cap_nvls, "collnet": cap_collnet}
        self.grow = 1.0 + np.asarray(L.latency_growth, dtype=float) * np.log2(
            np.clip(c.S, 8.0, GROWTH_SATURATION_BYTES) / 8.0
        )
        # (algo, proto, time, steps, latency, bandwidth, the tuner's estimate)
        self.rows: list[tuple[int, int, Any, Any, Any, Any, Any]] = []

    def add(
        self,
        algo: str,
        proto: int,
        lat: Any,
        bw: Any,
        steps: Any,
        valid: Any = True,
        *,
        bw_tuner: Any = None,
        grow: bool = True,
    ) -> None:
        """One candidate: its latency and bandwidth terms (us) as the model times them;
        ``bw_tuner``, where it differs, the bandwidth term NCCL's tuner estimates (every
        channel) and chooses by. ``grow`` False: no LATENCY_GROWTH (p2p, whose threads and
        channels do not widen by the collective rule it models)."""
        if self.algorithms is not None and algo not in self.algorithms:
            return
        if self.algorithms is None and algo in FORCED_ONLY:
            return  # not one of NCCL's algorithms: only when forced
        if self.c.deterministic and algo in ("nvls", "collnet", "nvls_tree"):
            return
        if self.protocols is not None and PROTOCOLS[proto] not in self.protocols:
            return
        floor = self.c.S / self.caps.get(algo, self.cap_plain)
        # NCCL picks by its tuner's estimate (tuning.cc latency + bytes / busBw with every
        # channel): without the size growth and the channel share, which it does not know.
        estimate = lat + np.maximum(bw if bw_tuner is None else bw_tuner, floor)
        bw = np.maximum(bw, floor)
        lat = lat * self.grow if grow else lat + 0 * self.grow
        if proto == 1 and self.protocols is None:
            # tuning.cc enables LL128 by default only over NVLink inside the node (typeIntra
            # <= PATH_NVB); NCCL_PROTO=LL128 still forces it.
            valid = valid & ~np.asarray(self.c.links.intra_is_pci, dtype=bool)
        t = np.where(valid, self.launch + lat + bw, np.inf)
        self.rows.append((ALGORITHMS.index(algo), proto, t, steps, lat, bw, np.where(valid, estimate, np.inf)))

    def best(self) -> CollectiveTimes:
        """The fastest candidate per element, with its breakdown."""
        c = self.c
        shape = np.broadcast(c.S, c.N, c.g, c.nvl, c.net_node).shape
        estimates = np.stack([np.broadcast_to(r[6], shape) for r in self.rows])
        best = np.argmin(estimates, axis=0)

        def pick(k: int) -> np.ndarray:
            stack = np.stack([np.broadcast_to(np.asarray(r[k], dtype=float), shape) for r in self.rows])
            return np.take_along_axis(stack, best[None, ...], axis=0)[0]

        chosen, lat_part, bw_part = pick(2), pick(4), pick(5)
        return CollectiveTimes(
            time_us=chosen,
            algorithm=np.array([r[0] for r in self.rows])[best],
            protocol=np.array([r[1] for r in self.rows])[best],
            latency_steps=pick(3),
            launch_us=chosen - lat_part - bw_part,
            latency_us=lat_part,
            bandwidth_us=bw_part,
        )


def _protocol_factor(c: _Setup, pi: int) -> Any:
    """Share of the link bandwidth a protocol delivers (tuning.cc): LL 1/2 under the LL cap
    (``_ll_capped``; tuning.cc since NCCL 2.21: ``min(llMaxBw, busBw * .5)``; 2.20 and
    older took 1/4, 1/3 for a single-node non-all-reduce), LL128 0.92 (0.7 on one GPU per
    node), Simple 1."""
    if pi == 0:
        return 0.5
    if pi == 1:
        return np.where(c.g < 2, 0.7, 0.92)
    return 1.0


def _ll_capped(c: _Setup, pi: int, busbw: Any, *, nodes: Any = None) -> Any:
    """A ring or tree busbw (bytes/us) under tuning.cc's LL cap (``llMaxBws``: by GPU
    generation on one node, by node count across nodes) when the protocol is LL; ``nodes``
    overrides the job's node count (a stage inside one node)."""
    if pi != 0:
        return busbw
    line = np.asarray(c.links.nvlink_line_gbps, dtype=float)
    return np.minimum(busbw, ll_max_busbw_gbps(c.N if nodes is None else nodes, line) * 1e3)


def _add_ring(c: _Setup, cands: _Candidates, pi: int, pf: Any) -> None:
    """Flat ring over all p ranks: 2(p-1) steps for all-reduce, of which 2(N-1) cross nodes."""
    if c.op not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        return
    p, N = c.p, c.N
    nsteps, ninter = (2 * (p - 1), 2 * (N - 1)) if c.op == "all_reduce" else (p - 1, N - 1)
    # NCCL >= 2.18: every step of a multi-node ring costs at least the network post overhead.
    overhead = NET_OVERHEAD_US[LL_CPU_VENDOR] * (NET_OVERHEAD_SIMPLE_FACTOR if pi == 2 else 1.0)
    intra = np.where(c.multi, np.maximum(c.intra("ring", pi), overhead), c.intra("ring", pi))
    lat = BASE_LAT_US["ring"][pi] + (nsteps - ninter) * intra + ninter * c.inter("ring", pi, c.cross_ring)
    if c.op == "all_reduce" and pi == 2:
        plateau = c.S / (N_CHANNELS * p) >= RING_PLATEAU_MIN_BYTES_PER_CHANNEL_RANK
        lat = np.where(c.multi & plateau, lat * RING_PLATEAU, lat)
    # NCCL runs a message on the channels it fills, each at most the tuner's per-channel
    # bandwidth (channel_cap_gbps); its tuner chooses as if every channel ran.
    busbw = _ll_capped(c, pi, c.b_ring * pf)
    filled = np.minimum(busbw, channel_cap_gbps(pi, c.S, N, c.links.nvlink_line_gbps) * 1e3)
    bus_bytes = c.S * busbw_factor(c.op, p)
    cands.add("ring", pi, lat, bus_bytes / filled, ninter, bw_tuner=bus_bytes / busbw)


def _add_tree_and_hierarchical(c: _Setup, cands: _Candidates, pi: int, pf: Any) -> None:
    """All-reduce: NCCL's double binary tree, and the NVLink RS / per-rail ring / NVLink AG
    hierarchy (not pipelined)."""
    S, N, g, p = c.S, c.N, c.g, c.p
    tpf = (1 / 3.8, np.where(c.multi, 0.915, 7 / 9), 1.0)[pi] * 0.9
    lat_t = BASE_LAT_US["tree"][pi] + 2 * ((g - 1) * c.intra("tree", pi) + c.log2n * c.inter("tree", pi, c.cross_tree))
    # On 2 nodes the tuner credits the tree with the graph's bwIntra (tuning.cc ``nNodes <= 2
    # ? bwIntra : bwInter``, v2.8.3 to v2.30.4), which the tree search raises up to twice its
    # bwInter (search.cc "increase bwIntra for trees (2 nodes or collnet)"): the two trees run
    # opposite ways, so a node's NICs carry each byte once per direction (a ring: 2(p-1)/p).
    # Bound there: twice the node's NICs, and the intra-node chain's NVLink share as a ring's.
    # Simple only: LL stays under llMaxBws, and LL128 is bound per channel (perChMaxTreeLL128Bws);
    # doubling LL128 too made the fit table's (#309, 2 nodes) tree LL128 rows 8-16 MiB 6-8
    # points worse (docs/accuracy.md).
    two = c.multi & (N <= 2) & (pi == 2)
    chain = np.where(g > 1, c.nvl * g / np.maximum(g - 1, 1), np.inf)  # one GPU a node: no chain
    b_tree = np.where(two, np.minimum(chain, 2 * c.net_node), c.b_ring)
    busbw_t = _ll_capped(c, pi, b_tree * tpf) * tree_correction(pi, S)
    # The tuner's own estimate: bwIntra x nChannels is at most the GPU's NVLink bandwidth.
    b_tuner = np.where(two, np.minimum(np.where(g > 1, c.nvl, np.inf), 2 * c.net_node), c.b_ring)
    busbw_tuner = _ll_capped(c, pi, b_tuner * tpf) * tree_correction(pi, S)
    cands.add("tree", pi, lat_t, 2 * S / busbw_t, 2 * c.log2n, p > 1, bw_tuner=2 * S / busbw_tuner)
    lat_h = BASE_LAT_US["ring"][pi] + 2 * (g - 1) * c.intra("ring", pi) + 2 * (N - 1) * c.inter("ring", pi)
    # Its stages are an NVLink ring and a ring across nodes: each under its own LL cap.
    ll_intra = _ll_capped(c, pi, c.nvl * pf, nodes=1)
    bw_h = 2 * (g - 1) / g * S / ll_intra + 2 * (N - 1) / N * S / _ll_capped(c, pi, c.net_node * pf)
    cands.add("hierarchical", pi, lat_h, bw_h, 2 * (N - 1), c.multi & (g > 1))


def _add_collnet(c: _Setup, cands: _Candidates, pi: int) -> None:
    """In-network reduction (SHARP): every byte crosses the host link once up and once down;
    LL128 unsupported (tuning.cc). Only with ``sharp`` on a SHARP-capable fabric."""
    if pi == 1:
        return
    L, g = c.links, c.g
    cpf = (0.9 / 6, 0.0, 0.9)[pi]
    nvls = np.where(c.deterministic, 0.0, np.asarray(L.nvls_busbw_gbps, dtype=float) * 1e3)
    intra_bw = np.maximum(c.nvl, nvls)
    bw_c = np.maximum(c.S / c.net_node, 2 * (g - 1) / g * c.S / intra_bw) / cpf
    lat_c = BASE_LAT_US["collnet"][pi] + 2 * (g - 1) * c.intra("collnet", pi) + c.inter("collnet", pi)
    capable = np.asarray(L.in_network_reduction, dtype=bool) & bool(c.sharp)
    cands.add("collnet", pi, lat_c, bw_c, 2 + 0 * c.N, c.multi & capable)


def _add_nvls(c: _Setup, cands: _Candidates) -> None:
    """NVLS (NVSwitch reduction in one node) and NVLSTree (NVLS in the node, a tree across
    nodes, one slice per NIC), Simple protocol only."""
    L, S, N, g, p = c.links, c.S, c.N, c.g, c.p
    nvls_bw = np.asarray(L.nvls_busbw_gbps, dtype=float) * 1e3
    # The tuner's NVLS latency (tuning.cc hwLatencies NVLS, 25 us); launch is separate.
    nvls_lat = np.asarray(L.nvls_latency_us, dtype=float) + 0 * N
    on = (nvls_bw > 0) & (g > 1)
    cands.add("nvls", 2, nvls_lat, S * busbw_factor(c.op, p) / np.maximum(nvls_bw, 1e-9), 0 * N, (~c.multi) & on)
    # NVLSTree: the slower stage, blended (NVLS_TREE_SHARPNESS); the tree carries the node's
    # NICs, twice that on 2 nodes (tuning.cc), as busbw -> algbw by p/(2(p-1)).
    a_nvls = np.maximum(nvls_bw / np.maximum(2 * (g - 1) / np.maximum(g, 1), 1e-9), 1e-9)
    a_tree = c.net_node * np.where(N <= 2, 2.0, 1.0) * p / np.maximum(2 * (p - 1), 1e-9)
    k = np.asarray(L.nvls_tree_sharpness, dtype=float)
    # The blend where the tuner doubles the tree (2 nodes: the two stages carry about the
    # same); beyond, the tuner's min: NIC-bound, NVLSTree carries what a ring carries, with
    # log2 N instead of N network steps.
    algbw_nt = np.where(N <= 2, (a_nvls ** (-k) + a_tree ** (-k)) ** (-1.0 / k), np.minimum(a_nvls, a_tree))
    lat_nt = nvls_lat + 2 * c.log2n * c.inter("tree", 2, c.cross_tree)
    cands.add("nvls_tree", 2, lat_nt, S / algbw_nt, 2 * c.log2n, c.multi & on)


def _p2p_protocol_ok(cands: _Candidates, pi: int, ll: Any) -> Any:
    """Where the p2p op runs protocol ``pi`` (LL 0 or Simple 2; NCCL's p2p kernels have no
    LL128): NCCL's rule (``ll``, model.p2p.uses_ll), not a tuner choice; a forced protocol
    (``NCCL_PROTO``-like, the model's option) is taken as given."""
    if cands.protocols is not None:
        return True
    return ll if pi == 0 else ~np.asarray(ll, dtype=bool)


def _p2p_bw_us(c: _Setup, pi: int, size: Any, bw_us: Any, nodes: Any) -> Any:
    """A p2p bandwidth term under its protocol: LL delivers half the link (tuning.cc's LL
    factor) and at most the tuner's LL busbw (``llMaxBws`` of ``nodes``), Simple all of it."""
    if pi != 0:
        return bw_us
    line = np.asarray(c.links.nvlink_line_gbps, dtype=float)
    return np.maximum(2 * bw_us, size / (ll_max_busbw_gbps(nodes, line) * 1e3))


def _add_pairwise(c: _Setup, cands: _Candidates, nccl_version: str | None) -> None:
    """All-to-all as NCCL runs it: P send/recv ops of S/P bytes, each on NCCL's p2p protocol
    (model.p2p.all_to_all_terms), grouped 8 to a channel batch; the groups run on their own
    channels at once, in ``waves`` when they outnumber the channels. Latency: one step on the
    slowest link per wave (a network step plus PXN's NVLink hop across nodes) and, across
    nodes, the proxy posting each remote peer's send/recv in turn at NCCL's own per-network-
    step host cost (tuning.cc getNetOverhead: 1 us on Intel hosts, 3x with Simple). Bandwidth:
    the node's NICs shared evenly per GPU (PXN) and the p2p channels (model.p2p); cross-leaf
    traffic pays the oversubscription (models.md 2.1)."""
    L, S, N, g, p = c.links, c.S, c.N, c.g, c.p
    ll, waves, net_gbps = p2p.all_to_all_terms(S, N, g, c.net_node / 1e3, L.intra_is_pci, nccl_version=nccl_version)
    pxn = (g > 1) & p2p.has_pxn(nccl_version)
    f_x = np.clip((p - np.asarray(L.ranks_per_leaf, dtype=float)) / p, 0, 1)
    penalty = np.maximum(1.0, np.asarray(L.oversubscription, dtype=float) * f_x)
    intra_bytes, inter_bytes = S * (g - 1) / p, S * (p - g) / p
    intra_us, inter_us = intra_bytes / c.nvl, inter_bytes / (net_gbps * 1e3) * penalty
    for pi in (0, 2):
        step = np.where(c.multi, c.inter("ring", pi) + np.where(pxn, c.intra("ring", pi), 0.0), c.intra("ring", pi))
        # A host cost of NCCL's proxy thread, not the wire's: not scaled by the fabric's NET
        # figure (a plugin's own per-op cost is Fabric.proxy_us, in the launch term).
        post = NET_OVERHEAD_US[LL_CPU_VENDOR] * (NET_OVERHEAD_SIMPLE_FACTOR if pi == 2 else 1.0)
        lat = BASE_LAT_US["ring"][pi] + waves * step + (p - g) * post
        bw = np.maximum(_p2p_bw_us(c, pi, intra_bytes, intra_us, 1.0), _p2p_bw_us(c, pi, inter_bytes, inter_us, N))
        cands.add("pairwise", pi, lat, bw, p - g, _p2p_protocol_ok(cands, pi, ll), grow=False)


def _add_p2p(c: _Setup, cands: _Candidates, nccl_version: str | None) -> None:
    """Send/recv (model.p2p) on the protocol NCCL's rule gives it: across nodes one peer pair
    gets NCCL's per-peer channels, not a whole NIC, and a cross-rail pair pays PXN's NVLink
    hop; inside a node the op's channels, each at the tuner's per-channel Simple bandwidth.
    Latency: ``baseLat`` + one step of the link (tuning.cc ring figures of the protocol)."""
    L = c.links
    ll, pxn, bw = p2p.send_recv_terms(
        size_bytes=c.S,
        nodes=c.N,
        gpus_per_node=c.g,
        nic_gbps=c.net_node / np.asarray(L.nics_per_node, dtype=float) / 1e3,
        nvl_busbw_gbps=c.nvl / 1e3,
        nvl_channel_gbps=per_channel_simple_gbps(1.0, L.nvlink_line_gbps),
        intra_is_pci=L.intra_is_pci,
        nic_share=L.p2p_net_share,
        nccl_version=nccl_version,
    )
    steps = np.where(c.multi, 1, 0)
    for pi in (0, 2):
        intra = c.intra("ring", pi)
        lat = BASE_LAT_US["ring"][pi] + np.where(c.multi, c.inter("ring", pi) + np.where(pxn, intra, 0.0), intra)
        cands.add("p2p", pi, lat, _p2p_bw_us(c, pi, c.S, bw, c.N), steps, _p2p_protocol_ok(cands, pi, ll), grow=False)


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
    nccl_version: str | None = None,
) -> CollectiveTimes:
    """Best predicted time of ``op`` for every design in the broadcast of the inputs.

    Args:
        op: one of OPS.
        size_bytes: nccl-tests size S (the whole array for all-gather/reduce-scatter,
            the bytes each rank sends in total for all-to-all).
        nodes, gpus_per_node: N and g; p = N * g ranks.
        links: link parameters.
        deterministic: exclude algorithms whose reduction order is not reproducible.
        algorithms: restrict to these algorithms (like NCCL_ALGO); None: the tuner's choice
            among NCCL's algorithms (FORCED_ONLY ones only when listed here).
        sharp: allow in-network reduction (collnet) where the fabric supports it.
        timing: "graph" (one CUDA-graph launch, the default here for the planner) or "eager"
            (nccl-tests without -G).
        protocols: restrict to these protocols (like NCCL_PROTO); None lets the tuner choose.
        harness: how the op is launched and timed (HARNESSES): "per-gpu" (one process per
            GPU), "single-process" (one thread drives every GPU of its node, nccl-tests -g N:
            SINGLE_PROCESS_US per extra GPU, eager only) or "torch" (torch.distributed timed
            with CUDA events: TORCH_OVERHEAD_US per op).
        nccl_version: the NCCL release, for its p2p channel rules (model.p2p); None: v2.20-v2.28's
            (model.p2p.UNSTATED).

    Every candidate's bandwidth term is at least S over :func:`algbw_ceiling_gbps`, so no
    prediction carries more than the NICs, NVLink or PCIe can. The stages (``_add_*``) list
    the tuner's candidates per algorithm; the smallest tuner estimate wins, as NCCL picks.
    """
    _check_choices(op, timing, harness, protocols)
    c = _Setup.of(op, size_bytes, nodes, gpus_per_node, links, deterministic=deterministic, sharp=sharp)
    cands = _Candidates(
        c, launch=_launch_us(links, c.N, c.g, timing, harness), algorithms=algorithms, protocols=protocols
    )
    for pi in range(3):
        pf = _protocol_factor(c, pi)
        _add_ring(c, cands, pi, pf)
        if op == "all_reduce":
            _add_tree_and_hierarchical(c, cands, pi, pf)
            _add_collnet(c, cands, pi)
            if pi == 2:
                _add_nvls(c, cands)
    if op == "all_to_all":
        _add_pairwise(c, cands, nccl_version)
    if op == "send_recv":
        _add_p2p(c, cands, nccl_version)
    if not cands.rows and op in ("send_recv", "all_to_all") and protocols and "LL128" in protocols:
        raise InputError(
            f"{op} runs LL or Simple only (NCCL's p2p kernels have no LL128); choose --protocol LL or Simple"
        )
    if not cands.rows:
        raise InputError(
            f"no algorithm {algorithms or ''} applies to {op}".replace("  ", " ")
            + (f" with protocol {'/'.join(protocols)}" if protocols else "")
            + (" with bitwise reproducibility" if deterministic else "")
        )
    return cands.best()


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
    # A forced algorithm is checked against its release only (FORCED_ONLY ones, absent from
    # what the tuner chooses among, are still allowed when forced).
    since = ALGORITHM_SINCE.get(algorithm or "", (0, 0))
    if nccl_version is not None and nccl_version_tuple(nccl_version) < since:
        raise InputError(f"algorithm {algorithm!r} needs NCCL >= {'.'.join(map(str, since))}, not {nccl_version}")
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
        nccl_version=nccl_version,
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
