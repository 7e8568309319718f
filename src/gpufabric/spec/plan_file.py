"""Reading a saved plan (``gpufabric plan SPEC --format json``) back in.

``bench`` derives SLOs from it and ``config`` renders the design it recommends; both read
it through these two functions, which know only the documented JSON keys
(``candidates[]`` with ``id``, ``fabric``, ``storage``; ``recommended``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from gpufabric.boundary import default_ids, read_capped
from gpufabric.errors import InputError
from gpufabric.spec.loader import did_you_mean
from gpufabric.spec.types import bounded_repr

#: Bytes read from a plan JSON file: a plan of every design with its breakdown is a few MB;
#: the cap keeps a wrong path (/dev/zero, a disk image) from being read into memory.
MAX_PLAN_BYTES = 256 * 1024 * 1024


def load_plan(path: Path) -> dict[str, Any]:
    """The plan document at ``path``; InputError when it is unreadable or not a plan."""
    try:
        doc = json.loads(read_capped(path, MAX_PLAN_BYTES, "plan").decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not a plan JSON file (not JSON: {exc.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("candidates"), list):
        raise InputError(f"{path}: not a plan JSON file (no 'candidates'); write one with gpufabric plan SPEC --format json")
    return doc


def recommended_candidate(plan: Mapping[str, Any], path: str | Path = "plan",
                          known_ids: Mapping[str, Collection[str]] | None = None) -> dict[str, Any]:
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
                    raise InputError(f"{path}: candidate {bounded_repr(wanted)}: unknown {key} id"
                                     f" {bounded_repr(candidate[key])} ({did_you_mean(candidate[key], sorted(ids))})")
            return candidate
    raise InputError(f"{path}: recommended candidate {bounded_repr(wanted)} is not among candidates[]")
