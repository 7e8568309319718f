"""Per-generation constants and NCCL tuner properties of the collective model (issue 25)."""

from __future__ import annotations

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.model.collectives import predict_collective

CAT = load_catalog()


def _p(**kw):
    base = dict(op="all_reduce", nodes=1, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", catalog=CAT)
    return predict_collective(**{**base, **kw})


def test_each_generation_has_its_own_nvls():
    """A100 has no NVLS (tuning.cc nvlsEfficiency Ampere 0); B200's is 480 x 900/450 x 0.74/0.85."""
    assert _p(gpu="a100-sxm", size_bytes=2**33).algorithm == "ring"
    b200 = _p(gpu="b200", size_bytes=2**34)
    assert b200.algorithm == "nvls"
    assert b200.busbw_gbps == pytest.approx(480 * 2 * 0.74 / 0.85, rel=0.01)
    assert _p(size_bytes=2**34).busbw_gbps == pytest.approx(480, rel=0.01)


def test_blackwell_nvlink_steps_are_slower_than_hoppers():
    """nccl#1940: 8-byte all-reduce ~3.0 us on B200 vs ~2.3 us on Hopper: NVLink step latency x1.3."""
    h100, b200 = _p(size_bytes=8, timing="graph"), _p(gpu="b200", size_bytes=8, timing="graph")
    assert (h100.algorithm, h100.protocol) == (b200.algorithm, b200.protocol) == ("ring", "LL")
    base = 3.6  # ring LL baseLat; the rest is 14 NVLink steps
    assert (b200.latency_us - base) == pytest.approx(1.3 * (h100.latency_us - base), rel=1e-6)


def test_nvls_tree_carries_what_a_ring_carries_when_nic_bound_beyond_two_nodes():
    """tuning.cc: NVLSTree bw = min(intra, inter) beyond 2 nodes, so when the NICs bind it is
    never slower than the ring (fewer network steps): the tuner picks it at every size."""
    for nodes in (4, 8, 32):
        for size in (2**24, 2**30, 2**34):
            tuner = _p(nodes=nodes, size_bytes=size)
            ring = _p(nodes=nodes, size_bytes=size, algorithm="ring")
            assert tuner.time_us <= ring.time_us * (1 + 1e-12)
    big = _p(nodes=8, size_bytes=2**34)
    assert big.algorithm == "nvls_tree" and big.algbw_gbps <= 8 * 47 * 64 / 126 * (1 + 1e-9)


def test_ll128_only_over_nvlink_unless_forced():
    """tuning.cc: LL128 is on by default only when the intra-node path is NVLink; NCCL_PROTO forces it."""
    sizes = [2**k for k in range(10, 27)]
    pci = {_p(gpu="l40s", size_bytes=s).protocol for s in sizes}
    assert "LL128" not in pci
    assert "LL128" in {_p(size_bytes=s, nodes=2).protocol for s in sizes}  # H100 over NVLink picks it somewhere
    assert _p(gpu="l40s", size_bytes=2**20, protocol="LL128").protocol == "LL128"


@pytest.mark.parametrize(
    ("gpu", "cap_gbps"), [("a100-sxm", 87.7), ("h100-sxm", 141.0), ("h200", 141.0), ("b200", 282.0)]
)
def test_ll_bandwidth_stays_under_the_tuners_cap_per_generation(gpu, cap_gbps):
    """tuning.cc llMaxBws: forced LL on one node carries at most the generation's cap (busbw),
    and half the ring busbw below it; across nodes at most 39.0 (2 nodes) / 20.4 GB/s (more)."""
    big = 2**28  # bandwidth-dominated
    one = _p(gpu=gpu, size_bytes=big, protocol="LL", algorithm="ring", timing="graph")
    assert one.size_bytes * 2 * 7 / 8 / (one.bandwidth_us * 1e3) == pytest.approx(
        min(cap_gbps, 0.5 * CAT.gpu(gpu).nvlink_busbw_gbps), rel=1e-6
    )
    for nodes, cap in ((2, 39.0), (4, 20.4), (16, 20.4)):
        p = _p(gpu=gpu, nodes=nodes, size_bytes=big, protocol="LL", algorithm="ring", timing="graph")
        assert p.busbw_gbps <= cap * (1 + 1e-9)


def test_b200_small_messages_pay_its_fitted_eager_launch():
    """B200's eager launch (19.0 us, GKE B200 table <= 64 KiB) is above Hopper's: a 32 KiB
    all_reduce on 8 x B200 costs more than on 8 x H100, by the launch difference and the
    x1.3 NVLink steps (graph timing keeps the site launch for both)."""
    h100, b200 = _p(size_bytes=2**15), _p(gpu="b200", size_bytes=2**15)
    assert b200.launch_us - h100.launch_us == pytest.approx(
        CAT.gpu("b200").eager_launch_us - CAT.gpu("h100-sxm").eager_launch_us
    )
    assert b200.time_us > 1.5 * h100.time_us
    g_h100, g_b200 = _p(size_bytes=2**15, timing="graph"), _p(gpu="b200", size_bytes=2**15, timing="graph")
    assert g_b200.launch_us == pytest.approx(g_h100.launch_us)
