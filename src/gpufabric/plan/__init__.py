"""Planner: enumerate designs, evaluate them, Pareto frontier, recommend, explain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufabric.catalog import Catalog
from gpufabric.plan.candidates import evaluate_candidates, evaluate_scenarios
from gpufabric.plan.evaluate import Candidate
from gpufabric.plan.recommend import Recommendation, pareto_front, rank, recommend, sensitivity_text
from gpufabric.spec.models import Spec

__all__ = ["Candidate", "Plan", "Recommendation", "evaluate_candidates", "make_plan", "pareto_front", "rank", "recommend"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Result of ``gpufabric plan``: ranked candidates, frontier, recommendation."""

    name: str
    candidates: list[Candidate]
    pareto: list[str]
    recommended: str
    runner_up: str | None
    binding: str | None
    rationale: str
    sensitivity: list[dict[str, Any]] = field(default_factory=list)

    def get(self, cand_id: str) -> Candidate:
        return next(c for c in self.candidates if c.id == cand_id)


def make_plan(spec: Spec, catalog: Catalog) -> Plan:
    """Evaluate, rank, recommend and test the recommendation's sensitivity."""
    base, slow_net, slow_storage = evaluate_scenarios(spec, catalog, [(1.0, 1.0), (2.0, 1.0), (1.0, 2.0)])
    cands = rank(base)
    req = spec.requirements
    rec = recommend(cands, req)
    sens = [
        sensitivity_text(cands, rec, "network latency and jitter", slow_net, req),
        sensitivity_text(cands, rec, "storage commit latency", slow_storage, req),
    ]
    return Plan(name=spec.name, candidates=cands, pareto=rec.pareto, recommended=rec.recommended,
                runner_up=rec.runner_up, binding=rec.binding, rationale=rec.rationale, sensitivity=sens)
