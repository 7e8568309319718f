"""The declared library API: what a program embeds (a planner in an optimisation loop, a CI
gate, a notebook). Everything else in the package may change between releases; these names
are a promise, versioned like the JSON outputs (``API_VERSION``: a name removed or a
signature changed incompatibly bumps it, additions do not).

    >>> from gpufabric import api
    >>> spec = api.load_spec("examples/llama3-70b-1k.yaml")
    >>> result = api.plan(spec)
    >>> result.recommended
    'ib-ndr/rail-optimized/...'

Errors are the documented tree (``gpufabric.errors``): ``UserError`` for a bad spec or
argument (with file, line and field where there is one), ``EnvironmentFailure`` for the
machine (an unreachable store). docs/api.md has a runnable example.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from gpufabric.app.requests import SimulateRequest

if TYPE_CHECKING:
    from gpufabric.app.workloads import SimulateOutcome
    from gpufabric.catalog import Catalog
    from gpufabric.model.collectives import CollectivePrediction
    from gpufabric.plan import Plan
    from gpufabric.plan.evaluate import Candidate
    from gpufabric.plan.inference import ServingPlan
    from gpufabric.results.store import Store
    from gpufabric.sim.config import SimConfig
    from gpufabric.sim.simulate import SimResult
    from gpufabric.spec.inference import InferenceSpec
    from gpufabric.spec.models import Spec

__all__ = [
    "API_VERSION",
    "SimulateRequest",
    "evaluate",
    "load_catalog",
    "load_spec",
    "open_store",
    "plan",
    "predict_collective",
    "simulate",
]

#: Version of this surface (see the module docstring).
API_VERSION = 1


def load_catalog(overrides: Sequence[str | Path] = ()) -> Catalog:
    """The shipped hardware and price catalog, with override files merged in order (later wins)."""
    from gpufabric.catalog import load_catalog as _load

    return _load(list(overrides))


def _catalog(catalog: Catalog | None) -> Catalog:
    return catalog if catalog is not None else load_catalog()


def load_spec(source: str | Path | Mapping[str, Any], *, catalog: Catalog | None = None) -> Spec | InferenceSpec:
    """A validated spec from a YAML file or a mapping, of the kind its ``workload.kind`` names: a
    training ``Spec``, or an ``InferenceSpec`` for ``inference``. Catalog ids are checked against
    ``catalog`` (default: the shipped one).

    Raises:
        SpecError: not a valid spec (file:line:field and the fix, for a file).
    """
    from gpufabric.app.workloads import load_workload

    return load_workload(source, _catalog(catalog).known_ids()).spec


def plan(spec: Spec | InferenceSpec, catalog: Catalog | None = None) -> Plan | ServingPlan:
    """Every candidate design costed and predicted, ranked, with the recommendation (``gpufabric plan``),
    by the planner of the spec's workload kind."""
    from gpufabric.app.workloads import kind_for

    return kind_for(spec).plan(spec, _catalog(catalog)).result


def evaluate(specs: Spec | Sequence[Spec], catalog: Catalog | None = None) -> list[Candidate] | list[list[Candidate]]:
    """The candidate table of one training spec (or one table per spec), unranked: every design
    its options allow with the best layout for each, predicted and costed, without the
    recommendation and sensitivity runs ``plan`` adds. The catalog is loaded once for a batch."""
    from gpufabric.plan.candidates import evaluate_batch, evaluate_candidates

    cat = _catalog(catalog)
    if isinstance(specs, Sequence):
        # One batch: the specs share table passes (the same records as one at a time).
        return evaluate_batch(specs, cat)
    return evaluate_candidates(specs, cat)


def predict_collective(
    *,
    op: str,
    size_bytes: int,
    nodes: int,
    gpus_per_node: int,
    gpu: str,
    fabric: str,
    catalog: Catalog | None = None,
    **options: Any,
) -> CollectivePrediction:
    """Expected nccl-tests time, algbw and busbw of one collective (``gpufabric predict collective``).

    ``options``: ``algorithm``, ``protocol``, ``harness``, ``timing``, ``sharp``,
    ``deterministic``, ``oversubscription``, ``nccl_version``, as
    :func:`gpufabric.model.collectives.predict_collective` takes them.
    """
    from gpufabric.model.collectives import predict_collective as _predict

    return _predict(
        op=op,
        size_bytes=size_bytes,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        gpu=gpu,
        fabric=fabric,
        catalog=_catalog(catalog),
        **options,
    )


@overload
def simulate(config: SimConfig, *, brute_force: bool = False) -> SimResult: ...
@overload
def simulate(config: SimulateRequest, *, brute_force: bool = False) -> SimulateOutcome: ...
def simulate(config: SimConfig | SimulateRequest, *, brute_force: bool = False) -> SimResult | SimulateOutcome:
    """Step-time distributions of synchronous training under jitter, stragglers, checkpoints and
    failures, from an engine ``SimConfig``; the same config and seed give the same result bit for
    bit. Given a ``SimulateRequest`` (what ``gpufabric simulate`` takes: a spec of any workload
    kind, or a synthetic job), the outcome of that command (``to_json()``, ``exit_code``)."""
    from gpufabric.app.requests import SimulateRequest

    if isinstance(config, SimulateRequest):
        from gpufabric.app.services import prepare_simulation

        return prepare_simulation(config).run()
    from gpufabric.sim.simulate import simulate as _simulate

    return _simulate(config, brute_force=brute_force)


def open_store(url: str | Path | None = None) -> Store:
    """The results store: a SQLite file, a ``postgresql://`` URL, or (None) ``$GPUFABRIC_DB`` /
    the user's default file. Use it as a context manager."""
    from gpufabric.results.store import Store

    return Store.open(url)
