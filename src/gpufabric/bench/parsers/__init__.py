"""Pure parsers of tool output: ``parse_<tool>(text, *, source="") -> list[Parsed]``.

Each parser turns the text a tool printed (or a file it wrote) into metrics with units
in their names, and never runs anything. Malformed text raises
:class:`~gpufabric.errors.ParseError` quoting the offending text; a run the tool itself
reports as failed (iperf3's ``"error"`` key with exit status 0, sockperf's "No messages
were received", nccl-tests' ``#wrong`` or out-of-bounds FAILED) parses fine and sets
``Parsed.error``, so the caller can record a failed result with whatever was measured.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

from gpufabric.bench.parsers.common import (
    ANSI_RE,
    ANY,
    COUNT,
    Each,
    Items,
    Number,
    Obj,
    OneOf,
    Parsed,
    Scalar,
    Text,
    check_json,
    collector_paused,
    finite,
    higher,
    load_json,
    lower,
    strip_ansi,
)
from gpufabric.errors import ParseError
from gpufabric.results.records import Metric, MetricRows, Status, TestResult

__all__ = [
    "ANSI_RE",
    "ANY",
    "COUNT",
    "Each",
    "Items",
    "Number",
    "Obj",
    "OneOf",
    "Parsed",
    "Scalar",
    "TOOLS",
    "Text",
    "check_json",
    "collector_paused",
    "detect_tool",
    "finite",
    "higher",
    "impossible",
    "load_json",
    "lower",
    "parser_for",
    "strip_ansi",
    "to_result",
]


def parser_for(tool: str) -> Callable[..., list[Parsed]]:
    """The parser of ``tool`` (fio, iperf3, sockperf, perftest, nccl-tests)."""
    from gpufabric.bench.parsers import fio, iperf3, nccl_tests, perftest, sockperf

    table: dict[str, Callable[..., list[Parsed]]] = {
        "fio": fio.parse_fio,
        "iperf3": iperf3.parse_iperf3,
        "sockperf": sockperf.parse_sockperf,
        "perftest": perftest.parse_perftest,
        "nccl-tests": nccl_tests.parse_nccl_tests,
    }
    try:
        return table[tool]
    except KeyError:
        raise ParseError(f"unknown tool {tool!r}; expected one of {', '.join(TOOLS)}") from None


#: The tools with a parser (the keys of :func:`parser_for`'s table).
TOOLS = ("fio", "iperf3", "sockperf", "perftest", "nccl-tests")


def detect_tool(text: str) -> str:
    """Which tool printed ``text`` (one of TOOLS), or "" when nothing identifies it.

    JSON documents are told apart by their top-level keys (fio ``"fio version"``, iperf3
    ``start``/``end``, perftest ``test_info``, nccl-tests ``out_of_bounds``); text by the
    headers each tool prints (nccl-tests ``# nThread`` or its size-table header, perftest's
    ``#bytes #iterations``, sockperf's ``sockperf:`` lines and its --full-log CSV header).
    Launcher prefixes and leading warnings do not hide them: only markers are searched.
    """
    head = strip_ansi(text[:1_000_000])
    if '"fio version"' in head and '"jobs"' in head:
        return "fio"
    if '"out_of_bounds"' in head and '"results"' in head:
        return "nccl-tests"
    if '"test_info"' in head and '"results"' in head:
        return "perftest"
    if (
        re.search(r'"start"\s*:', head)
        and re.search(r'"end"\s*:', head)
        and ('"intervals"' in head or '"error"' in head)
    ):
        return "iperf3"
    if '"error"' in head and "iperf" in head.lower():
        return "iperf3"
    if re.search(r"#\s*nThread \d+ nGpus \d+", head) or re.search(r"#\s+size\s+count\s+type", head):
        return "nccl-tests"
    if re.search(r"#bytes\s+#iterations", head):
        return "perftest"
    if "sockperf" in head.lower():
        return "sockperf"
    return ""


def impossible(metrics: Sequence[Metric]) -> str:
    """Every metric gpufabric records is a non-negative quantity (times, rates, counts):
    a negative or non-finite value cannot be a measurement, whatever the tool."""
    # a MetricRows' value column: the very floats its metrics hold (no attribute read per metric)
    values = metrics.columns[1] if type(metrics) is MetricRows else [m.value for m in metrics]
    if not values or (math.isfinite(sum(values)) and min(values) >= 0):
        return ""  # all finite (NaN/inf propagate through the sum) and >= 0, checked at C speed
    bad = [f"{m.name}={m.value:g}" for m in metrics if not math.isfinite(m.value) or m.value < 0]
    return f"impossible values {', '.join(bad[:5])}" if bad else ""


def to_result(
    parsed: Parsed,
    *,
    name: str,
    host: str,
    failure: str = "",
    argv: tuple[str, ...] = (),
    started_at: float = 0.0,
    duration_s: float = 0.0,
    raw_output: str = "",
    params: Mapping[str, str] | None = None,
) -> TestResult:
    """The one conversion from a parsed tool output to a TestResult, for the suite and ingest.

    Failed when the tool reported failure (``Parsed.error``), when the caller saw it fail
    (``failure``: a non-zero exit), or when its values cannot be true (``Parsed.invalid``,
    ``impossible``): such a result is marked ``invalid`` and never ok, wherever it came from.
    Partial (``Parsed.partial``: a posted table cut after its last row) when what it has is
    sound but incomplete.
    """
    invalid = "; ".join(x for x in (parsed.invalid, impossible(parsed.metrics)) if x)
    reason = "; ".join(x for x in (parsed.error, failure, f"invalid data: {invalid}" if invalid else "") if x)
    return TestResult(
        name=name,
        tool=parsed.tool,
        host=host,
        status=Status.failed if reason else Status.partial if parsed.partial else Status.ok,
        metrics=parsed.metrics,
        reason=reason or parsed.partial,
        argv=argv,
        started_at=started_at,
        duration_s=duration_s,
        raw_output=raw_output,
        params={**(params or {}), **parsed.params(), **({"invalid": invalid} if invalid else {})},
    )
