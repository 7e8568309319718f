"""``gpufabric schema``: the JSON Schema of the spec, for editors."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    app.command("schema")(schema)


def schema() -> int:
    """Print the JSON Schema of the spec (point your editor's YAML plugin at it)."""
    from gpufabric.spec.models import Spec

    document = Spec.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "https://gpufabric.dev/schema/spec-v1.json"
    typer.echo(json.dumps(document, indent=2))
    return 0
