"""Monte Carlo engine for step-time jitter, stragglers, checkpoint stalls and failures.

Public API::

    from gpufabric.sim import SimConfig, simulate, config_from_breakdown
    result = simulate(SimConfig(num_ranks=16384, steps=100_000, compute=Normal(mu_s=0.1, sigma_s=0.002)))
    result.step_time_ms.p99

See docs/simulation.md for the model, its assumptions and its limits.

The package loads nothing at import: every name below comes from its module on first use,
so the serving simulator (``sim.serving``, ``sim.batching``) does not import the training
Monte Carlo (~10 ms of a serving plan's start-up, issue 32).
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from gpufabric.lazy import lazy_names

if TYPE_CHECKING:
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

#: Where each public name lives.
_HOME = {
    "config_from_breakdown": "breakdown",
    "CheckpointPolicy": "config",
    "CommLatency": "config",
    "Failures": "config",
    "SimConfig": "config",
    "Stragglers": "config",
    "Constant": "distributions",
    "Distribution": "distributions",
    "Empirical": "distributions",
    "Hiccup": "distributions",
    "LogNormal": "distributions",
    "Normal": "distributions",
    "ShiftedExponential": "distributions",
    "expected_max": "distributions",
    "max_moments": "distributions",
    "parse_checkpoint": "parse",
    "parse_distribution": "parse",
    "parse_hiccup": "parse",
    "parse_stragglers": "parse",
    "LostShares": "simulate",
    "SimResult": "simulate",
    "Spread": "simulate",
    "StepStats": "simulate",
    "mean_value_step_s": "simulate",
    "simulate": "simulate",
}


__getattr__ = lazy_names(__name__, _HOME, globals())


class _Package(types.ModuleType):
    """The import system binds each loaded submodule to its name on this package; the name
    ``simulate`` stays the function (as the eager imports had it), not its module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "simulate" and isinstance(value, types.ModuleType):
            value = value.simulate
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
