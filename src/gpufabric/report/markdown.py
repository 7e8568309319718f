"""Markdown report: the verdict table and results, for a terminal, a PR comment or a wiki."""

from __future__ import annotations

from gpufabric.report import common
from gpufabric.results.records import RunRecord


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(run: RunRecord) -> str:
    lines = [f"# gpufabric run {run.id}: {run.status}", ""]
    meta = [f"kind {run.kind}", f"started {common.when(run.started_at)}"]
    if run.spec_name:
        meta.insert(1, f"spec {run.spec_name}")
    meta.append(
        f"finished {common.when(run.finished_at)} ({common.duration(run)})"
        if run.finished_at
        else "never finished (interrupted)"
    )
    meta.append(f"gpufabric {run.gpufabric_version}")
    lines += [" · ".join(meta), "", f"`{' '.join(run.argv)}`", ""]
    counts = common.outcome_counts(run)
    if counts:
        lines += [", ".join(f"**{n}** {outcome}" for outcome, n in counts.items()), ""]
    lines += ["## Verdicts", ""]
    if run.verdicts:
        lines += [
            "| test | host | metric | outcome | measured | expected | margin | repeats | reason |",
            "|---|---|---|---|---:|---:|---:|---:|---|",
        ]
        for v in run.verdicts:
            reason = v.reason + "".join(f"; warning: {w}" for w in v.warnings)
            repeats = f"{v.passed_repeats}/{v.total_repeats}" if v.total_repeats else ""
            lines.append(
                "| "
                + " | ".join(
                    _cell(c)
                    for c in (
                        v.test,
                        v.host,
                        v.metric,
                        f"**{v.outcome.value}**",
                        f"{common.num(v.measured)} {v.unit}".strip(),
                        common.num(v.expected),
                        common.pct(v.margin),
                        repeats,
                        reason,
                    )
                )
                + " |"
            )
    else:
        lines.append("No SLOs were applied to this run.")
    lines += ["", "## Results", "", "| test | tool | host | status | metrics |", "|---|---|---|---|---|"]
    for r in run.results:
        metrics = ", ".join(f"{m.name}={common.num(m.value)} {m.unit}".strip() for m in r.metrics[:8])
        if len(r.metrics) > 8:
            metrics += f", ... ({len(r.metrics) - 8} more)"
        status = r.status.value + (f": {r.reason}" if r.reason else "")
        name = f"{r.name} {common.param_tag(r)}".strip()
        lines.append("| " + " | ".join(_cell(c) for c in (name, r.tool, r.host, status, metrics)) + " |")
    return "\n".join(lines) + "\n"
