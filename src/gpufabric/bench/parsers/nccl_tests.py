"""nccl-tests parser: the ``-J`` JSON file and the text tables, as users really have them.

Formats (reference/bench-tools.md section 1, NVIDIA/nccl-tests@a0b82b2 src/util.cu and
src/common.cu): each size row carries ``size count type [redop [root]]`` then, for
out-of-place and in-place, ``time algbw busbw #wrong`` (``root`` appeared in 2.x, older
builds have neither or only ``redop``; ``#wrong`` is ``N/A`` when ``-c 0`` skips the
check and was ``error`` before 2.0). GB/s is 1e9 bytes/s. The footer prints ``# Out of
bounds values : N OK|FAILED`` and ``# Avg bus bandwidth : X``. The header names the
devices, one line per rank: ``#  Rank  3 Group  0 Pid 1234 on HOST device  3 [0x18]
NVIDIA H100 80GB HBM3``, which gives ranks, nodes (distinct hosts), GPUs per node and
the GPU model, and ``graph: 1`` when the run timed CUDA-graph launches (``-G``).

Real logs add more: launcher prefixes on every line (see :mod:`.prefixes`), NCCL INFO
lines of other ranks between rows, several binaries or several runs of one binary in a
file (``# Collective test starting: X_perf`` or a new ``# nThread`` header starts a
run). Each run becomes one :class:`Parsed`.

Values that cannot be true (a negative time or bandwidth, NaN where nccl-tests prints a
number, a size that is not count x type size) make the run *invalid*: its metrics are
kept for inspection but ``Parsed.invalid`` says why, and ingest never stores it as ok.
Cells nccl-tests leaves empty (``N/A``) stay absent. A non-zero ``#wrong`` or
out-of-bounds FAILED is data corruption: ``Parsed.error``.

Older builds (before nccl-tests 2.13, the NCCL 2.12 era) print an ``error`` column where
``#wrong`` is now: the *maximum relative error* of the check (``2e-07``), not a count of
wrong elements (nccl-tests issues 52, 118 and 176: "only errors which are out of bounds"
count); their verdict is the out-of-bounds footer alone. A run whose table stops after
its last row (a posted log copied without the footer, a job killed after the last size)
is ``Parsed.partial``: its rows are kept, and nothing confirms the data check.

Size and count (src/common.cu ``setupArgs``): the ``size`` column is the larger of the
send and receive buffers, ``count`` the per-call element count; for all_gather,
reduce_scatter, alltoall, gather and scatter that count is per rank, so
``size = count x type size x ranks`` (src/all_gather.cu ``AllGatherGetCollByteCount``
and its siblings); for all_reduce, broadcast, reduce and sendrecv ``size = count x type
size``. The rank count comes from the device lines, or, where a log elides them, from
the sizes themselves (one integer factor for the whole table).
"""

from __future__ import annotations

import math
import operator
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NamedTuple, cast

from gpufabric.bench.parsers import common as shape  # the -J path's type check
from gpufabric.bench.parsers.common import Parsed, collector_paused, finite, load_json, lower, strip_ansi
from gpufabric.bench.parsers.prefixes import strip_all, strip_all_nl
from gpufabric.errors import ParseError
from gpufabric.results.records import Direction, Metric, MetricRows

_OOB_M = re.compile(r"^[ \t]*#[ \t]*Out of bounds values[ \t]*:[ \t]*(\d+)[ \t]+(OK|FAILED)", re.MULTILINE)
_AVG_M = re.compile(r"^[ \t]*#[ \t]*Avg bus bandwidth[ \t]*:[ \t]*(\S+)", re.MULTILINE)
#: A device line, found after its newline (see _ROW); the model is the rest of the line,
#: right-stripped by the caller (a lazy ``(.*?)[ \t]*$`` tried the end at every character).
_DEVICE_NL = re.compile(
    r"\n[ \t]*#[ \t]+Rank[ \t]+(\d+)[ \t]+(?:Group[ \t]+\d+[ \t]+)?Pid[ \t]+\d+[ \t]+on[ \t]+(\S+)[ \t]+device[ \t]+(\d+)"
    r"[ \t]+\[[^\]\n]*\][ \t]*([^\n]*)"
)
_NTHREAD_M = re.compile(r"^[ \t]*#[ \t]*nThread[ \t]+(\d+)[ \t]+nGpus[ \t]+(\d+).*$", re.MULTILINE)
_GRAPH = re.compile(r"\bgraph:\s*(\d+)")
_START = re.compile(r"#\s*Collective test starting:\s*(\w+?)_perf")
#: The nccl-tests binaries (``<name>_perf``).
_BINARIES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "alltoall",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
)
_BINARY = re.compile(r"\b(" + "|".join(_BINARIES) + ")_perf")
#: The binaries' names, longest first (_binary: the leftmost match is the longest name).
_BINARY_NAMES = tuple(sorted(_BINARIES, key=len, reverse=True))


def _binary(text: str, start: int = 0, end: int | None = None) -> str:
    r"""``_BINARY.search(text, start, end).group(1)``, "" without a match, at memchr speed: each
    "_perf" found by str.find and the names tried backwards from it. The regex tries its
    alternation at every character (60 us on a 2.8 kB run header, 1.5 us this way). The
    leftmost match ends at the first "_perf" any name fits (no name contains "_perf"), and
    there it is the longest fitting name; ``\b`` looks at the character before, as in
    the regex (which sees the whole string, also before ``start``)."""
    end = len(text) if end is None else end
    at = text.find("_perf", start, end)
    while at != -1:
        for name in _BINARY_NAMES:
            begin = at - len(name)
            if begin >= start and text.startswith(name, begin) and not (begin and _word(text[begin - 1])):
                return name
        at = text.find("_perf", at + 1, end)
    return ""


def _word(char: str) -> bool:
    r"""Whether ``char`` is a regex ``\w`` character (str patterns: Unicode word characters)."""
    return char.isalnum() or char == "_"


_VERSION = re.compile(r"#\s*nccl-tests version (\S+).*?nccl-library=(\d+)|NCCL version (\S+)")
#: Bytes per element of the nccl-tests ``-d`` types (src/common.cu ncclTypeSize).
TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "f8e4m3": 1,
    "f8e5m2": 1,
}
#: Suite op names (gpufabric's) of the nccl-tests binaries.
OP_NAMES = {"alltoall": "all_to_all", "sendrecv": "send_recv"}
#: Ops whose ``count`` column is per rank (size = count x type size x ranks).
_PER_RANK_COUNT = ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter")


class Row(NamedTuple):
    """One size row; ``None`` where nccl-tests printed ``N/A`` (a NamedTuple: a 100 MB log
    has ~350,000 of them, and tuples are the cheapest record Python builds)."""

    size: int
    elem_count: int  # not ``count``: that would shadow tuple.count
    dtype: str
    oop_time_us: float | None
    oop_algbw: float | None
    oop_busbw: float | None
    ip_time_us: float | None
    ip_algbw: float | None
    ip_busbw: float | None
    wrong: int | None


def _cell(token: str) -> float | None:
    """A measurement cell: N/A -> None; 'nan'/'-nan'/'inf' stay NaN/inf so validation sees them."""
    if token.upper() == "N/A":
        return None
    return float(token)


#: A #wrong count as nccl-tests prints it (``%6ld``-style integers); anything else in that
#: column is the older builds' maximum relative error (``2e-07``, ``0e+00``).
_COUNT = re.compile(r"\d+")


def _wrong(tokens: list[str | float | None]) -> int | None:
    """#wrong is a count, 'N/A' when not checked; the older 'error' column (a float such as
    ``2e-07``, the largest relative error) is no count at all: None (the footer judges).

    Raises:
        ValueError: a cell that is neither (not a number).
    """
    values = [str(t) for t in tokens if t is not None and str(t).upper() != "N/A"]
    if not values:
        return None
    total = 0
    counted = False
    for token in values:
        if _COUNT.fullmatch(token):
            total += int(token)
            counted = True
        elif not math.isfinite(float(token)):
            raise ValueError(token)
    return total if counted else None


#: One size row: size count type [redop [root]] then 8 cells (time algbw busbw #wrong, twice).
#: Matched from the newline before the row: a pattern that starts with a literal character
#: lets the regex engine jump from newline to newline at C-loop speed, where a MULTILINE
#: ``^`` made it try the pattern at every character (docs/performance.md). The text
#: searched therefore starts with a newline (_runs). Every character repeat is possessive
#: (``++``, ``*+``; Python 3.11): each is followed by a class it cannot overlap ([ \t] after
#: \d, \w or \S, a digit, letter or \S after [ \t], \n after [ \t]), so giving characters
#: back could never let the rest match and the matches are the same, without the engine
#: saving a backtrack point per character (~10% of the findall over a 100 MB log). The
#: optional redop and root groups still backtrack (an ``N/A`` cell starts like a redop).
_ROW = re.compile(
    r"\n[ \t]*+(\d++)[ \t]++(\d++)[ \t]++([A-Za-z]\w*+)(?:[ \t]++([A-Za-z]\w*+))?(?:[ \t]++(-?\d++))?"
    + r"[ \t]++(\S++)" * 8
    + r"[ \t]*+(?=\n|\Z)"
)


def _row(m: re.Match[str], source: str) -> Row:
    g = m.groups()
    try:  # fast path: six numbers and two zero #wrong cells, by far the common row
        if g[8] == "0" and g[12] == "0":
            return Row(
                int(g[0]),
                int(g[1]),
                g[2],
                float(g[5]),
                float(g[6]),
                float(g[7]),
                float(g[9]),
                float(g[10]),
                float(g[11]),
                0,
            )
    except ValueError:
        pass
    cells = []
    for name, token in zip(
        ("time", "algbw", "busbw", "time", "algbw", "busbw"),
        (m.group(6), m.group(7), m.group(8), m.group(10), m.group(11), m.group(12)),
        strict=True,
    ):
        try:
            cells.append(_cell(token))
        except ValueError:
            raise ParseError(
                f"nccl-tests row has a non-numeric {name}", source=source, excerpt=m.group(0)[1:]
            ) from None
    try:
        wrong = _wrong([m.group(9), m.group(13)])
    except ValueError:
        raise ParseError("nccl-tests row has a non-numeric #wrong", source=source, excerpt=m.group(0)[1:]) from None
    return Row(
        int(m.group(1)), int(m.group(2)), m.group(3), cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], wrong
    )


class _Table:
    """A run's size rows as columns (Row's fields, one list each): the 100 MB log's 340,000
    rows are converted, validated and turned into metrics column by column; the Row tuples
    are built only for the rare row-by-row paths (a column that fails a check, rows_of).

    ``numeric``: every cell of the measurement and #wrong columns is a number (no N/A), as
    _rows' column path guarantees; the checks then skip their ``None not in`` scans, which
    compare each float with None (about 3.7 million comparisons per 100 MB log)."""

    __slots__ = ("cols", "_rows", "numeric")

    def __init__(self, cols: list[list[Any]], *, numeric: bool = False) -> None:
        self.cols = cols
        self._rows: list[Row] | None = None
        self.numeric = numeric

    @classmethod
    def of_rows(cls, rows: list[Row]) -> _Table:
        table = cls([list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in Row._fields])
        table._rows = rows
        return table

    @property
    def rows(self) -> list[Row]:
        if self._rows is None:
            self._rows = list(map(Row, *self.cols))
        return self._rows

    def __len__(self) -> int:
        return len(self.cols[0])


@dataclass
class _Run:
    op: str = ""
    table: _Table = field(default_factory=lambda: _Table.of_rows([]))
    devices: list[tuple[int, str, str]] = field(default_factory=list)  # (rank, host, gpu model)
    graph: str = ""
    gpus_per_process: int = 0  # nThread x nGpus of the header (0: no header)
    oob: tuple[int, str] | None = None
    avg: str | None = None
    version: str = ""
    relative_error: bool = False  # the header names an 'error' column (max relative error), not '#wrong'


#: The column header of the builds whose check column is a maximum relative error.
_ERROR_HEADER = re.compile(r"busbw[ \t]+error\b")


def _segments(text: str) -> list[tuple[int, int]]:
    """Where runs start and end in ``text``: cut at a "Collective test starting" or nThread
    header line, and after an "Avg bus bandwidth" footer line (it stays with its run).
    Literal searches (str.find) rather than a MULTILINE regex: they skip megabytes of rows
    at memchr speed. Offsets, not slices: the regexes search ``text`` between them."""
    cuts = [0]
    for needle, after in (("Collective test starting", False), ("nThread", False), ("Avg bus bandwidth", True)):
        i = text.find(needle)
        while i != -1:
            start = text.rfind("\n", 0, i) + 1
            if text[start:i].strip() == "#":
                if after:
                    end = text.find("\n", i)
                    cuts.append(len(text) if end == -1 else end + 1)
                else:
                    cuts.append(start)
            i = text.find(needle, i + len(needle))
    cuts = sorted(set(cuts)) + [len(text)]
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


class _Ints(dict[str, int]):
    """``int(token)`` of the size and count cells, converted once per distinct token: the runs
    of a log sweep the same sizes (a 100 MB log: 680,000 cells, a few hundred distinct), and
    a dict lookup of a short string costs half of int()'s parse."""

    def __missing__(self, token: str) -> int:
        value = self[token] = int(token)
        return value


def _rows(text: str, start: int, end: int, source: str, ints: _Ints | None = None) -> _Table | None:
    """The size rows between ``start`` (a newline) and ``end``, converted column by column (map
    over C-built tuples: no Python frame per cell, no tuple per row); rows with N/A,
    non-numeric or non-zero #wrong cells go through _row one by one. None without rows.
    ``ints``: the parse's size and count conversions (a new one per call without it)."""
    found = _ROW.findall(text, start, end)
    if not found:
        return None
    cols = list(zip(*found, strict=True))  # one regex: every match has the same group count
    try:
        if set(cols[8]) != {"0"} or set(cols[12]) != {"0"}:
            raise ValueError
        nums = [list(map(float, cols[k])) for k in (5, 6, 7, 9, 10, 11)]
        types = cols[2]
        # one type per table (nearly always): one string shared by the rows, not one kept per row
        dtype = [types[0]] * len(types) if types.count(types[0]) == len(types) else list(types)
        as_int = (_Ints() if ints is None else ints).__getitem__
        ints_ = [list(map(as_int, cols[0])), list(map(as_int, cols[1]))]
        return _Table([*ints_, dtype, *nums, [0] * len(found)], numeric=True)  # map(float) made every cell a float
    except ValueError:
        return _Table.of_rows([_row(m, source) for m in _ROW.finditer(text, start, end)])


def _version(head: str) -> str:
    """The NCCL version a header names. The regex is searched from the '#' before the first
    literal "version" phrase: no match can start earlier (its ``#\\s*`` runs over blanks
    only), and an alternation is tried at every character of the header otherwise."""
    at = [i for i in (head.find("nccl-tests version"), head.find("NCCL version")) if i != -1]
    if not at or not (v := _VERSION.search(head, max(head.rfind("#", 0, min(at)), 0))):
        return ""
    return v.group(1) or v.group(3)


def _runs(text: str, source: str) -> list[_Run]:
    """Every run of a prefix-free nccl-tests text (:func:`_runs_nl`)."""
    return _runs_nl("\n" + text, source)


def _runs_nl(text: str, source: str) -> list[_Run]:
    """Every run of a prefix-free nccl-tests text that starts with a newline (every line
    after a newline: _ROW, _DEVICE_NL). Regexes over whole segments (C speed): a 100 MB
    log has ~350,000 size rows (benchmarks/bench_ingest.py)."""
    runs: list[_Run] = []
    pending_op, version = "", ""
    ints = _Ints()
    for start, end in _segments(text):
        first = _ROW.search(text, start - 1, end)  # start - 1: the newline ending the line before
        head_end = first.start() + 1 if first else end
        head = text[start:head_end]  # header lines come before the rows
        if "ersion" in head and (v := _version(head)):
            version = v
        if "Collective test starting" in head and (m := _START.search(head)):
            pending_op = m.group(1)
        table = _rows(text, first.start(), end, source, ints) if first else None
        if table is None:
            if not pending_op:
                pending_op = _binary(text, start, end)
            continue
        op = pending_op
        if not op:
            op = _binary(head)
        run = _Run(op=op, table=table, devices=[], version=version, relative_error=bool(_ERROR_HEADER.search(head)))
        pending_op = ""
        if "Rank" in head and (found := _DEVICE_NL.findall(text, start - 1, head_end)):
            ranks, hosts, _, models = zip(*found, strict=True)  # columns, converted by map (C speed)
            run.devices = list(zip(map(int, ranks), hosts, map(str.rstrip, models, repeat(" \t")), strict=True))
        if "nThread" in head and (g := _NTHREAD_M.search(head)):
            graph = _GRAPH.search(g.group(0))
            run.graph = graph.group(1) if graph else ""
            run.gpus_per_process = int(g.group(1)) * int(g.group(2))
        cut = text.rfind("\n", start, max(start, end - 300))  # the footer is the segment's end
        foot = text[cut + 1 if cut != -1 else start : end]
        if o := _OOB_M.search(foot):
            run.oob = (int(o.group(1)), o.group(2))
        if a := _AVG_M.search(foot):
            run.avg = a.group(1)
        runs.append(run)
    return runs


def _factor_op(table: _Table, ranks: int) -> str:
    """Infer the op from busbw/algbw when the log never names the binary. nccl-tests'
    bus-bandwidth factors (doc/PERFORMANCE.md): all_reduce 2(n-1)/n, all_gather,
    reduce_scatter and alltoall (n-1)/n, broadcast, reduce and sendrecv 1; so a factor
    strictly between 1 and 2 is all_reduce whatever n (which elided device lines may hide)."""
    for algbw, busbw in zip(table.cols[4], table.cols[5], strict=True):
        if algbw and busbw and algbw > 0.5:
            ratio = busbw / algbw
            if ranks > 2 and abs(ratio - 2 * (ranks - 1) / ranks) < 0.02 * ratio:
                return "all_reduce"
            # 1.2: n >= 3 gives 4/3; 2 % below 2 leaves room for the two printed decimals
            return "all_reduce" if 1.2 < ratio < 2.0 else ""
    return ""


#: Ops whose size column equals count x type size (one buffer the size of the message).
_WHOLE_COUNT = ("all_reduce", "broadcast", "reduce", "sendrecv")


def _rank_factor(rows: _Table | list[Row]) -> int | None:
    """size / (count x type size), when it is one integer for every row, else None. Column-wise
    (map over the columns, no Python frame per row: a 100 MB log has ~350,000 rows)."""
    table = rows if isinstance(rows, _Table) else _Table.of_rows(rows)
    dtypes = {dtype.lower() for dtype in set(table.cols[2])}  # one lower() per distinct type, not per row
    tb = TYPE_BYTES.get(dtypes.pop()) if len(dtypes) == 1 else None
    if not tb:
        return 1  # unknown type size: nothing to check
    sizes, counts = table.cols[0], table.cols[1]
    first = next((i for i, c in enumerate(counts) if c), None)
    if first is None:
        return 1
    factor, rem = divmod(sizes[first], counts[first] * tb)
    if rem or factor < 1:
        return None
    unit = tb * factor
    return factor if all(map(operator.eq, sizes, map(operator.mul, counts, repeat(unit)))) else None


def _size_problems(table: _Table, op: str, ranks: int) -> tuple[list[str], str]:
    """(problems, warning) of the size/count relation of ``op`` (module docstring)."""
    factor = _rank_factor(table)
    if factor is not None:
        if op in _WHOLE_COUNT and factor != 1:
            pass  # fall through to the per-row message
        elif op in _PER_RANK_COUNT and ranks and factor != ranks:
            # Device lines elided in a posted log ("...") undercount the ranks; the sizes do not lie.
            return [], f"the device lines list {ranks} ranks but the sizes imply {factor} (lines left out?)"
        else:
            return [], ""
    problems = []
    for r in table.rows:
        tb = TYPE_BYTES.get(r.dtype.lower())
        if not tb or not r.size:
            continue
        ok = {r.elem_count * tb}
        if op not in _WHOLE_COUNT:
            ok.add(r.elem_count * tb * (ranks or factor or 1))
        if r.size not in ok:
            problems.append(f"size {r.size} B does not match count {r.elem_count} x {tb} B ({r.dtype})")
    return problems or ["sizes and counts do not keep one ratio (size = count x type size x ranks)"], ""


def _validate(rows: _Table | list[Row], op: str, ranks: int) -> tuple[list[str], str]:
    """(what cannot be true, a warning) of a run's rows."""
    table = rows if isinstance(rows, _Table) else _Table.of_rows(rows)
    problems: list[str] = []
    cols = table.cols
    clean = all((table.numeric or None not in col) and math.isfinite(sum(col)) and min(col) >= 0 for col in cols[3:9])
    for r in () if clean else table.rows:
        cells = r[3:9]
        nums = cast("tuple[float, ...]", cells)  # read only once `None not in cells` held (mypy cannot narrow by `in`)
        if None not in cells and math.isfinite(sum(nums)) and min(nums) >= 0:
            continue  # all finite (NaN/inf propagate) and >= 0
        for name, value in (
            ("time", r.oop_time_us),
            ("algbw", r.oop_algbw),
            ("busbw", r.oop_busbw),
            ("in-place time", r.ip_time_us),
            ("in-place algbw", r.ip_algbw),
            ("in-place busbw", r.ip_busbw),
        ):
            if value is None:
                continue
            if math.isnan(value) or math.isinf(value):
                if r.size == 0 and "bw" in name:
                    continue  # 0 bytes / t: nccl-tests prints nan busbw for empty sizes of some ops
                problems.append(f"{name} is {value} at {r.size} B")
            elif value < 0:
                problems.append(f"negative {name} {value:g} at {r.size} B")
    if len(set(cols[2])) > 1:
        return (problems + ["more than one data type in one table"])[:5], ""
    sizes, warning = _size_problems(table, op, ranks)
    return (problems + sizes)[:5], warning


#: Metric's fields in the order _metric sets them (tests/bench/parsers pin this against
#: dataclasses.fields(Metric), so a new field cannot be left unset).
METRIC_FIELDS = ("name", "value", "unit", "direction", "samples")
_new, _set = object.__new__, object.__setattr__
_LOWER, _HIGHER = Direction.lower, Direction.higher
#: Each Metric slot's setter, in METRIC_FIELDS' order (_metric_columns).
_SETTERS = tuple(Metric.__dict__[name].__set__ for name in METRIC_FIELDS)


def _metric(name: str, value: float, unit: str, direction: Direction, samples: tuple[float, ...] = ()) -> Metric:
    """Metric(...) without the keyword-argument call: a 100 MB log builds 680,000 of them
    and the dataclass __init__ took half of _metrics' time (docs/performance.md). Metric
    has no __post_init__, so setting its slots is what __init__ does."""
    m = _new(Metric)
    _set(m, "name", name)
    _set(m, "value", value)
    _set(m, "unit", unit)
    _set(m, "direction", direction)
    _set(m, "samples", samples)
    return m


def _metric_columns(*cols: Sequence[Any]) -> list[Metric]:
    """Metrics from columns (METRIC_FIELDS' order): the objects allocated in one call and each
    slot filled for all of them by its descriptor's C ``__set__`` (map, no Python frame per
    metric; half the time of _metric per object; docs/performance.md)."""
    metrics = list(map(_new, repeat(Metric, len(cols[0]))))
    for setter, col in zip(_SETTERS, cols, strict=True):
        deque(map(setter, metrics, col), maxlen=0)
    return metrics


def _peak(busbw: list[float | None], ip_busbw: list[float | None], *, numeric: bool = False) -> float | None:
    """The largest finite bus bandwidth of either placement, None without any. Column maxima
    when every cell is a finite number and the largest is positive (ties are then equal
    values, of one sign: the small sizes' 0.00 cells no longer send every table down the
    slow path); else the first largest in row order (out-of-place, in-place, next size), as
    one pass over the cells (0.0 and -0.0 tie there, and the first is kept). ``numeric``: the
    columns are known to hold no None (_Table.numeric)."""
    if (numeric or (None not in busbw and None not in ip_busbw)) and busbw:
        nums = cast("list[float]", busbw), cast("list[float]", ip_busbw)
        if math.isfinite(sum(nums[0])) and math.isfinite(sum(nums[1])):
            peak = max(max(nums[0]), max(nums[1]))
            if peak > 0:
                return peak
    peaks = [x for pair in zip(busbw, ip_busbw, strict=True) for x in pair if x is not None and math.isfinite(x)]
    return max(peaks) if peaks else None


class _Names(dict[int, tuple[str, str]]):
    """Each size's metric names (``busbw_gbps@SB``, ``time_us@SB``), formatted once per parse:
    the runs of a log sweep the same sizes (a 100 MB log: 680,000 names, 30 sizes)."""

    def __missing__(self, size: int) -> tuple[str, str]:
        names = self[size] = (f"busbw_gbps@{size}B", f"time_us@{size}B")
        return names


def _metrics(table: _Table, avg_busbw: float | None, names_of: _Names | None = None) -> tuple[Metric, ...]:
    """The run's metrics: the top size's, then busbw and time per smaller size. A MetricRows
    (with its columns, for the store and the JSON) when the sizes below the top are built
    column by column (nearly always), else a plain tuple."""
    sizes, _, _, times, algbws, busbws, ip_times, _, ip_busbws, wrongs = table.cols
    # the measured sizes (size > 0, an out-of-place time), smallest first (a stable sort, as
    # the rows are nearly always in order already)
    numeric = table.numeric  # no None in any measurement column: the scans below are skipped
    whole = bool(sizes) and min(sizes) > 0 and (numeric or None not in times)  # every size measured (nearly always)
    if whole:
        measured = list(range(len(sizes)))
    else:
        measured = [i for i, (size, t) in enumerate(zip(sizes, times, strict=True)) if size > 0 and t is not None]
    if not measured:
        return ()
    in_order = sizes if whole else list(map(sizes.__getitem__, measured))
    if any(map(operator.gt, in_order, in_order[1:])):
        measured.sort(key=sizes.__getitem__)
        whole = False  # the columns are not in the measured order: picked by index below
    top = measured[-1]
    top_time_us = times[top]
    # _metric, not lower()/higher(): the same Metric without the keyword call (10,617 tables)
    top_samples = (top_time_us, ip_times[top]) if ip_times[top] is not None else ()
    metrics = [_metric("time_us", float(top_time_us), "us", _LOWER, top_samples)]
    if busbws[top] is not None:
        metrics.append(_metric("busbw_gbps", float(busbws[top]), "GB/s", _HIGHER))
    if algbws[top] is not None:
        metrics.append(_metric("algbw_gbps", float(algbws[top]), "GB/s", _HIGHER))
    peak = _peak(busbws, ip_busbws, numeric=numeric) if whole else _peak(*_picked(measured, busbws, ip_busbws))
    if peak is not None:
        metrics.append(_metric("busbw_peak_gbps", float(peak), "GB/s", _HIGHER))
    wrong = wrongs if numeric else [w for w in wrongs if w is not None]
    if wrong:
        metrics.append(lower("wrong_total", float(sum(wrong)), "count"))
    if avg_busbw is not None:
        metrics.append(_metric("avg_busbw_gbps", float(avg_busbw), "GB/s", _HIGHER))
    # The in-place time is a second measurement of the same transfer: kept as the samples of
    # the size's time metric (out-of-place first), so calibration takes their median.
    # Each size below the top gives busbw_gbps@S then time_us@S, built column by column
    # when every size has both cells (nearly always), else one by one.
    rest = measured[:-1]
    # the columns' slices when every size is measured in order (nearly always), else picked
    rest_busbw, rest_ip = (busbws[:-1], ip_times[:-1]) if whole else _picked(rest, busbws, ip_times)
    if numeric or (None not in rest_busbw and None not in rest_ip):
        rest_sizes, rest_time = (sizes[:-1], times[:-1]) if whole else _picked(rest, sizes, times)
        n = len(rest)
        pairs = list(map((_Names() if names_of is None else names_of).__getitem__, rest_sizes))
        names: list[Any] = [None] * (2 * n)
        names[0::2] = map(_FIRST, pairs)
        names[1::2] = map(_SECOND, pairs)
        values: list[Any] = [None] * (2 * n)
        values[0::2], values[1::2] = rest_busbw, rest_time
        samples: list[Any] = [()] * (2 * n)
        samples[1::2] = zip(rest_time, rest_ip, strict=True)
        units, directions = ["GB/s", "us"] * n, [_HIGHER, _LOWER] * n
        rest_metrics = _metric_columns(names, values, units, directions, samples)
        # the top size's few metrics, then the columns: the columns of every metric, in order
        head = [list(map(getter, metrics)) for getter in _FIELD_GETTERS]
        rest_columns: tuple[list[Any], ...] = (names, values, units, directions, samples)
        columns = tuple(first + col for first, col in zip(head, rest_columns, strict=True))
        return MetricRows.of(metrics + rest_metrics, columns)
    else:
        append = metrics.append
        for i in rest:
            size, time_us, ip_time_us = sizes[i], times[i], ip_times[i]
            if busbws[i] is not None:
                append(_metric(f"busbw_gbps@{size}B", busbws[i], "GB/s", _HIGHER))
            append(
                _metric(
                    f"time_us@{size}B", time_us, "us", _LOWER, (time_us, ip_time_us) if ip_time_us is not None else ()
                )
            )
    return tuple(metrics)


_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
#: Each Metric field's getter, in METRIC_FIELDS' order (the columns of a MetricRows).
_FIELD_GETTERS = tuple(map(operator.attrgetter, METRIC_FIELDS))


def _picked(indices: list[int], *cols: list[Any]) -> list[list[Any]]:
    """Each column's cells at ``indices``."""
    return [list(map(col.__getitem__, indices)) for col in cols]


def _info(devices: list[tuple[int, str, str]], *, max_size: int, graph: str, version: str) -> dict[str, str]:
    info = {"max_size_bytes": str(max_size)}
    if devices:
        hosts: dict[str, int] = {}
        for _, host, _ in devices:
            hosts[host] = hosts.get(host, 0) + 1
        models = sorted({model for _, _, model in devices if model})
        info.update(
            {
                "ranks": str(len(devices)),
                "nodes": str(len(hosts)),
                "gpus_per_node": str(max(hosts.values())),
                "hosts": ",".join(sorted(hosts)),
            }
        )
        if models:
            info["gpu_model"] = "; ".join(models)
    if graph:
        info["graph"] = graph
    if version:
        info["nccl_version"] = version
    return info


def _harness(gpus_per_process: int) -> dict[str, str]:
    """What the header's ``nThread T nGpus G`` says about the launch: each process drives
    T x G GPUs (nccl-tests README, "-t" and "-g"); more than one is the single-process harness
    (one thread launches on several GPUs, model.collectives.HARNESSES), which calibration
    and predictions model instead of fitting its launch cost into the GPU's."""
    return {
        "gpus_per_process": str(gpus_per_process),
        "harness": "single-process" if gpus_per_process > 1 else "per-gpu",
    }


def _lines(text: str) -> str:
    """``text`` without ANSI colour codes and with Unix newlines (each a 100 MB copy, made only
    when there is something to change)."""
    text = strip_ansi(text)
    return text.replace("\r\n", "\n") if "\r" in text else text


def _op(name: str) -> str:
    return OP_NAMES.get(name, name)


#: ``text.lstrip().startswith("{")`` without the copy lstrip makes of a 100 MB text that
#: starts with a blank (an srun prefix): ``\s`` is str.isspace's set (Py_UNICODE_ISSPACE).
_JSON_START = re.compile(r"\s*\{")


@collector_paused  # 680,000 metrics per 100 MB, no cycles
def parse_nccl_tests(text: str, *, source: str = "") -> list[Parsed]:
    """Parse nccl-tests output: a ``-J`` JSON file or the text the ``*_perf`` binaries print.

    One :class:`Parsed` per run (binary invocation) found in the text.
    """
    if _JSON_START.match(text):
        return [_parse_json(text, source)]
    clean_nl = strip_all_nl(_lines(text))  # one 100 MB copy fewer than "\n" + strip_all(...)
    runs = _runs_nl(clean_nl, source)
    if not runs:
        clean = clean_nl[1:]
        if "nThread" not in clean and "Avg bus bandwidth" not in clean:
            raise ParseError(
                "not nccl-tests output (no '# nThread' header and no size rows)", source=source, excerpt=clean[:120]
            )
        raise ParseError(
            "nccl-tests output has no size rows (the run stopped before measuring?)",
            source=source,
            excerpt=clean[-200:],
        )
    file_op = ""
    if m := _BINARY.search(source or ""):
        file_op = m.group(1)
    out = []
    names_of = _Names()
    infos: dict[tuple[Any, ...], dict[str, str]] = {}
    for run in runs:
        ranks = len(run.devices)
        table = run.table
        op = run.op or file_op or _factor_op(table, ranks) or "collective"
        avg = None
        if run.avg is not None:
            try:
                avg = float(run.avg)
            except ValueError:
                avg = None
            if avg is not None and not math.isfinite(avg):
                avg = None
        errors = []
        wrong = sum(filter(None, table.cols[9]))
        if wrong:
            errors.append(f"{wrong} wrong elements (#wrong) - data corruption")
        if run.oob and run.oob[1] == "FAILED":
            errors.append(f"out of bounds values: {run.oob[0]} FAILED")
        partial = ""
        if run.oob is None:
            partial = "no 'Out of bounds values' footer: the table stops after its last row (cut short or copied without it), so no data check is confirmed"
        # the runs of one job list the same devices: their summary is built once and copied
        key = (tuple(run.devices), max(table.cols[0]), run.graph, run.version)
        if (known := infos.get(key)) is None:
            known = infos[key] = _info(run.devices, max_size=key[1], graph=run.graph, version=run.version)
        info = dict(known)
        if run.gpus_per_process:
            info.update(_harness(run.gpus_per_process))
        info["op"] = _op(op)
        if run.relative_error:
            info["check"] = "max relative error (the pre-2.13 'error' column); judged by the out-of-bounds footer"
        problems, warning = _validate(table, op, ranks)
        out.append(
            Parsed(
                tool="nccl-tests",
                case=op,
                metrics=_metrics(table, avg, names_of),
                error="; ".join(errors),
                invalid="; ".join(problems),
                warnings=tuple(w for w in (warning, partial) if w),
                partial=partial,
                info=info,
            )
        )
    return out


def rows_of(text: str, *, source: str = "") -> list[list[Row]]:
    """The size rows of every run in ``text`` (for calibration and tests)."""
    return [r.table.rows for r in _runs(strip_all(_lines(text)), source)]


def _json_rows(doc: dict[str, Any], source: str) -> list[Row]:
    rows: list[Row] = []
    for entry in doc.get("results") or []:
        oop, ip = entry.get("out_of_place") or {}, entry.get("in_place") or {}
        try:

            def num(d: dict[str, Any], *keys: str) -> float | None:
                for k in keys:
                    if d.get(k) is not None:
                        return finite(d[k], what=k, source=source)
                return None

            rows.append(
                Row(
                    int(entry["size"]),
                    int(entry.get("count") or 0),
                    str(entry.get("type", "")),
                    num(oop, "time", "cpu_time"),
                    num(oop, "alg_bw"),
                    num(oop, "bus_bw"),
                    num(ip, "time", "cpu_time"),
                    num(ip, "alg_bw"),
                    num(ip, "bus_bw"),
                    _wrong([oop.get("nwrong"), ip.get("nwrong")]),
                )
            )
            if rows[-1].oop_busbw is None:
                raise KeyError("out_of_place.bus_bw")
        except KeyError as exc:
            raise ParseError(f"nccl-tests JSON result lacks {exc}", source=source, excerpt=str(entry)[:200]) from None
    return rows


#: The fields the -J path reads, with their JSON types (nccl-tests src/common.cu JSON writer);
#: measurements are null where the test did not run them, #wrong "N/A" where it did not check.
_NUM = shape.Number(nullable=True)
_LEG = shape.Obj(
    {
        "time": _NUM,
        "cpu_time": _NUM,
        "alg_bw": _NUM,
        "bus_bw": _NUM,
        "nwrong": shape.OneOf((shape.Number(), shape.Text(re.compile(r"(?i)n/a"))), nullable=True),
    },
    nullable=True,
)
_RESULT = shape.Obj(
    {
        "size": shape.COUNT,
        "count": shape.Number(min=0, nullable=True),
        "type": shape.ANY,
        "out_of_place": _LEG,
        "in_place": _LEG,
    }
)
JSON_SHAPE = shape.Obj(
    {
        "results": shape.Items(_RESULT, nullable=True),
        "average_bus_bandwidth": shape.Obj({"bandwidth": _NUM}, nullable=True),
        "devices": shape.Items(
            shape.Obj({"hostname": shape.ANY, "device_name": shape.ANY, "name": shape.ANY}), nullable=True
        ),
        "out_of_bounds": shape.Obj({"okay": shape.ANY, "count": shape.Number(min=0, nullable=True)}, nullable=True),
        "config": shape.Each(shape.ANY, nullable=True),
    }
)


def _parse_json(text: str, source: str) -> Parsed:
    doc = load_json(text, source=source, tool="nccl-tests")
    if not isinstance(doc, dict) or "results" not in doc or "out_of_bounds" not in doc:
        keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
        raise ParseError("not nccl-tests -J output: no 'results' and 'out_of_bounds' keys", source=source, excerpt=keys)
    shape.check_json(doc, JSON_SHAPE, tool="nccl-tests", source=source)
    rows = _json_rows(doc, source)
    if not rows:
        raise ParseError("nccl-tests JSON has no results", source=source, excerpt=text[:120])
    avg = (doc.get("average_bus_bandwidth") or {}).get("bandwidth")
    devices = [
        (i, str(d.get("hostname", "")), str(d.get("device_name", d.get("name", ""))))
        for i, d in enumerate(doc.get("devices") or [])
    ]
    errors = []
    wrong = sum(r.wrong or 0 for r in rows)
    if wrong:
        errors.append(f"{wrong} wrong elements (#wrong) - data corruption")
    oob = doc.get("out_of_bounds") or {}
    if oob.get("okay") is False or int(oob.get("count") or 0):
        errors.append(f"out of bounds values: {oob.get('count')} FAILED")
    if doc.get("errors"):
        errors.append(f"errors: {doc['errors']}")
    config = doc.get("config") or {}
    m = _BINARY.search(" ".join(str(v) for v in config.values())) or _BINARY.search(source)
    table = _Table.of_rows(rows)
    op = m.group(1) if m else (_factor_op(table, len(devices)) or "collective")
    info = _info(
        devices,
        max_size=max(r.size for r in rows),
        graph=str(config.get("cudagraph", config.get("graph", ""))),
        version="",
    )
    info["op"] = _op(op)
    problems, warning = _validate(table, op, len(devices))
    return Parsed(
        tool="nccl-tests",
        case=op,
        metrics=_metrics(table, finite(avg, what="average bus bandwidth", source=source) if avg is not None else None),
        error="; ".join(errors),
        invalid="; ".join(problems),
        warnings=(warning,) if warning else (),
        info=info,
    )
