"""Moving runs between stores: ``gpufabric export`` and ``gpufabric import`` as application
services. Each outcome owns what the command prints (the export's payload, the import's
versioned JSON) and the CLI only declares the options and writes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.errors import InputError
from gpufabric.results import document
from gpufabric.results.records import RunRecord

#: Runs one export may name (each is loaded whole, with its samples).
MAX_RUNS = 10_000
#: Largest export file read (a run with raw samples is a few MB; a week of a fleet's CI a few hundred).
MAX_IMPORT_BYTES = 1 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportOutcome:
    """The exported runs rendered as ``fmt`` (jsonl: one run export per line; openmetrics)."""

    fmt: str
    ids: tuple[int, ...]
    text: str
    exit_code: int = 0

    @property
    def summary(self) -> str:
        """The line for stderr (the payload alone goes to stdout)."""
        return f"exported {len(self.ids)} run(s) ({self.fmt}): {', '.join(map(str, self.ids))}"

    def write(self, out: Path) -> None:
        """Write the payload to ``out`` beside it and rename: the textfile collector never
        reads half a file. InputError when it cannot be written."""
        try:
            tmp = out.with_name(f".{out.name}.tmp")
            tmp.write_text(self.text, encoding="utf-8")
            tmp.replace(out)
        except OSError as exc:
            raise InputError(f"{out}: cannot write the export: {exc.strerror}") from exc


def export_runs(refs: Sequence[str], *, fmt: str, db: str | None) -> ExportOutcome:
    """The runs ``refs`` name (each once, in order), with their results, samples and verdicts."""
    from gpufabric.results.codec import export_to_dict
    from gpufabric.results.openmetrics import to_openmetrics
    from gpufabric.results.store import Store

    if len(refs) > MAX_RUNS:
        raise InputError(f"RUN...: {len(refs)} runs; export at most {MAX_RUNS:,} at a time")
    with Store.open(db, create=False) as store:
        ids = list(dict.fromkeys(store.resolve(ref) for ref in refs))
        records = [store.get_run(i) for i in ids]
    if fmt == "openmetrics":
        text = to_openmetrics(records)
    else:
        text = "".join(json.dumps(export_to_dict(r), separators=(",", ":"), allow_nan=True) + "\n" for r in records)
    return ExportOutcome(fmt=fmt, ids=tuple(ids), text=text)


def read_exports(file: Path) -> list[RunRecord]:
    """The runs of an export file (JSON lines) or of one ``report --format json`` document."""
    from gpufabric.boundary import read_capped
    from gpufabric.results.codec import export_from_dict

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
    return [export_from_dict(doc, source=f"{file}:{n}") for n, doc in docs]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOutcome:
    """(id in the export, id here) of each imported run, and the store."""

    db: str
    pairs: tuple[tuple[int, int], ...]
    exit_code: int = 0

    def payload(self) -> dict[str, Any]:
        return {"db": self.db, "imported": [{"from_id": a, "id": b} for a, b in self.pairs]}

    def to_json(self) -> str:
        """The versioned JSON document (``schema_version`` first)."""
        return document.dumps(self.payload())

    def text_lines(self) -> list[str]:
        return [f"run {a} -> run {b}" for a, b in self.pairs] + [f"imported {len(self.pairs)} run(s) into {self.db}"]


def import_file(file: Path, *, db: str | None) -> ImportOutcome:
    """Store every run of ``file`` as it was, each in one transaction (all read before any is stored)."""
    from gpufabric.results.store import Store

    records = read_exports(file)
    with Store.open(db) as store:
        pairs = tuple((r.id, store.import_run(r)) for r in records)
        where = str(store.path)
    return ImportOutcome(db=where, pairs=pairs)
