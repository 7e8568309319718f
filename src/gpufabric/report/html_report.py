"""Self-contained HTML report: inline CSS, charts as inline SVG, no JavaScript, no network."""

from __future__ import annotations

from gpufabric.report import common, plots, series
from gpufabric.results.records import RunRecord
from gpufabric.results.stats import summarize


def render_html(run: RunRecord) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpufabric.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    charts = _charts(run)
    samples = series.latency_samples(run)
    summaries = [(label, summarize(values, unit=unit)) for label, unit, values in samples]
    return env.get_template("report.html.j2").render(
        run=run,
        started=common.when(run.started_at),
        finished=common.when(run.finished_at),
        duration=common.duration(run),
        counts=common.outcome_counts(run),
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
    charts = []
    for test, bands in series.sweep_bands(run).items():
        charts.append((f"{test} busbw vs message size", plots.sweep_chart(test, bands, expected.get(test, ()))))
    for test, bands in series.percentile_bands(run).items():
        charts.append((f"{test} latency percentiles", plots.percentile_band_chart(test, bands)))
    for test, curves in series.pooled_samples(run).items():
        charts.append((f"{test} latency CDF", plots.cdf_chart(curves, title=f"{test}: latency CDF (repeats pooled)")))
    return charts
