"""The inference workload kind (``spec/inference.py``, docs/inference.md): serving designs
searched and sized by simulation, and one design simulated request by request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from gpufabric.app.requests import INFERENCE
from gpufabric.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Collection
    from pathlib import Path

    from gpufabric.app.requests import SimulateRequest
    from gpufabric.catalog import Catalog
    from gpufabric.plan.inference import ServingCandidate, ServingPlan
    from gpufabric.plan.serving_search import SearchRow
    from gpufabric.spec.inference import InferenceSpec
    from gpufabric.spec.loader import Located

#: Requests simulated by default: enough for a p99 from 1,000 samples beyond it.
DEFAULT_REQUESTS = 100_000
#: Upper bound on --requests (memory: ~20 float arrays of this length).
MAX_REQUESTS = 20_000_000

HEADERS = (
    "",
    "mode",
    "fabric",
    "storage",
    "layout",
    "P+D",
    "GPUs",
    "TTFT p99",
    "TPOT p99",
    "ITL p99",
    "KV p99",
    "cold",
    "$/M tok",
    "meets",
)
SEARCH_HEADERS = ("mode", "layout", "P+D", "GPUs", "$/M tok", "TTFT p99", "TPOT p99", "status", "why")


def _mode(mode: str) -> str:
    return "disagg" if mode == "disaggregated" else "coloc"


def _row(c: ServingCandidate, rec: str | None) -> list[str]:
    return [
        "*" if c.id == rec else "",
        _mode(c.mode),
        c.fabric,
        c.storage,
        f"tp{c.tp} pp{c.pp} b{c.max_batch} t{c.token_budget}",
        f"{c.prefill_replicas}+{c.decode_replicas}",
        str(c.gpus),
        f"{c.ttft_p99_s:.3g}s",
        f"{c.tpot_p99_s * 1e3:.3g}ms",
        f"{c.itl_p99_s * 1e3:.3g}ms",
        f"{c.kv_transfer_p99_s * 1e3:.3g}ms",
        f"{c.cold_start_s:.3g}s",
        f"{c.usd_per_million_output_tokens:.3g}",
        "yes" if c.meets_slo else ";".join(v.split(" ", 1)[0] for v in c.violations),
    ]


def _search_row(r: SearchRow) -> list[str]:
    sized = bool(r.gpus) and r.status in ("winner", "meets")
    return [
        _mode(r.mode),
        r.layout,
        f"{r.prefill_replicas}+{r.decode_replicas}" if sized else "-",
        str(r.gpus) if sized else "-",
        f"{r.usd_per_million_output_tokens:.3g}" if sized else "-",
        f"{r.ttft_p99_s:.3g}s" if sized else "-",
        f"{r.tpot_p99_s * 1e3:.3g}ms" if sized else "-",
        r.status,
        r.reason,
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingPlanOutcome:
    """``plan`` on an inference spec: the search and each mode's best designs."""

    kind: str = "inference"
    result: ServingPlan
    catalog_files: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return 0 if self.result.recommended else 1

    @property
    def load(self) -> str:
        """The traffic the designs were sized for, in words."""
        r = self.result
        return f"{r.rate_rps:g} requests/s" if r.rate_rps is not None else f"{r.concurrency} concurrent clients"

    def shown(self, top: int | None, *, default: int | None) -> list[ServingCandidate]:
        limit = top or default
        return self.result.candidates[:limit] if limit else list(self.result.candidates)

    def table(self, shown: Sequence[ServingCandidate]) -> tuple[tuple[str, ...], list[list[str]]]:
        return HEADERS, [_row(c, self.result.recommended) for c in shown]

    def search_table(self) -> tuple[tuple[str, ...], list[list[str]]]:
        return SEARCH_HEADERS, [_search_row(r) for r in self.result.search]

    def to_json(self, shown: Sequence[ServingCandidate]) -> dict[str, Any]:
        r = self.result
        return {
            "name": r.name,
            "kind": "inference",
            "rate_rps": r.rate_rps,
            "concurrency": r.concurrency,
            "candidates": [asdict(c) for c in shown],
            "search": [asdict(s) for s in r.search],
            "recommended": r.recommended,
            "rationale": r.rationale,
            "catalog": list(self.catalog_files),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingSimulation:
    """``simulate`` of one planned serving design: the service's latency percentiles and SLOs."""

    kind: str = "inference"
    payload: dict[str, Any]
    violations: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return 0 if not self.violations else 1

    def to_json(self) -> dict[str, Any]:
        return self.payload


class InferenceKind:
    """``workload.kind: inference``."""

    name = "inference"
    simulate_mode = INFERENCE

    def owns(self, spec: object) -> bool:
        from gpufabric.spec.inference import InferenceSpec

        return isinstance(spec, InferenceSpec)

    def load(self, located: Located, known_ids: Mapping[str, Collection[str]]) -> InferenceSpec:
        from gpufabric.spec.inference import InferenceSpec
        from gpufabric.spec.loader import check_ids, validate_model

        spec = validate_model(located, InferenceSpec)
        if known_ids:
            check_ids(located, known_ids)
        return spec

    def plan(
        self,
        spec: InferenceSpec,
        catalog: Catalog,
        *,
        located: Located | None = None,
        catalog_files: Sequence[Path] = (),
    ) -> ServingPlanOutcome:
        from gpufabric.plan.inference import make_serving_plan
        from gpufabric.sim.serving import simulate_serving

        result = make_serving_plan(spec, catalog, simulate=simulate_serving)
        return ServingPlanOutcome(result=result, catalog_files=tuple(catalog.files))

    def simulate(self, spec: InferenceSpec, catalog: Catalog, request: SimulateRequest) -> ServingSimulation:
        from gpufabric.plan.inference import _violations, make_serving_plan, serving_config
        from gpufabric.sim.serving import simulate_serving
        from gpufabric.spec.loader import did_you_mean

        n, seed = DEFAULT_REQUESTS if request.requests is None else request.requests, request.seed
        if not 1 <= n <= MAX_REQUESTS:
            raise InputError(f"--requests must be between 1 and {MAX_REQUESTS:,}, got {n}")
        plan = make_serving_plan(spec, catalog, simulate=simulate_serving, seed=seed)
        chosen = request.candidate or plan.recommended or plan.candidates[0].id
        by_id = {c.id: c for c in plan.candidates}
        if chosen not in by_id:
            raise InputError(f"unknown candidate {chosen!r}; {did_you_mean(chosen, sorted(by_id), 'candidates')}")
        cand = by_id[chosen]
        summary = simulate_serving(serving_config(spec, catalog, cand, requests=n, seed=seed)).summary()
        violations = _violations(summary, spec.workload.slo)
        traffic = spec.workload.traffic
        payload: dict[str, Any] = {
            "mode": "inference",
            "name": spec.name,
            "candidate": chosen,
            "rate_rps": traffic.rate_rps,
            "concurrency": traffic.concurrency,
            "prefill_replicas": cand.prefill_replicas,
            "decode_replicas": cand.decode_replicas,
            "gpus": cand.gpus,
            "seed": seed,
            **summary,
            # The service's requests; one engine of the design simulates its round-robin share of them.
            "requests": n,
            "simulated_requests": summary["requests"],
            "meets_slo": not violations,
            "violations": violations,
        }
        return ServingSimulation(payload=payload, violations=tuple(violations))
