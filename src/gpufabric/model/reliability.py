"""Failures, checkpoint interval and goodput (models.md 2.6).

- Job MTTF (exponential, independent components): ``M = M_gpu / N_gpu``. MLPerf
  Storage v2.0 premise 50,000 h per accelerator => a failure every 30 min at 100k GPUs.
- Young (1974): ``tau_opt = sqrt(2 delta M)``; Daly (2006):
  ``tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta/2M) + (1/9)(delta/2M)] - delta``.
- Waste: ``W = delta/tau + (tau/2 + lag)/M + R/M``; lag is how long after a checkpoint
  starts until it is durable (0 for sync, the write or drain time for async: a failure
  in that window loses the previous interval too), R the restart + restore time.
  Goodput = 1 - W, floored at 0.
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
    return np.sqrt(2 * d * m) * (1 + np.sqrt(x) / 3 + x / 9) - d


def waste_fraction(*, block_s: Any, interval_s: Any, mttf_s: Any, restart_s: Any, lag_s: Any = 0.0) -> Any:
    """Fraction of wall time lost to checkpoints, lost work and restarts."""
    tau = np.asarray(interval_s, dtype=float)
    m = np.asarray(mttf_s, dtype=float)
    return np.asarray(block_s) / tau + (tau / 2 + np.asarray(lag_s)) / m + np.asarray(restart_s) / m


def goodput(**kwargs: Any) -> Any:
    """1 - waste_fraction(...), floored at 0."""
    return np.maximum(0.0, 1.0 - waste_fraction(**kwargs))
