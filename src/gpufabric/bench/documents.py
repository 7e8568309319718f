"""The JSON documents of the bench commands: the versioned envelope and a result's row.

Kept free of heavy imports: the CLI reads these names while it builds its commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpufabric import SCHEMA_VERSION, __version__

if TYPE_CHECKING:
    from gpufabric.results.records import TestResult


def envelope(payload: dict[str, Any]) -> dict[str, Any]:
    """``schema_version`` and the tool version ahead of a document's own keys (as every command prints)."""
    return {"schema_version": SCHEMA_VERSION, "gpufabric_version": __version__, **payload}


def headline(result: TestResult) -> str:
    """The first metric of a result, for one-line listings ("" when it has none)."""
    if not result.metrics:
        return ""
    m = result.metrics[0]
    return f"{m.name}={m.value:.4g} {m.unit}"


def result_row(result: TestResult, **extra: Any) -> dict[str, Any]:
    """A result's JSON entry in ``bench`` and ``ingest`` reports; ``extra`` adds keys."""
    return {
        "name": result.name,
        **extra,
        "status": result.status.value,
        "reason": result.reason,
        "warnings": result.params.get("quality_warnings", ""),
        "metrics": {m.name: m.value for m in result.metrics},
    }
