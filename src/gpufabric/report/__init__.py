"""Renderers of a stored run: HTML (self-contained, with charts), Markdown, JSON, JUnit XML."""

from __future__ import annotations

import json

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
