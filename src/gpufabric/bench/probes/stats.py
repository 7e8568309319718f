"""Pure functions shared by the probes: nccl-tests bandwidth definitions and stragglers.

No torch import here: the parent process (CLI, store, calibrate) uses these too. The bus
factor and the list of collectives are the model's (``gpufabric.model.collectives``) and
summaries are :func:`gpufabric.results.stats.summarize`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# The nccl-tests bandwidth definitions live with the collective model; the probes use them from here.
from gpufabric.model.collectives import algbw_gbps as algbw_gbps
from gpufabric.model.collectives import busbw_gbps as busbw_gbps


def element_count(op: str, size_bytes: int, elem_bytes: int, num_ranks: int) -> int:
    """Elements of the nccl-tests buffer S for ``op``, rounded down so every chunk is whole.

    S is the per-rank buffer for all_reduce/broadcast/send_recv/all_to_all, the gathered
    output for all_gather and the full input for reduce_scatter; all_to_all, all_gather and
    reduce_scatter split S into num_ranks equal chunks.
    """
    count = size_bytes // elem_bytes
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        count -= count % num_ranks
    return count


def robust_z(values: Sequence[float], *, floor_frac: float = 0.01) -> np.ndarray:
    """Modified z-score 0.6745 * (x - median) / MAD (Iglewicz and Hoaglin, 1993).

    The MAD is floored at ``floor_frac`` of the median so that a perfectly uniform
    cluster does not turn a 0.1% wobble into a straggler (the same idea as the 0.5%
    stddev floor of together-nccl-tests ``find_stragglers.py``, reference/bench-tools.md).
    """
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    mad = max(mad, abs(med) * floor_frac, 1e-12)
    return 0.6745 * (x - med) / mad


@dataclass(frozen=True, slots=True, kw_only=True)
class Straggler:
    rank: int
    host: str
    value: float
    median: float
    z: float


#: |z| above this is an outlier (Iglewicz and Hoaglin's recommended 3.5).
STRAGGLER_Z = 3.5


def find_stragglers(
    values_by_rank: Mapping[int, float],
    hosts: Mapping[int, str],
    *,
    threshold: float = STRAGGLER_Z,
    slow_is_high: bool = True,
    floor_frac: float = 0.05,
) -> list[Straggler]:
    """Ranks whose value sits outside the cluster median by more than ``threshold`` robust z.

    Only the slow side counts (higher times when ``slow_is_high``); needs >= 3 ranks,
    because with two there is no majority to call one of them the outlier. The MAD floor
    of 5% of the median means a rank must be ~25% off the median (z = 3.5) before it is
    named: per-rank medians on a shared VM wander by several percent without any fault.
    """
    ranks = sorted(values_by_rank)
    if len(ranks) < 3:
        return []
    vals = [values_by_rank[r] for r in ranks]
    z = robust_z(vals, floor_frac=floor_frac)
    med = float(np.median(vals))
    out = []
    for rank, value, score in zip(ranks, vals, z, strict=True):
        slow = score > threshold if slow_is_high else score < -threshold
        if slow:
            out.append(Straggler(rank=rank, host=hosts.get(rank, "?"), value=value, median=med, z=float(score)))
    return out
