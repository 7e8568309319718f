"""``simulate(cfg) -> SimResult``: R independent runs, step-time statistics, time to train,
goodput and the share of wall time lost to each cause.

Lost time is attributed by peeling causes off one at a time, with coupled random numbers
(same seed) so the differences are not noise:

    wall                          W0
    - failures (lost work + restarts)            -> failures
    - checkpoint stalls                          -> checkpoints        = W2 (time in steps)
    - persistent stragglers (re-simulated without them, same draws) -> compute_imbalance
    - random variation, every random time replaced by its mean      -> jitter
    - mean latency of the dependent collective steps                -> communication_latency
    = ideal time (mean compute + hiccup mean + fixed time) x steps    W5

so ``efficiency = W5/W0 = 1 - sum(shares)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpufabric.sim.config import SimConfig
from gpufabric.sim.engine import draw_layout, step_times
from gpufabric.sim.memory import check_fits
from gpufabric.sim.timeline import run_time, segment_step_sums

HISTOGRAM_BINS = 30


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStats:
    """Distribution of step times (milliseconds), pooled over all runs."""

    mean: float
    p50: float
    p90: float
    p99: float
    p999: float
    cv: float
    std: float
    min: float
    max: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Spread:
    """A quantity across the R runs."""

    mean: float
    std: float
    cv: float
    min: float
    max: float
    per_run: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LostShares:
    """Share of wall time lost to each cause (fractions of wall time)."""

    compute_imbalance: float | None
    """Persistent stragglers (None when attribution was switched off)."""
    communication_latency: float
    jitter: float
    checkpoints: float
    failures: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    ranks: int
    steps: int
    train_steps: int
    runs: int
    seed: int
    method: str
    """"order-statistics" or "brute-force"."""
    step_time_ms: StepStats
    mean_value_step_ms: float
    """Step time if every random time took its mean (what a mean-value model predicts)."""
    ideal_step_ms: float
    """Mean-value step without the latency of dependent collective steps."""
    time_to_train_s: Spread
    throughput_steps_per_s: float
    throughput_tokens_per_s: float | None
    goodput: float
    """Time in steps that count / wall time (checkpoint and failure overheads excluded)."""
    efficiency: float
    """Ideal time / wall time = 1 - sum of lost shares."""
    lost: LostShares
    checkpoint_fraction: float
    failures_per_run: float
    slow_nodes_per_run: tuple[int, ...]
    histogram_ms: dict
    """{"edges": [...], "counts": [...]} of the pooled step times."""
    step_times_s: np.ndarray = field(repr=False, compare=False)
    """Pooled step times (runs x steps), run by run; not part of the JSON output."""


def _seeds(cfg: SimConfig) -> list[list[np.random.SeedSequence]]:
    # One child per run, split into layout / steps / failures streams: adding runs or
    # switching a cause off never shifts the random numbers of another stream.
    return [child.spawn(3) for child in np.random.SeedSequence(cfg.seed).spawn(cfg.runs)]


def _gen(seq: np.random.SeedSequence) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seq))


def mean_value_step_s(cfg: SimConfig, *, latency: bool = True) -> float:
    """Step time with every random quantity at its mean and no stragglers."""
    t = cfg.compute.mean + cfg.fixed_s
    if cfg.hiccup is not None:
        t += cfg.hiccup.mean
    if cfg.leaf_jitter is not None:
        t += cfg.leaf_jitter.mean
    if latency and cfg.comm is not None:
        t += cfg.comm.dependent_steps * cfg.comm.alpha.mean
    return t


def _total(step_s: np.ndarray, total_steps: int) -> float:
    return float(segment_step_sums(step_s, total_steps, total_steps).sum())


def _spread(values: list[float]) -> Spread:
    a = np.asarray(values)
    mean = float(a.mean())
    std = float(a.std(ddof=1)) if a.size > 1 else 0.0
    return Spread(
        mean=mean,
        std=std,
        cv=std / mean if mean else 0.0,
        min=float(a.min()),
        max=float(a.max()),
        per_run=tuple(float(v) for v in a),
    )


def _stats_ms(t_s: np.ndarray) -> StepStats:
    ms = t_s * 1e3
    p50, p90, p99, p999 = np.quantile(ms, [0.5, 0.9, 0.99, 0.999])
    mean = float(ms.mean())
    std = float(ms.std())
    return StepStats(
        mean=mean,
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        p999=float(p999),
        cv=std / mean if mean else 0.0,
        std=std,
        min=float(ms.min()),
        max=float(ms.max()),
    )


def histogram_ms(t_s: np.ndarray, bins: int = HISTOGRAM_BINS) -> dict:
    counts, edges = np.histogram(t_s * 1e3, bins=bins)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def simulate(cfg: SimConfig, *, brute_force: bool = False) -> SimResult:
    """Simulate ``cfg.runs`` independent runs. Same ``cfg`` (seed included) -> same result,
    bit for bit. ``brute_force`` draws every rank (the reference path; slow).

    Raises:
        InputError: the arrays would not fit in the available memory (the estimate is in the message).
    """
    check_fits(cfg, brute_force=brute_force)
    total = cfg.total_steps
    has_stragglers = cfg.stragglers is not None or (cfg.comm is not None and cfg.comm.slow_links is not None)
    pooled = np.empty(cfg.runs * cfg.steps)
    walls, lost = [], np.zeros(5)
    ck_s = steps_sum = 0.0
    failures = 0
    slow_nodes = []
    mv = mean_value_step_s(cfg)
    ideal = mean_value_step_s(cfg, latency=False)
    for r, (s_layout, s_steps, s_fail) in enumerate(_seeds(cfg)):
        lay = draw_layout(cfg, _gen(s_layout))
        slow_nodes.append(int(lay.slow_node_mask.sum()))
        t = step_times(cfg, lay, _gen(s_steps), brute_force=brute_force)
        pooled[r * cfg.steps : (r + 1) * cfg.steps] = t
        rt = run_time(cfg, t, _gen(s_fail))
        walls.append(rt.wall_s)
        w2 = rt.steps_s
        if has_stragglers and cfg.attribution:
            flat = draw_layout(cfg, _gen(s_layout), stragglers=False)
            w3 = _total(step_times(cfg, flat, _gen(s_steps), brute_force=brute_force), total)
        else:
            w3 = w2
        lost += [w2 - w3, w3 - total * mv, total * (mv - ideal), rt.checkpoint_s, rt.failure_s]
        ck_s += rt.checkpoint_s
        steps_sum += w2
        failures += rt.failures
    wall_sum = float(sum(walls))
    shares = lost / wall_sum
    shares[np.abs(shares) < 1e-12] = 0.0  # differences of equal sums: rounding, not a loss
    imbalance = float(shares[0]) if (cfg.attribution or not has_stragglers) else None
    jitter = float(shares[1]) if imbalance is not None else float(shares[0] + shares[1])
    tokens = cfg.tokens_per_step or None
    mean_wall = wall_sum / cfg.runs
    return SimResult(
        ranks=cfg.num_ranks,
        steps=cfg.steps,
        train_steps=total,
        runs=cfg.runs,
        seed=cfg.seed,
        method="brute-force" if brute_force else "order-statistics",
        step_time_ms=_stats_ms(pooled),
        mean_value_step_ms=mv * 1e3,
        ideal_step_ms=ideal * 1e3,
        time_to_train_s=_spread(walls),
        throughput_steps_per_s=total / mean_wall,
        throughput_tokens_per_s=total * tokens / mean_wall if tokens else None,
        goodput=steps_sum / wall_sum,
        efficiency=total * ideal * cfg.runs / wall_sum,
        lost=LostShares(
            compute_imbalance=imbalance,
            communication_latency=float(shares[2]),
            jitter=jitter,
            checkpoints=float(shares[3]),
            failures=float(shares[4]),
        ),
        checkpoint_fraction=ck_s / wall_sum,
        failures_per_run=failures / cfg.runs,
        slow_nodes_per_run=tuple(slow_nodes),
        histogram_ms=histogram_ms(pooled),
        step_times_s=pooled,
    )
