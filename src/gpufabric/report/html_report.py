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
    charts: list[tuple[str, str]] = []
    busbw = series.busbw_series(run)
    if busbw:
        charts.append(("busbw vs message size", plots.busbw_chart(busbw)))
    samples = series.latency_samples(run)
    if samples:
        charts.append(("latency CDF", plots.cdf_chart(samples)))
    fio = series.percentile_series(run, tool="fio")
    if fio:
        charts.append(("fio completion latency percentiles", plots.percentile_chart(fio)))
    others = [s for s in series.percentile_series(run) if s not in fio]
    if others:
        charts.append(("latency percentiles", plots.percentile_chart(others, title="Latency percentiles")))
    summaries = [(label, summarize(values, unit=unit)) for label, unit, values in samples]
    return env.get_template("report.html.j2").render(
        run=run,
        started=common.when(run.started_at),
        finished=common.when(run.finished_at),
        duration=common.duration(run),
        counts=common.outcome_counts(run),
        charts=charts,
        summaries=summaries,
        fingerprint_rows=common.flatten(run.fingerprint),
        num=common.num,
        pct=common.pct,
        ratio=common.ratio,
        tag=common.param_tag,
    )
