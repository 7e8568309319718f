"""Planner: enumerate designs, evaluate them, Pareto frontier, recommend, explain.

The package loads nothing at import: every name below comes from its module on first use,
so a serving plan (``plan.inference``) does not import the training planner (~0.06 s of
start-up, issue 32). ``recommend`` (the function) is not re-exported here: the submodule of
that name would shadow it; import it from ``gpufabric.plan.recommend``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufabric.lazy import lazy_names

if TYPE_CHECKING:
    from gpufabric.plan.candidates import evaluate_candidates
    from gpufabric.plan.evaluate import Candidate
    from gpufabric.plan.planner import Plan, make_plan
    from gpufabric.plan.recommend import Recommendation, pareto_front, rank

__all__ = ["Candidate", "Plan", "Recommendation", "evaluate_candidates", "make_plan", "pareto_front", "rank"]

#: Where each public name lives.
_HOME = {
    "Candidate": "evaluate",
    "Plan": "planner",
    "Recommendation": "recommend",
    "evaluate_candidates": "candidates",
    "make_plan": "planner",
    "pareto_front": "recommend",
    "rank": "recommend",
}


__getattr__ = lazy_names(__name__, _HOME, globals())
