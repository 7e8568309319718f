"""Step times of one run: the order-statistics path and the brute-force reference.

A synchronous step ends when its slowest rank ends. For n i.i.d. ranks the maximum is
drawn directly as F^-1(U^(1/n)) (``distributions.draw_max``) instead of n draws. Groups
that are not identically distributed are split into i.i.d. classes and their maxima
combined:

- stragglers: slow and normal ranks are two classes; max = max(class maxima);
- hiccups: K ~ Binomial(n, q) ranks hiccup this step; max = max(max of n-K ranks,
  D + max of K ranks), exact because the hiccup is independent of the compute time;
- correlated leaf jitter: max over leaves of (shared leaf draw + max over the leaf's
  ranks), one draw per leaf instead of one per rank (leaves of equal composition are
  i.i.d.);
- collectives: a ring of S dependent steps, each waiting for the slowest of p transfers.

Steps run in fixed-size chunks (independent of the machine) so memory stays bounded and
the same seed gives the same numbers bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufabric.sim.config import CommLatency, SimConfig
from gpufabric.sim.distributions import Distribution, Hiccup, draw_max, max_moments

#: Random numbers per chunk; bounds memory at ~tens of MiB whatever the scale.
_CHUNK_DRAWS = 1 << 21


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """What is fixed for a whole run: which nodes and links are slow."""

    slow_node_mask: np.ndarray
    slow_link_count: int
    leaf_types: tuple[tuple[int, int, int], ...]
    """(normal ranks, slow ranks, number of leaves) per distinct leaf composition."""

    @property
    def slow_ranks(self) -> int:
        return int(sum(s * g for _, s, g in self.leaf_types))


def draw_layout(cfg: SimConfig, rng: np.random.Generator, *, stragglers: bool = True) -> Layout:
    """Pick the run's slow nodes and links (Bernoulli per node/link, fixed for the run);
    none with ``stragglers=False`` (the straggler-free rerun)."""
    nodes = cfg.num_nodes
    mask = np.zeros(nodes, dtype=bool)
    if stragglers and cfg.stragglers is not None:
        mask = rng.random(nodes) < cfg.stragglers.fraction
    slow_links = 0
    if stragglers and cfg.comm is not None and cfg.comm.slow_links is not None:
        slow_links = int((rng.random(cfg.comm.width) < cfg.comm.slow_links.fraction).sum())
    rpl = cfg.ranks_per_leaf or cfg.num_ranks
    nodes_per_leaf = rpl // cfg.ranks_per_node
    slow_per_leaf = mask.reshape(-1, nodes_per_leaf).sum(axis=1) * cfg.ranks_per_node
    values, counts = np.unique(slow_per_leaf, return_counts=True)
    types = tuple((rpl - int(s), int(s), int(g)) for s, g in zip(values, counts, strict=True))
    return Layout(slow_node_mask=mask, slow_link_count=slow_links, leaf_types=types)


def _slow(cfg: SimConfig) -> Distribution:
    return cfg.compute.affine(scale=cfg.stragglers.factor) if cfg.stragglers else cfg.compute


def _group_max(rng: np.random.Generator, n: int, dist: Distribution, hiccup: Hiccup | None, shape) -> np.ndarray:
    """Max over n i.i.d. ranks of (dist + hiccup), exactly, for every entry of ``shape``."""
    if hiccup is None or hiccup.prob == 0.0:
        return draw_max(dist, n, rng.random(shape))
    k = rng.binomial(n, hiccup.prob, shape)
    out = draw_max(dist, n - k, rng.random(shape)) + hiccup.loc_s
    flat = out.reshape(-1)
    hit = np.flatnonzero(k)  # usually few: q is small, so draw only where needed
    if hit.size:
        slow = hiccup.loc_s + hiccup.delay_s + draw_max(dist, k.reshape(-1)[hit], rng.random(hit.size))
        flat[hit] = np.maximum(flat[hit], slow)
    return out


def _compute_fast(cfg: SimConfig, lay: Layout, rng: np.random.Generator, m: int) -> np.ndarray:
    slow = _slow(cfg)
    if cfg.leaf_jitter is None:
        # Without a shared leaf term the leaves do not matter: two classes over all ranks.
        normal_n = cfg.num_ranks - lay.slow_ranks
        out = _group_max(rng, normal_n, cfg.compute, cfg.hiccup, m) if normal_n else np.full(m, -np.inf)
        if lay.slow_ranks:
            out = np.maximum(out, _group_max(rng, lay.slow_ranks, slow, cfg.hiccup, m))
        return out
    out = np.full(m, -np.inf)
    for normal_n, slow_n, leaves in lay.leaf_types:
        shape = (m, leaves)
        v = _group_max(rng, normal_n, cfg.compute, cfg.hiccup, shape) if normal_n else np.full(shape, -np.inf)
        if slow_n:
            v = np.maximum(v, _group_max(rng, slow_n, slow, cfg.hiccup, shape))
        v += cfg.leaf_jitter.isf(rng.random(shape))
        out = np.maximum(out, v.max(axis=1))
    return out


def _compute_brute(cfg: SimConfig, lay: Layout, rng: np.random.Generator, m: int) -> np.ndarray:
    n = cfg.num_ranks
    slow_rank = np.repeat(lay.slow_node_mask, cfg.ranks_per_node)
    x = np.empty((m, n))
    x[:, ~slow_rank] = cfg.compute.sample(rng, (m, int((~slow_rank).sum())))
    if slow_rank.any():
        x[:, slow_rank] = _slow(cfg).sample(rng, (m, int(slow_rank.sum())))
    if cfg.hiccup is not None:
        x += cfg.hiccup.sample(rng, (m, n))
    if cfg.leaf_jitter is not None:
        leaves = n // cfg.ranks_per_leaf
        x = x.reshape(m, leaves, cfg.ranks_per_leaf) + cfg.leaf_jitter.sample(rng, (m, leaves))[:, :, None]
        return x.reshape(m, n).max(axis=1)
    return x.max(axis=1)


def comm_max_classes(c: CommLatency, lay: Layout) -> list[tuple[Distribution, int]]:
    """(distribution, count) classes of the p transfers of one dependent step."""
    classes = [(c.alpha, c.width - lay.slow_link_count)]
    if lay.slow_link_count and c.slow_links is not None:  # draw_layout draws slow links only from slow_links
        classes.append((c.alpha.affine(scale=c.slow_links.factor), lay.slow_link_count))
    return [(d, n) for d, n in classes if n > 0]


def _comm_fast(
    cfg: SimConfig, c: CommLatency, lay: Layout, rng: np.random.Generator, m: int, moments: tuple[float, float] | None
) -> np.ndarray:
    s = c.dependent_steps
    if s == 0:
        return np.zeros(m)
    if s <= cfg.exact_ring_steps or moments is None:  # step_times computes moments exactly when s > exact_ring_steps
        total = np.full((m, s), -np.inf)
        for dist, n in comm_max_classes(c, lay):
            total = np.maximum(total, draw_max(dist, n, rng.random((m, s))))
        return total.sum(axis=1)
    from scipy.special import ndtri  # here: scipy.special is ~0.2 s to import (sim/distributions.py)

    mean, var = moments
    return s * mean + np.sqrt(s * var) * ndtri(rng.random(m))


def _comm_brute(c: CommLatency, lay: Layout, rng: np.random.Generator, m: int) -> np.ndarray:
    if c.dependent_steps == 0:
        return np.zeros(m)
    a = c.alpha.sample(rng, (m, c.dependent_steps, c.width))
    if lay.slow_link_count and c.slow_links is not None:  # draw_layout draws slow links only from slow_links
        k = lay.slow_link_count
        a[:, :, :k] = c.alpha.affine(scale=c.slow_links.factor).sample(rng, (m, c.dependent_steps, k))
    return a.max(axis=2).sum(axis=1)


def chunk_steps(cfg: SimConfig, *, brute_force: bool) -> int:
    """Steps per chunk: a function of the configuration only, so output never depends on
    the machine."""
    per_step = cfg.num_ranks if brute_force else (cfg.num_ranks // cfg.ranks_per_leaf if cfg.leaf_jitter else 4)
    if cfg.comm is not None:
        s, p = cfg.comm.dependent_steps, cfg.comm.width
        per_step += s * p if brute_force else (s if s <= cfg.exact_ring_steps else 1)
    return max(1, min(1 << 16, _CHUNK_DRAWS // per_step))


def step_times(cfg: SimConfig, lay: Layout, rng: np.random.Generator, *, brute_force: bool = False) -> np.ndarray:
    """Step times (s) of ``cfg.steps`` steps of one run with layout ``lay``."""
    out = np.empty(cfg.steps)
    chunk = chunk_steps(cfg, brute_force=brute_force)
    comm = cfg.comm
    moments = None
    if not brute_force and comm is not None and comm.dependent_steps > cfg.exact_ring_steps:
        moments = max_moments(comm_max_classes(comm, lay))
    for start in range(0, cfg.steps, chunk):
        m = min(chunk, cfg.steps - start)
        if brute_force:
            t = _compute_brute(cfg, lay, rng, m)
            if comm is not None:
                t += _comm_brute(comm, lay, rng, m)
        else:
            t = _compute_fast(cfg, lay, rng, m)
            if comm is not None:
                t += _comm_fast(cfg, comm, lay, rng, m, moments)
        out[start : start + m] = t + cfg.fixed_s
    return out
