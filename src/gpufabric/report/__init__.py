"""Renderers of a stored run: HTML (self-contained, with charts), Markdown, JSON, JUnit XML."""

from __future__ import annotations

import json
from pathlib import Path

from gpufabric.boundary import read_capped
from gpufabric.errors import InputError
from gpufabric.results.codec import export_from_dict, export_to_dict
from gpufabric.results.records import RunRecord

FORMATS = ("html", "json", "junit", "markdown")


def render_json(run: RunRecord) -> str:
    """``{"schema_version", "gpufabric_version", "run": {...}}`` with results, samples, verdicts and
    fingerprint; ``compare`` reads it back as a baseline."""
    return json.dumps(export_to_dict(run), indent=2) + "\n"


#: Bytes read from a ``report --format json`` baseline: samples make reports of big runs tens
#: of MB; 1 GiB (as ``ingest``) leaves room while /dev/zero cannot exhaust memory.
MAX_REPORT_BYTES = 1 << 30


def load_json_report(path: str) -> RunRecord:
    """A run from a file written by ``gpufabric report --format json``."""
    try:
        data = json.loads(read_capped(path, MAX_REPORT_BYTES, "JSON report").decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from exc
    return export_from_dict(data, source=path)


def render(run: RunRecord, fmt: str) -> str:
    """``run`` rendered in one of FORMATS."""
    if fmt == "json":
        return render_json(run)
    if fmt == "markdown":
        from gpufabric.report.markdown import render_markdown

        return render_markdown(run)
    if fmt == "junit":
        from gpufabric.report.junit import render_junit

        return render_junit(run)
    if fmt == "html":
        from gpufabric.report.html_report import render_html

        return render_html(run)
    raise ValueError(f"unknown report format {fmt!r}")


def render_stored(ref: str, fmt: str, *, db: str | None) -> tuple[RunRecord, str]:
    """(the run ``ref`` names in the store, rendered in ``fmt``): ``gpufabric report``'s service.

    Raises:
        InputError: ``text`` (a report is a document; markdown is the plain-text one), an unknown run.
    """
    from gpufabric.results.store import Store

    if fmt == "text":
        raise InputError(
            "--format text: a report is a document; use markdown (the default, plain text to read),"
            " html, json or junit (`gpufabric runs` lists runs as text)"
        )
    with Store.open(db, create=False) as store:
        record = store.get_run(ref)
    return record, render(record, fmt)


def write_report(out: Path, text: str) -> None:
    """Write a rendered report to ``out`` (its directory made); InputError when it cannot be written."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write report: {exc.strerror}") from exc
