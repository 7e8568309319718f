"""``gpufabric report``: render a stored run as HTML, JSON, JUnit XML or Markdown."""

from __future__ import annotations

import enum
import sys
from pathlib import Path

import typer

from gpufabric.cli.options import db_option


class ReportKind(enum.StrEnum):
    html = "html"
    json = "json"
    junit = "junit"
    markdown = "markdown"
    text = "text"  # refused with a pointer to markdown: a report is a document, not a terminal table


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    run: str = typer.Argument("latest", help="Run id, 'latest' or 'latest~N'."),
    db: str | None = db_option(),
    fmt: ReportKind = typer.Option(
        ReportKind.markdown,
        "--format",
        help="Output format: markdown (default: readable as text), html (self-contained, with charts), json or junit.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Write to FILE instead of stdout."),
) -> int:
    """Render one run: verdicts, results, charts (busbw vs size, latency CDFs, fio percentiles), fingerprint."""
    from gpufabric.report import render_stored, write_report

    record, text = render_stored(run, fmt.value, db=db)
    if out is None:
        sys.stdout.write(text)
        return 0
    write_report(out, text)
    typer.echo(f"wrote {out} ({fmt.value}, run {record.id})")
    return 0
