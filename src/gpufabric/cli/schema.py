"""``gpufabric schema``: the JSON Schema of the spec, for editors."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import typer

from gpufabric.cli.options import SPEC_MODELS


class SchemaKind(StrEnum):
    all = "all"
    training = "training"
    inference = "inference"


#: The pydantic model modules this command builds at start-up (cli/app.py ALL_MODEL_MODULES).
MODELS = SPEC_MODELS


def register(app: typer.Typer) -> None:
    app.command("schema")(schema)


def schema(
    kind: SchemaKind = typer.Option(
        SchemaKind.all, "--kind", help="Which spec: training, inference (workload.kind), or all (either)."
    ),
) -> int:
    """Print the JSON Schema of the spec (point your editor's YAML plugin at it)."""
    typer.echo(json.dumps(spec_schema(kind.value), indent=2))
    return 0


def spec_schema(kind: str) -> dict[str, Any]:
    """The schema of a training spec, an inference spec, or either (``all``: anyOf on
    ``workload.kind``, training being the default kind)."""
    from pydantic import TypeAdapter

    from gpufabric.spec.inference import InferenceSpec
    from gpufabric.spec.models import Spec

    if kind == "training":
        document = Spec.model_json_schema()
    elif kind == "inference":
        document = InferenceSpec.model_json_schema()
    else:
        document = TypeAdapter(Spec | InferenceSpec).json_schema()
        document["title"] = "gpufabric spec (workload.kind: training or inference)"
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = f"https://gpufabric.dev/schema/spec-v1{'' if kind == 'training' else '-' + kind}.json"
    return document
