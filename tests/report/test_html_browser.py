"""Open the HTML report in headless Chromium: no console errors, charts laid out, screenshot kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.report import render
from gpufabric.results.store import Store
from tests.report import webdriver
from tests.results.factories import make_run

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.skipif(not webdriver.available(), reason="chromium/chromedriver not installed"),
    pytest.mark.slow,
]

# Every chart: its <svg> laid out with a non-zero box, drawn <path>s with geometry, and the
# legend's box beside the axes' box (never over it), all in page pixels.
_CHARTS_JS = """
const rect = el => { const r = el.getBoundingClientRect(); return {l: r.left, r: r.right, t: r.top, b: r.bottom}; };
return Array.from(document.querySelectorAll('figure.chart svg')).map(svg => {
  const box = svg.getBoundingClientRect();
  const paths = Array.from(svg.querySelectorAll('path')).filter(p => p.getTotalLength() > 0);
  const legend = svg.querySelector('g[id$="legend_1"]');
  const axes = svg.querySelector('g[id$="axes_1"] > g[id$="patch_2"]');
  const texts = Array.from(svg.querySelectorAll('text'));
  return {label: svg.parentElement.getAttribute('aria-label'), width: box.width, height: box.height,
          right: box.right, paths: paths.length, texts: texts.length,
          legend: legend ? rect(legend) : null, axes: axes ? rect(axes) : null,
          min_font_px: Math.min(...texts.map(t => t.getBoundingClientRect().height).filter(h => h > 0)),
          legend_text: legend ? legend.textContent : ''};
});
"""


def _report_run(store):
    """A run with repeats (3 sweeps, 3 latency repeats), an SLO from the plan's prediction on busbw,
    and a collective probe result with a straggler on node2."""
    import json

    from gpufabric.results.records import Direction, Metric, Outcome, Status, TestResult, Verdict
    from tests.results.factories import fio_result, latency_result, nccl_results

    results = [r for peak in (170.0, 180.0, 185.0) for r in nccl_results(peak=peak)]
    results += [latency_result(median_us=m, seed=i) for i, m in enumerate((11000.0, 11600.0, 12100.0))]
    results += [fio_result(), fio_result()]
    results.append(
        TestResult(
            name="torch.all_reduce",
            tool="torch",
            host="cluster",
            status=Status.ok,
            params={
                "op": "all_reduce",
                "size_bytes": "1048576",
                "rank_time_p50_us": json.dumps({"0": 100.0, "1": 102.0, "2": 250.0}),
                "rank_hosts": json.dumps({"0": "node1", "1": "node1", "2": "node2"}),
                "stragglers": "[2]",
            },
            metrics=(Metric(name="time_p50_us", value=101.0, unit="us", direction=Direction.lower),),
        )
    )
    verdicts = [
        Verdict(
            test="nccl.all_reduce",
            metric="busbw_gbps",
            host="node1",
            outcome=Outcome.passed,
            measured=179.0,
            expected=175.0,
            direction=Direction.higher,
            margin=0.02,
            unit="GB/s",
            source="plan p.json candidate c1: predict_collective all_reduce 128 MiB, ring",
        )
    ]
    return store.get_run(make_run(store, results, verdicts=verdicts))


def test_html_report_renders_in_chromium(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run = _report_run(store)
    page = tmp_path / "report.html"
    page.write_text(render(run, "html"), encoding="utf-8")
    # nothing that could be fetched: only XML namespace names may look like URLs
    assert "http" not in page.read_text().replace("http://www.w3.org/", "")

    with webdriver.Browser(tmp_path / "profile") as browser:
        browser.get(page.as_uri())
        charts = browser.execute(_CHARTS_JS)
        viewport = browser.execute("return document.documentElement.clientWidth;")
        rows = browser.execute("return document.querySelectorAll('#verdicts tr').length;")
        nodes = browser.execute(
            "return Array.from(document.querySelectorAll('section.node h3')).map(h => h.textContent);"
        )
        body = browser.execute("return document.body.innerText;")
        resources = browser.execute("return performance.getEntriesByType('resource').map(e => e.name);")
        errors = [e for e in browser.console() if e["level"] in ("SEVERE", "WARNING")]
        browser.screenshot(ARTIFACTS / "report.png")

    assert errors == []
    assert resources == []  # self-contained: the page loaded nothing else
    labels = {c["label"] for c in charts}
    assert {
        "nccl.all_reduce busbw vs message size",
        "sockperf.data latency CDF",
        "fio.checkpoint_write latency percentiles",
    } <= labels
    assert viewport <= 1280
    for chart in charts:
        assert chart["width"] > 600 and chart["height"] > 150, chart
        assert chart["right"] <= viewport, chart  # no horizontal scrolling at 1280 px
        assert chart["paths"] >= 3 and chart["texts"] >= 3, chart
        assert chart["min_font_px"] >= 8, chart  # legend and tick text stay readable
        if chart["legend"]:  # outside the plot: left edge at or beyond the axes' right edge
            assert chart["legend"]["l"] >= chart["axes"]["r"] - 1, chart
    sweep = next(c for c in charts if c["label"] == "nccl.all_reduce busbw vs message size")
    assert "median of 3" in sweep["legend_text"] and "min-max" in sweep["legend_text"]
    assert "expected 175 GB/s" in sweep["legend_text"]  # the plan's prediction, overlaid
    assert rows == 1 + len(run.verdicts)
    # one section per node; the straggler is listed under the node it ran on
    assert nodes[0].startswith("cluster") or "node1" in " ".join(nodes)
    assert any(n.startswith("node2") and "1 straggler" in n for n in nodes)
    assert "11.6 ms" in body and "e+0" not in body  # human units, no 1.16e+04 us
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_console_errors_are_caught(tmp_path):
    """The console check itself can fail: a page with a script error is reported."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('boom'); undefinedFn();</script></body></html>")
    with webdriver.Browser(tmp_path / "profile") as browser:
        browser.get(page.as_uri())
        messages = " ".join(e["message"] for e in browser.console() if e["level"] == "SEVERE")
    assert "boom" in messages and "undefinedFn" in messages
