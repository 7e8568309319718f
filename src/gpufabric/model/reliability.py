"""Failures, checkpoint interval and goodput (models.md 2.6).

- Job MTTF (exponential, independent components): ``M = M_gpu / N_gpu``. MLPerf
  Storage v2.0 premise 50,000 h per accelerator => a failure every 30 min at 100k GPUs.
- Young (1974), "A first order approximation to the optimum checkpoint interval",
  CACM 17(9): ``tau_opt = sqrt(2 delta M)``; Daly (2006), eq. 37:
  ``tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta/2M) + (1/9)(delta/2M)] - delta`` for
  ``delta < 2M``, else ``tau = M`` (checked against both papers, as_of 2026-12).
  Both assume a checkpoint can start any time. It cannot: an async checkpoint cannot
  start before the previous one has drained (one in flight: ``tau >= t_durable``), and a
  sync one stalls for its write (``tau >= t_write``: less work than write between
  checkpoints halves the throughput); a failure within the durability lag L loses the
  previous interval too, so ``tau >= L`` as well. ``min_interval_s`` is that bound; the
  planner maximises the exact goodput on intervals at or above it.
- First-order waste (models.md 2.6): ``W = delta/tau + (tau/2 + lag)/M + R/M``; lag is
  how long after a checkpoint's block until it is durable (0 for sync, the write or
  drain time for async: a failure in that window loses the previous interval too), R the
  restart + restore time. It is the leading term of the overhead ``E[wall]/tau - 1`` of
  the exact expectation below; the planner used ``1 - W`` as goodput, which at 16k GPUs
  (M = 3 h, tau = 30 min, R = 15 min) is 1.3 points low.
- Goodput (exact for exponential failures): Daly, "A higher order estimate of the optimum
  checkpoint interval for restart dumps", Future Generation Computer Systems 22(3),
  2006: with failures at rate 1/M at all times, restarts included, a segment of
  work tau plus block delta (T = tau + delta) takes in expectation

      E[wall] = M e^(R/M) (e^(T/M) - 1)  +  T e^(T/M) (1 - e^(-min(lag, T)/M))

  (the second term: a failure within ``lag`` of the segment's start redoes the previous
  segment), and goodput = tau / E[wall]. Failures do happen during restarts: the
  hardware keeps failing while the job reloads, and at 16k GPUs a 17-min restart is a
  tenth of the MTTF. The simulator draws exactly this process (sim/timeline.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def job_mttf_s(gpu_mttf_hours: Any, num_gpus: Any) -> Any:
    """Mean time between failures of a job on ``num_gpus`` GPUs, seconds."""
    return np.asarray(gpu_mttf_hours, dtype=float) * 3600.0 / np.asarray(num_gpus, dtype=float)


def young_interval_s(delta_s: Any, mttf_s: Any) -> Any:
    """Young's optimal checkpoint interval sqrt(2 delta M)."""
    return np.sqrt(2 * np.asarray(delta_s, dtype=float) * np.asarray(mttf_s, dtype=float))


def daly_interval_s(delta_s: Any, mttf_s: Any) -> Any:
    """Daly's refinement of Young's interval (valid for delta < 2M)."""
    d = np.asarray(delta_s, dtype=float)
    m = np.asarray(mttf_s, dtype=float)
    x = d / (2 * m)
    return np.where(d < 2 * m, np.sqrt(2 * d * m) * (1 + np.sqrt(x) / 3 + x / 9) - d, m)


def min_interval_s(*, write_s: Any, durable_s: Any, lag_s: Any) -> Any:
    """Shortest feasible checkpoint interval (module docstring): the write, the time to
    durability and the durability lag, whichever is longest."""
    return np.maximum(
        np.asarray(write_s, dtype=float), np.maximum(np.asarray(durable_s, dtype=float), np.asarray(lag_s, dtype=float))
    )


def waste_fraction(*, block_s: Any, interval_s: Any, mttf_s: Any, restart_s: Any, lag_s: Any = 0.0) -> Any:
    """First-order waste of checkpoints, lost work and restarts per unit of work
    (models.md 2.6; the leading term of ``1/goodput - 1``)."""
    tau = np.asarray(interval_s, dtype=float)
    m = np.asarray(mttf_s, dtype=float)
    return np.asarray(block_s) / tau + (tau / 2 + np.asarray(lag_s)) / m + np.asarray(restart_s) / m


def expected_segment_wall_s(*, block_s: Any, interval_s: Any, mttf_s: Any, restart_s: Any, lag_s: Any = 0.0) -> Any:
    """Expected wall time of one checkpoint interval under exponential failures (Daly 2006,
    module docstring), the rare second failure while redoing an undrained interval aside."""
    m = np.asarray(mttf_s, dtype=float)
    seg = np.asarray(interval_s, dtype=float) + np.asarray(block_s, dtype=float)
    lag = np.minimum(np.asarray(lag_s, dtype=float), seg)
    x = seg / m
    with np.errstate(over="ignore", invalid="ignore"):  # failures far more often than segments: inf
        redo = np.where(lag > 0, -seg * np.exp(x) * np.expm1(-lag / m), 0.0)
        return m * np.exp(np.asarray(restart_s, dtype=float) / m) * np.expm1(x) + redo


def goodput(*, block_s: Any, interval_s: Any, mttf_s: Any, restart_s: Any, lag_s: Any = 0.0) -> Any:
    """Time in steps that count / wall time: interval / expected segment wall (Daly 2006), in [0, 1].

    E[wall] >= interval + block, so the ratio is at most 1; a segment whose expected wall
    overflows (failures far more often than segments) has goodput 0, its limit.
    """
    wall = expected_segment_wall_s(
        block_s=block_s, interval_s=interval_s, mttf_s=mttf_s, restart_s=restart_s, lag_s=lag_s
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        good = np.asarray(interval_s, dtype=float) / wall
    return np.clip(np.where(np.isfinite(good), good, 0.0), 0.0, 1.0)


def stall_fraction(*, block_s: Any, interval_s: Any) -> Any:
    """Share of wall time blocked on checkpoints between failures: block / (interval + block), in [0, 1)."""
    block = np.asarray(block_s, dtype=float)
    return block / (np.asarray(interval_s, dtype=float) + block)
