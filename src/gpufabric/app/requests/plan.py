"""The request of ``gpufabric plan``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpufabric.exec.knobs import knob


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """``gpufabric plan SPEC``: every candidate design of a spec, one recommended."""

    spec_file: Path = knob(..., None, "Spec YAML (see `gpufabric init`).")
    top: int | None = knob(None, "--top", "Show only the best N candidates (default: 12 in text, all in JSON).", min=1)
    catalog_files: list[Path] = knob([], "--catalog", "Catalog override file (repeatable; later wins).")
