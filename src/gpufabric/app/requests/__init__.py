"""Typed requests of the application services: every knob of a command declared once.

Each field is an ``exec.knobs.knob``: what the CLI needs to make it an option
(``cli/request_options.py``): ``flag`` (None: the positional argument), ``help``, ``modes``
(the modes that read it; an option given in another mode is refused, exit 2, rather than
silently ignored) and ``cap`` (the largest value the command accepts, checked before anything runs).

One module per command, loaded on first use of its record (PEP 562): a record of many knobs
costs its dataclass build (~1 ms each, the generated ``__init__`` and ``__repr__`` compiled),
and ``plan`` paid for ``simulate``'s 27 knobs at every start (issue 32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufabric.lazy import lazy_names

if TYPE_CHECKING:
    from gpufabric.app.requests.calibrate import CalibrateRequest
    from gpufabric.app.requests.collective import PredictCollectiveRequest
    from gpufabric.app.requests.plan import PlanRequest
    from gpufabric.app.requests.simulate import SimulateRequest

__all__ = [
    "INFERENCE",
    "SPEC",
    "SYNTHETIC",
    "CalibrateRequest",
    "PlanRequest",
    "PredictCollectiveRequest",
    "SimulateRequest",
]

#: Modes of ``simulate``: a synthetic job from flags, a training spec's candidate, an inference spec's design.
SYNTHETIC, SPEC, INFERENCE = "synthetic", "spec", "inference"

#: Where each record lives.
_HOME = {
    "CalibrateRequest": "calibrate",
    "PlanRequest": "plan",
    "PredictCollectiveRequest": "collective",
    "SimulateRequest": "simulate",
}

__getattr__ = lazy_names(__name__, _HOME, globals())
