"""Fat-tree and rail-optimized fabric sizing (models.md 2.7), vectorisable with numpy.

k-port switches, oversubscription r = down:up at the leaf only (spines and cores are
non-blocking towards what the leaves send up):

- leaf down ports d = floor(k r / (1 + r)), up ports u = k - d (r = 1: k/2 each).
- Max endpoints: 1 tier k; 2 tiers k d (= k^2/2 at r = 1); 3 tiers k (k/2) d (= k^3/4).
- 2 tiers: leaves ceil(H/d); spines ceil(leaves u / k).
- 3 tiers: leaves ceil(H/d); spines ceil(leaves u / (k/2)); cores ceil(spines (k/2) / k).
- Links: node-leaf H, leaf-spine leaves*u, spine-core spines*k/2.
- Transceivers: 2 per optical link; a twin-port 800G OSFP carries 2 x 400G, so
  switch-side modules = switch-side link ends / ports_per_module (models.md 2.7 [V]).

Reproduces the DGX SuperPOD compute-fabric table (tests/model/test_topology.py).
Rail-optimized wiring (GPU i of every node to rail leaf i) does not change the counts,
only which nodes share a leaf: a rail leaf serves d nodes (one NIC each), a classic
fat-tree leaf serves d/g nodes (all g NICs of a node on one leaf).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricSize:
    """Switch, link and transceiver counts of one (or, as arrays, many) fabrics."""

    tiers: Any
    endpoints: Any
    leaf_switches: Any
    spine_switches: Any
    core_switches: Any
    node_leaf_links: Any
    leaf_spine_links: Any
    spine_core_links: Any
    nic_transceivers: Any
    switch_transceivers: Any
    cables: Any
    nodes_per_leaf: Any  # nodes whose same-rail NICs share one leaf
    nodes_per_pod: Any  # nodes reachable without a core switch

    @property
    def switches(self) -> Any:
        return self.leaf_switches + self.spine_switches + self.core_switches


def leaf_ports(radix: Any, oversubscription: Any) -> tuple[Any, Any]:
    """(down, up) ports of a leaf for ratio r = down:up."""
    k = np.asarray(radix, dtype=float)
    r = np.asarray(oversubscription, dtype=float)
    down = np.floor(k * r / (1 + r))
    return down, k - down


def max_endpoints(radix: Any, tiers: Any, oversubscription: Any = 1.0) -> Any:
    """Largest endpoint count a t-tier fabric of k-port switches holds (models.md 2.7)."""
    k = np.asarray(radix, dtype=float)
    d, _ = leaf_ports(k, oversubscription)
    t = np.asarray(tiers)
    return np.where(t <= 1, k, np.where(t == 2, k * d, k * (k / 2) * d))


def tiers_needed(endpoints: Any, radix: Any, oversubscription: Any = 1.0) -> Any:
    """Fewest tiers that hold ``endpoints`` (a value above 3 tiers' capacity still gets 3)."""
    h = np.asarray(endpoints, dtype=float)
    return np.where(
        h <= max_endpoints(radix, 1, oversubscription),
        1,
        np.where(h <= max_endpoints(radix, 2, oversubscription), 2, 3),
    )


def size_fabric(
    *,
    nodes: Any,
    nics_per_node: Any,
    radix: Any,
    oversubscription: Any = 1.0,
    tiers: Any = None,
    rail_optimized: Any = True,
    switch_ports_per_module: Any = 2,
    nic_optics: Any = True,
) -> FabricSize:
    """Size the compute fabric for ``nodes`` x ``nics_per_node`` endpoints.

    Args:
        tiers: force a tier count (>= the minimum); None picks the fewest that fit.
        switch_ports_per_module: links one switch-side module carries (twin-port: 2).
        nic_optics: NIC-side links use a transceiver (False: copper DAC).
    """
    n = np.asarray(nodes, dtype=float)
    g = np.asarray(nics_per_node, dtype=float)
    k = np.asarray(radix, dtype=float)
    h = n * g
    d, u = leaf_ports(k, oversubscription)
    need = tiers_needed(h, k, oversubscription)
    t = need if tiers is None else np.maximum(need, np.asarray(tiers))
    leaf = np.where(t == 1, 1.0, np.ceil(h / d))
    leaf_spine = np.where(t >= 2, leaf * u, 0.0)
    spine = np.where(t == 2, np.ceil(leaf_spine / k), np.where(t == 3, np.ceil(leaf_spine / (k / 2)), 0.0))
    spine_core = np.where(t == 3, spine * (k / 2), 0.0)
    core = np.where(t == 3, np.ceil(spine_core / k), 0.0)
    ppm = np.asarray(switch_ports_per_module, dtype=float)
    nic_x = np.where(nic_optics, h, 0.0)
    switch_x = np.ceil(h / ppm) + np.ceil(2 * leaf_spine / ppm) + np.ceil(2 * spine_core / ppm)
    rail = np.asarray(rail_optimized, dtype=bool)
    per_leaf = np.where(t == 1, n, np.where(rail, d, np.maximum(1.0, np.floor(d / g))))
    per_pod = np.where(t <= 2, n, per_leaf * (k / 2))
    return FabricSize(
        tiers=t,
        endpoints=h,
        leaf_switches=leaf,
        spine_switches=spine,
        core_switches=core,
        node_leaf_links=h,
        leaf_spine_links=leaf_spine,
        spine_core_links=spine_core,
        nic_transceivers=nic_x,
        switch_transceivers=switch_x,
        cables=h + leaf_spine + spine_core,
        nodes_per_leaf=per_leaf,
        nodes_per_pod=per_pod,
    )


def switch_hops(group_nodes: Any, size: FabricSize) -> Any:
    """Switches on the worst path between same-rail NICs of a group of nodes placed together.

    1 inside a leaf, 3 through a spine, 5 through a core (up-down routing).
    """
    n = np.asarray(group_nodes, dtype=float)
    return np.where(n <= size.nodes_per_leaf, 1, np.where(n <= size.nodes_per_pod, 3, 5))


#: PCIe bandwidth per lane per direction after line encoding, GB/s (PCI-SIG base
#: specifications: Gen3 8 GT/s 128b/130b, Gen4 16, Gen5 32, Gen6 64 GT/s FLIT 242/256,
#: Gen7 128 GT/s).
PCIE_LANE_GBPS = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563, 7: 15.125}
#: Share of that left after transaction- and link-layer overhead at 256-byte payloads [U,
#: estimate: 256 / (256 + 24 header bytes + DLLP) ~ 0.86; measured Gen5 x16 NICs reach ~52 GB/s].
PCIE_EFFICIENCY = 0.85


def nic_host_gbps(pcie_gen: Any, lanes: Any) -> Any:
    """Bandwidth a NIC can move to and from host/GPU memory per direction, GB/s."""
    gen = np.asarray(pcie_gen)
    lane = np.vectorize(lambda g: PCIE_LANE_GBPS[int(g)])(gen) if gen.ndim else PCIE_LANE_GBPS[int(gen)]
    return np.asarray(lanes, dtype=float) * lane * PCIE_EFFICIENCY
