"""Congestion above the leaf: oversubscription and ECMP path collisions (docs/models.md, "Congestion").

Traffic that leaves a leaf switch is spread over its ``L`` uplinks by ECMP: each flow
(a queue pair) is hashed to one uplink, independently of the others. With ``F`` flows the
busiest uplink carries the maximum of F balls thrown into L bins, and every synchronous
collective runs at the pace of its slowest flow. A flow wants ``demand`` of a link (a
NIC's line rate split over the ``q`` flows it drives), so the busiest uplink is asked for
``E[max load] x demand`` links' worth and the slowdown of that traffic is
``max(1, E[max load] x demand)``. The oversubscription ratio r enters through L: a leaf
with d NIC-facing ports has d / r uplinks (model.topology.leaf_ports).

- Expected maximum load: ``E[max] = sum_k>=1 (1 - P(X < k)^L)`` with X ~ Poisson(F / L),
  the Poisson approximation of the balls-into-bins occupancy (Raab & Steger, "Balls into
  Bins - A Simple and Tight Analysis", RANDOM 1998; Mitzenmacher & Upfal,
  "Probability and Computing", 2005, sec. 5.4: the Poisson case bounds the exact one
  within a factor 2 in probability and is tight in expectation for our sizes).
- Which flows leave the leaf (``cross_fraction``): a ring or tree over contiguously
  placed nodes sends one edge per leaf boundary, so 1 / nodes_per_leaf of the NICs of a
  leaf send up. Rail-optimized leaves hold d nodes of one rail, classic fat-tree leaves
  d / g whole nodes: rail-aligned traffic crosses g times less often on rails. With
  ``placement: scattered`` (a job spread over leaves it shares with other jobs) ring
  neighbours are on other leaves: every edge crosses. An all-to-all sends
  ``(n - nodes_per_leaf) / n`` of its bytes off the leaf either way.
- ``placement: fragmented`` (the default: what a busy scheduler delivers) sits between:
  the job gets its nodes in runs of ``FRAGMENT_NODES`` under one leaf (the rest of the
  leaf holds other jobs or failed nodes), so a ring crosses once per run, and the nodes
  that replaced failed ones come from wherever a spare was: each such node has both ring
  edges off the leaf. The replaced share grows with the failures between re-packings:
  ``rho = min(1, g x 24 h x REPACK_DAYS / gpu_mttf_hours)`` (a node fails at g times the
  GPU rate). Cross fraction ``min(1, 1 / min(nodes_per_leaf, FRAGMENT_NODES) + 2 rho)``.
  Meta keeps its 24k-GPU clusters' 3,072-GPU pods non-blocking and over-provisions the
  leaf uplinks for this reason ("RoCE networks for distributed AI training at scale",
  SIGCOMM 2024, as_of 2024-08); ``contiguous`` is the best case a topology-aware
  scheduler on an empty cluster gives, and must be asked for.
- ``q`` = 2 flows per NIC [U, estimate]: NCCL drives each NIC with 2 or more channels,
  each its own queue pair (NCCL_IB_QPS_PER_CONNECTION = 1 per channel).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from gpufabric.model.rows import unique_rows

#: Flows (queue pairs) per NIC that ECMP hashes independently [U, estimate].
FLOWS_PER_NIC = 2.0
#: Nodes per contiguous run of a job's allocation under one leaf on a shared, busy
#: cluster [U, estimate: schedulers place by free node, and a leaf of 16-32 nodes is
#: rarely free as a whole; multi-tenant traces report fragmentation, not run lengths:
#: Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters", USENIX ATC 2019].
FRAGMENT_NODES = 4.0
#: Days a job keeps the replacements of failed nodes before it is re-packed [U, estimate].
REPACK_DAYS = 7.0
#: Placements (options.placement) and what each assumes.
PLACEMENTS = {
    "fragmented": f"fragmented (runs of {FRAGMENT_NODES:g} nodes per leaf, failed nodes replaced from other leaves)",
    "contiguous": "contiguous (whole leaves, topology-aware scheduling on a free cluster)",
    "scattered": "scattered (every ring neighbour on another leaf)",
}
#: Relative uncertainty of a step time from the congestion and tail models [U]: designs
#: closer than this are reported as a tie (recommend.py caveat).
MODEL_UNCERTAINTY = 0.02


@lru_cache(maxsize=4096)
def _expected_max_scalar(balls: int, bins: int) -> float:
    if balls <= 0:
        return 0.0
    if bins <= 1:
        return float(balls)
    lam = balls / bins
    kmax = int(math.ceil(lam + 12 * math.sqrt(lam) + 12))
    k = np.arange(kmax + 1, dtype=float)
    log_pmf = -lam + k * math.log(lam) - np.array([math.lgamma(x + 1) for x in k])
    cdf = np.cumsum(np.exp(log_pmf))  # cdf[j] = P(X <= j) = P(X < j + 1)
    # Exact max of the *balls* thrown: the max never exceeds the number of balls.
    terms = 1.0 - np.minimum(cdf[:-1], 1.0) ** bins  # k = 1..kmax: 1 - P(X < k)^L
    # The Poisson total is random; the real one is not: the busiest bin holds at least
    # ceil(balls / bins) and at most all of them.
    return float(min(balls, max(math.ceil(balls / bins), np.sum(terms))))


def expected_max_load(balls: Any, bins: Any) -> np.ndarray:
    """E[max over ``bins`` of the flows hashed there] for ``balls`` flows (arrays ok; Poisson approximation)."""
    b, n = np.broadcast_arrays(np.rint(np.asarray(balls, dtype=float)), np.rint(np.asarray(bins, dtype=float)))
    bb, nn = b.ravel(), n.ravel()
    first, inv = unique_rows(bb, nn)
    vals = np.array([_expected_max_scalar(int(bb[i]), int(nn[i])) for i in first])
    return vals[inv].reshape(b.shape)


def replaced_fraction(*, gpus_per_node: Any, gpu_mttf_hours: Any, repack_days: float = REPACK_DAYS) -> np.ndarray:
    """Share of a job's nodes that replaced failed ones since it was last packed (module docstring)."""
    g = np.asarray(gpus_per_node, dtype=float)
    return np.clip(g * 24.0 * repack_days / np.asarray(gpu_mttf_hours, dtype=float), 0.0, 1.0)


def cross_fraction(
    *,
    group_nodes: Any,
    nodes_per_leaf: Any,
    scattered: Any = False,
    fragment_nodes: Any = np.inf,
    replaced: Any = 0.0,
    all_to_all: bool = False,
) -> np.ndarray:
    """Fraction of a leaf's NICs whose flow of this collective leaves the leaf (module docstring).

    ``fragment_nodes`` (inf: contiguous) and ``replaced`` describe a fragmented placement;
    ``scattered`` sends every edge off the leaf.
    """
    n = np.asarray(group_nodes, dtype=float)
    npl = np.maximum(np.asarray(nodes_per_leaf, dtype=float), 1.0)
    spans = n > npl
    run = np.minimum(npl, np.maximum(np.asarray(fragment_nodes, dtype=float), 1.0))
    if all_to_all:  # the peers outside this leaf's share of the group (one run when fragmented)
        return np.where(n > run, np.clip((n - run) / np.maximum(n, 1.0), 0.0, 1.0), 0.0)
    # A fragmented group spans leaves once it outgrows one run, not one leaf.
    placed = np.where(n > run, np.clip(1.0 / run + 2.0 * np.asarray(replaced, dtype=float), 0.0, 1.0), 0.0)
    return np.where(np.asarray(scattered, dtype=bool), np.where(spans, 1.0, 0.0), placed)


def uplink_slowdown(
    *, nics_per_leaf: Any, uplinks: Any, cross: Any, demand: Any = 1.0, flows_per_nic: float = FLOWS_PER_NIC
) -> np.ndarray:
    """Slowdown (>= 1) of the traffic that leaves a leaf: ``max(1, E[max load] x demand / q)``.

    Args:
        nics_per_leaf: NIC-facing ports of the leaf (d).
        uplinks: leaf uplinks (d / r).
        cross: fraction of the leaf's NICs whose flows leave it.
        demand: fraction of a NIC's line rate the traffic asks for (1: a bandwidth-bound collective).
    """
    flows = np.asarray(cross, dtype=float) * np.asarray(nics_per_leaf, dtype=float) * flows_per_nic
    m = expected_max_load(np.maximum(flows, 0.0), np.maximum(np.asarray(uplinks, dtype=float), 1.0))
    return np.maximum(1.0, m * np.asarray(demand, dtype=float) / flows_per_nic)
