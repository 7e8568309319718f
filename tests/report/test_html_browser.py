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

# Every chart: its <svg> laid out with a non-zero box, and drawn <path>s with geometry.
_CHARTS_JS = """
return Array.from(document.querySelectorAll('figure.chart svg')).map(svg => {
  const box = svg.getBoundingClientRect();
  const paths = Array.from(svg.querySelectorAll('path')).filter(p => p.getTotalLength() > 0);
  return {label: svg.parentElement.getAttribute('aria-label'), width: box.width, height: box.height,
          paths: paths.length, texts: svg.querySelectorAll('text').length};
});
"""


def test_html_report_renders_in_chromium(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run = store.get_run(make_run(store))
    page = tmp_path / "report.html"
    page.write_text(render(run, "html"), encoding="utf-8")
    # nothing that could be fetched: only XML namespace names may look like URLs
    assert "http" not in page.read_text().replace("http://www.w3.org/", "")

    with webdriver.Browser(tmp_path / "profile") as browser:
        browser.get(page.as_uri())
        charts = browser.execute(_CHARTS_JS)
        rows = browser.execute("return document.querySelectorAll('#verdicts tr').length;")
        failed = browser.execute("return document.querySelectorAll('#verdicts tr.failed').length;")
        resources = browser.execute("return performance.getEntriesByType('resource').map(e => e.name);")
        errors = [e for e in browser.console() if e["level"] in ("SEVERE", "WARNING")]
        browser.screenshot(ARTIFACTS / "report.png")

    assert errors == []
    assert resources == []  # self-contained: the page loaded nothing else
    labels = {c["label"] for c in charts}
    assert {"busbw vs message size", "latency CDF", "fio completion latency percentiles"} <= labels
    for chart in charts:
        assert chart["width"] > 300 and chart["height"] > 150, chart
        assert chart["paths"] >= 3 and chart["texts"] >= 3, chart
    assert rows == 1 + len(run.verdicts) and failed == 1
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_console_errors_are_caught(tmp_path):
    """The console check itself can fail: a page with a script error is reported."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('boom'); undefinedFn();</script></body></html>")
    with webdriver.Browser(tmp_path / "profile") as browser:
        browser.get(page.as_uri())
        messages = " ".join(e["message"] for e in browser.console() if e["level"] == "SEVERE")
    assert "boom" in messages and "undefinedFn" in messages
