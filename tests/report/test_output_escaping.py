"""Each renderer escapes for its format (issue 24, Deliver 4) and reports read failures first (issue 23)."""

from __future__ import annotations

import dataclasses
import re
import time

from gpufabric.report import plots, render
from gpufabric.results.records import RunRecord, TestResult
from gpufabric.results.verdicts import evaluate
from tests.results.factories import SAMPLE_SLOS, fio_result, latency_result, nccl_results, sample_run_results


def _run(results, verdicts=None, **kw) -> RunRecord:
    results = list(results)
    return RunRecord(
        id=3,
        kind="bench",
        status="failed",
        started_at=1.7e9,
        finished_at=1.7e9 + 60,
        argv=kw.pop("argv", ("gpufabric", "bench")),
        fingerprint={},
        results=tuple(results),
        verdicts=tuple(evaluate(results, SAMPLE_SLOS) if verdicts is None else verdicts),
        **kw,
    )


def _renamed(result: TestResult, *, host: str | None = None, name: str | None = None) -> TestResult:
    return dataclasses.replace(result, host=host or result.host, name=name or result.name)


def test_failures_come_first_in_markdown_and_html(monkeypatch):
    from gpufabric.report import html_report

    monkeypatch.setattr(html_report, "_charts", lambda run: [])  # the order of the tables is the point here
    run = _run(sample_run_results())
    failed = next(v for v in run.verdicts if v.outcome.value == "failed")
    assert run.verdicts.index(failed) > 0  # recorded after a pass: the renderers must reorder
    md = render(run, "markdown")
    first_row = md.split("## Verdicts", 1)[1].splitlines()[4]
    assert "**failed**" in first_row and failed.test in first_row
    html = render(run, "html")
    verdicts = html.split('id="verdicts"', 1)[1]
    assert verdicts.index('class="failed"') < verdicts.index('class="passed"')
    results = html.split('id="results"', 1)[1]
    assert results.index('class="skipped"') < results.index('class="ok"')


def test_math_text_in_a_host_or_job_name_does_not_break_the_html_report():
    results = [_renamed(r, host="ckpt_$RANK_$SIZE") for r in (*nccl_results(), latency_result())]
    results.append(_renamed(fio_result(), name="fio.ckpt_$RANK_$SIZE"))
    html = render(_run(results, verdicts=()), "html")
    assert html.count("<svg") >= 2 and "chart not drawn" not in html
    assert "ckpt_$RANK_$SIZE" in html


def test_a_20000_character_host_name_costs_little_and_is_cut_in_charts():
    base = [*nccl_results(), latency_result()]
    t0 = time.perf_counter()
    small = render(_run(base, verdicts=()), "html")
    t_small = time.perf_counter() - t0
    huge = "h" * 20_000
    t0 = time.perf_counter()
    big = render(_run([_renamed(r, host=huge) for r in base], verdicts=()), "html")
    t_big = time.perf_counter() - t0
    assert len(big) < 2 * len(small) + 40 * 20_000  # the tables name the host in full, the charts do not
    assert t_big < 3 * t_small + 1.0
    svg = big[big.index("<svg") : big.index("</svg>")]
    assert huge not in svg
    labels = re.findall(r"<text[^>]*>([^<]*h{50,}[^<]*)</text>", svg)
    assert labels and all(len(t) == plots.LABEL_CHARS and t.endswith("...") for t in labels)


def test_a_failing_chart_leaves_a_note_and_the_report(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("no font for \x1b[31m")

    monkeypatch.setattr(plots, "sweep_chart", broken)
    html = render(_run(nccl_results(), verdicts=()), "html")
    assert "chart not drawn: ValueError: no font for \\x1b[31m" in html and 'id="results"' in html


def test_markup_and_control_characters_are_inert_in_markdown_and_html():
    evil_host = "n1\n# Forged heading\n<script>alert(1)</script><img src=x onerror=alert(2)>\x1b]0;t\x07"
    argv = ("gpufabric", "bench", "--host", evil_host, "x```y")
    run = _run([_renamed(latency_result(), host=evil_host)], verdicts=(), argv=argv)
    md = render(run, "markdown")
    assert "\x1b" not in md and "\x07" not in md
    assert not any(line.startswith("# Forged") for line in md.splitlines())
    lines = md.splitlines()
    opened = lines.index("````")  # longer than the ``` inside argv: argv cannot close its block
    closed = lines.index("````", opened + 1)
    assert closed == opened + 2  # argv is one line inside its fence (its newlines shown as \x0a)
    outside = "\n".join(lines[:opened] + lines[closed + 1 :])
    assert "<script>" not in outside and "<img" not in outside and "&lt;script&gt;" in outside
    html = render(run, "html")
    assert "<script>" not in html and "<img" not in html and "\x1b" not in html and "\x07" not in html
    assert "&lt;script&gt;" in html and "\\x1b]0;t\\x07" in html


def test_context_of_the_run_is_rendered_when_recorded():
    run = _run([latency_result()], verdicts=(), meta={"cluster": "lab-a", "hosts": ["n1", "n2"], "job_id": "k8s:job/x"})
    md = render(run, "markdown")
    assert "cluster lab-a · hosts n1, n2 · job id k8s:job/x" in md
    html = render(run, "html")
    assert 'id="context"' in html and "<b>lab-a</b>" in html and "k8s:job/x" in html
    # per-test durations: the factory's sockperf run took 2 s; none recorded shows '-', not '0 ns'
    assert "| 2 s |" in md or "| 2.0 s |" in md or "| 2.00 s |" in md
