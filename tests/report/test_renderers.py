from __future__ import annotations

import xml.etree.ElementTree as ET

from gpufabric.report import render
from gpufabric.results.records import Direction, Outcome, RunRecord, Status, TestResult, Verdict


def _run(results=(), verdicts=()):
    return RunRecord(
        id=5,
        kind="ingest",
        status="failed",
        started_at=1.7e9,
        finished_at=None,
        argv=("a|b",),
        fingerprint={"host": "<b>h</b>", "nics": [{"name": "eth0"}]},
        results=tuple(results),
        verdicts=tuple(verdicts),
    )


NOISY = Verdict(
    test="sockperf.data",
    metric="lat_p50_us",
    host="h",
    outcome=Outcome.noisy,
    measured=12.3,
    expected=10.0,
    direction=Direction.lower,
    margin=-0.02,
    reason="too noisy to judge",
    warnings=("the standard deviation (8 us) is 65% of the mean (12.3 us)",),
    unit="us",
)
TIMEOUT = TestResult(
    name="iperf3.data",
    tool="iperf3",
    host="h",
    status=Status.timeout,
    reason="killed at 30 s",
    raw_output="partial <output> & \x1b[31mmore\x1b[0m",
)


def test_junit_maps_noisy_to_skipped_and_tool_failure_to_error():
    root = ET.fromstring(render(_run([TIMEOUT], [NOISY]), "junit").split("\n", 1)[1])
    suite = root.find("testsuite")
    cases = {c.get("classname"): c for c in suite.findall("testcase")}
    assert cases["sockperf.data"].find("skipped").get("message").startswith("noisy: too noisy")
    error = cases["iperf3.data"].find("error")
    # control characters (ANSI colour codes) are not allowed in XML 1.0 and are dropped
    assert error.get("type") == "timeout" and error.text == "partial <output> & [31mmore[0m"
    assert (suite.get("errors"), suite.get("skipped"), suite.get("failures")) == ("1", "1", "0")


def test_html_escapes_data_and_marks_interrupted_runs():
    evil = TestResult(name="<script>alert(1)</script>", tool="fio", host="h", status=Status.ok)
    html = render(_run([evil, TIMEOUT], [NOISY]), "html")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;h&lt;/b&gt;" in html  # fingerprint values escaped too
    assert "never finished (interrupted)" in html
    assert "<svg" not in html  # nothing to plot: no empty charts
    assert 'class="noisy"' in html and "65% of the mean" in html


def test_markdown_escapes_pipes_and_lists_warnings():
    md = render(_run([TIMEOUT], [NOISY]), "markdown")
    assert "```\na|b\n```" in md  # argv in a fenced block: verbatim, inert
    assert "| **noisy** |" in md and "warning: the standard deviation" in md
    assert "| iperf3.data | iperf3 | h | timeout: killed at 30 s | - |  |" in md
    assert "**1** test timeout" in md


def _node_run(result):
    from gpufabric.results.records import RunRecord

    return RunRecord(
        id=1,
        kind="bench.collectives",
        status="passed",
        started_at=0.0,
        finished_at=1.0,
        argv=(),
        fingerprint={},
        results=(result,),
    )


def test_stragglers_reach_their_node_from_typed_and_from_legacy_per_rank_data():
    """A run recorded now (RankStats) and one recorded before it (JSON in params) render alike."""
    from gpufabric.report.common import node_sections
    from gpufabric.results.ranks import to_params
    from gpufabric.results.records import RankStat, RankStats, Status, TestResult

    stats = RankStats(
        quantity="time_us",
        stragglers=(2,),
        ranks=(
            RankStat(rank=0, host="node1", p50=100.0),
            RankStat(rank=1, host="node1", p50=102.0),
            RankStat(rank=2, host="node2", p50=250.0),
        ),
    )
    typed = TestResult(
        name="torch.all_reduce",
        tool="torch",
        host="cluster",
        status=Status.ok,
        params={"size_bytes": "1024"},
        ranks=stats,
    )
    legacy = TestResult(
        name="torch.all_reduce",
        tool="torch",
        host="cluster",
        status=Status.ok,
        params={"size_bytes": "1024", **to_params(stats)},
    )
    for result in (typed, legacy):
        sections = {s.host: s for s in node_sections(_node_run(result))}
        assert set(sections) == {"node1", "node2"} and sections["node1"].stragglers == ()
        (slow,) = sections["node2"].stragglers
        assert (slow.rank, slow.p50_us, slow.median_us) == (2, 250.0, 102.0)
