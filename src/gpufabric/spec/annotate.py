"""Render a spec as YAML with every field's docstring as a comment (``gpufabric init``)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel


def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def annotated_yaml(model: BaseModel, indent: int = 0) -> str:
    """YAML for ``model`` where each field is preceded by its description as a comment.

    A field left unset (None) is written commented out, so the file shows where it goes
    without setting it.
    """
    lines: list[str] = []
    pad = "  " * indent
    for name, field in type(model).model_fields.items():
        if field.exclude:  # read-only fields the loader fills (workload.notes)
            continue
        value = getattr(model, name)
        if field.description:
            lines.append(f"{pad}# {field.description}")
        if value is None:
            lines.append(f"{pad}# {name}:")
        elif isinstance(value, BaseModel):
            lines.append(f"{pad}{name}:")
            lines.append(annotated_yaml(value, indent + 1))
        elif isinstance(value, list):
            lines.append(
                f"{pad}{name}: {_scalar([v.model_dump(mode='json') if isinstance(v, BaseModel) else v for v in value])}"
            )
        else:
            lines.append(f"{pad}{name}: {_scalar(value)}")
    return "\n".join(lines)
