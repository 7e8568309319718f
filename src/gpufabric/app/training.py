"""The training workload kind (``spec/models.py``): the planner's designs and the step simulator."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufabric.app.requests import SPEC
from gpufabric.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Collection
    from pathlib import Path

    from gpufabric.app.requests import SimulateRequest
    from gpufabric.catalog import Catalog
    from gpufabric.plan import Plan
    from gpufabric.plan.evaluate import Candidate
    from gpufabric.sim import SimConfig, SimResult
    from gpufabric.spec.loader import Located
    from gpufabric.spec.models import Spec

#: Columns of the candidate table (text and Markdown).
HEADERS = (
    "",
    "fabric",
    "topology",
    "storage",
    "step",
    "p99",
    "CV",
    "comm",
    "stall",
    "good",
    "days",
    "capex",
    "commit",
    "run",
    "MFU",
    "mem",
    "meets",
)
#: Short names of the violated requirements in the ``meets`` column.
_SHORT = {
    "step_time_cv": "cv",
    "checkpoint_stall_fraction": "stall",
    "time_to_train_days": "days",
    "capex_usd": "budget",
    "rent_commitment_usd": "budget",
    "dataset_read_gbps": "data",
    "goodput": "goodput",
    "memory": "mem",
}


def _row(c: Candidate, rec: str | None, pareto: set[str]) -> list[str]:
    topo = "rail" if c.topology == "rail-optimized" else "fat"
    if c.capacity == "rent":  # the offering names the fabric (JSON: fabric); the term is short
        what, where = str(c.rental), "rent " + {"on_demand": "od"}.get(str(c.term), str(c.term))
    else:
        what, where = c.fabric + ("+S" if c.in_network_reduction else ""), f"{topo} {c.oversubscription:g}:1"
    rented = c.capacity == "rent"
    return [
        "*" if c.id == rec else ("p" if c.id in pareto else ""),
        what,
        where,
        c.storage,
        f"{c.step_time_s:.3g}",
        f"{c.step_time_p99_s:.3g}",
        f"{c.step_time_cv:.2%}",
        f"{c.comm_exposed_s:.3g}",
        f"{c.checkpoint_stall_fraction:.1%}",
        f"{c.goodput:.0%}",
        f"{c.time_to_train_days:.1f}",
        f"{c.capex_usd / 1e6:,.1f}" if not rented else "-",
        f"{c.rent_commitment_usd / 1e6:,.1f}" if rented else "-",
        f"{c.run_cost_usd / 1e6:,.3g}",
        f"{c.mfu:.0%}",
        f"{c.memory_gb:.0f}",
        "yes"
        if c.meets_requirements
        else ",".join(_SHORT.get(w, w) for w in (v.split(" ", 1)[0] for v in c.violations)),
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingPlan:
    """``plan`` on a training spec: the ranked designs and the catalog overrides applied."""

    kind: str = "training"
    spec: Spec
    result: Plan
    catalog_files: tuple[str, ...]
    overrides: tuple[dict[str, Any], ...]

    @property
    def exit_code(self) -> int:
        # Nothing recommendable (no layout fits in memory) is a failed check.
        return 0 if self.result.recommended is not None else 1

    def shown(self, top: int | None, *, default: int | None) -> list[Candidate]:
        """The best ``top`` (else ``default``; None: all), the recommended design always among them."""
        result, limit = self.result, top or default
        if limit is None:
            return list(result.candidates)
        keep = result.candidates[:limit]
        if result.recommended is None:
            return keep
        rec = result.get(result.recommended)
        return keep if rec in keep else [rec, *keep[: limit - 1]]

    def table(self, shown: Sequence[Candidate]) -> tuple[tuple[str, ...], list[list[str]]]:
        pareto = set(self.result.pareto)
        return HEADERS, [_row(c, self.result.recommended, pareto) for c in shown]

    def to_json(self, shown: Sequence[Candidate]) -> dict[str, Any]:
        from gpufabric.spec.plan_file import plan_to_dict

        return plan_to_dict(self.result, shown, catalog_files=self.catalog_files, overrides=self.overrides)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSimulation:
    """``simulate`` of synchronous training steps (a spec's candidate or a synthetic job)."""

    kind: str = "training"
    meta: dict[str, Any]
    """mode (spec or synthetic); in spec mode the spec, its name, the candidate and the planner's figures."""
    result: SimResult
    exit_code: int = 0

    def to_json(self) -> dict[str, Any]:
        from gpufabric.jsonable import to_jsonable

        r = self.result
        # The raw samples (runs x steps floats) are not part of the output: left out before the
        # conversion, which otherwise built and dropped a million-element list (docs/performance.md).
        body = {f.name: to_jsonable(getattr(r, f.name)) for f in dataclasses.fields(r) if f.name != "step_times_s"}
        return {**self.meta, **body}


@dataclass(frozen=True, slots=True, kw_only=True)
class Declined:
    """Nothing to simulate: the plan recommends no design and no candidate was named (exit 1, like plan)."""

    kind: str = "training"
    message: str
    exit_code: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"error": self.message}


class TrainingKind:
    """``workload.kind: training`` (the default)."""

    name = "training"
    simulate_mode = SPEC

    def owns(self, spec: object) -> bool:
        from gpufabric.spec.models import Spec

        return isinstance(spec, Spec)

    def load(self, located: Located, known_ids: Mapping[str, Collection[str]]) -> Spec:
        from gpufabric.spec.loader import check_ids, validate_model
        from gpufabric.spec.models import Spec

        spec = validate_model(located, Spec)
        check_ids(located, known_ids)
        return spec

    def plan(
        self, spec: Spec, catalog: Catalog, *, located: Located | None = None, catalog_files: Sequence[Path] = ()
    ) -> TrainingPlan:
        from gpufabric.plan import make_plan
        from gpufabric.plan.capacity import check_options

        check_options(spec, catalog, located)  # SHARP, provider fabrics, offerings: located errors
        overrides: list[dict[str, Any]] = []
        if catalog_files:  # plan.calibrate imports scipy.optimize (~1 s): only when there is something to read
            from gpufabric.plan.calibrate import overrides_in

            overrides = overrides_in(list(catalog_files))
        return TrainingPlan(
            spec=spec, result=make_plan(spec, catalog), catalog_files=tuple(catalog.files), overrides=tuple(overrides)
        )

    def simulate(self, spec: Spec, catalog: Catalog, request: SimulateRequest) -> StepSimulation | Declined:
        from gpufabric.plan import evaluate_candidates, rank
        from gpufabric.plan.recommend import recommend
        from gpufabric.sim import config_from_breakdown, parse_hiccup, parse_stragglers
        from gpufabric.sim import simulate as run

        cands = rank(evaluate_candidates(spec, catalog))
        ids = [c.id for c in cands]
        chosen_id = request.candidate
        if chosen_id is None:
            rec = recommend(cands, spec.requirements)
            if rec.recommended is None:  # plan's contract: no design fits => exit 1
                return Declined(
                    message=f"{request.spec}: the plan recommends no design, so there is nothing to simulate by"
                    f" default. {rec.rationale} Simulate one anyway with --candidate ID (one of {', '.join(ids)})."
                )
            chosen_id = rec.recommended
        if chosen_id not in ids:
            raise InputError(f"unknown candidate {request.candidate!r}: choose one of {', '.join(ids)}")
        chosen = cands[ids.index(chosen_id)]
        cv = request.compute_cv
        if cv is not None and not (math.isfinite(cv) and cv >= 0):
            raise InputError(f"--compute-cv must be a finite number >= 0, got {cv}")
        # Compute CV and hiccups come with the candidate's breakdown (the planner's own
        # inputs); --compute-cv and --hiccup override them.
        cfg = config_from_breakdown(
            chosen.breakdown,
            steps=request.steps,
            train_steps=request.train_steps
            or math.ceil(spec.workload.total_tokens / spec.workload.global_batch_tokens),
            runs=request.runs,
            seed=request.seed,
            compute_cv=cv,
            hiccup=parse_hiccup(request.hiccup) if request.hiccup else None,
            stragglers=parse_stragglers(request.straggler) if request.straggler else None,
            tokens_per_step=spec.workload.global_batch_tokens,
        )
        planner = {k: getattr(chosen, k) for k in ("step_time_s", "step_time_p99_s", "step_time_cv", "goodput")}
        meta = {
            "mode": "spec",
            "spec": str(request.spec),
            "name": spec.name,
            "candidate": chosen.id,
            "planner": planner,
        }
        return StepSimulation(meta=meta, result=run(checked(cfg, request), brute_force=request.brute_force))


#: Pooled step times are kept for exact percentiles: 8 bytes each, so 400 MB at the limit.
MAX_STEP_SAMPLES = 50_000_000


def checked(cfg: SimConfig, request: SimulateRequest) -> SimConfig:
    """``cfg`` within the memory limit, with the attribution rerun switched off when asked."""
    if cfg.runs * cfg.steps > MAX_STEP_SAMPLES:
        raise InputError(
            f"--runs x --steps = {cfg.runs * cfg.steps:,} step times would not fit in memory comfortably "
            f"(limit {MAX_STEP_SAMPLES:,}); use --train-steps for long runs, it cycles the simulated steps"
        )
    return dataclasses.replace(cfg, attribution=False) if request.no_attribution else cfg
