"""Fabric sizing against the DGX SuperPOD table and fat-tree formulas (models.md 2.7)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.model.topology import leaf_ports, max_endpoints, size_fabric, switch_hops

# SUs, nodes, leaf, spine, core, node-leaf, leaf-spine, spine-core cables (B200 RA).
SUPERPOD = [
    (2, 64, 16, 8, 0, 512, 512, 0),
    (4, 128, 32, 16, 0, 1024, 1024, 0),
    (8, 256, 64, 32, 0, 2048, 2048, 0),
    (16, 512, 128, 128, 64, 4096, 4096, 4096),
    (32, 1024, 256, 256, 128, 8192, 8192, 8192),
    (64, 2048, 512, 512, 256, 16384, 16384, 16384),
]


@pytest.mark.parametrize("row", SUPERPOD, ids=lambda r: f"{r[0]}SU")
def test_superpod_table(row):
    _, nodes, leaf, spine, core, nl, ls, sc = row
    s = size_fabric(nodes=nodes, nics_per_node=8, radix=64)
    assert (int(s.leaf_switches), int(s.spine_switches), int(s.core_switches)) == (leaf, spine, core)
    assert (int(s.node_leaf_links), int(s.leaf_spine_links), int(s.spine_core_links)) == (nl, ls, sc)
    # Twin-port switch optics: one module per 2 switch-side link ends; NIC side one per link.
    assert int(s.switch_transceivers) == (nl + 2 * ls + 2 * sc) // 2
    assert int(s.nic_transceivers) == nl


def test_k64_capacities_and_switch_counts():
    assert [int(max_endpoints(64, t)) for t in (1, 2, 3)] == [64, 2048, 65536]
    full2 = size_fabric(nodes=256, nics_per_node=8, radix=64)
    assert int(full2.switches) == 96  # 64 leaves + 32 spines (models.md 2.7)
    full3 = size_fabric(nodes=8192, nics_per_node=8, radix=64)
    assert int(full3.switches) == 5120  # 5k^2/4


def test_oversubscription_ports():
    assert [int(x) for x in leaf_ports(64, 1)] == [32, 32]
    assert [int(x) for x in leaf_ports(64, 3)] == [48, 16]
    down, up = leaf_ports(64, 2)
    assert (int(down), int(up)) == (42, 22)
    assert down / up <= 2  # the floor keeps the realised ratio at or under the one asked for
    assert int(size_fabric(nodes=128, nics_per_node=8, radix=64, oversubscription=2).spine_switches) < 16


def test_rail_vs_fat_tree_hops():
    rail = size_fabric(nodes=128, nics_per_node=8, radix=64)
    fat = size_fabric(nodes=128, nics_per_node=8, radix=64, rail_optimized=False)
    assert int(rail.nodes_per_leaf) == 32 and int(fat.nodes_per_leaf) == 4
    assert int(switch_hops(16, rail)) == 1 and int(switch_hops(16, fat)) == 3


@settings(max_examples=80, deadline=None)
@given(nodes=st.integers(1, 4096), r=st.sampled_from([1.0, 1.5, 2.0, 3.0]), extra=st.integers(1, 2))
def test_more_tiers_never_cheaper(nodes, r, extra):
    base = size_fabric(nodes=nodes, nics_per_node=8, radix=64, oversubscription=r)
    more = size_fabric(
        nodes=nodes, nics_per_node=8, radix=64, oversubscription=r, tiers=min(3, int(base.tiers) + extra)
    )
    assert more.switches >= base.switches
    assert more.cables >= base.cables and more.switch_transceivers >= base.switch_transceivers
