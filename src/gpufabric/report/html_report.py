"""Self-contained HTML report: inline CSS, charts as inline SVG, no JavaScript, no network.

Every value is HTML-escaped (jinja autoescape) and shown with its control characters as
escapes (a terminal escape or a bidirectional override in a host name does nothing in the
page); failures come first; a chart that cannot be drawn is replaced by a note naming why,
never aborting the report.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import markupsafe

from gpufabric.report import common, plots, series
from gpufabric.results.records import RunRecord
from gpufabric.results.stats import summarize


def render_html(run: RunRecord) -> str:
    import jinja2

    def shown(value: object) -> object:
        # Markup is ours (the inline SVG); every other string came from a run.
        if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
            return common.printable(value, keep_newlines=True)
        return value

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpufabric.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=shown,
    )
    charts = _charts(run)
    samples = series.latency_samples(run)
    summaries = [(label, summarize(values, unit=unit)) for label, unit, values in samples]
    return env.get_template("report.html.j2").render(
        run=run,
        started=common.when(run.started_at),
        finished=common.when(run.finished_at),
        duration=common.seconds(common.run_seconds(run)),
        counts=common.outcome_counts(run),
        verdicts=common.verdicts_failures_first(run),
        results=common.results_failures_first(run),
        context=common.run_context(run),
        durations=common.durations_by_test(run),
        seconds=common.seconds,
        charts=charts,
        summaries=summaries,
        nodes=common.node_sections(run),
        human=common.human,
        fingerprint_rows=common.flatten(run.fingerprint),
        num=common.num,
        pct=common.pct,
        ratio=common.ratio,
        tag=common.param_tag,
    )


def _charts(run: RunRecord) -> list[tuple[str, str]]:
    """(title, svg) per test: a sweep's busbw, a test's latency percentiles, its latency CDF.

    One chart per test keeps each legend short (21 lines under one legend was unreadable,
    issue 16); repeats are combined into a median line and a min-max band.
    """
    expected: dict[str, list[tuple[str, float]]] = {}
    for v in run.verdicts:
        if v.metric == "busbw_gbps" and v.expected is not None and v.expected > 0:
            name = v.test.split("[", 1)[0]
            label = f"expected {v.expected:.4g} GB/s" + (f" ({v.source.split(':', 1)[0]})" if v.source else "")
            if (label, v.expected) not in expected.get(name, []):
                expected.setdefault(name, []).append((label, v.expected))
    charts: list[tuple[str, str]] = []

    def add(title: str, draw: Callable[[], str]) -> None:
        try:
            charts.append((title, markupsafe.Markup(draw())))
        # A chart is an illustration of data the tables already show: whatever breaks in the
        # plotting library (a label it cannot lay out, a font) must not cost the report.
        except Exception as exc:
            why = markupsafe.escape(common.printable(f"{type(exc).__name__}: {exc}")[:300])
            charts.append((title, markupsafe.Markup(f'<p class="meta">chart not drawn: {why}</p>')))

    for test, bands in series.sweep_bands(run).items():
        add(f"{test} busbw vs message size", partial(plots.sweep_chart, test, bands, expected.get(test, ())))
    for test, bands in series.percentile_bands(run).items():
        add(f"{test} latency percentiles", partial(plots.percentile_band_chart, test, bands))
    for test, curves in series.pooled_samples(run).items():
        add(f"{test} latency CDF", partial(plots.cdf_chart, curves, title=f"{test}: latency CDF (repeats pooled)"))
    return charts
