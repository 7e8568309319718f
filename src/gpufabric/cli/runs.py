"""``gpufabric runs``: list the run history kept in the results store."""

from __future__ import annotations

import typer

from gpufabric.cli.options import db_option, format_option
from gpufabric.cli.output import Format, show
from gpufabric.exec.knobs import check_max


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)


def runs(
    db: str | None = db_option(),
    limit: int = typer.Option(50, "--limit", help="Show at most this many runs, newest first."),
    fmt: Format = format_option(),
) -> int:
    """List stored runs, newest first: id, when, kind, status, results and verdict counts.

    A run still shown as 'running' was interrupted (Ctrl-C, kill -9, a crashed node) or is still going.
    """
    from gpufabric.report.history import RunsRequest, run

    request = RunsRequest(db=db, limit=limit)
    if limit >= 1:
        check_max("--limit", limit, 1_000_000)
    outcome = run(request)
    return show(outcome, fmt)
