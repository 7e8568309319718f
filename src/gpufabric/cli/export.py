"""``gpufabric export RUN...``: runs as JSON lines (for ``import`` into another store) or OpenMetrics."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path

import typer

from gpufabric.cli.options import db_option
from gpufabric.errors import InputError


class ExportFormat(enum.StrEnum):
    jsonl = "jsonl"
    openmetrics = "openmetrics"


#: Runs one export may name (each is loaded whole, with its samples).
MAX_RUNS = 10_000


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
    from gpufabric.results.codec import export_to_dict
    from gpufabric.results.openmetrics import to_openmetrics
    from gpufabric.results.store import Store

    refs = runs or ["latest"]
    if len(refs) > MAX_RUNS:
        raise InputError(f"RUN...: {len(refs)} runs; export at most {MAX_RUNS:,} at a time")
    with Store.open(db, create=False) as store:
        ids = list(dict.fromkeys(store.resolve(ref) for ref in refs))
        records = [store.get_run(i) for i in ids]
    if fmt is ExportFormat.openmetrics:
        text = to_openmetrics(records)
    else:
        text = "".join(json.dumps(export_to_dict(r), separators=(",", ":"), allow_nan=True) + "\n" for r in records)
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            # Written beside and renamed: the textfile collector never reads half a file.
            tmp = out.with_name(f".{out.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(out)
        except OSError as exc:
            raise InputError(f"{out}: cannot write the export: {exc.strerror}") from exc
    typer.echo(f"exported {len(records)} run(s) ({fmt.value}): {', '.join(map(str, ids))}", err=True)
    return 0
