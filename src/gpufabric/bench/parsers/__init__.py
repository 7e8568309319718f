"""Pure parsers of tool output: ``parse_<tool>(text, *, source="") -> list[Parsed]``.

Each parser turns the text a tool printed (or a file it wrote) into metrics with units
in their names, and never runs anything. Malformed text raises
:class:`~gpufabric.errors.ParseError` quoting the offending text; a run the tool itself
reports as failed (iperf3's ``"error"`` key with exit status 0, sockperf's "No messages
were received", nccl-tests' ``#wrong`` or out-of-bounds FAILED) parses fine and sets
``Parsed.error``, so the caller can record a failed result with whatever was measured.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from gpufabric.boundary import MAX_JSON_DEPTH, json_too_deep
from gpufabric.errors import ParseError
from gpufabric.results.records import Direction, Metric, Status, TestResult

#: CSI escape sequences (colours, cursor movement) that sockperf and others print.
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

P = ParamSpec("P")
R = TypeVar("R")


def collector_paused(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function`` with Python's cyclic garbage collector paused (a decorator).

    Parsing a 100 MB nccl-tests log builds ~1.4 million small objects (rows, metrics,
    results), none of them in reference cycles (reference counting frees the temporaries);
    the collector still walked the growing heap again and again: about half of the parse
    (docs/performance.md). Pausing only delays collection; the previous state is restored.
    """

    @functools.wraps(function)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


@dataclass(frozen=True, slots=True, kw_only=True)
class Parsed:
    """What one tool output says about one test case (one fio job, one nccl-tests binary)."""

    tool: str
    case: str  # fio job name, iperf3 "tcp", nccl op, ...
    metrics: tuple[Metric, ...]
    error: str = ""  # the tool reported failure (not a parse problem)
    warnings: tuple[str, ...] = ()  # quality warnings: values not to be trusted
    invalid: str = ""  # values that cannot be true (negative, NaN, size != count)
    partial: str = ""  # why the output is incomplete but what it has is sound (a table without its footer)
    info: dict[str, str] = field(default_factory=dict)  # tool version, engine, host, ...

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    def params(self) -> dict[str, str]:
        """What a TestResult records of this output besides metrics: ``tool_<info key>``
        and the quality warnings, joined."""
        params = {f"tool_{k}": v for k, v in self.info.items()}
        if self.warnings:
            params["quality_warnings"] = "; ".join(self.warnings)
        if self.invalid:
            params["invalid"] = self.invalid
        return params


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text  # the find runs at memchr speed


def lower(name: str, value: float, unit: str, samples: tuple[float, ...] = ()) -> Metric:
    return Metric(name=name, value=float(value), unit=unit, direction=Direction.lower, samples=samples)


def higher(name: str, value: float, unit: str, samples: tuple[float, ...] = ()) -> Metric:
    return Metric(name=name, value=float(value), unit=unit, direction=Direction.higher, samples=samples)


def _reject_constant(token: str) -> float:
    raise ValueError(f"non-finite number {token}")


def load_json(text: str, *, source: str, tool: str, trailing_ok: str = "") -> Any:
    """Strict JSON: NaN/Infinity are errors (fio and iperf3 have emitted them), text
    before the document (tools print warnings to stdout) is skipped up to the first brace
    that starts a line, concatenated documents yield the last, trailing text is an error."""
    if match := ANSI_RE.search(text):
        raise ParseError(
            f"not {tool} JSON output: it contains terminal colour codes (text output?)",
            source=source,
            excerpt=text[max(0, match.start() - 40) : match.start() + 40],
        )
    if text.lstrip().startswith("{"):
        body = text.lstrip()
    elif "\n{" in text:
        body = text[text.index("\n{") + 1 :]
    else:
        raise ParseError(f"no {tool} JSON document found (empty or text output)", source=source, excerpt=text[:120])
    if json_too_deep(body):
        raise ParseError(f"{tool} JSON nests deeper than {MAX_JSON_DEPTH} levels (not {tool} output)", source=source)
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    try:
        doc, end = decoder.raw_decode(body)
        rest = body[end:].lstrip()
        # fio --status-interval concatenates complete documents; the last is the final one.
        while rest.startswith("{"):
            doc, end = decoder.raw_decode(rest)
            rest = rest[end:].lstrip()
    except RecursionError:  # never closed and deep: the C decoder recursed before it saw the end
        raise ParseError(
            f"{tool} JSON nests deeper than {MAX_JSON_DEPTH} levels (not {tool} output)", source=source
        ) from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError):
            # parse_constant errors carry no position; locate the token ourselves.
            hit = re.search(r"-?\b(NaN|nan|Infinity|inf)\b", body)
            pos = hit.start() if hit else 0
            what = str(exc)
        else:
            pos = exc.pos
            # More opening than closing braces: the document was cut off (killed tool, partial copy).
            truncated = body.count("{") + body.count("[") > body.count("}") + body.count("]")
            what = "truncated JSON" if truncated else f"invalid JSON ({exc.msg})"
            if exc.lineno:
                what += f" at line {exc.lineno}"
        raise ParseError(f"{what} in {tool} output", source=source, excerpt=body[max(0, pos - 60) : pos + 60]) from None
    if rest and trailing_ok and re.match(trailing_ok, rest):
        rest = ""
    if rest:
        # iperf3 has printed error text after its JSON (esnet/iperf#1143): not a clean run.
        raise ParseError(f"unexpected text after the {tool} JSON document", source=source, excerpt=rest[:120])
    return doc


def finite(value: Any, *, what: str, source: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ParseError(f"{what} is not a number", source=source, excerpt=repr(value)) from None
    if not math.isfinite(number):
        raise ParseError(f"{what} is not finite", source=source, excerpt=repr(value))
    return number


# ---------------------------------------------------------------- JSON shapes
# Each JSON parser checks the document against a shape of the fields it reads before it
# reads them, so a value of the wrong type (a string for a number, a list for an object,
# null) is a ParseError naming the field (exit 2), never a TypeError deep in the parser.
# Only the fields a parser reads are described; a field absent from the document is the
# parser's business (it says which one is missing).


@dataclass(frozen=True, slots=True)
class Number:
    """An int or float (JSON true/false is not a number), at least ``min``; an int when ``integer``."""

    min: float = -math.inf
    nullable: bool = False
    integer: bool = False


@dataclass(frozen=True, slots=True)
class Scalar:
    """A string, number or bool: the parser only ``str()``s it."""

    nullable: bool = True


@dataclass(frozen=True, slots=True)
class Text:
    """A string matching ``pattern`` (e.g. nccl-tests' "N/A" where a count was not checked)."""

    pattern: re.Pattern[str]
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Each:
    """An object with any keys (matching ``key`` when given), every value of shape ``value``."""

    value: Any
    key: re.Pattern[str] | None = None
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Obj:
    """An object whose listed keys, when present, have the given shapes; ``required`` keys must be present."""

    fields: dict[str, Any]
    nullable: bool = False
    required: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Items:
    """A list whose every element has shape ``item``."""

    item: Any
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class OneOf:
    """Any of ``shapes`` (the first is named when none matches)."""

    shapes: tuple[Any, ...]
    nullable: bool = False


#: Anything at all (the parser does not look inside it, or only truth-tests it).
ANY = None
COUNT = Number(min=0, integer=True)  # I/Os, bytes, histogram counts: tools write them as integers
_MISSING = object()
_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "a bool", type(None): "null"}


def _expected(shape: Any) -> str:
    if isinstance(shape, Number):
        kind = "an integer" if shape.integer else "a number"
        return kind if shape.min == -math.inf else f"{kind} >= {shape.min:g}"
    if isinstance(shape, (Obj, Each)):
        return "an object"
    if isinstance(shape, Items):
        return "a list"
    if isinstance(shape, OneOf):
        return " or ".join(_expected(s) for s in shape.shapes)
    if isinstance(shape, Text):
        return f"a string matching {shape.pattern.pattern}"
    return "a string or number"


def _problem(value: Any, shape: Any, path: str) -> tuple[str, str, Any] | None:
    """(field path, what was expected, offending value) for the first mismatch, or None."""
    if shape is ANY or (value is None and shape.nullable):
        return None
    if isinstance(shape, Number):
        ok = (
            isinstance(value, int if shape.integer else (int, float))
            and not isinstance(value, bool)
            and value >= shape.min
        )
    elif isinstance(shape, Scalar):
        ok = isinstance(value, (str, int, float, bool))
    elif isinstance(shape, Text):
        ok = isinstance(value, str) and shape.pattern.fullmatch(value) is not None
    elif isinstance(shape, OneOf):
        ok = any(_problem(value, s, path) is None for s in shape.shapes)
    elif isinstance(shape, Items):
        if not isinstance(value, list):
            return path, _expected(shape), value
        for index, item in enumerate(value):
            if hit := _problem(item, shape.item, f"{path}[{index}]"):
                return hit
        return None
    else:
        if not isinstance(value, dict):
            return path, _expected(shape), value
        if isinstance(shape, Obj):
            for key in shape.required:
                if key not in value:
                    return f"{path}.{key}" if path else key, "", _MISSING
            for key, sub in shape.fields.items():
                if key in value and (hit := _problem(value[key], sub, f"{path}.{key}" if path else key)):
                    return hit
            return None
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if shape.key is not None and not shape.key.fullmatch(key):
                return where, f"a key matching {shape.key.pattern}", key
            if hit := _problem(item, shape.value, where):
                return hit
        return None
    return None if ok else (path, _expected(shape), value)


def check_json(doc: Any, shape: Any, *, tool: str, source: str) -> None:
    """ParseError naming the first field of ``doc`` whose value does not have its shape."""
    if hit := _problem(doc, shape, ""):
        path, expected, value = hit
        if value is _MISSING:
            raise ParseError(f"{tool} JSON field {path} is missing", source=source)
        got = _TYPE_NAMES.get(type(value), "a number")
        raise ParseError(
            f"{tool} JSON field {path or '(document)'}: expected {expected}, got {got}",
            source=source,
            excerpt=repr(value)[:80],
        )


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
    values = [m.value for m in metrics]
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
