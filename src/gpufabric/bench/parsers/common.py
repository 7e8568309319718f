"""What every tool parser shares: the parsed record, metric helpers, strict JSON loading
and the shape check of JSON documents (the parsers import this module, never the package,
so that the package's registry, :func:`gpufabric.bench.parsers.parser_for`, can import
them without a cycle)."""

from __future__ import annotations

import functools
import gc
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from gpufabric.boundary import MAX_JSON_DEPTH, json_too_deep
from gpufabric.errors import ParseError
from gpufabric.results.records import Direction, Metric

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
