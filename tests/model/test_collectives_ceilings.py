"""Hard ceilings: no collective prediction carries more than the NICs, NVLink or PCIe can.

The bounds here are computed from the catalog's line rates, independently of the model's
own ``algbw_ceiling_gbps``: every byte that must leave or enter a node crosses its NICs
(all_reduce N/(2(N-1)), all_gather/reduce_scatter N/(N-1), broadcast 1, all_to_all
p/(g(p-g)) of the node's line rate; send_recv one NIC), and inside a node each GPU's
scale-up port carries its line rate.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.catalog import load_catalog
from gpufabric.model.collectives import OPS, predict_collective

CAT = load_catalog()
GPUS = ("a100-sxm", "h100-sxm", "h200", "b200", "l40s")
FABRICS = tuple(CAT.fabrics)


def line_bound_gbps(op: str, nodes: int, g: int, gpu: str, fabric: str, *, sharp: bool) -> float:
    """algbw bound at line rate (no efficiency): the weakest the model may never beat."""
    f = CAT.fabric(fabric)
    node_line = f.nic_line_gbps * g  # one NIC per GPU (predict_collective's layout)
    nvl = CAT.gpu(gpu).nvlink_gbps
    p = nodes * g
    bounds = []
    if nodes > 1:
        in_net = sharp and f.in_network_reduction
        bounds.append(
            {
                "all_reduce": node_line if in_net else node_line * nodes / (2 * (nodes - 1)),
                "all_gather": node_line * nodes / (nodes - 1),
                "reduce_scatter": node_line * nodes / (nodes - 1),
                "broadcast": node_line,
                "all_to_all": node_line * p / (g * (p - g)),
                "send_recv": f.nic_line_gbps,
            }[op]
        )
    if g > 1:
        switch = CAT.gpu(gpu).nvls
        bounds.append(
            {
                "all_reduce": nvl if switch else nvl * g / (2 * (g - 1)),
                "all_gather": nvl * g / (g - 1),
                "reduce_scatter": nvl * g / (g - 1),
                "all_to_all": nvl * g / (g - 1),
                "broadcast": nvl,
                "send_recv": nvl,
            }[op]
        )
    return min(bounds) if bounds else float("inf")


@pytest.mark.parametrize("gpu", ("a100-sxm", "h100-sxm", "h200", "b200"))
@pytest.mark.parametrize("fabric", ("ib-hdr", "ib-ndr", "roce-400g", "efa-p5"))
@pytest.mark.parametrize("nodes", (2, 4, 16))
def test_no_prediction_above_the_nic_line_rate_on_the_issue_grid(gpu, fabric, nodes):
    """Issue 25 bar: 4 GPUs x 4 fabrics x 2/4/16 nodes x all_reduce/all_gather/reduce_scatter."""
    f = CAT.fabric(fabric)
    for op, share in (
        ("all_reduce", nodes / (2 * (nodes - 1))),
        ("all_gather", nodes / (nodes - 1)),
        ("reduce_scatter", nodes / (nodes - 1)),
    ):
        bound = share * 8 * f.nic_line_gbps
        for size in (2**20, 2**28, 2**33, 2**34):
            p = predict_collective(
                op=op, size_bytes=size, nodes=nodes, gpus_per_node=8, gpu=gpu, fabric=fabric, catalog=CAT
            )
            assert p.algbw_gbps <= bound * (1 + 1e-9), (op, size, p.algorithm, p.algbw_gbps, bound)
            # ... and below line rate x the fabric's efficiency, the ceiling the model enforces.
            assert p.algbw_gbps <= bound * f.nic_efficiency * (1 + 1e-9)
            assert p.algbw_gbps <= p.ceiling_algbw_gbps * (1 + 1e-9)


def test_the_ceiling_binds_where_the_old_nvls_tree_form_exceeded_it():
    """2 x 8 B200 over NDR, 8 GiB: the NVLSTree form gave algbw 455 GB/s (issue 25); eight
    400G NICs carry 400 at line rate, 376 at NCCL's efficiency."""
    p = predict_collective(
        op="all_reduce", size_bytes=8 * 2**30, nodes=2, gpus_per_node=8, gpu="b200", fabric="ib-ndr", catalog=CAT
    )
    assert p.algbw_gbps <= 8 * 50 * 0.94
    assert p.algbw_gbps > 300  # still NVLSTree-fast, not a ring over one NIC


def test_sendrecv_across_nodes_gets_a_peer_share_of_one_nic():
    """NCCL 2.20-2.28 give a network peer two p2p channels of ~14 GB/s (model.p2p): about
    half a NIC, not the full 47 GB/s; 2.29+ sizes them to the NIC (tests/model/test_p2p.py)."""
    p = predict_collective(
        op="send_recv", size_bytes=2**30, nodes=2, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", catalog=CAT,
        nccl_version="2.27.7",
    )  # fmt: skip
    assert p.algbw_gbps < 0.6 * 47


def test_a_nic_never_moves_more_than_its_pcie_slot():
    """An XDR (800G, 100 GB/s) NIC in the B200's PCIe Gen5 x16 slot: ~54 GB/s, not 94."""
    ring = predict_collective(
        op="all_reduce",
        size_bytes=2**34,
        nodes=2,
        gpus_per_node=8,
        gpu="b200",
        fabric="ib-xdr",
        catalog=CAT,
        algorithm="ring",
    )
    per_nic = ring.busbw_gbps / 8
    assert per_nic <= 16 * 3.938 * 0.85 * (1 + 1e-9)


@settings(max_examples=300, deadline=None)
@given(
    gpu=st.sampled_from(GPUS),
    fabric=st.sampled_from(FABRICS),
    nodes=st.integers(1, 256),
    g=st.sampled_from((1, 2, 4, 8)),
    op=st.sampled_from(OPS),
    size=st.integers(1, 2**36),
    sharp=st.booleans(),
    timing=st.sampled_from(("eager", "graph")),
    # each p2p channel rule (model.p2p): <= 2.19, 2.20-2.28, >= 2.29, and the unstated default
    nccl_version=st.sampled_from((None, "2.19.3", "2.21.5", "2.29.2")),
    # forced as NCCL_ALGO / NCCL_PROTO too: a forced two-node tree keeps its doubling
    algorithm=st.sampled_from((None, "ring", "tree", "nvls", "nvls_tree", "collnet", "hierarchical")),
    protocol=st.sampled_from((None, "LL", "LL128", "Simple")),
)
def test_no_prediction_exceeds_its_physical_bound(
    gpu, fabric, nodes, g, op, size, sharp, timing, nccl_version, algorithm, protocol
):
    try:
        p = predict_collective(
            op=op,
            size_bytes=size,
            nodes=nodes,
            gpus_per_node=g,
            gpu=gpu,
            fabric=fabric,
            catalog=CAT,
            sharp=sharp,
            timing=timing,
            nccl_version=nccl_version,
            algorithm=algorithm,
            protocol=protocol,
        )
    except Exception as exc:  # only "no algorithm applies", or a forced protocol the op lacks
        forced_lacking = protocol is not None and "have no" in str(exc)
        assert "does not apply" in str(exc) or "no algorithm" in str(exc) or forced_lacking, exc
        return
    assert p.time_us > 0
    assert p.algbw_gbps <= line_bound_gbps(op, nodes, g, gpu, fabric, sharp=sharp) * (1 + 1e-9)
    assert p.algbw_gbps <= p.ceiling_algbw_gbps * (1 + 1e-9)
