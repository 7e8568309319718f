"""``gpufabric import FILE``: runs exported by ``gpufabric export`` (or ``report --format json``) into a store."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from gpufabric.cli.options import db_option, format_option
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError

#: Largest export file read (a run with raw samples is a few MB; a week of a fleet's CI a few hundred).
MAX_IMPORT_BYTES = 1 << 30


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
    from gpufabric.boundary import read_capped
    from gpufabric.results.codec import export_from_dict
    from gpufabric.results.store import Store

    text = read_capped(file, MAX_IMPORT_BYTES, "export").decode("utf-8")
    stripped = text.strip()
    if not stripped:
        raise InputError(f"{file}: empty: nothing to import")
    docs = []
    try:
        if stripped.startswith("{") and "\n{" not in stripped:
            docs.append((1, json.loads(stripped)))  # one document (report --format json, pretty-printed)
        else:
            docs += [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    except json.JSONDecodeError as exc:
        raise InputError(f"{file}: line {exc.lineno}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{file}: JSON nested too deeply to be a gpufabric export") from None
    records = [export_from_dict(doc, source=f"{file}:{n}") for n, doc in docs]
    with Store.open(db) as store:
        pairs = [(r.id, store.import_run(r)) for r in records]
        where = str(store.path)
    if fmt is Format.json:
        print_json({"db": where, "imported": [{"from_id": a, "id": b} for a, b in pairs]})
        return 0
    out = stdout_console()
    for a, b in pairs:
        out.print(f"run {a} -> run {b}", markup=False)
    out.print(f"imported {len(pairs)} run(s) into {where}", markup=False)
    return 0
