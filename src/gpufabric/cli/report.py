"""``gpufabric report``: render a stored run as HTML, JSON, JUnit XML or Markdown."""

from __future__ import annotations

import enum
import sys
from pathlib import Path

import typer

from gpufabric.cli.options import db_option
from gpufabric.errors import InputError


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
    from gpufabric.report import render
    from gpufabric.results.store import Store

    if fmt is ReportKind.text:
        raise InputError(
            "--format text: a report is a document; use markdown (the default, plain text to read),"
            " html, json or junit (`gpufabric runs` lists runs as text)"
        )
    with Store.open(db, create=False) as store:
        record = store.get_run(run)
    kind = fmt.value
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
