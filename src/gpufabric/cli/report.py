"""``gpufabric report``: render a stored run as HTML, JSON, JUnit XML or Markdown."""

from __future__ import annotations

import enum
import sys
from pathlib import Path

import typer

from gpufabric.cli.runs import DB_HELP
from gpufabric.errors import InputError


class ReportKind(enum.StrEnum):
    html = "html"
    json = "json"
    junit = "junit"
    markdown = "markdown"
    text = "text"  # an alias of markdown, for the house rule that every reporting command takes --format text


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    run: str = typer.Argument("latest", help="Run id, 'latest' or 'latest~N'."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    fmt: ReportKind = typer.Option(ReportKind.markdown, "--format", help="html (self-contained, with charts), json, junit or markdown."),
    out: Path | None = typer.Option(None, "--out", help="Write to FILE instead of stdout."),
) -> int:
    """Render one run: verdicts, results, charts (busbw vs size, latency CDFs, fio percentiles), fingerprint."""
    from gpufabric.report import render
    from gpufabric.results.store import Store

    with Store.open(db, create=False) as store:
        record = store.get_run(run)
    kind = "markdown" if fmt is ReportKind.text else fmt.value
    text = render(record, kind)
    if out is None:
        sys.stdout.write(text)
        return 0
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write report: {exc.strerror}") from exc
    typer.echo(f"wrote {out} ({kind}, run {record.id})")
    return 0
