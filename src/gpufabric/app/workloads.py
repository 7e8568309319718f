"""The registry of workload kinds: a spec's ``workload.kind`` is read once, here, and each
kind is one entry behind one protocol.

A kind loads its typed spec from the parsed YAML, plans it (``gpufabric plan``, ``api.plan``)
and simulates one of its designs (``gpufabric simulate``). A third kind is a new entry in
``KINDS``; no command compares kind names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpufabric.app.training import TrainingKind

if TYPE_CHECKING:
    from collections.abc import Collection

    from gpufabric.app.requests import SimulateRequest
    from gpufabric.catalog import Catalog
    from gpufabric.plan import Plan
    from gpufabric.plan.inference import ServingPlan
    from gpufabric.spec.inference import InferenceSpec
    from gpufabric.spec.loader import Located
    from gpufabric.spec.models import Spec


class PlanOutcome(Protocol):
    """What ``plan`` gives for any kind: the designs shown, one JSON document, the exit status."""

    @property
    def kind(self) -> str: ...

    @property
    def result(self) -> Plan | ServingPlan:
        """The planner's typed result (``api.plan`` returns it)."""
        ...

    @property
    def exit_code(self) -> int:
        """0 when a design is recommended, 1 when none meets the requirements on the cluster."""
        ...

    def shown(self, top: int | None, *, default: int | None) -> Sequence[Any]:
        """The candidates a renderer shows: the best ``top`` (else ``default``; None: all)."""
        ...

    def table(self, shown: Sequence[Any]) -> tuple[tuple[str, ...], list[list[str]]]:
        """The candidate table: headers and one row of cells per shown candidate."""
        ...

    def to_json(self, shown: Sequence[Any]) -> dict[str, Any]:
        """The JSON document (``cli.output.print_json`` adds the envelope)."""
        ...


class SimulateOutcome(Protocol):
    """What ``simulate`` gives for any mode: one JSON document and the exit status."""

    @property
    def kind(self) -> str: ...

    @property
    def exit_code(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


class WorkloadKind(Protocol):
    """One workload kind: its spec type, its planner and its simulator."""

    name: str
    simulate_mode: str
    """The ``simulate`` mode of a spec of this kind (``requests``: the options that apply)."""

    def owns(self, spec: object) -> bool:
        """Whether ``spec`` is this kind's spec type."""
        ...

    def load(self, located: Located, known_ids: Mapping[str, Collection[str]]) -> Any:
        """The validated spec (located errors), its catalog ids checked against ``known_ids``."""
        ...

    def plan(
        self, spec: Any, catalog: Catalog, *, located: Located | None = None, catalog_files: Sequence[Path] = ()
    ) -> PlanOutcome:
        """Every design of ``spec`` (errors located in the file when ``located`` is given;
        ``catalog_files``: the override files the catalog merged, listed by the outcome)."""
        ...

    def simulate(self, spec: Any, catalog: Catalog, request: SimulateRequest) -> SimulateOutcome:
        """One design of ``spec`` (``request.candidate``, else the recommended one) simulated."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A spec loaded once: its kind, the typed spec and where each field came from."""

    kind: WorkloadKind
    spec: Spec | InferenceSpec
    located: Located


def _inference() -> WorkloadKind:
    # Imported with the first inference spec: a training plan does not build the serving
    # kind's records (~1.5 ms of every start, issue 32).
    from gpufabric.app.inference import InferenceKind

    return InferenceKind()


#: The registry, keyed by ``workload.kind`` (the first is the default when a spec names none):
#: what makes each kind, called once (:func:`kind_named`).
KINDS: dict[str, Callable[[], WorkloadKind]] = {"training": TrainingKind, "inference": _inference}


@cache
def kind_named(name: str) -> WorkloadKind:
    """The registered kind ``name`` (a key of ``KINDS``), made on first use."""
    return KINDS[name]()


def kind_of(located: Located) -> WorkloadKind:
    """The registered kind a parsed spec names (located error for an unknown one)."""
    data = located.data
    workload = data.get("workload") if isinstance(data, dict) else None
    name = workload.get("kind", "training") if isinstance(workload, dict) else "training"
    if not isinstance(name, str) or name not in KINDS:
        raise located.error(("workload", "kind"), f"unknown workload kind {name!r}", "choose " + " or ".join(KINDS))
    return kind_named(name)


def kind_for(spec: object) -> WorkloadKind:
    """The registered kind whose spec type ``spec`` is."""
    for name in KINDS:
        if (kind := kind_named(name)).owns(spec):
            return kind
    raise TypeError(f"not a spec of a registered workload kind: {type(spec).__name__}")


def load_workload(source: str | Path | Mapping[str, Any], known_ids: Mapping[str, Collection[str]]) -> Workload:
    """Read a spec file (or take a mapping) once and load it as the kind it names.

    Raises:
        SpecError: unreadable, not YAML, an unknown kind, or not a valid spec of its kind.
    """
    from gpufabric.spec.loader import Located, parse_yaml, read_text

    if isinstance(source, Mapping):
        located = Located(file="<mapping>", data=dict(source), key_positions={}, value_positions={})
    else:
        # The spec reader: size cap, UTF-8 with the line of a bad byte, bounded alias expansion.
        located = parse_yaml(read_text(source), str(source))
    kind = kind_of(located)
    return Workload(kind=kind, spec=kind.load(located, known_ids), located=located)
