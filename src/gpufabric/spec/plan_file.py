"""The saved plan (``gpufabric plan SPEC --format json``): the one module that writes and reads it.

``bench`` derives SLOs from it and ``config`` renders the design it recommends; both read
it through ``load_plan``/``plan_from_dict``, which know only the documented JSON keys
(``candidates[]`` with ``id``, ``fabric``, ``storage``; ``recommended``). ``plan_to_dict``
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
from collections.abc import Collection, Mapping, Sequence
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


def plan_from_dict(data: Any, *, source: str = "plan") -> dict[str, Any]:
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
    return data


#: Bytes read from a plan JSON file: a plan of every design with its breakdown is a few MB;
#: the cap keeps a wrong path (/dev/zero, a disk image) from being read into memory.
MAX_PLAN_BYTES = 256 * 1024 * 1024


def load_plan(path: Path) -> dict[str, Any]:
    """The plan document at ``path``; InputError when it is unreadable, not a plan, or too new."""
    try:
        doc = loads_json(
            read_capped(path, MAX_PLAN_BYTES, "plan").decode("utf-8", errors="replace"), source=str(path), what="plan"
        )
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not a plan JSON file (not JSON: {exc.msg})") from None
    return plan_from_dict(doc, source=str(path))


def recommended_candidate(
    plan: Mapping[str, Any], path: str | Path = "plan", known_ids: Mapping[str, Collection[str]] | None = None
) -> dict[str, Any]:
    """The recommended candidate of a plan document, with its fabric and storage ids checked.

    Args:
        known_ids: as for ``load_spec``; None uses the registered default ids. The ids
            land in generated files and SLO names, so an unknown one is an error with a
            did-you-mean, never text passed on.
    """
    wanted = plan.get("recommended")
    for candidate in plan["candidates"]:
        if isinstance(candidate, dict) and candidate.get("id") == wanted:
            if not isinstance(candidate.get("fabric"), str) or not isinstance(candidate.get("storage"), str):
                raise InputError(f"{path}: candidate {bounded_repr(wanted)} lacks fabric/storage ids")
            known = default_ids() if known_ids is None else known_ids
            for key, field in (("fabric", "options.fabrics"), ("storage", "options.storage")):
                ids = known.get(field)
                if ids and candidate[key] not in ids:
                    raise InputError(
                        f"{path}: candidate {bounded_repr(wanted)}: unknown {key} id"
                        f" {bounded_repr(candidate[key])} ({did_you_mean(candidate[key], sorted(ids))})"
                    )
            return candidate
    raise InputError(f"{path}: recommended candidate {bounded_repr(wanted)} is not among candidates[]")
