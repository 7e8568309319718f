"""``gpufabric init``: write an annotated example spec."""

from __future__ import annotations

from enum import StrEnum
from importlib import resources
from pathlib import Path

import typer

from gpufabric.cli.options import SPEC_MODELS
from gpufabric.errors import InputError

#: The pydantic model modules this command builds at start-up (cli/app.py ALL_MODEL_MODULES).
MODELS = SPEC_MODELS


def register(app: typer.Typer) -> None:
    app.command("init")(init)


class InitKind(StrEnum):
    training = "training"
    inference = "inference"


#: Packaged example spec per workload kind.
_EXAMPLES = {"training": "example.yaml", "inference": "example_inference.yaml"}


def init(
    path: Path = typer.Argument(Path("gpufabric.yaml"), help="Where to write the spec."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    kind: InitKind = typer.Option(
        InitKind.training, "--kind", help="training (a 1,024-GPU 70B run) or inference (70B serving on 64 GPUs)."
    ),
) -> int:
    """Write an annotated example spec to PATH, every field explained."""
    from gpufabric.spec import Spec, parse_yaml, validate_model
    from gpufabric.spec.annotate import annotated_yaml
    from gpufabric.spec.inference import InferenceSpec

    if path.exists() and not force:
        raise InputError(f"{path} exists; pass --force to overwrite it")
    name = _EXAMPLES[kind.value]
    example = resources.files("gpufabric.spec").joinpath(name).read_text(encoding="utf-8")
    spec = validate_model(parse_yaml(example, name), InferenceSpec if kind is InitKind.inference else Spec)
    header = (
        "# gpufabric spec. Every field is documented in the comment above it.\n"
        "# Validate and plan with: gpufabric plan " + str(path) + "\n"
    )
    path.write_text(header + annotated_yaml(spec) + "\n", encoding="utf-8")
    typer.echo(f"wrote {path}")
    return 0
