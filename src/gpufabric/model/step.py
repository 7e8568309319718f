"""Training-step model.

``StepBreakdown`` is the contract between the planner (which computes it for every
candidate design) and the simulator (which draws step-time distributions from it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class StepBreakdown:
    """Where the time of one synchronous training step goes, for one candidate design.

    All times are means without jitter; the jitter fields say how much the
    latency-bound parts vary per dependent step.
    """

    step_time_s: float              # deterministic mean step time (compute + bubble + exposed comm)
    compute_s: float                # per-rank compute per step
    bubble_s: float                 # pipeline bubble per step
    comm_exposed_s: float           # communication not hidden behind compute
    dependent_latency_steps: int    # latency-bound dependent steps on the critical path per step
    latency_per_step_s: float       # mean per-dependent-step latency (alpha) of the scale-out fabric
    jitter_per_step_s: float        # std-dev of that per-step latency (fabric jitter)
    num_ranks: int
    num_nodes: int
    nodes_per_leaf: int             # nodes sharing one leaf switch (correlated-jitter group)
    checkpoint_write_s: float       # time to write one checkpoint to the storage backend
    checkpoint_block_s: float       # time one checkpoint blocks training (sync: write; async: snapshot)
    checkpoint_interval_s: float    # wall time between checkpoints
    restart_s: float                # time from a failure to training again
    job_mttf_s: float               # mean time between failures of the whole job
