"""Conversion of gpufabric's records to JSON types (shared by the CLI, the store and reports)."""

from __future__ import annotations

import dataclasses
import enum
import math
from pathlib import Path
from typing import Any


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
