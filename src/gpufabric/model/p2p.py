"""NCCL point-to-point (send/recv, all-to-all) across nodes: per-peer channels, chunks, PXN.

NCCL moves a send/recv over the network on a few *p2p channels* per peer, not on the 16-32
channels a ring collective spreads over a node's NICs, so one cross-node peer pair is
bounded by ``channels x what one channel carries`` before the NIC's rate
(:func:`send_recv_terms`). How many channels a network peer gets depends on the release
and the communicator's size (:func:`net_channels_per_peer`), how many of them one op uses
on its size (:func:`op_channels`: NCCL splits an op into 64-128 KiB parts, one per
channel). An all-to-all sends to every peer at once over all of a GPU's p2p channels and,
with PXN, through the NIC of whichever local GPU is on the destination's rail, so the
node's NICs share the cross-node bytes evenly (:func:`all_to_all_terms`).

Facts read off NCCL's source (github.com/NVIDIA/nccl; tags named where they changed):

- ``src/graph/paths.cc`` ``ncclTopoGetNchannels`` / ``ncclTopoComputeP2pChannels``:
  channels per network peer: ``NCCL_NCHANNELS_PER_NET_PEER`` = 2 up to v2.19; v2.20-v2.28
  start from 2 and halve while ``2 x nRanks > 4 x p2pnChannels``; v2.29+ (master 5067397c)
  ``max(netCount, ceil(netBw / P2P_PER_CHANNEL_NET_BW))`` with ``P2P_PER_CHANNEL_NET_BW``
  14 GB/s, halved while ``channels x ceil(nRanks / 8) > p2pnChannels`` (8 =
  ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``, device.h). Rounded up to a power of two.
- ``src/enqueue.cc`` ``addP2pToPlan`` (master): across nodes an op is split into parts of
  ``stepSize/2 .. stepSize`` (``P2P_NET_CHUNKSIZE`` 128 KiB, init.cc; NVLink chunks are 512
  KiB) with one part per channel, from ``nChannelsMin`` (halved while ``nChannelsMin x
  nRanks > p2pnChannels``) doubling up to the per-peer count. (Its protocol rule, LL up to
  16 KiB per channel and Simple above, is not imposed: the model's latencies are the tuner's
  collective ones, whose Simple step overstates a 1 MiB NVLink send 1.5x; the candidates
  compete as for a collective, see model.collectives._add_p2p.)
- ``src/graph/paths.cc`` ``NCCL_PXN_DISABLE`` = 0 (PXN on, NCCL >= 2.12): a GPU reaches a
  remote GPU on another rail through the local GPU on that rail (one NVLink hop) and its
  NIC, so traffic stays on its rail and an all-to-all's messages are aggregated per NIC.

Units: bandwidths GB/s (1e9 B/s), sizes bytes, times microseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpufabric.model.nccl_tuner import nccl_version_tuple

#: What one p2p channel carries over the network, GB/s: NCCL's own figure, the bandwidth per
#: channel its channel-count rule sizes a peer's channels by (paths.cc
#: ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s, v2.29+, master 5067397c) [V, NCCL source]. The one
#: public single-channel measurement found is higher: NVIDIA/nccl#1272, 8 nodes x 4 GH200 over
#: HPE Slingshot 200G (aws-ofi-nccl, Grace hosts), sendrecv_perf 512 MiB under NCCL 2.20.5,
#: whose rule leaves one channel per network peer at 32 ranks: 18.3 GB/s (the model: 14, -23%);
#: with two channels (NCCL 2.19.4, NCCL_NCHANNELS_PER_NET_PEER=4, or 2 and 4 nodes) the job
#: reaches its NIC, 24.2 GB/s, as the model does. NCCL's figure is kept: it is the vendor's
#: for its reference InfiniBand platforms, the GH200 one a different host and network.
P2P_NET_CHANNEL_GBPS = 14.0
#: comm->p2pnChannels of NVSwitch nodes with a NIC per GPU: the collective channel count
#: rounded up to a power of two, at most MAXCHANNELS 32 [D: "32 coll channels, 32 collnet
#: channels, 32 nvls channels, 32 p2p channels, 2 p2p channels per peer" in a public NCCL INFO
#: log of a 2-node, 8-rank job on AWS (aws-ofi-nccl); smaller systems log fewer, "8 coll
#: channels, ..., 8 p2p channels" (nccl#1189, H20), and nccl#1272's GH200 drop at 8 nodes but
#: not 4 implies 8 there].
P2P_CHANNELS = 32
#: NCCL's per-channel figure for sizing the channel count (paths.cc P2P_PER_CHANNEL_NET_BW, v2.29+).
NCCL_PER_CHANNEL_NET_BW_GBPS = P2P_NET_CHANNEL_GBPS
#: Ops one channel runs at once (device.h NCCL_MAX_DEV_WORK_P2P_PER_BATCH).
P2P_PER_BATCH = 8
#: Network chunk of a p2p step (init.cc NCCL_P2P_NET_CHUNKSIZE, 128 KiB); an op is split into
#: parts of half to one chunk per channel across nodes (enqueue.cc addP2pToPlan).
P2P_NET_CHUNK_BYTES = 1 << 17
#: First release with PXN (src/graph/paths.cc: no PXN path in v2.11.4-1; PATH_PXN and
#: NCCL_PXN_DISABLE in v2.12.7-1).
PXN_SINCE = (2, 12)
#: First release that sizes a network peer's channels by its NIC's bandwidth (v2.29.2, Dec 2025).
PER_NIC_RULE_SINCE = (2, 29)
#: The rule assumed when the release is not given (``nccl_version`` None): v2.20-v2.28's.
#: Why not the newest: nearly every published send/recv table (and the PyTorch wheels that
#: bundled NCCL through 2025) ran 2.18-2.28, and at 2-8 nodes that rule gives a peer pair about
#: 28 of a 400G NIC's 47 GB/s where v2.29 gives all of it; assuming the upgrade a site may not
#: have made would make a plan optimistic 1.7x. ``--nccl-version 2.29`` takes the newer rule.
UNSTATED = (2, 28)


def _pow2_up(x: Any) -> Any:
    return 2.0 ** np.ceil(np.log2(np.maximum(np.asarray(x, dtype=float), 1.0)))


def _halve_while(ch: Any, too_many: Any) -> Any:
    """``ch`` halved (not below 1) while ``too_many(ch)`` holds: NCCL's loops, vectorised
    (at most log2(32) = 5 steps)."""
    ch = np.asarray(ch, dtype=float)
    for _ in range(6):
        ch = np.where(too_many(ch) & (ch > 1), ch / 2, ch)
    return ch


def net_channels_per_peer(
    ranks: Any, nic_gbps: Any, *, nccl_version: str | None = None, p2p_channels: Any = P2P_CHANNELS
) -> Any:
    """Channels NCCL gives each network peer (``p2pnChannelsPerPeer`` of a multi-node comm).

    ``nic_gbps`` stands for NCCL's topology bandwidth of the GPU's NIC (its line rate, the
    host slot's where lower): 400G -> 4 channels from v2.29, 200G -> 2, 800G -> 8.
    """
    v = UNSTATED if nccl_version is None else nccl_version_tuple(nccl_version)
    n = np.asarray(ranks, dtype=float)
    pc = np.asarray(p2p_channels, dtype=float)
    if v < (2, 20):
        ch = 2.0 + 0 * n
    elif v < PER_NIC_RULE_SINCE:
        ch = _halve_while(2.0 + 0 * n, lambda c: c * n > 4 * pc)
    else:
        wanted = _pow2_up(np.ceil(np.asarray(nic_gbps, dtype=float) / NCCL_PER_CHANNEL_NET_BW_GBPS))
        ch = _halve_while(wanted + 0 * n, lambda c: c * np.ceil(n / P2P_PER_BATCH) > pc)
    return np.minimum(ch, pc)


def op_channels(size_bytes: Any, ranks: Any, per_peer: Any, *, p2p_channels: Any = P2P_CHANNELS) -> Any:
    """Channels one cross-node op of ``size_bytes`` runs on (enqueue.cc addP2pToPlan):
    ``nChannelsMin`` parts of at least half a chunk, doubled while a part exceeds a chunk,
    up to ``per_peer``."""
    S = np.asarray(size_bytes, dtype=float)
    per_peer = np.asarray(per_peer, dtype=float)
    n_min = _halve_while(per_peer + 0 * S, lambda c: c * np.asarray(ranks, dtype=float) > p2p_channels)
    ch = np.maximum(np.minimum(n_min, np.ceil(S / (P2P_NET_CHUNK_BYTES / 2))), 1.0)
    for _ in range(6):
        ch = np.where((np.ceil(S / ch) > P2P_NET_CHUNK_BYTES) & (ch <= per_peer / 2), ch * 2, ch)
    return ch


def net_peer_gbps(
    size_bytes: Any,
    ranks: Any,
    nic_gbps: Any,
    *,
    nccl_version: str | None = None,
    p2p_channels: Any = P2P_CHANNELS,
    channel_gbps: Any = P2P_NET_CHANNEL_GBPS,
) -> Any:
    """Bandwidth (GB/s) of one cross-node send/recv pair: its channels x what one carries,
    at most the NIC's achievable ``nic_gbps``."""
    per_peer = net_channels_per_peer(ranks, nic_gbps, nccl_version=nccl_version, p2p_channels=p2p_channels)
    ch = op_channels(size_bytes, ranks, per_peer, p2p_channels=p2p_channels)
    return np.minimum(np.asarray(nic_gbps, dtype=float), ch * np.asarray(channel_gbps, dtype=float))


def send_recv_terms(
    *,
    size_bytes: Any,
    nodes: Any,
    gpus_per_node: Any,
    nic_gbps: Any,
    nvl_busbw_gbps: Any,
    nic_share: Any = np.nan,
    inter_us: Any,
    intra_us: Any,
    nccl_version: str | None = None,
) -> tuple[Any, Any]:
    """(latency us, bandwidth us) of nccl-tests' send/recv (rank r sends S to r+1): on one
    node an NVLink pair; across nodes the pair that crosses is bounded by its channels
    (:func:`net_peer_gbps`). Its two GPUs are on different rails when a node has more than
    one GPU (local GPU g-1 sends to the next node's GPU 0): PXN adds one NVLink step.
    ``inter_us``/``intra_us`` are one network / NVLink step of the protocol in use.
    ``nic_share`` (not NaN) replaces the channel bound by that share of the NIC: a KV-transfer
    engine (Mooncake, NIXL) posts many queue pairs per peer and fills it (model.inference)."""
    N = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    multi = N > 1
    share = np.asarray(nic_share, dtype=float)
    peer = np.where(
        np.isnan(share),
        net_peer_gbps(size_bytes, N * g, nic_gbps, nccl_version=nccl_version),
        np.nan_to_num(share) * np.asarray(nic_gbps, dtype=float),
    )
    bw = np.where(multi, peer, np.asarray(nvl_busbw_gbps, dtype=float)) * 1e3
    # The PXN hop is NCCL's (nccl-tests' ring shift crosses rails; PXN since 2.12, before it
    # the pair crossed rails through the spine, the worst path ``inter_us`` already pays); a
    # rail-aligned pair, as pipeline stages laid out rail by rail, would skip it (one NVLink
    # step, 1-5 us).
    has_pxn = nccl_version is None or nccl_version_tuple(nccl_version) >= PXN_SINCE
    pxn = np.isnan(share) & (g > 1) & has_pxn
    lat = np.where(multi, inter_us + np.where(pxn, intra_us, 0.0), intra_us)
    return lat, np.asarray(size_bytes, dtype=float) / bw


def all_to_all_net_gbps(
    size_bytes: Any,
    nodes: Any,
    gpus_per_node: Any,
    node_net_gbps: Any,
    *,
    nccl_version: str | None = None,
    p2p_channels: Any = P2P_CHANNELS,
) -> Any:
    """Cross-node bandwidth (GB/s) of one GPU in an all-to-all of ``size_bytes`` per rank.

    With PXN the node's NICs carry its GPUs' cross-node bytes evenly, ``node_net / g`` per
    GPU (sjeaugey, nccl-tests#130: busbw = N/(N-1) x the network bandwidth per GPU); the
    GPU's p2p channels bound it too: each of its p - g remote peers gets its op's channels,
    all of them at most ``p2p_channels`` at once. That binds only with few remote peers (2
    nodes of one GPU: the send/recv pair).
    """
    N = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    p = N * g
    per_gpu_nic = np.asarray(node_net_gbps, dtype=float) / g
    per_peer = net_channels_per_peer(p, per_gpu_nic, nccl_version=nccl_version, p2p_channels=p2p_channels)
    peer_bytes = np.asarray(size_bytes, dtype=float) / np.maximum(p, 1)
    ch = op_channels(peer_bytes, p, per_peer, p2p_channels=p2p_channels)
    channels = np.minimum(ch * np.maximum(p - g, 1), p2p_channels)
    return np.minimum(per_gpu_nic, channels * P2P_NET_CHANNEL_GBPS)
