"""``gpufabric export RUN...``: runs as JSON lines (for ``import`` into another store) or OpenMetrics."""

from __future__ import annotations

import enum
import sys
from pathlib import Path

import typer

from gpufabric.cli.options import db_option


class ExportFormat(enum.StrEnum):
    jsonl = "jsonl"
    openmetrics = "openmetrics"


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    runs: list[str] = typer.Argument(None, metavar="RUN...", help="Run ids, 'latest' or 'latest~N' (default: latest)."),
    fmt: ExportFormat = typer.Option(
        ExportFormat.jsonl,
        "--format",
        help="Output format: jsonl (one run export per line, what `gpufabric import` reads) or openmetrics (Prometheus text).",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Write to FILE instead of stdout (for the textfile collector: a *.prom file)."
    ),
    db: str | None = db_option(),
) -> int:
    """Export runs with their results, samples, verdicts and provenance; the payload alone goes to stdout."""
    from gpufabric.results.transfer import export_runs

    outcome = export_runs(runs or ["latest"], fmt=fmt.value, db=db)
    if out is None:
        sys.stdout.write(outcome.text)
    else:
        outcome.write(out)
    typer.echo(outcome.summary, err=True)
    return outcome.exit_code
