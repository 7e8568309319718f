"""``gpufabric runs``: list the run history kept in the results store."""

from __future__ import annotations

import datetime as dt

import typer

from gpufabric.cli.limits import check_max
from gpufabric.cli.options import db_option, format_option
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M") if ts else "-"


def runs(
    db: str | None = db_option(),
    limit: int = typer.Option(50, "--limit", help="Show at most this many runs, newest first."),
    fmt: Format = format_option(),
) -> int:
    """List stored runs, newest first: id, when, kind, status, results and verdict counts.

    A run still shown as 'running' was interrupted (Ctrl-C, kill -9, a crashed node) or is still going.
    """
    from gpufabric.report.common import printable, run_context, run_seconds, seconds
    from gpufabric.results.store import Store

    if limit < 1:
        raise InputError(f"--limit must be >= 1, got {limit}")
    check_max("--limit", limit, 1_000_000)
    with Store.open(db, create=False) as store:
        records = store.list_runs(limit=limit)
        path = store.path
    if fmt is Format.json:
        print_json(
            {
                "db": str(path),
                "runs": [
                    {
                        "id": r.id,
                        "kind": r.kind,
                        "status": r.status,
                        "started_at": r.started_at,
                        "finished_at": r.finished_at,
                        "argv": list(r.argv),
                        "spec_name": r.spec_name,
                        "host": r.fingerprint.get("host"),
                        "gpufabric_version": r.gpufabric_version,
                        "result_count": r.result_count,
                        "verdict_counts": r.verdict_counts,
                        "duration_s": run_seconds(r),
                        **{label.replace(" ", "_"): text for label, text in run_context(r)},
                    }
                    for r in records
                ],
            }
        )
        return 0
    console = stdout_console()
    if not records:
        console.print(f"no runs in {path}", markup=False)
        return 0
    console.print(
        f"{'id':>5}  {'started (UTC)':16}  {'kind':8} {'status':11} {'took':>8} {'tests':>5}  {'verdicts':28} "
        "spec / command [cluster, job]",
        markup=False,
    )
    for r in records:
        verdicts = " ".join(f"{n} {k}" for k, n in sorted(r.verdict_counts.items())) or "-"
        what = r.spec_name or " ".join(r.argv)[:60]
        where = ", ".join(f"{label} {text}"[:60] for label, text in run_context(r) if label != "hosts")
        line = (
            f"{r.id:>5}  {_when(r.started_at):16}  {r.kind:8} {r.status:11} {seconds(run_seconds(r)):>8} "
            f"{r.result_count:>5}  {verdicts:28} {what}" + (f" [{where}]" if where else "")
        )
        console.print(printable(line), markup=False)
    return 0
