"""Monte Carlo engine for step-time jitter, stragglers, checkpoint stalls and failures.

Public API::

    from gpufabric.sim import SimConfig, simulate, config_from_breakdown
    result = simulate(SimConfig(num_ranks=16384, steps=100_000, compute=Normal(mu_s=0.1, sigma_s=0.002)))
    result.step_time_ms.p99

See docs/simulation.md for the model, its assumptions and its limits.
"""

from gpufabric.sim.breakdown import config_from_breakdown
from gpufabric.sim.config import CheckpointPolicy, CommLatency, Failures, SimConfig, Stragglers
from gpufabric.sim.distributions import (
    Constant,
    Distribution,
    Empirical,
    Hiccup,
    LogNormal,
    Normal,
    ShiftedExponential,
    expected_max,
    max_moments,
)
from gpufabric.sim.parse import parse_checkpoint, parse_distribution, parse_hiccup, parse_stragglers
from gpufabric.sim.simulate import LostShares, SimResult, Spread, StepStats, mean_value_step_s, simulate

__all__ = [
    "CheckpointPolicy",
    "CommLatency",
    "Constant",
    "Distribution",
    "Empirical",
    "Failures",
    "Hiccup",
    "LogNormal",
    "LostShares",
    "Normal",
    "ShiftedExponential",
    "SimConfig",
    "SimResult",
    "Spread",
    "StepStats",
    "Stragglers",
    "config_from_breakdown",
    "expected_max",
    "max_moments",
    "mean_value_step_s",
    "parse_checkpoint",
    "parse_distribution",
    "parse_hiccup",
    "parse_stragglers",
    "simulate",
]
