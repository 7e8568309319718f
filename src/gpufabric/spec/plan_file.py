"""The saved plan (``gpufabric plan SPEC --format json``): the one module that writes and reads it.

``bench`` derives SLOs from it and ``config`` renders the design it recommends; both read
it back typed through ``load_plan``/``plan_from_dict`` (a ``SavedPlan``) and
``recommended_candidate`` (a ``SavedCandidate``), which know only the documented JSON keys
(``candidates[]`` with ``id``, ``fabric``, ``storage``, optionally ``capacity``,
``step_time_s``, ``storage_read_gbps``, ``breakdown``; ``recommended``). ``plan_to_dict``
is what ``gpufabric plan`` writes.

Versions (``schema_version``):
    0  documents without the key (hand-written plans, or a plan whose envelope a tool
       stripped): the same keys as v1, read as v1.
    1  the envelope ``schema_version``/``gpufabric_version`` around the keys above.
A newer version is refused with a one-line error (exit 2) rather than misread.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.boundary import default_ids, loads_json, read_capped
from gpufabric.errors import InputError
from gpufabric.jsonable import schema_version
from gpufabric.spec.loader import did_you_mean
from gpufabric.spec.types import bounded_repr

#: The version ``plan_to_dict`` writes.
PLAN_SCHEMA_VERSION = 1


def _candidate(c: Any) -> dict[str, Any]:
    """A ``plan.evaluate.Candidate`` as JSON keys: its fields in order (the record is the one
    list of keys, ``plan.evaluate.CANDIDATE_KEYS``), its breakdown last."""
    out = {f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.name != "breakdown"}
    return out | {"breakdown": c.breakdown}


def plan_to_dict(
    result: Any, candidates: Sequence[Any], *, catalog_files: Sequence[str], overrides: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The saved-plan document of a ``plan.PlanResult`` showing ``candidates`` (JSON-able after
    ``jsonable.to_jsonable``)."""
    return {
        "schema_version": PLAN_SCHEMA_VERSION,
        "name": result.name,
        "candidates": [_candidate(c) for c in candidates],
        "pareto": result.pareto,
        "recommended": result.recommended,
        "runner_up": result.runner_up,
        "binding_constraint": result.binding,
        "rationale": result.rationale,
        "sensitivity": result.sensitivity,
        "throughput": result.throughput,
        "layout_search": result.layout_search,
        "storage_tiers": getattr(result, "storage_tiers", []),
        "placement": getattr(result, "placement", None),
        "notes": result.notes,
        "catalog": list(catalog_files),
        "catalog_overrides": list(overrides),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedPlan:
    """A saved plan read back: checked and brought to ``PLAN_SCHEMA_VERSION``."""

    schema_version: int
    recommended: str | None
    """The recommended candidate's id (None: the plan recommends none)."""
    candidates: tuple[Mapping[str, Any], ...]
    """The candidates as written; ``recommended_candidate`` reads the recommended one typed."""
    document: dict[str, Any]
    """The whole document, stored with the runs it judges (``store.recording(plan=...)``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedCandidate:
    """The recommended candidate of a saved plan, its fabric and storage ids checked."""

    id: str
    fabric: str
    storage: str
    capacity: str
    """build (owned; also when the plan predates the key) or rent."""
    step_time_s: float | None
    """Mean step time, s; None when the plan has no finite figure."""
    storage_read_gbps: float | None
    breakdown: Mapping[str, Any]
    """The step breakdown as written (empty when absent)."""


def plan_from_dict(data: Any, *, source: str = "plan") -> SavedPlan:
    """A saved plan checked and brought to PLAN_SCHEMA_VERSION; InputError naming ``source`` otherwise."""
    if not isinstance(data, dict):
        raise InputError(
            f"{source}: not a plan JSON file (not an object); write one with gpufabric plan SPEC --format json"
        )
    version = schema_version(data, current=PLAN_SCHEMA_VERSION, what="plan", source=source)
    if not isinstance(data.get("candidates"), list):
        raise InputError(
            f"{source}: not a plan JSON file (no 'candidates'); write one with gpufabric plan SPEC --format json"
        )
    if version == 0:  # v0 -> v1: same keys, the version was not written
        data = {**data, "schema_version": 1}
    wanted = data.get("recommended")
    return SavedPlan(
        schema_version=PLAN_SCHEMA_VERSION,
        recommended=wanted if isinstance(wanted, str) else None,
        candidates=tuple(c for c in data["candidates"] if isinstance(c, Mapping)),
        document=data,
    )


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


#: Bytes read from a plan JSON file: a plan of every design with its breakdown is a few MB;
#: the cap keeps a wrong path (/dev/zero, a disk image) from being read into memory.
MAX_PLAN_BYTES = 256 * 1024 * 1024


def load_plan(path: Path) -> SavedPlan:
    """The plan document at ``path``; InputError when it is unreadable, not a plan, or too new."""
    try:
        doc = loads_json(
            read_capped(path, MAX_PLAN_BYTES, "plan").decode("utf-8", errors="replace"), source=str(path), what="plan"
        )
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not a plan JSON file (not JSON: {exc.msg})") from None
    return plan_from_dict(doc, source=str(path))


def recommended_candidate(
    plan: SavedPlan | Mapping[str, Any],
    path: str | Path = "plan",
    known_ids: Mapping[str, Collection[str]] | None = None,
) -> SavedCandidate:
    """The recommended candidate of a saved plan (or of a plan document, checked first), typed,
    with its fabric and storage ids checked.

    Args:
        known_ids: as for ``load_spec``; None uses the registered default ids. The ids
            land in generated files and SLO names, so an unknown one is an error with a
            did-you-mean, never text passed on.
    """
    saved = plan if isinstance(plan, SavedPlan) else plan_from_dict(plan, source=str(path))
    wanted = saved.document.get("recommended")
    for candidate in saved.candidates:
        if candidate.get("id") == wanted:
            fabric, storage = candidate.get("fabric"), candidate.get("storage")
            if not isinstance(fabric, str) or not isinstance(storage, str):
                raise InputError(f"{path}: candidate {bounded_repr(wanted)} lacks fabric/storage ids")
            known = default_ids() if known_ids is None else known_ids
            for key, value, field in (("fabric", fabric, "options.fabrics"), ("storage", storage, "options.storage")):
                ids = known.get(field)
                if ids and value not in ids:
                    raise InputError(
                        f"{path}: candidate {bounded_repr(wanted)}: unknown {key} id"
                        f" {bounded_repr(value)} ({did_you_mean(value, sorted(ids))})"
                    )
            breakdown = candidate.get("breakdown")
            return SavedCandidate(
                id=str(wanted),
                fabric=fabric,
                storage=storage,
                capacity="rent" if candidate.get("capacity") == "rent" else "build",
                step_time_s=_number(candidate.get("step_time_s")),
                storage_read_gbps=_number(candidate.get("storage_read_gbps")),
                breakdown=breakdown if isinstance(breakdown, Mapping) else {},
            )
    raise InputError(f"{path}: recommended candidate {bounded_repr(wanted)} is not among candidates[]")
