"""NCCL point-to-point (send/recv, all-to-all): per-peer channels, parts, protocol, batches, PXN.

NCCL moves a send/recv over the network on a few *p2p channels* per peer, not on the 16-32
channels a ring collective spreads over a node's NICs, so one cross-node peer pair is
bounded by ``channels x what one channel carries`` before the NIC's rate
(:func:`send_recv_terms`). How many channels a network peer gets depends on the release
and the communicator's size (:func:`net_channels_per_peer`), how many of them one op uses
on its size (:func:`op_channels`: NCCL splits an op into 64-128 KiB parts, one per
channel). An all-to-all sends to every peer at once over all of a GPU's p2p channels and,
with PXN, through the NIC of whichever local GPU is on the destination's rail, so the
node's NICs share the cross-node bytes evenly (:func:`all_to_all_terms`). Each op runs
the protocol NCCL's p2p rule gives it (:func:`uses_ll`), and an all-to-all's ops run in
NCCL's batches of 8 (:func:`all_to_all_schedule`); model.collectives times them.

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
  nRanks > p2pnChannels``) doubling up to the per-peer count; inside one node the parts are
  ``P2P_NVL_CHUNKSIZE / 8 .. x 32`` (64 KiB-16 MiB over NVLink).
- ``src/enqueue.cc`` protocol rule (``NCCL_P2P_LL_THRESHOLD`` 16 KiB, every tag v2.18.3-1 to
  master): an op runs LL when its bytes are at most a threshold, Simple above, never LL128
  (:func:`uses_ll`). Up to v2.21 the threshold is 16 KiB per op; v2.22-v2.28 multiply it by
  the per-peer channel count ``nChannelsMax`` (32 on one NVSwitch node: LL up to 512 KiB; 2
  across nodes: 32 KiB); from v2.29 by the op's own channel count (16 KiB on one channel).
  The model times that protocol only (model.collectives._add_p2p): it is not a tuner choice.
- ``src/include/channel.h`` ``ncclP2pChannelBaseForRound`` and enqueue.cc
  ``ncclAddWorkBatchToPlan`` (master): an all-to-all's P rounds go in groups of
  ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` = 8 (device.h); one group shares a channel's batch and
  its ops run together, groups run on other channels, and a channel runs its batches one
  after another once the groups' parts outnumber the p2p channels (:func:`all_to_all_waves`).
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
#: NVLink chunk of a p2p step inside one all-NVLink node (init.cc NCCL_P2P_NVL_CHUNKSIZE, 512 KiB);
#: PCIe: NCCL_P2P_PCI_CHUNKSIZE, 128 KiB (v2.26.2-1 init.cc computeBuffSizes).
P2P_NVL_CHUNK_BYTES = 1 << 19
P2P_PCI_CHUNK_BYTES = 1 << 17
#: enqueue.cc ``NCCL_PARAM(P2pLLThreshold, "P2P_LL_THRESHOLD", 16384)`` (unchanged v2.18.3-1 to
#: master 5067397c): the LL protocol's bytes per op (<= v2.21) or per channel (see uses_ll).
P2P_LL_THRESHOLD_BYTES = 16384
#: v2.22.3-1 enqueue.cc addP2pToPlan: ``thresholdLL = nChannelsMax * P2pLLThreshold`` (the
#: peer's channel count; to v2.28.9-1). v2.29.2-1: ``nChannels[dir] * P2pLLThreshold`` (the op's).
LL_PER_PEER_CHANNELS_SINCE = (2, 22)
LL_PER_OP_CHANNELS_SINCE = (2, 29)
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


def has_pxn(nccl_version: str | None) -> bool:
    """Whether the release routes cross-rail traffic through PXN (PXN_SINCE; None: yes)."""
    return nccl_version is None or nccl_version_tuple(nccl_version) >= PXN_SINCE


def _pow2_up(x: Any) -> Any:
    return 2.0 ** np.ceil(np.log2(np.maximum(np.asarray(x, dtype=float), 1.0)))


def _halved_to(ch: Any, limit: Any) -> Any:
    """A power of two ``ch`` halved (not below 1) while ``ch > limit``: NCCL's halving loops
    (``while (c * n > budget && c > 1) c /= 2``) in closed form, the largest power of two
    <= ``limit`` where that is smaller (tests/model/test_p2p_protocol.py checks it against the
    loops)."""
    lim = np.maximum(np.asarray(limit, dtype=float), 1.0)
    return np.maximum(np.minimum(np.asarray(ch, dtype=float), 2.0 ** np.floor(np.log2(lim))), 1.0)


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
        ch = _halved_to(2.0, 4 * pc / n)  # halved while c x nRanks > 4 x p2pnChannels
    else:
        wanted = _pow2_up(np.ceil(np.asarray(nic_gbps, dtype=float) / NCCL_PER_CHANNEL_NET_BW_GBPS))
        ch = _halved_to(wanted, pc / np.ceil(n / P2P_PER_BATCH))  # while c x ceil(n / 8) > p2pnChannels
    return np.minimum(ch, pc)


def peer_channels(
    nodes: Any,
    ranks: Any,
    nic_gbps: Any,
    intra_is_pci: Any = False,
    *,
    nccl_version: str | None = None,
    p2p_channels: Any = P2P_CHANNELS,
) -> Any:
    """``comm->p2pnChannelsPerPeer``: the fewest channels any peer gets (paths.cc
    ncclTopoComputeP2pChannels, rounded up to a power of two, at most ``p2p_channels``). An
    NVLink peer gets 2 x its NVLink count (ncclTopoGetNchannels: 24-36 on A100-B200 NVSwitch
    nodes, so every p2p channel), a PCIe peer 2, a network peer :func:`net_channels_per_peer`."""
    pc = np.asarray(p2p_channels, dtype=float)
    intra = np.where(np.asarray(intra_is_pci, dtype=bool), 2.0, pc)
    net = net_channels_per_peer(ranks, nic_gbps, nccl_version=nccl_version, p2p_channels=pc)
    return np.minimum(np.where(np.asarray(nodes, dtype=float) > 1, np.minimum(net, intra), intra), pc)


def part_bytes(nodes: Any, intra_is_pci: Any = False) -> tuple[Any, Any]:
    """(smallest, largest) part of an op per channel (enqueue.cc addP2pToPlan): across nodes
    half to one ``P2P_NET_CHUNKSIZE``; inside a node 1/8 to 32 x the NVLink (or PCIe) chunk."""
    multi = np.asarray(nodes, dtype=float) > 1
    chunk = np.where(np.asarray(intra_is_pci, dtype=bool), P2P_PCI_CHUNK_BYTES, P2P_NVL_CHUNK_BYTES)
    return (
        np.where(multi, P2P_NET_CHUNK_BYTES / 2, chunk / 8),
        np.where(multi, float(P2P_NET_CHUNK_BYTES), chunk * 32.0),
    )


def op_channels(
    size_bytes: Any,
    ranks: Any,
    per_peer: Any,
    *,
    p2p_channels: Any = P2P_CHANNELS,
    min_part: Any = P2P_NET_CHUNK_BYTES / 2,
    max_part: Any = P2P_NET_CHUNK_BYTES,
) -> Any:
    """Channels one op of ``size_bytes`` runs on (enqueue.cc addP2pToPlan): ``nChannelsMin``
    (``per_peer`` halved while it x ``ranks`` exceeds the p2p channels) parts of at least
    ``min_part``, doubled while a part exceeds ``max_part``, up to ``per_peer``. The default
    parts are the network's (:func:`part_bytes`)."""
    S = np.asarray(size_bytes, dtype=float)
    per_peer = np.asarray(per_peer, dtype=float)
    n_min = _halved_to(per_peer, np.asarray(p2p_channels, dtype=float) / np.asarray(ranks, dtype=float))
    ch = np.maximum(np.minimum(n_min, np.ceil(S / min_part)), 1.0)
    # ``while (ceil(S / ch) > max_part && ch <= per_peer / 2) ch *= 2`` in closed form: the
    # doublings the part size needs, at most those that keep ch <= per_peer.
    with np.errstate(divide="ignore"):
        need = np.ceil(np.log2(np.maximum(S / (ch * np.asarray(max_part, dtype=float)), 1.0)))
    room = np.floor(np.log2(np.maximum(per_peer / ch, 1.0)))
    return ch * 2.0 ** np.minimum(need, room)


def uses_ll(size_bytes: Any, channels: Any, per_peer: Any, *, nccl_version: str | None = None) -> Any:
    """True where NCCL runs an op of ``size_bytes`` with LL, else Simple (enqueue.cc
    addP2pToPlan, ``P2P_LL_THRESHOLD``): up to v2.21 ``bytes <= 16 KiB``; v2.22-v2.28 ``bytes
    <= per_peer x 16 KiB`` (the peer's channels); from v2.29 ``bytes <= channels x 16 KiB`` (the
    op's own, :func:`op_channels`). ``nccl_version`` None: v2.20-v2.28's rule (UNSTATED)."""
    v = UNSTATED if nccl_version is None else nccl_version_tuple(nccl_version)
    if v < LL_PER_PEER_CHANNELS_SINCE:
        factor: Any = 1.0
    elif v < LL_PER_OP_CHANNELS_SINCE:
        factor = per_peer
    else:
        factor = channels
    return np.asarray(size_bytes, dtype=float) <= np.asarray(factor, dtype=float) * P2P_LL_THRESHOLD_BYTES


def all_to_all_waves(ranks: Any, channels: Any, *, p2p_channels: Any = P2P_CHANNELS) -> Any:
    """Batches one channel runs one after another in an all-to-all of ``ranks`` (enqueue.cc
    ncclAddWorkBatchToPlan, channel.h ncclP2pChannelBaseForRound): the rounds go in groups of
    ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` (8), a group's ops share one batch on each of the
    ``channels`` its op is split over, and groups take other channels until the
    ``p2p_channels`` are used up: ``ceil(ceil(ranks / 8) x channels / p2p_channels)``."""
    groups = np.ceil(np.asarray(ranks, dtype=float) / P2P_PER_BATCH)
    return np.maximum(np.ceil(groups * np.asarray(channels, dtype=float) / np.asarray(p2p_channels, dtype=float)), 1.0)


def pair_channels(
    size_bytes: Any,
    nodes: Any,
    gpus_per_node: Any,
    nic_gbps: Any,
    intra_is_pci: Any = False,
    *,
    nccl_version: str | None = None,
) -> tuple[Any, Any]:
    """(per-peer channels, the op's channels) of one send/recv of ``size_bytes`` in a
    communicator of nodes x gpus_per_node ranks: :func:`peer_channels` and
    :func:`op_channels` with the parts of :func:`part_bytes`."""
    N = np.asarray(nodes, dtype=float)
    p = N * np.asarray(gpus_per_node, dtype=float)
    per_peer = peer_channels(N, p, nic_gbps, intra_is_pci, nccl_version=nccl_version)
    lo, hi = part_bytes(N, intra_is_pci)
    return per_peer, op_channels(size_bytes, p, per_peer, min_part=lo, max_part=hi)


def send_recv_terms(
    *,
    size_bytes: Any,
    nodes: Any,
    gpus_per_node: Any,
    nic_gbps: Any,
    nvl_busbw_gbps: Any,
    nvl_channel_gbps: Any = np.inf,
    intra_is_pci: Any = False,
    nic_share: Any = np.nan,
    nccl_version: str | None = None,
) -> tuple[Any, Any, Any]:
    """(LL?, PXN hop?, bandwidth us) of nccl-tests' send/recv (rank r sends S to r+1).

    The op's channels (:func:`pair_channels`) set its protocol (:func:`uses_ll`) and its
    bandwidth: on one node an NVLink pair, each channel at most ``nvl_channel_gbps`` (8 ranks
    get 4 of 32 until a part passes 16 MiB); across nodes each channel carries
    P2P_NET_CHANNEL_GBPS, at most the NIC. Its two GPUs are on different rails when a node
    has more than one GPU (local GPU g-1 sends to the next node's GPU 0): PXN adds one
    NVLink step to the latency. ``nic_share`` (not NaN) replaces the channel bound by that
    share of the NIC: a KV-transfer engine (Mooncake, NIXL) posts many queue pairs per peer
    and fills it (model.inference)."""
    N = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    nic = np.asarray(nic_gbps, dtype=float)
    per_peer, ch = pair_channels(size_bytes, N, g, nic, intra_is_pci, nccl_version=nccl_version)
    share = np.asarray(nic_share, dtype=float)
    net = np.where(np.isnan(share), np.minimum(nic, ch * P2P_NET_CHANNEL_GBPS), np.nan_to_num(share) * nic)
    nvl = np.minimum(np.asarray(nvl_busbw_gbps, dtype=float), ch * np.asarray(nvl_channel_gbps, dtype=float))
    bw = np.where(N > 1, net, nvl) * 1e3
    # The PXN hop is NCCL's (nccl-tests' ring shift crosses rails; PXN since 2.12, before it
    # the pair crossed rails through the spine, the worst path the NET step already pays); a
    # rail-aligned pair, as pipeline stages laid out rail by rail, would skip it (one NVLink
    # step, 1-5 us).
    pxn = np.isnan(share) & (g > 1) & has_pxn(nccl_version)
    ll = uses_ll(size_bytes, ch, per_peer, nccl_version=nccl_version)
    return ll, pxn, np.asarray(size_bytes, dtype=float) / bw


def all_to_all_terms(
    size_bytes: Any,
    nodes: Any,
    gpus_per_node: Any,
    node_net_gbps: Any,
    intra_is_pci: Any = False,
    *,
    nccl_version: str | None = None,
) -> tuple[Any, Any, Any]:
    """(LL?, waves, cross-node GB/s per GPU) of nccl-tests' all-to-all of ``size_bytes`` per
    rank: each of its P ops carries ``size_bytes / P`` on the channels :func:`pair_channels`
    splits it over and the protocol :func:`uses_ll` gives it; ``waves`` is
    :func:`all_to_all_waves`.

    With PXN the node's NICs carry its GPUs' cross-node bytes evenly, ``node_net / g`` per
    GPU (sjeaugey, nccl-tests#130: busbw = N/(N-1) x the network bandwidth per GPU); the
    GPU's p2p channels bound it too: each of its p - g remote peers gets its op's channels,
    all of them at most P2P_CHANNELS at once. That binds only with few remote peers (2
    nodes of one GPU: the send/recv pair).
    """
    N = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    p = N * g
    per_gpu_nic = np.asarray(node_net_gbps, dtype=float) / g
    peer_bytes = np.asarray(size_bytes, dtype=float) / np.maximum(p, 1.0)
    per_peer, ch = pair_channels(peer_bytes, N, g, per_gpu_nic, intra_is_pci, nccl_version=nccl_version)
    channels = np.minimum(ch * np.maximum(p - g, 1), P2P_CHANNELS)
    net = np.minimum(per_gpu_nic, channels * P2P_NET_CHANNEL_GBPS)
    return uses_ll(peer_bytes, ch, per_peer, nccl_version=nccl_version), all_to_all_waves(p, ch), net
