"""``gpufabric import FILE``: runs exported by ``gpufabric export`` (or ``report --format json``) into a store."""

from __future__ import annotations

from pathlib import Path

import typer

from gpufabric.cli.options import db_option, format_option
from gpufabric.cli.output import Format, show


def register(app: typer.Typer) -> None:
    app.command("import")(import_runs)


def import_runs(
    file: Path = typer.Argument(
        ..., help="JSON lines from `gpufabric export`, or one `report --format json` document."
    ),
    db: str | None = db_option(),
    fmt: Format = format_option(),
) -> int:
    """Store every run of FILE as it was (status, times, results, samples, verdicts, provenance), each in one transaction."""
    from gpufabric.results.transfer import import_file

    outcome = import_file(file, db=db)
    return show(outcome, fmt)
