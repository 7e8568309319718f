"""model.p2p: NCCL's per-peer p2p channels, op splitting and PXN (issue 25, Deliver 2)."""

from __future__ import annotations

import numpy as np
import pytest

from gpufabric.catalog import load_catalog
from gpufabric.model import p2p
from gpufabric.model.collectives import collective_times, links_for, predict_collective

GiB = 1 << 30


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.mark.parametrize(
    ("version", "ranks", "nic_gbps", "p2p_channels", "want"),
    [
        ("2.18.3", 1024, 47.0, 32, 2),  # NCCL_NCHANNELS_PER_NET_PEER = 2, never reduced
        ("2.21.5", 64, 47.0, 32, 2),  # 2 x 64 <= 4 x 32
        ("2.21.5", 128, 47.0, 32, 1),  # 2 x 128 > 4 x 32: halved
        ("2.20.5", 16, 24.2, 8, 2),  # nccl#1272: 4 GH200 nodes keep two channels
        ("2.20.5", 32, 24.2, 8, 1),  # ... 8 nodes drop to one
        ("2.29.2", 16, 47.0, 32, 4),  # ceil(47 / 14) = 4 channels for a 400G NIC
        ("2.29.2", 16, 23.5, 32, 2),  # 200G: 2
        ("2.29.2", 16, 94.0, 32, 8),  # 800G: ceil(6.7) -> 8 (a power of two)
        ("2.29.2", 128, 47.0, 32, 2),  # 4 x ceil(128 / 8) > 32: halved
        ("2.29.2", 512, 47.0, 32, 1),
        (None, 16, 47.0, 32, 2),  # None: the 2.20-2.28 rule (p2p.UNSTATED), not 2.29's 4
    ],
)
def test_channels_per_network_peer_follow_nccl_by_release(version, ranks, nic_gbps, p2p_channels, want):
    got = p2p.net_channels_per_peer(ranks, nic_gbps, nccl_version=version, p2p_channels=p2p_channels)
    assert float(got) == want


def test_an_op_is_split_into_half_to_one_chunk_per_channel():
    """enqueue.cc addP2pToPlan across nodes: parts of 64-128 KiB, one per channel."""
    got = p2p.op_channels(np.array([8, 64 << 10, 128 << 10, 256 << 10, 1 << 20, GiB]), 16, 4)
    assert got.tolist() == [1, 1, 2, 2, 4, 4]
    # 128 ranks: nChannelsMin is 1 (1 x 128 > 32 halves), larger ops still double up to the peer's count
    assert p2p.op_channels(np.array([96 << 10, GiB]), 128, 2).tolist() == [1, 2]


def test_the_public_gh200_sendrecv_figures_of_nccl_1272():
    """8 x 4 GH200, Slingshot 200G (the NIC figure: 24.2 GB/s, what 2-4 nodes reach),
    sendrecv 512 MiB: NCCL 2.19.4 24.2, 2.20.5 18.3 (one channel), 2.20.5 on 4 nodes 24.2.
    The drop is where NCCL's rule puts it (8 nodes, not 4); its size is NCCL's per-channel
    figure, 14 GB/s, 23% under this host's."""

    def peer(ranks: int, version: str) -> float:  # this host's 8 p2p channels: its channels x 14 GB/s, at most its NIC
        per_peer = p2p.net_channels_per_peer(ranks, 24.2, nccl_version=version, p2p_channels=8)
        ch = p2p.op_channels(512 << 20, ranks, per_peer, p2p_channels=8)
        return float(min(24.2, ch * p2p.P2P_NET_CHANNEL_GBPS))

    assert peer(32, "2.19.4") == pytest.approx(24.2)
    assert peer(16, "2.20.5") == pytest.approx(24.2)
    assert peer(32, "2.20.5") == pytest.approx(18.3, rel=0.25)
    assert peer(32, "2.20.5") < 0.8 * peer(16, "2.20.5")


def _sendrecv_gbps(catalog, nodes, version, size=GiB, fabric="ib-ndr"):
    return predict_collective(
        op="send_recv", size_bytes=size, nodes=nodes, gpus_per_node=8, gpu="h100-sxm",
        fabric=fabric, catalog=catalog, nccl_version=version,
    ).busbw_gbps  # fmt: skip


def test_cross_node_sendrecv_is_bounded_by_its_channels_not_the_nic(catalog):
    nic = catalog.fabric("ib-ndr").nic_line_gbps * catalog.fabric("ib-ndr").nic_efficiency
    two_channels = 2 * p2p.P2P_NET_CHANNEL_GBPS
    for nodes in (2, 4, 8):
        assert _sendrecv_gbps(catalog, nodes, "2.21.5") == pytest.approx(two_channels, rel=0.02)
    # 16 x 8 ranks: NCCL 2.20-2.28 leave one channel per network peer
    assert _sendrecv_gbps(catalog, 16, "2.21.5") == pytest.approx(p2p.P2P_NET_CHANNEL_GBPS, rel=0.02)
    # NCCL >= 2.29 sizes the channels to the NIC (4 x 14 GB/s): the NIC binds on 2 nodes
    assert _sendrecv_gbps(catalog, 2, "2.29.2") == pytest.approx(nic, rel=0.03)
    assert _sendrecv_gbps(catalog, 16, "2.29.2") == pytest.approx(two_channels, rel=0.02)
    # an unstated release takes the 2.20-2.28 rule: never above what 2.29 gives at these sizes
    for nodes in (2, 16):
        assert _sendrecv_gbps(catalog, nodes, None) == pytest.approx(_sendrecv_gbps(catalog, nodes, "2.21.5"))
    assert two_channels < nic
    # one node: an NVLink pair, no network channel limit
    assert _sendrecv_gbps(catalog, 1, "2.21.5") > 5 * nic


def test_a_cross_rail_sendrecv_pays_the_pxn_nvlink_hop(catalog):
    """nccl-tests sendrecv: local GPU g-1 sends to the next node's GPU 0, another rail."""
    links = links_for(
        catalog.gpu("h100-sxm"), catalog.fabric("ib-ndr"), catalog.site, catalog.switches["qm9700"], nics_per_node=8
    )
    one = collective_times("send_recv", 8, 2, 1, links, protocols=("LL",))
    eight = collective_times("send_recv", 8, 2, 8, links, protocols=("LL",))
    assert float(eight.latency_us - one.latency_us) > 0.3
    before_pxn = collective_times("send_recv", 8, 2, 8, links, protocols=("LL",), nccl_version="2.11.4")
    assert float(before_pxn.latency_us) == pytest.approx(float(one.latency_us))


def test_all_to_all_carries_the_node_nics_per_gpu_and_few_peers_their_channels(catalog):
    """sjeaugey (nccl-tests#130): alltoall busbw on N nodes is N/(N-1) x the network
    bandwidth per GPU (PXN spreads a node's cross-node bytes over all its NICs)."""
    nic = catalog.fabric("ib-ndr").nic_line_gbps * catalog.fabric("ib-ndr").nic_efficiency
    for nodes in (2, 4):
        got = predict_collective(
            op="all_to_all", size_bytes=8 * GiB, nodes=nodes, gpus_per_node=8, gpu="h100-sxm",
            fabric="ib-ndr", catalog=catalog,
        ).busbw_gbps  # fmt: skip
        p = 8 * nodes
        want = nic * p / (p - 8) * (p - 1) / p
        assert got == pytest.approx(want, rel=0.05)
    # two nodes of one GPU: the one remote peer has its channels, like a send/recv pair
    got = p2p.all_to_all_terms(GiB, 2, 1, nic, nccl_version="2.21.5")[2]
    assert float(got) == pytest.approx(2 * p2p.P2P_NET_CHANNEL_GBPS)


def test_the_a100_alltoall_of_nccl_1138(catalog):
    """nccl#1138: 2 x (8 A100 + 4 x 200G HDR), NCCL 2.18.6, alltoall 4 GiB busbw 19.83 GB/s
    (a check, not a fit: nothing was tuned on it)."""
    links = links_for(
        catalog.gpu("a100-sxm"), catalog.fabric("ib-hdr"), catalog.site, catalog.switches["qm9700"], nics_per_node=4
    )
    t = collective_times("all_to_all", 4 * GiB, 2, 8, links, timing="eager", nccl_version="2.18.6")
    busbw = 4 * GiB / float(t.time_us) / 1e3 * 15 / 16
    assert busbw == pytest.approx(19.83, rel=0.15)
