"""``gpufabric init``: write an annotated example spec."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import typer

from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    app.command("init")(init)


def init(
    path: Path = typer.Argument(Path("gpufabric.yaml"), help="Where to write the spec."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> int:
    """Write an annotated example spec (a 1,024-GPU 70B run) to PATH, every field explained."""
    from gpufabric.spec import Spec, parse_yaml, validate_model
    from gpufabric.spec.annotate import annotated_yaml

    if path.exists() and not force:
        raise InputError(f"{path} exists; pass --force to overwrite it")
    example = resources.files("gpufabric.spec").joinpath("example.yaml").read_text(encoding="utf-8")
    spec = validate_model(parse_yaml(example, "example.yaml"), Spec)
    header = (
        "# gpufabric spec. Every field is documented in the comment above it.\n"
        "# Validate and plan with: gpufabric plan " + str(path) + "\n"
    )
    path.write_text(header + annotated_yaml(spec) + "\n", encoding="utf-8")
    typer.echo(f"wrote {path}")
    return 0
