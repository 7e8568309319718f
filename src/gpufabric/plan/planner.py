"""The training planner: evaluate, rank, recommend and explain (``gpufabric plan``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufabric.catalog import Catalog
from gpufabric.plan.candidates import evaluate_scenarios, prepare
from gpufabric.plan.capacity import rent_text, sharp_text, with_break_even
from gpufabric.plan.evaluate import Candidate
from gpufabric.plan.recommend import calibrated_fabrics, calibration_text, rank, recommend, sensitivity_text
from gpufabric.plan.storage_tiers import TierPrice, price_tiers, tiers_text
from gpufabric.spec.models import Spec


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Result of ``gpufabric plan``: ranked candidates, frontier, recommendation."""

    name: str
    candidates: list[Candidate]
    pareto: list[str]
    recommended: str | None
    runner_up: str | None
    binding: str | None
    rationale: str
    sensitivity: list[dict[str, Any]] = field(default_factory=list)
    throughput: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    layout_search: dict[str, Any] = field(default_factory=dict)
    placement: str = "fragmented"
    """options.placement the predictions assume (named on the recommendation line)."""
    storage_tiers: list[TierPrice] = field(default_factory=list)
    """The recommendation's storage (workload minimum) and the reference tiers, priced (plan.storage_tiers)."""

    def get(self, cand_id: str) -> Candidate:
        return next(c for c in self.candidates if c.id == cand_id)


def make_plan(spec: Spec, catalog: Catalog) -> Plan:
    """Evaluate, rank, recommend and test the recommendation's sensitivity."""
    prep = prepare(spec, catalog)
    base, slow_net, slow_storage = evaluate_scenarios(spec, catalog, [(1.0, 1.0), (2.0, 1.0), (1.0, 2.0)], prep)
    cands = rank(base, spec.requirements.objective)
    if any(c.capacity == "rent" for c in cands):
        cands = with_break_even(cands, spec, catalog)
    req = spec.requirements
    rec = recommend(cands, req, spec.options.placement)
    sens = [
        s
        for s in (
            sensitivity_text(cands, rec, "network latency and jitter", slow_net, req),
            sensitivity_text(cands, rec, "storage commit latency", slow_storage, req),
        )
        if s is not None
    ]
    a = prep.anchor
    best = next((c for c in cands if c.id == rec.recommended), None)
    rationale = " ".join(
        t
        for t in (
            a.text,
            rec.rationale,
            sharp_text(cands, rec.recommended, catalog),
            rent_text(cands, rec.recommended, spec, catalog),
            calibration_text(
                cands, rec.recommended, catalog, lambda: _shipped_recommendation(spec, catalog), req.objective
            ),
        )
        if t
    )
    tiers = (
        price_tiers(best, spec, catalog)
        if best is not None and best.capacity == "build" and spec.storage.reference_tiers
        else []
    )
    if tiers and best is not None:
        rationale += " " + tiers_text(tiers, best)
    if spec.searched and best is not None:
        rationale += f" Layout for {best.id}: {best.layout.text} ({best.layout_note})."
    throughput = {
        "given": a.kind,
        "figure": a.figure,
        "flops": a.flops,
        "compute_efficiency": a.compute_efficiency,
        "measured_at": None
        if a.measured_layout is None
        else {
            "gpus": a.measured_gpus,
            "layout": a.measured_layout,
            "fabric": a.measured_fabric,
            "assumed_from_spec": a.assumed,
            "step_time_s": a.anchor_step_s,
        },
        "text": a.text,
        "notes": list(a.notes),
    }
    search = (
        {
            "searched": prep.choice.searched,
            "fit_in_memory": prep.choice.feasible,
            "evaluated": prep.choice.evaluated_rows,
        }
        if spec.searched
        else {}
    )
    return Plan(
        name=spec.name,
        candidates=cands,
        pareto=rec.pareto,
        recommended=rec.recommended,
        runner_up=rec.runner_up,
        binding=rec.binding,
        rationale=rationale,
        sensitivity=sens,
        throughput=throughput,
        layout_search=search,
        notes=list(prep.notes),
        storage_tiers=tiers,
        placement=spec.options.placement,
    )


def _shipped_recommendation(spec: Spec, catalog: Catalog) -> str | None:
    """The recommendation with every calibrated fabric back at its shipped figures (for
    calibration_text: does the choice flip only because of the calibration?)."""
    from dataclasses import replace

    from gpufabric.catalog import load_catalog

    shipped = load_catalog()
    names = calibrated_fabrics(catalog, list(catalog.fabrics))
    base = replace(
        catalog, fabrics={**catalog.fabrics, **{f: shipped.fabrics[f] for f in names if f in shipped.fabrics}}
    )
    (cands,) = evaluate_scenarios(spec, base, [(1.0, 1.0)], prepare(spec, base))
    return recommend(rank(cands, spec.requirements.objective), spec.requirements).recommended
