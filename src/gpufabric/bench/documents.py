"""The JSON documents of the bench commands: a result's row (the envelope is results.document's).

Kept free of heavy imports: the CLI reads these names while it builds its commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpufabric.results.records import TestResult


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
