"""Wall time of one training run: steps, checkpoint stalls and failures (models.md 2.6).

The run of ``total_steps`` steps is cut into segments of ``every_steps`` steps, each
ending with a checkpoint. Segment step time comes from the simulated step times (cycled
when the run is longer than the simulated steps).

- sync checkpoint: training blocks for the whole write.
- async checkpoint: training blocks for the snapshot; the write drains in the background
  for ``write_s``. Steps overlapping the drain run ``1 + drain_slowdown`` times slower
  (the drain contends for storage and network bandwidth); if the drain is still running
  when the next checkpoint is due, training waits for it (one checkpoint in flight).
- failures: the job fails at rate nodes/node_mttf (exponential, memoryless), at all
  times, restarts included. A failure loses the work since the last durable checkpoint
  and costs a restart of ``restart_s``; a failure during the restart loses the restart
  so far and starts it again; then the segment is redone. A checkpoint is durable only
  ``lag`` after its block ends (async: once drained), so a failure inside that window
  also loses the previous segment. A failure during the redo of that previous segment is
  not modelled (second order: it needs two failures within one lag).

This is the failure model of Daly (2006), "A higher order estimate of the optimum
checkpoint interval for restart dumps", Future Generation Computer Systems 22(3): a
segment of wall length T (work plus block) takes in expectation
``M e^(R/M) (e^(T/M) - 1)`` with job MTTF M and restart R, plus ``T e^(T/M) (1 -
e^(-L/M))`` for a durability lag L <= T (models.md 2.6; ``model.reliability.goodput``
is this closed form, checked against this engine in tests/sim/test_planner_agreement.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufabric.errors import InputError
from gpufabric.sim.config import SimConfig

#: log of the expected attempts per segment beyond which the run practically never ends
#: (e^8 ~ 3,000 failed attempts for one checkpoint interval).
_MAX_LOG_ATTEMPTS = 8.0
#: Expected failures per run beyond which drawing each one would exhaust memory.
_MAX_FAILURES = 10_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTime:
    """Where the wall time of one run went (seconds)."""

    wall_s: float
    steps_s: float
    """Time in steps that count (no redone work)."""
    checkpoint_s: float
    """Blocking snapshots/writes, waits for a previous drain, drain contention."""
    failure_s: float
    """Work lost to failures plus restarts."""
    failures: int


def segment_step_sums(step_times_s: np.ndarray, total_steps: int, every: int) -> np.ndarray:
    """Sum of step times of each segment of ``every`` steps over ``total_steps`` steps,
    cycling the simulated ``step_times_s``."""
    n = step_times_s.size
    prefix = np.concatenate([[0.0], np.cumsum(step_times_s)])
    bounds = np.minimum(np.arange(0, total_steps + every, every, dtype=np.int64), total_steps)
    bounds = np.unique(bounds)
    cum = (bounds // n) * prefix[-1] + prefix[bounds % n]
    return np.diff(cum)


def run_time(cfg: SimConfig, step_times_s: np.ndarray, rng: np.random.Generator) -> RunTime:
    """Wall time of one run of ``cfg.total_steps`` steps with these step times."""
    total = cfg.total_steps
    ck = cfg.checkpoint
    every = ck.every_steps if ck else total
    seg = segment_step_sums(step_times_s, total, every)
    steps_s = float(seg.sum())
    n_ck = total // every if ck else 0
    block = np.zeros(seg.size)
    if ck is not None and ck.mode == "sync":
        block[:n_ck] = ck.write_s
    elif ck is not None:
        block[:n_ck] = ck.snapshot_s
        # Checkpoint j drains while segment j+1 runs; segment j+1 waits at its own
        # checkpoint if the drain is still going (one checkpoint in flight at a time).
        c, w = ck.drain_slowdown, ck.write_s
        nxt = np.arange(1, min(n_ck + 1, seg.size))
        t = seg[nxt]
        overlapped = w <= t * (1 + c)
        stretch = np.where(overlapped, w * c / (1 + c), t * c)
        wait = np.where(overlapped | (nxt >= n_ck), 0.0, w - t * (1 + c))
        block[nxt] += stretch + wait
    seg_wall = seg + block
    checkpoint_s = float(block.sum())

    failure_s, failures = 0.0, 0
    if cfg.failures is not None:
        rate = cfg.num_nodes / cfg.failures.node_mttf_s
        exposure = rate * seg_wall
        if (
            max(exposure.max(), rate * cfg.failures.restart_s) > _MAX_LOG_ATTEMPTS
            or float(np.expm1(exposure).sum()) > _MAX_FAILURES
        ):
            raise InputError(
                f"with a job MTTF of {1 / rate:.3g} s and {seg_wall.max():.3g} s between checkpoints "
                "the run would practically never finish: checkpoint more often"
            )
        # Attempts until one segment survives: geometric with success exp(-rate*T).
        fails = rng.geometric(np.exp(-exposure)) - 1
        failures = int(fails.sum())
        if failures:
            idx = np.repeat(np.arange(seg.size), fails)
            # Time into the segment at the failure: exponential truncated to [0, T].
            u = rng.random(failures)
            lost = -np.log1p(-u * -np.expm1(-exposure[idx])) / rate
            lag = ck.durable_lag_s if ck is not None else 0.0
            if lag > 0:
                undrained = (idx > 0) & (lost < lag)
                lost = lost + np.where(undrained, seg_wall[np.maximum(idx - 1, 0)], 0.0)
            # Each restart is itself retried until it survives (same geometric law).
            restart = cfg.failures.restart_s
            retries = int((rng.geometric(np.exp(-rate * restart), failures) - 1).sum()) if restart > 0 else 0
            lost_restarts = -np.log1p(-rng.random(retries) * -np.expm1(-rate * restart)) / rate
            failures += retries
            failure_s = float(lost.sum()) + float(lost_restarts.sum()) + (failures - retries) * restart
    wall = float(seg_wall.sum()) + failure_s
    return RunTime(wall_s=wall, steps_s=steps_s, checkpoint_s=checkpoint_s, failure_s=failure_s, failures=failures)
