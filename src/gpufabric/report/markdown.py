"""Markdown report: the verdict table and results, for a terminal, a PR comment or a wiki.

Every value from a run (test, host and metric names, reasons, the spec name, argv) comes
from tool output or files and is escaped for Markdown: HTML-escaped (GitHub renders raw
``<img onerror>``), Markdown punctuation backslash-escaped (no links, emphasis or code
spans), control characters shown as escapes (no terminal sequences, no line break to start
a heading), and argv goes into a fenced block longer than any backtick run in it.
Failures come first.
"""

from __future__ import annotations

import html
import re

from gpufabric.report import common
from gpufabric.results.records import RunRecord

#: Markdown punctuation that starts emphasis, a code span, a table cell or an escape (an
#: intraword underscore is no emphasis in GitHub Markdown, and names are full of them).
_MD_PUNCT = re.compile(r"([\\`*|~])")


def _cell(text: object) -> str:
    """``text`` as inert inline Markdown: one line, no markup of its own."""
    text = _MD_PUNCT.sub(r"\\\1", html.escape(common.printable(str(text)), quote=False))
    # "[x](url)" is the only inline link a cell could start ("<url>" is escaped above, reference
    # definitions need a line of their own): breaking "](" keeps "[size_bytes=1024]" readable.
    return text.replace("](", "]\\(")


def _fenced(text: str) -> list[str]:
    """``text`` in a fenced code block that nothing inside can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text, fence]


def render_markdown(run: RunRecord) -> str:
    lines = [f"# gpufabric run {run.id}: {run.status}", ""]
    meta = [f"kind {_cell(run.kind)}", f"started {common.when(run.started_at)}"]
    if run.spec_name:
        meta.insert(1, f"spec {_cell(run.spec_name)}")
    if run.finished_at:
        meta.append(f"finished {common.when(run.finished_at)} ({common.seconds(common.run_seconds(run))})")
    else:
        meta.append("never finished (interrupted)")
    meta.append(f"gpufabric {_cell(run.gpufabric_version)}")
    lines += [" · ".join(meta), ""]
    context = common.run_context(run)
    if context:
        lines += [" · ".join(f"{label} {_cell(text)}" for label, text in context), ""]
    lines += [*_fenced(" ".join(common.printable(a) for a in run.argv)), ""]
    counts = common.outcome_counts(run)
    if counts:
        lines += [", ".join(f"**{n}** {_cell(outcome)}" for outcome, n in counts.items()), ""]
    lines += ["## Verdicts", ""]
    durations = common.durations_by_test(run)
    if run.verdicts:
        lines += [
            "| test | host | metric | outcome | measured | expected | margin | repeats | duration | reason |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for v in common.verdicts_failures_first(run):
            reason = v.reason + "".join(f"; warning: {w}" for w in v.warnings)
            repeats = f"{v.passed_repeats}/{v.total_repeats}" if v.total_repeats else ""
            cells = [
                _cell(v.test),
                _cell(v.host),
                _cell(v.metric),
                f"**{_cell(v.outcome.value)}**",
                _cell(f"{common.num(v.measured)} {v.unit}".strip()),
                common.num(v.expected),
                common.pct(v.margin),
                repeats,
                common.seconds(durations.get((v.test, v.host))),
                _cell(reason),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append("No SLOs were applied to this run.")
    lines += [
        "",
        "## Results",
        "",
        "| test | tool | host | status | duration | metrics |",
        "|---|---|---|---|---:|---|",
    ]
    for r in common.results_failures_first(run):
        metrics = ", ".join(f"{m.name}={common.num(m.value)} {m.unit}".strip() for m in r.metrics[:8])
        if len(r.metrics) > 8:
            metrics += f", ... ({len(r.metrics) - 8} more)"
        status = r.status.value + (f": {r.reason}" if r.reason else "")
        name = f"{r.name} {common.param_tag(r)}".strip()
        cells = [_cell(name), _cell(r.tool), _cell(r.host), _cell(status), common.seconds(r.duration_s), _cell(metrics)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
