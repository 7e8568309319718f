"""NCCL's own tuner figures and release facts the collective model uses (model.collectives).

Everything here is read off NCCL's source (``src/graph/tuning.cc``, release notes), not
fitted: the per-algorithm/protocol base and hardware latencies, the tree bandwidth
correction by size, and the first release of each algorithm. Units: microseconds, bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpufabric.errors import InputError

ALGORITHMS = ("ring", "tree", "hierarchical", "collnet", "nvls", "pairwise", "p2p", "nvls_tree")
#: Algorithms the tuner never picks by itself: NCCL has no ``hierarchical`` (NVLink
#: reduce-scatter, per-rail ring, NVLink all-gather) among its algorithms (tuning.cc:
#: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT), so it is predicted only
#: when a user forces it (``algorithm="hierarchical"``, e.g. to compare a hand-written
#: hierarchy). Issue 25: it won mid sizes across nodes where NCCL runs tree or ring.
FORCED_ONLY = ("hierarchical",)

# NCCL tuning.cc (commit 01afd20, models.md 2.3) [V]: {LL, LL128, Simple}, microseconds.
BASE_LAT_US = {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4), "collnet": (4.4, 4.4, 0.0)}
HW_LAT_US = {
    "nvlink": {"tree": (0.52, 1.2, 28.0), "ring": (0.47, 1.9, 3.4), "collnet": (0.5, 1.2, 4.0)},
    "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7), "collnet": (1.0, 1.9, 5.5)},
    "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6), "collnet": (5.0, 5.0, 10.7)},
}
#: tuning.cc ``llMaxBws`` (master 5067397c, 2026-06, and v2.26.2; Hopper's 141 since v2.21,
#: Volta/Ampere and the multi-node rows unchanged since v2.12 at least): the most
#: busbw (GB/s) the tuner credits the LL protocol with (ring LL and tree LL). One node: by GPU
#: generation (compute capability: Ampere 87.7, Hopper 141, Blackwell 282); across nodes: by
#: CPU vendor and node count (Intel 39.0 on 2 nodes, 20.4 on 3 or more; AMD 22.5 and 19.0).
LL_MAX_BUSBW_1NODE = {"ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
LL_MAX_BUSBW_MULTINODE = {"intel": (39.0, 20.4), "amd": (22.5, 19.0)}
#: The CPU vendor taken for the multi-node LL cap: Intel (DGX H100/B200 hosts are Xeon); AMD
#: hosts (e.g. AWS p5's EPYC) get 22.5/19.0 in NCCL, 42% less on 2 nodes, 7% on 3 or more.
LL_CPU_VENDOR = "intel"
#: tuning.cc ``ncclTopoGetAlgoTime`` (NCCL >= 2.18, unchanged to master 5067397c): a
#: multi-node ring Simple all-reduce pays 1.4x its latency ("plateau effect of ring"; 1.9 on
#: GPUs older than sm80, and on every GPU with NCCL <= 2.16) once nBytes / (nChannels x
#: nRanks) >= 64 B.
RING_PLATEAU = 1.4
RING_PLATEAU_MIN_BYTES_PER_CHANNEL_RANK = 64
#: tuning.cc ``getNetOverhead`` (NCCL >= 2.18; x86 Intel hosts 1.0 us, AMD 2.0): "inter-node
#: rings still have to launch nsteps * net overhead": every step of a multi-node ring costs
#: at least this much, 3x with Simple. It replaced NCCL <= 2.17's 1.8x on every intra-node LL
#: step of a multi-node job (which the tree paid too; since 2.18 the tree pays neither).
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
NET_OVERHEAD_SIMPLE_FACTOR = 3.0
#: Channels NCCL runs a ring or tree on (``comm->nChannels``; at most MAXCHANNELS, 64 in
#: device.h). The graph search finds 8-16 on an 8-GPU NVSwitch node and NCCL runs "typically
#: 2x the search channels" (NCCL maintainer, nccl#1041); public logs show 16 (1 x 8 H800,
#: "16 coll channels", nccl#892; 3 x 8 H100, "Channel 05/16", nccl#1453) [D: 32 taken for
#: every node; 16 gives the same figure on every table of docs/accuracy.md]. Used where the
#: tuner divides by it (the ring plateau) and for the channels a message fills
#: (:func:`channel_cap_gbps`).
N_CHANNELS = 32
#: enqueue.cc ``topoGetAlgoInfo`` (master 5067397c): ring and tree drop channels while
#: nBytes < nChannels x nThreads x threadThreshold. nThreads per protocol (device.h
#: NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512) x
#: threadThreshold (comm.h NCCL_LL_THREAD_THRESHOLD 8, x nRanks for ring LL in tuning.cc;
#: unused, see channel_cap_gbps;
#: NCCL_LL128_THREAD_THRESHOLD 8; NCCL_SIMPLE_THREAD_THRESHOLD 64): the bytes one channel
#: needs before NCCL adds the next, per protocol (LL, LL128, Simple).
CHANNEL_BYTES = (512 * 8, 640 * 8, 512 * 64)
#: tuning.cc per-channel busbw caps (master 5067397c), GB/s, rows Ampere (and older, PCIe),
#: Hopper, Blackwell; columns 1 node, 2 nodes, 3 or more: ``perChMaxRingLL128Bws`` and
#: ``perChMaxTreeBws``.
PER_CHANNEL_RING_LL128_GBPS = ((20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))
PER_CHANNEL_TREE_SIMPLE_GBPS = ((24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
#: First NCCL release of an algorithm (NVIDIA/nccl release notes): NVLS (NVLink SHARP inside a
#: node) 2.17, NVLSTree (NVLS in the node, a tree across nodes) 2.18. An older NCCL's tuner
#: never picks them.
ALGORITHM_SINCE = {"nvls": (2, 17), "nvls_tree": (2, 18)}


def ll_max_busbw_gbps(nodes: Any, nvlink_line_gbps: Any) -> Any:
    """tuning.cc's LL busbw cap (LL_MAX_BUSBW_*), GB/s. The GPU generation is read off its
    NVLink line rate per direction (NVLink3 A100 300, NVLink4 H100/H200 450, NVLink5 B200 and
    later 900 GB/s); a PCIe-only GPU (sm89 L40S: tuning.cc's Ampere row) gets Ampere's."""
    N = np.asarray(nodes, dtype=float)
    line = np.asarray(nvlink_line_gbps, dtype=float)
    pcie_or_nvl3 = LL_MAX_BUSBW_1NODE["ampere"]
    one = np.where(
        np.isfinite(line) & (line >= 900),
        LL_MAX_BUSBW_1NODE["blackwell"],
        np.where(np.isfinite(line) & (line >= 450), LL_MAX_BUSBW_1NODE["hopper"], pcie_or_nvl3),
    )
    two, more = LL_MAX_BUSBW_MULTINODE[LL_CPU_VENDOR]
    return np.where(N <= 1, one, np.where(N <= 2, two, more))


def _generation(nvlink_line_gbps: Any) -> Any:
    """tuning.cc's compute-capability row, read off the NVLink line rate per direction (0
    Ampere and PCIe-only GPUs, 1 Hopper, 2 Blackwell; as :func:`ll_max_busbw_gbps`)."""
    line = np.asarray(nvlink_line_gbps, dtype=float)
    ok = np.isfinite(line)
    return np.where(ok & (line >= 900), 2, np.where(ok & (line >= 450), 1, 0))


def channel_cap_gbps(proto: int, size_bytes: Any, nodes: Any, nvlink_line_gbps: Any) -> Any:
    """Most ring busbw (GB/s) the channels a message of ``size_bytes`` fills can carry:
    enqueue.cc runs it on ceil(size / CHANNEL_BYTES) channels (1 to N_CHANNELS), and one
    channel moves at most the tuner's per-channel bandwidth (tuning.cc ``perChMaxRingLL128Bws``
    for LL128; ``perChMaxTreeBws``, the only per-channel Simple figure the tuner has, for
    Simple [D: taken for the ring]). inf for LL, whose bandwidth is the tuner's llMaxBws cap
    (:func:`ll_max_busbw_gbps`), not a per-channel copy rate: a channel split of that cap made
    the fit rows worse (scripts/accuracy.py fit rows, each variant refitted: 5.3% against
    3.8%). With every channel filled the cap is 640-2,240 GB/s and never binds."""
    S = np.asarray(size_bytes, dtype=float)
    if proto == 0:
        return np.full_like(S, np.inf)
    used = np.clip(np.ceil(S / CHANNEL_BYTES[proto]), 1, N_CHANNELS)
    gen = _generation(nvlink_line_gbps)
    N = np.asarray(nodes, dtype=float)
    col = np.where(N <= 1, 0, np.where(N <= 2, 1, 2))
    table = PER_CHANNEL_RING_LL128_GBPS if proto == 1 else PER_CHANNEL_TREE_SIMPLE_GBPS
    return used * np.asarray(table)[gen, col]


def per_channel_simple_gbps(nodes: Any, nvlink_line_gbps: Any) -> Any:
    """What one channel moves with Simple, GB/s: tuning.cc ``perChMaxTreeBws`` (the tuner's only
    per-channel Simple figure; master 5067397c) by generation and node count, as
    :func:`channel_cap_gbps` takes it for rings. model.p2p bounds an NVLink send/recv by it x
    the channels NCCL splits the op over."""
    N = np.asarray(nodes, dtype=float)
    col = np.where(N <= 1, 0, np.where(N <= 2, 1, 2))
    return np.asarray(PER_CHANNEL_TREE_SIMPLE_GBPS)[_generation(nvlink_line_gbps), col]


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
    """The algorithms NCCL ``version``'s tuner chooses from (None: the newest's; FORCED_ONLY
    never)."""
    if version is None:
        return None
    v = nccl_version_tuple(version)
    return tuple(a for a in ALGORITHMS if v >= ALGORITHM_SINCE.get(a, (0, 0)) and a not in FORCED_ONLY)


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


def tree_correction(proto: int, size_bytes: Any) -> Any:
    """NCCL's tree bandwidth factor (TREE_CORRECTION) at ``size_bytes``."""
    log_size = np.floor(np.log2(np.maximum(np.asarray(size_bytes, dtype=float), 1.0) / 64.0))
    inside = (log_size >= 0) & (log_size < TREE_CORRECTION.shape[1])
    index = np.clip(log_size, 0, TREE_CORRECTION.shape[1] - 1).astype(int)
    return np.where(inside, TREE_CORRECTION[proto][index], 1.0)
