"""Conversion of gpufabric's records to JSON types (shared by the CLI, the store and reports)."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
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
        kind = value.dtype.kind if getattr(value, "ndim", 0) else ""
        if kind and kind in "iub":
            return value.tolist()  # integers and booleans: already JSON types, no walk per element
        if kind == "f":
            import numpy as np

            if np.isfinite(value).all():
                return value.tolist()  # finite floats too; only non-finite ones need the walk (-> None)
        return to_jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def schema_version(data: Mapping[str, Any], *, current: int, what: str, source: str) -> int:
    """The ``schema_version`` of a JSON document gpufabric wrote (0 when absent: written before
    the key existed), checked to be one this code reads.

    Every owned file format (saved plan, bundle manifest, run export) calls this first
    and then upgrades an older document to ``current`` (pyperf ``_bench.py`` style).

    Raises:
        InputError: the version is not a whole number, or is newer than ``current`` (exit 2).
    """
    from gpufabric.errors import InputError

    version = data.get("schema_version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InputError(f"{source}: {what} schema_version {version!r} is not a whole number >= 0")
    if version > current:
        raise InputError(
            f"{source}: {what} schema_version {version} is newer than this gpufabric reads"
            f" (up to {current}); upgrade gpufabric or write the file again with this one"
        )
    return version
