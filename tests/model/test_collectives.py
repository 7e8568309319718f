"""Collective model: nccl-tests factors, hand-computed tuner cases, monotonicity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError
from gpufabric.model.collectives import OPS, Links, busbw_factor, collective_times, predict_collective

CAT = load_catalog()


def test_nccl_tests_bus_factors():
    # nccl-tests doc/PERFORMANCE.md (models.md 2.2).
    assert busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor("all_reduce", 8, in_network=True) == pytest.approx(7 / 9)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert busbw_factor(op, 16) == pytest.approx(15 / 16)
    assert busbw_factor("broadcast", 16) == 1
    with pytest.raises(InputError):
        busbw_factor("gather", 4)


def test_small_message_is_ring_ll_tuner_latency():
    # tuning.cc: ring LL baseLat 3.6 + 2(p-1) x NVLink LL 0.47 us, plus 1 us launch (catalog site).
    p = predict_collective(
        op="all_reduce",
        size_bytes=8,
        nodes=1,
        gpus_per_node=2,
        gpu="h100-sxm",
        fabric="ib-ndr",
        catalog=CAT,
        timing="graph",
    )
    assert (p.algorithm, p.protocol) == ("ring", "LL")
    # LL: half the ring busbw under tuning.cc's Hopper LL cap (llMaxBws 141 GB/s).
    assert p.time_us == pytest.approx(1.0 + 3.6 + 2 * 0.47 + 8 * 1.0 / min(369e3 * 0.5, 141e3), rel=1e-6)


def test_large_ring_matches_alpha_beta_by_hand():
    size = 2**30
    p = predict_collective(
        op="all_reduce",
        size_bytes=size,
        nodes=1,
        gpus_per_node=8,
        gpu="h100-sxm",
        fabric="ib-ndr",
        catalog=CAT,
        algorithm="ring",
        timing="graph",
    )
    # Tuner latency (8.4 base + 14 NVLink steps x 3.4) grown to its 1 MiB saturation:
    # 1 + 0.025 x log2(2^20 / 8) = 1.425.
    lat = 1.0 + (8.4 + 14 * 3.4) * (1 + 0.025 * 17)
    assert p.protocol == "Simple"
    assert p.time_us == pytest.approx(lat + size * 1.75 / 369e3, rel=1e-6)
    assert p.busbw_gbps == pytest.approx(p.algbw_gbps * 1.75)


def test_latency_grows_with_size_until_nccl_saturates_its_channels():
    """LATENCY_GROWTH per doubling above 8 B, on the latency term only, flat beyond 1 MiB."""
    from dataclasses import replace

    from gpufabric.model.collectives import links_for

    fab = CAT.fabric("ib-ndr")
    links = links_for(CAT.gpu("h100-sxm"), fab, CAT.site, CAT.switches[fab.switch], nics_per_node=8)
    sizes = [8, 2**13, 2**30]
    flat = collective_times("all_reduce", sizes, 1, 8, replace(links, latency_growth=0.0), algorithms=("ring",))
    grown = collective_times("all_reduce", sizes, 1, 8, links, algorithms=("ring",))
    assert list(grown.protocol) == list(flat.protocol)  # same choice: the ratio is the growth alone
    assert list(grown.latency_us / flat.latency_us) == pytest.approx([1.0, 1 + 0.025 * 10, 1 + 0.025 * 17])
    assert list(grown.launch_us) == pytest.approx(list(flat.launch_us))  # the launch does not grow


def test_tree_bandwidth_carries_nccls_mid_size_correction():
    """tuning.cc treeCorrectionFactor: tree LL128 at 1 MiB (log2(2^20/64) = 14) runs at 0.6."""
    from gpufabric.model.nccl_tuner import TREE_CORRECTION, tree_correction

    assert tree_correction(1, 2**20) == pytest.approx(0.6)
    assert tree_correction(2, 63) == 1.0 and tree_correction(2, 2**40) == 1.0
    assert TREE_CORRECTION.shape == (3, 23)
    kw = dict(op="all_reduce", nodes=4, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", catalog=CAT, timing="graph")
    mid, big = (predict_collective(size_bytes=s, algorithm="tree", **kw) for s in (2**20, 2**32))
    assert mid.bandwidth_us / mid.size_bytes > 1.4 * big.bandwidth_us / big.size_bytes


def test_algorithm_choice_responds_to_scale_and_size():
    kw = dict(gpu="h100-sxm", fabric="ib-ndr", catalog=CAT)
    assert predict_collective(op="all_reduce", size_bytes=2**33, nodes=1, gpus_per_node=8, **kw).algorithm == "nvls"
    # In-network reduction only when asked for (--sharp); NVLSTree otherwise on NVLS GPUs.
    assert (
        predict_collective(op="all_reduce", size_bytes=2**30, nodes=16, gpus_per_node=8, sharp=True, **kw).algorithm
        == "collnet"
    )
    assert (
        predict_collective(op="all_reduce", size_bytes=2**30, nodes=2, gpus_per_node=8, **kw).algorithm == "nvls_tree"
    )
    det = predict_collective(
        op="all_reduce", size_bytes=2**30, nodes=16, gpus_per_node=8, deterministic=True, sharp=True, **kw
    )
    assert det.algorithm not in ("nvls", "collnet", "nvls_tree")
    roce = predict_collective(
        op="all_reduce",
        size_bytes=2**30,
        nodes=16,
        gpus_per_node=8,
        gpu="h100-sxm",
        fabric="roce-400g",
        catalog=CAT,
        sharp=True,
    )
    assert roce.algorithm != "collnet"  # no SHARP on Ethernet


def test_eager_timing_adds_fitted_launch_and_proxy_and_breakdown_sums():
    kw = dict(op="all_reduce", size_bytes=8, gpu="h100-sxm", fabric="ib-ndr", catalog=CAT, gpus_per_node=8)
    for nodes in (1, 4):
        graph = predict_collective(nodes=nodes, timing="graph", **kw)
        eager = predict_collective(nodes=nodes, **kw)
        # the catalog's fitted eager_launch_us (H100) replaces the 1.0 us graph launch, plus
        # proxy_us x log2(nodes)
        fitted = CAT.gpu("h100-sxm").eager_launch_us + CAT.fabric("ib-ndr").proxy_us * np.log2(nodes)
        assert eager.time_us - graph.time_us == pytest.approx(fitted - 1.0)
        assert eager.launch_us == pytest.approx(fitted)
        assert eager.launch_us + eager.latency_us + eager.bandwidth_us == pytest.approx(eager.time_us)
    with pytest.raises(InputError, match="unknown timing"):
        predict_collective(nodes=1, timing="lazy", **kw)


@pytest.mark.parametrize("op", OPS)
def test_every_op_predicts(op):
    p = predict_collective(
        op=op, size_bytes=2**26, nodes=4, gpus_per_node=8, gpu="h100-sxm", fabric="roce-400g", catalog=CAT
    )
    assert p.time_us > 0 and p.num_ranks == 32
    assert p.busbw_gbps == pytest.approx(p.algbw_gbps * float(busbw_factor(op, 32)))


def test_tcp_slower_than_rdma_at_scale():
    kw = dict(op="all_reduce", size_bytes=2**20, nodes=64, gpus_per_node=8, gpu="h100-sxm", catalog=CAT)
    assert (
        predict_collective(fabric="tcp-100g", **kw).time_us > 3 * predict_collective(fabric="roce-100g", **kw).time_us
    )


def _links(nic: float, nvl: float = 369.0, scale: float = 1.0) -> Links:
    return Links(
        nvl_busbw_gbps=nvl,
        intra_is_pci=False,
        nvls_busbw_gbps=0.0,
        nvls_latency_us=0.0,
        nic_gbps=nic,
        nics_per_node=8,
        net_latency_scale=scale,
        extra_hop_us=0.3,
        in_network_reduction=False,
    )


@settings(max_examples=60, deadline=None)
@given(
    op=st.sampled_from(OPS),
    size=st.integers(1, 2**34),
    nodes=st.integers(1, 512),
    nic=st.floats(1, 200),
    more=st.floats(1.0, 4.0),
)
def test_more_bandwidth_never_slower(op, size, nodes, nic, more):
    slow = collective_times(op, size, nodes, 8, _links(nic)).time_us
    fast = collective_times(op, size, nodes, 8, _links(nic * more)).time_us
    assert fast <= slow * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(OPS), size=st.integers(1, 2**30), nodes=st.integers(2, 512), scale=st.floats(1.0, 10.0))
def test_more_latency_never_faster(op, size, nodes, scale):
    base = collective_times(op, size, nodes, 8, _links(47)).time_us
    worse = collective_times(op, size, nodes, 8, _links(47, scale=scale)).time_us
    assert worse >= base * (1 - 1e-12)


def test_vectorised_equals_scalar():
    sizes = np.array([2**10, 2**20, 2**30])
    vec = collective_times("all_reduce", sizes, 16, 8, _links(47)).time_us
    one = [float(collective_times("all_reduce", s, 16, 8, _links(47)).time_us) for s in sizes]
    assert np.allclose(vec, one)


def test_bad_inputs():
    with pytest.raises(InputError, match="unknown collective"):
        predict_collective(
            op="gather", size_bytes=8, nodes=1, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", catalog=CAT
        )
    with pytest.raises(InputError, match=r"no algorithm \('nvls',\) applies to all_gather"):
        predict_collective(
            op="all_gather",
            size_bytes=8,
            nodes=1,
            gpus_per_node=8,
            gpu="h100-sxm",
            fabric="ib-ndr",
            catalog=CAT,
            algorithm="nvls",
        )
    with pytest.raises(InputError, match="algorithm 'nvls' does not apply to all_reduce on 2 node"):
        predict_collective(
            op="all_reduce",
            size_bytes=8,
            nodes=2,
            gpus_per_node=8,
            gpu="h100-sxm",
            fabric="ib-ndr",
            catalog=CAT,
            algorithm="nvls",
        )


@pytest.mark.parametrize("gpu", ["a100-sxm", "h100-sxm", "b200", "gb200", "l40s"])
def test_plan_builds_the_links_predict_builds(gpu):
    """plan/evaluate.py and predict build Links through the one build_links: every field
    agrees for each design of a plan (the NVLink line rate, the generation's NVLink latency
    factor and the NIC's PCIe slot used to be left out by the planner, issue 25)."""
    from dataclasses import fields

    from gpufabric.model.collectives import links_for
    from gpufabric.plan.evaluate import _links
    from gpufabric.plan.table import build_table, enumerate_designs
    from gpufabric.spec import load_spec
    from tests.conftest import EXAMPLES

    spec = load_spec(EXAMPLES / "llama3-70b-1k.yaml").spec
    data = spec.model_dump()
    data["cluster"]["gpu"] = gpu
    spec = type(spec).model_validate(data)
    designs = enumerate_designs(spec)
    t = build_table(spec, CAT, designs, compute_efficiency=0.5)
    hops, nics, leaf = np.full(len(t), 2.0), np.full(len(t), 8.0), np.full(len(t), 256.0)
    planned = _links(t, hops, nics, leaf)
    for i, d in enumerate(designs):
        fab = CAT.fabric(d.fabric)
        want = links_for(
            CAT.gpu(gpu),
            fab,
            CAT.site,
            CAT.switches[fab.switch],
            nics_per_node=8.0,
            hops=2.0,
            oversubscription=d.oversubscription,
            ranks_per_leaf=256.0,
        )
        for f in fields(want):
            if f.name in ("eager_launch_us", "proxy_us"):  # eager timing only; the planner times graphs
                continue
            expected = float(getattr(want, f.name))
            if f.name == "in_network_reduction":  # the planner's design option: SHARP chosen and capable
                expected = float(d.sharp and fab.in_network_reduction)
            got = np.broadcast_to(np.asarray(getattr(planned, f.name), dtype=float), (len(t),))[i]
            assert got == pytest.approx(expected, nan_ok=True), (d.fabric, f.name)


def test_hierarchical_is_never_the_tuners_pick_only_forced():
    """NCCL has no hierarchical algorithm (tuning.cc): the automatic choice is among NCCL's
    own; forcing it still predicts it (issue 25: it won 2-8-node small and mid sizes)."""
    sizes = [8, 2**16, 2**20, 2**24, 2**30]
    for nodes in (2, 4, 8):
        for size in sizes:
            auto = predict_collective(
                op="all_reduce",
                size_bytes=size,
                nodes=nodes,
                gpus_per_node=8,
                gpu="h100-sxm",
                fabric="ib-ndr",
                catalog=CAT,
            )
            assert auto.algorithm != "hierarchical"
    forced = predict_collective(
        op="all_reduce",
        size_bytes=2**16,
        nodes=4,
        gpus_per_node=8,
        gpu="h100-sxm",
        fabric="ib-ndr",
        catalog=CAT,
        algorithm="hierarchical",
    )
    assert forced.algorithm == "hierarchical"
    versioned = predict_collective(
        op="all_reduce",
        size_bytes=2**16,
        nodes=4,
        gpus_per_node=8,
        gpu="h100-sxm",
        fabric="ib-ndr",
        catalog=CAT,
        nccl_version="2.18.3",
    )
    assert versioned.algorithm != "hierarchical"


def test_ring_runs_a_mid_size_message_on_the_channels_it_fills():
    """enqueue.cc: Simple adds a channel per 512 threads x 64 B = 32 KiB, LL128 per 640 x 8 B;
    each channel carries at most the tuner's per-channel busbw (Hopper: tree Simple 38.7 GB/s
    on one node, ring LL128 36.7). NCCL's tuner still chooses as if every channel ran."""
    from gpufabric.model.nccl_tuner import channel_cap_gbps

    assert channel_cap_gbps(2, 64 * 1024, 1, 450) == pytest.approx(2 * 38.7)
    assert channel_cap_gbps(2, 2**30, 4, 450) == pytest.approx(32 * 36.0)
    assert channel_cap_gbps(1, 20 * 1024, 2, 900) == pytest.approx(4 * 40.0)
    assert channel_cap_gbps(1, 20 * 1024, 2, 300) == pytest.approx(4 * 20.0)  # Ampere
    assert channel_cap_gbps(0, 8, 1, 450) == np.inf  # LL: the tuner's LL cap, not per channel
    from gpufabric.model.collectives import links_for

    fab = CAT.fabric("ib-ndr")
    links = links_for(CAT.gpu("h100-sxm"), fab, CAT.site, CAT.switches[fab.switch], nics_per_node=8)
    t = collective_times("all_reduce", 64 * 1024, 1, 8, links, algorithms=("ring",), protocols=("Simple",))
    assert float(t.bandwidth_us) == pytest.approx(64 * 1024 * 1.75 / (2 * 38.7e3), rel=1e-6)


def test_per_tier_latency_follows_the_steps_that_leave_a_leaf():
    """Only the ring hops and tree levels that leave a leaf pay the spine's extra switches: none
    inside a leaf; at 128 nodes under 64-node leaves 2 of 128 ring hops and 1 of 7 tree levels."""
    from dataclasses import replace

    from gpufabric.model.collectives import _Setup, links_for

    fab = CAT.fabric("roce-400g")
    sw = CAT.switches[fab.switch]
    base = links_for(CAT.gpu("h100-sxm"), fab, CAT.site, sw, nics_per_node=8, hops=3, ranks_per_leaf=64 * 8)
    c = _Setup.of("all_reduce", 2**20, 128, 8, base, deterministic=False, sharp=False)
    assert float(c.cross_ring) == pytest.approx(2 / 128)
    assert float(c.cross_tree) == pytest.approx(1 / 7)
    hop = 2 * sw.latency_ns / 1e3
    assert float(c.inter("ring", 1, c.cross_ring)) == pytest.approx(4.0 * fab.net_latency_scale + hop * 2 / 128)
    inside = _Setup.of("all_reduce", 2**20, 32, 8, replace(base, extra_hop_us=0.0), deterministic=False, sharp=False)
    assert float(inside.cross_ring) == 0.0 and float(inside.cross_tree) == 0.0


def test_one_node_h100_choice_is_the_one_nccl_logged():
    """nccl-tests#309 (comment of 2025-05-23, 1 x 8 H100 with 8 NICs, NCCL 2.26): NCCL_DEBUG
    shows ring/LL from 8 B to 1 MiB and NVLS/Simple from 2 MiB to 16 GiB."""
    for k in range(3, 35):
        p = predict_collective(
            op="all_reduce", size_bytes=2**k, nodes=1, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", catalog=CAT
        )
        expected = ("ring", "LL") if 2**k <= 2**20 else ("nvls", "Simple")
        assert (p.algorithm, p.protocol) == expected, 2**k
