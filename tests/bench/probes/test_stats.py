"""Pure functions: nccl-tests bandwidth factors, robust z stragglers, size parsing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufabric.bench.probes import stats
from gpufabric.bench.probes.requests import parse_sizes
from gpufabric.errors import InputError
from gpufabric.model.collectives import busbw_factor


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [  # reference/bench-tools.md busbw table (nccl-tests src/<coll>.cu *GetBw)
        ("all_reduce", 8, 2 * 7 / 8),
        ("all_reduce", 2, 1.0),
        ("all_gather", 4, 3 / 4),
        ("reduce_scatter", 16, 15 / 16),
        ("all_to_all", 8, 7 / 8),
        ("broadcast", 8, 1.0),
        ("send_recv", 8, 1.0),
    ],
)
def test_busbw_factor_matches_nccl_tests(op, n, factor):
    assert busbw_factor(op, n) == pytest.approx(factor)
    # 1 GB in 10 ms is 100 GB/s algbw
    assert stats.busbw_gbps(op, 10**9, 0.01, n) == pytest.approx(100 * factor)


def test_unknown_op_rejected():
    with pytest.raises(InputError, match="unknown collective"):
        stats.busbw_gbps("gather_all", 1024, 1.0, 2)


def test_element_count_keeps_chunks_whole():
    assert stats.element_count("all_gather", 1000, 4, 3) == 249  # 250 -> 249 so 3 equal chunks
    assert stats.element_count("all_reduce", 1000, 4, 3) == 250


def test_stragglers_named_with_host():
    times = {0: 10.0, 1: 10.2, 2: 9.9, 3: 10.1, 4: 19.0}
    hosts = {r: f"node{r // 2}" for r in times}
    found = stats.find_stragglers(times, hosts)
    assert [(g.rank, g.host) for g in found] == [(4, "node2")]
    assert found[0].z > stats.STRAGGLER_Z
    # A uniform cluster with a few percent of wobble has none; two ranks cannot outvote each other.
    assert stats.find_stragglers({0: 10.0, 1: 10.3, 2: 9.8, 3: 10.1}, hosts) == []
    assert stats.find_stragglers({0: 1.0, 1: 100.0}, hosts) == []


@given(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=3, max_size=50))
def test_robust_z_is_scale_invariant(values):
    z1 = stats.robust_z(values)
    z2 = stats.robust_z([v * 7.5 for v in values])
    assert np.allclose(z1, z2, rtol=1e-6, atol=1e-6)
    assert not any(math.isnan(z) for z in z1)


def test_parse_sizes():
    assert parse_sizes("1K:8K") == [1024, 2048, 4096, 8192]
    assert parse_sizes("1K:1G")[-1] == 1 << 30 and len(parse_sizes("1K:1G")) == 21
    assert parse_sizes("1M,16M") == [1 << 20, 16 << 20]
    with pytest.raises(InputError):
        parse_sizes("8K:1K")
