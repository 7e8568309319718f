"""Reading a saved plan (``gpufabric plan SPEC --format json``) back in.

``bench`` derives SLOs from it and ``config`` renders the design it recommends; both read
it through these two functions, which know only the documented JSON keys
(``candidates[]`` with ``id``, ``fabric``, ``storage``; ``recommended``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpufabric.errors import InputError


def load_plan(path: Path) -> dict[str, Any]:
    """The plan document at ``path``; InputError when it is unreadable or not a plan."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read plan: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not a plan JSON file (not JSON: {exc.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("candidates"), list):
        raise InputError(f"{path}: not a plan JSON file (no 'candidates'); write one with gpufabric plan SPEC --format json")
    return doc


def recommended_candidate(plan: Mapping[str, Any], path: str | Path = "plan") -> dict[str, Any]:
    """The recommended candidate of a plan document, with its fabric and storage ids checked."""
    wanted = plan.get("recommended")
    for candidate in plan["candidates"]:
        if isinstance(candidate, dict) and candidate.get("id") == wanted:
            if not isinstance(candidate.get("fabric"), str) or not isinstance(candidate.get("storage"), str):
                raise InputError(f"{path}: candidate {wanted!r} lacks fabric/storage ids")
            return candidate
    raise InputError(f"{path}: recommended candidate {wanted!r} is not among candidates[]")
