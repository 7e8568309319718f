"""Shared output helpers for every command: formats, JSON encoding, consoles."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from gpufabric import SCHEMA_VERSION, __version__


class Format(str, enum.Enum):
    """Output format of a reporting command."""

    text = "text"
    json = "json"


class ReportFormat(str, enum.Enum):
    """Output format of a command that also renders Markdown."""

    text = "text"
    json = "json"
    markdown = "markdown"


def stdout_console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, pydantic models, enums, paths, numpy scalars and arrays -> JSON types.

    Non-finite floats become None: JSON has no NaN/Infinity and consumers choke on them.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return to_jsonable(value.model_dump(mode="json"))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalar or array
        return to_jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def envelope(payload: dict[str, Any]) -> dict[str, Any]:
    """Prefix a JSON document with ``schema_version`` and the tool version."""
    return {"schema_version": SCHEMA_VERSION, "gpufabric_version": __version__, **payload}


def print_json(payload: dict[str, Any]) -> None:
    """Write ``payload`` (enveloped) as JSON on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(envelope(payload)), indent=2) + "\n")
    sys.stdout.flush()
