"""Security policy section of the spec: planes, roles and allowed flows.

Placeholder schema; the config/audit work replaces it with the full model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class SecurityPolicy(BaseModel):
    """Planes, node roles and allowed flows (intent)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    planes: list[dict[str, Any]] = []
    """Networks: management, control, compute-data, storage."""
    roles: list[dict[str, Any]] = []
    """Node roles."""
    flows: list[dict[str, Any]] = []
    """Allowed flows."""
