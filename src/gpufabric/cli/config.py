"""``gpufabric config``: render the configuration bundle of a design, per node role."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpufabric.cli.options import format_option
from gpufabric.cli.output import Format


def register(app: typer.Typer) -> None:
    app.command("config")(config)


def config(
    spec_path: Path = typer.Argument(..., metavar="SPEC", help="The spec YAML file."),
    plan: Path | None = typer.Option(
        None, "--plan", help="A `gpufabric plan --format json` file; its recommended design is configured."
    ),
    design_text: str | None = typer.Option(
        None,
        "--design",
        metavar="fabric=ID,storage=ID",
        help="Configure this design instead of the planner's recommendation.",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Directory to write the bundle into (required unless --dry-run)."
    ),
    seed: str | None = typer.Option(None, "--seed", help="Make secrets reproducible from this seed (tests only)."),
    key_file: Path | None = typer.Option(None, "--key-file", help="Make secrets reproducible from this file's bytes."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Render and list the files without writing them."),
    catalog_files: list[Path] = typer.Option(
        [], "--catalog", help="Catalog override file (repeatable; later wins), as for `gpufabric plan`."
    ),
    fmt: Format = format_option(),
) -> int:
    """Render nftables, NVMe-oF, OpenSM/RoCE, NCCL, tuned/sysctl and launch artefacts for every node role."""
    from gpufabric.configure.outcome import ConfigRequest, run
    from gpufabric.plan import make_plan

    request = ConfigRequest(
        spec_path=spec_path,
        plan=plan,
        design_text=design_text,
        out=out,
        seed=seed,
        key_file=key_file,
        dry_run=dry_run,
        catalog_files=tuple(catalog_files),
    )
    outcome = run(request, warn=lambda line: typer.echo(line, err=True), recommend=make_plan)
    if outcome.failure:
        typer.echo(f"gpufabric: failed: {outcome.failure}", err=True)
    elif fmt is Format.json:
        sys.stdout.write(outcome.to_json())
        sys.stdout.flush()
    else:
        for line, err in outcome.text_lines():
            typer.echo(line, err=err)
    return outcome.exit_code
