"""The simulator's input: what one synchronous training step and one training run look like."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpufabric.errors import InputError
from gpufabric.sim.distributions import Distribution, Hiccup

#: Checkpoint intervals per run the timeline handles (a few arrays of this length).
MAX_SEGMENTS = 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Stragglers:
    """Persistent slow nodes (or links): each is slow with probability ``fraction``, drawn
    once per run and kept for the whole run, so they never average out (models.md 2.5)."""

    fraction: float
    """Probability that a node (link) is slow in a run, in [0, 1]."""
    factor: float
    """Its time is multiplied by this factor (>= 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommLatency:
    """Latency-bound dependent steps of the step's collectives (ring or tree)."""

    alpha: Distribution
    """Latency of one transfer in one dependent step (alpha plus its jitter)."""
    dependent_steps: int
    """S: dependent steps per training step (2(p-1) for a flat ring all-reduce)."""
    width: int
    """p: concurrent transfers each dependent step waits for (the slowest one)."""
    slow_links: Stragglers | None = None
    """Persistently slow links among the p (a congested uplink, an unlucky ECMP path)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointPolicy:
    """A checkpoint every ``every_steps`` steps (models.md 2.6)."""

    every_steps: int
    write_s: float
    """Time to write one checkpoint to storage (sync blocks this long)."""
    mode: Literal["sync", "async"] = "sync"
    snapshot_s: float = 0.0
    """async: time training blocks to snapshot state before the background drain."""
    drain_slowdown: float = 0.0
    """async: fractional slowdown of steps while the drain contends for storage bandwidth."""
    lag_s: float | None = None
    """Time from the end of the block until the checkpoint is durable: a failure inside it
    also loses the previous interval. None: ``write_s`` for async (the background write),
    0 for sync (a drain to a durable tier after a sync local write sets it)."""

    @property
    def durable_lag_s(self) -> float:
        if self.lag_s is not None:
            return self.lag_s
        return self.write_s if self.mode == "async" else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Failures:
    """Exponential failures: each node fails at rate 1/node_mttf_s (models.md 2.6)."""

    node_mttf_s: float
    restart_s: float
    """Time from a failure to training again (detect, reschedule, reload)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    """Everything the engine needs. Times in seconds.

    One step takes ``max over ranks(compute + hiccup [+ leaf jitter]) + fixed_s + comm``.
    """

    num_ranks: int
    compute: Distribution
    """Per-rank compute time of one step, jitter included (truncated at 0 for normal)."""
    steps: int
    """Steps simulated per run (their step times are the step-time statistics)."""
    ranks_per_node: int = 1
    ranks_per_leaf: int = 0
    """Ranks under one leaf switch; 0 = no leaf grouping (no correlated jitter)."""
    leaf_jitter: Distribution | None = None
    """Per-step delay shared by all ranks under one leaf (needs ranks_per_leaf)."""
    hiccup: Hiccup | None = None
    """Per rank per step: probability ``prob`` of an extra ``delay_s``."""
    stragglers: Stragglers | None = None
    fixed_s: float = 0.0
    """Deterministic critical-path time per step: pipeline bubble, exposed bandwidth term."""
    comm: CommLatency | None = None
    checkpoint: CheckpointPolicy | None = None
    failures: Failures | None = None
    train_steps: int = 0
    """Steps of a whole training run (time to train); 0 = ``steps``. Longer runs cycle the
    simulated step times and simulate checkpoints and failures over the whole length."""
    runs: int = 1
    """Independent runs R (run-to-run spread of time to train)."""
    seed: int = 0
    tokens_per_step: float = 0.0
    """Tokens per step, to report tokens/s (0 = unknown)."""
    exact_ring_steps: int = 64
    """Sum up to this many dependent steps exactly; beyond, use the normal limit of the sum
    with the exact mean and variance of one step's maximum (CLT, error O(1/sqrt(S)))."""
    attribution: bool = True
    """Also simulate the straggler-free run needed to attribute lost time to causes."""

    @property
    def num_nodes(self) -> int:
        return self.num_ranks // self.ranks_per_node

    @property
    def total_steps(self) -> int:
        return self.train_steps or self.steps

    def __post_init__(self) -> None:
        _check_int("ranks", self.num_ranks, 1)
        _check_int("steps", self.steps, 1)
        _check_int("runs", self.runs, 1)
        _check_int("ranks per node", self.ranks_per_node, 1)
        _check_int("train steps", self.train_steps, 0)
        if self.seed < 0:
            raise InputError(f"seed must be >= 0, got {self.seed}")
        if self.num_ranks % self.ranks_per_node:
            raise InputError(f"ranks ({self.num_ranks}) must be a multiple of ranks per node ({self.ranks_per_node})")
        if self.ranks_per_leaf and (self.ranks_per_leaf % self.ranks_per_node or self.num_ranks % self.ranks_per_leaf):
            raise InputError(
                f"ranks per leaf ({self.ranks_per_leaf}) must be a multiple of ranks per node "
                f"({self.ranks_per_node}) and divide the ranks ({self.num_ranks})"
            )
        if self.leaf_jitter is not None and not self.ranks_per_leaf:
            raise InputError("leaf jitter needs --ranks-per-leaf (which ranks share a leaf switch)")
        _check_time("fixed time per step", self.fixed_s)
        if self.stragglers is not None:
            _check_stragglers("straggler", self.stragglers)
        if self.comm is not None:
            _check_int("dependent steps", self.comm.dependent_steps, 0)
            _check_int("ring width", self.comm.width, 1)
            if self.comm.slow_links is not None:
                _check_stragglers("slow-link", self.comm.slow_links)
        if self.checkpoint is not None:
            c = self.checkpoint
            _check_int("checkpoint interval (steps)", c.every_steps, 1)
            _check_time("checkpoint write time", c.write_s)
            _check_time("checkpoint snapshot time", c.snapshot_s)
            if c.lag_s is not None:
                _check_time("checkpoint durability lag", c.lag_s)
            if c.mode not in ("sync", "async"):
                raise InputError(f"checkpoint mode must be sync or async, got {c.mode!r}")
            if not (0 <= c.drain_slowdown < 10):
                raise InputError(f"drain slowdown must be in [0, 10), got {c.drain_slowdown}")
            if self.total_steps // c.every_steps > MAX_SEGMENTS:
                raise InputError(
                    f"{self.total_steps} steps with a checkpoint every {c.every_steps} make more than "
                    f"{MAX_SEGMENTS:,} checkpoint intervals: checkpoint less often or simulate fewer steps"
                )
        if self.failures is not None:
            if not (self.failures.node_mttf_s > 0 and math.isfinite(self.failures.node_mttf_s)):
                raise InputError(f"node MTTF must be a positive time, got {self.failures.node_mttf_s}")
            _check_time("restart time", self.failures.restart_s)
        if self.tokens_per_step < 0:
            raise InputError("tokens per step must be >= 0")


def _check_int(what: str, value: int, low: int) -> None:
    if not isinstance(value, int) or value < low:
        raise InputError(f"{what} must be an integer >= {low}, got {value!r}")


def _check_time(what: str, value: float) -> None:
    if not (value >= 0 and math.isfinite(value)):
        raise InputError(f"{what} must be a finite time >= 0, got {value!r}")


def _check_stragglers(what: str, s: Stragglers) -> None:
    if not (0.0 <= s.fraction <= 1.0):
        raise InputError(f"{what} fraction must be in [0, 1], got {s.fraction}")
    if not (s.factor >= 1.0 and math.isfinite(s.factor)):
        raise InputError(f"{what} factor must be >= 1 (a slowdown), got {s.factor}")
