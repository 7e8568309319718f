"""Sweeps: many variants of one spec evaluated in one vectorised pass (``gpufabric sweep``).

Each ``--vary key=v1,v2,...`` names a dotted spec path and its values; every combination
is a spec (validated as a spec is, each varied section once per distinct value set;
invalid pairings are skipped with their reason). The throughput anchor is solved once on
the base spec (a varied ``workload.throughput.*`` gives each variant its own). A variant
is a column edit of the base spec's table (its workload columns, layout and compute
efficiency; the design columns are built once per design list), and the rows go through
``evaluate_table`` in chunks as the layout search's do (plan/search.py), each chunk written
to CSV or Parquet before the next is built: memory is flat in the number of rows.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ValidationError

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model.memory import GIB
from gpufabric.plan.anchor import layout_efficiencies, solve_anchor
from gpufabric.plan.evaluate import EVAL_FIELDS, Evaluation, evaluate_table
from gpufabric.plan.layouts import Layout, spec_layout
from gpufabric.plan.search import CHUNK_ROWS
from gpufabric.plan.table import (
    BOOL_FIELDS,
    Design,
    Table,
    concat_tables,
    design_columns,
    enumerate_designs,
    layout_columns,
    workload_scalars,
)
from gpufabric.spec.models import Spec

_KEY = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")
#: Upper bound on combinations: a sweep is a notebook's input, not a search engine.
MAX_COMBINATIONS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Vary:
    """One varied spec field."""

    key: str
    values: tuple[Any, ...]


def parse_vary(text: str) -> Vary:
    """``key=v1,v2,...`` -> :class:`Vary` (values read as YAML scalars: 8 is an int, 1e9 a float)."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key) or not values.strip():
        raise InputError(
            f"--vary {text!r}: expected key=v1,v2,... with a dotted spec path such as cluster.nodes=64,128"
        )
    if values.count(",") >= MAX_COMBINATIONS:  # one list alone beyond the cap: refused before parsing it
        raise InputError(f"--vary {key}: more than {MAX_COMBINATIONS:,} values; at most {MAX_COMBINATIONS:,}")
    parsed = []
    for raw in values.split(","):
        raw = raw.strip()
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str) and re.fullmatch(r"[-+]?\d+(\.\d*)?[eE][-+]?\d+", value):
            value = float(value)  # YAML 1.1 reads 7e9 as a string
        if not isinstance(value, (int, float, str, bool)):
            raise InputError(f"--vary {key}: value {raw!r} is not a scalar")
        parsed.append(value)
    return Vary(key=key, values=tuple(parsed))


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {} if child is None else child
            if not isinstance(child, dict):
                raise InputError(f"--vary {key}: {part} is not a section of the spec")
            node[part] = child
        node = child
    node[parts[-1]] = value


def _skip_reason(varies: Sequence[Vary], combo: tuple[Any, ...], exc: ValidationError, prefix: tuple[Any, ...]) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in (*prefix, *err["loc"])) or "spec"
    label = ", ".join(f"{v.key}={c}" for v, c in zip(varies, combo, strict=True))
    return f"--vary {label}: {where}: {err['msg'].removeprefix('Value error, ')}"


class _Sections:
    """The spec's top-level sections with the varied values applied, each validated once
    per distinct value set (a sweep of 70 x 60 values validates 130 sections, not 4,200
    specs); untouched sections stay the base spec's own instances (pydantic takes a model
    instance as it is), so the spec of a combination validates only its own fields and
    cross-field rules."""

    def __init__(self, spec: Spec, varies: Sequence[Vary]) -> None:
        self.spec = spec
        self.varies = varies
        self.base = {name: getattr(spec, name) for name in type(spec).model_fields}
        self.base.pop("notes", None)
        self.by_section: dict[str, list[int]] = {}
        for index, vary in enumerate(varies):
            self.by_section.setdefault(vary.key.split(".")[0], []).append(index)
        self.cache: dict[tuple[str, tuple[Any, ...]], Any] = {}

    def section(self, name: str, combo: tuple[Any, ...]) -> Any:
        """Section ``name`` with its varied values from ``combo`` (a ValidationError, kept)."""
        indices = self.by_section[name]
        key = (name, tuple(combo[i] for i in indices))
        if key not in self.cache:
            self.cache[key] = self._validated(name, indices, combo)
        return self.cache[key]

    def _validated(self, name: str, indices: list[int], combo: tuple[Any, ...]) -> Any:
        current = self.base.get(name)
        if not isinstance(current, BaseModel):  # a top-level scalar: the spec validates it
            return combo[indices[0]]
        data = current.model_dump(exclude_none=True)
        if name == "workload":
            data.pop("notes", None)  # the validator writes them again
        for i in indices:
            _set(data, self.varies[i].key.partition(".")[2], combo[i])
        try:
            return type(current).model_validate(data)
        except ValidationError as exc:
            return exc

    def spec_of(self, combo: tuple[Any, ...]) -> Spec | str:
        """The spec of ``combo``, or why it is skipped."""
        data = dict(self.base)
        for name in self.by_section:
            value = self.section(name, combo)
            if isinstance(value, ValidationError):
                return _skip_reason(self.varies, combo, value, (name,))
            data[name] = value
        try:
            return Spec.model_validate(data)
        except ValidationError as exc:
            return _skip_reason(self.varies, combo, exc, ())


def _combinations(varies: Sequence[Vary]) -> Iterator[tuple[Any, ...]]:
    # counted before the product is built: 9 lists of 10 values would be 10^9 tuples in memory
    count = math.prod(len(v.values) for v in varies)
    if count > MAX_COMBINATIONS:
        raise InputError(f"--vary gives {count:,} combinations; at most {MAX_COMBINATIONS:,}")
    return itertools.product(*(v.values for v in varies))


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """Evaluated rows: the varied values, the design and layout, and every model output."""

    keys: tuple[str, ...]
    combos: Sequence[tuple[Any, ...]]
    design_ids: Sequence[str]
    layouts: Sequence[str]
    compute_efficiency: np.ndarray
    out: Evaluation
    skipped: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.design_ids)

    @property
    def columns(self) -> list[str]:
        return [*self.keys, "design", "layout", "compute_efficiency", "memory_fits", *EVAL_FIELDS]

    def column_arrays(self) -> list[np.ndarray | list[Any]]:
        """Every column (``columns`` order): a numpy array, or a list for the varied values and text."""
        fits = np.asarray(self.out.memory_bytes) <= np.asarray(self.out.memory_capacity_bytes)
        combos = [list(c) for c in zip(*self.combos, strict=True)] if self.keys and len(self) else []
        return [
            *(combos or [[] for _ in self.keys]),
            list(self.design_ids),
            list(self.layouts),
            np.asarray(self.compute_efficiency, dtype=float),
            fits,
            *(np.asarray(getattr(self.out, f)) for f in EVAL_FIELDS),
        ]

    def column_values(self) -> list[list[Any]]:
        """Every column as a list of Python values (``columns`` order): one ``tolist`` per column."""
        return [c.tolist() if isinstance(c, np.ndarray) else c for c in self.column_arrays()]

    def rows(self) -> list[list[Any]]:
        return [list(row) for row in zip(*self.column_values(), strict=True)]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Variant:
    combo: tuple[Any, ...]
    designs: tuple[Design, ...]
    layout: Layout
    efficiency: float
    scalars: dict[str, Any]


def _variant_rows(spec: Spec, catalog: Catalog, varies: Sequence[Vary], skipped: list[str]) -> Iterator[_Variant]:
    """Each valid combination's designs, layout, compute efficiency and workload columns.

    The combination is a column edit of the base spec's table (build_table's own parts:
    the workload scalars, the layout's columns, the compute efficiency), never a YAML
    round trip; the layout's efficiency is computed once per distinct workload section.
    """
    sections = _Sections(spec, varies)
    # The figure was measured once, on the base spec: every variant is predicted from the
    # base spec's compute efficiency, unless the sweep varies the figure itself.
    per_variant = any(v.key.startswith("workload.throughput") for v in varies)
    base = None if per_variant else solve_anchor(spec, catalog)
    efficiency: dict[tuple[int, str, Layout], float] = {}
    layouts: dict[int, Layout] = {}
    designs: dict[tuple[int, int, int], tuple[Design, ...]] = {}
    # one object per distinct design list: consecutive variants that share it share a table
    interned: dict[tuple[Design, ...], tuple[Design, ...]] = {}
    found = False
    for combo in _combinations(varies):
        variant = sections.spec_of(combo)
        if isinstance(variant, str):
            skipped.append(variant)
            continue
        if id(variant.workload) not in layouts:  # the layout is the workload section's alone
            if variant.searched:
                raise InputError("sweep evaluates the spec's own layout; fix parallelism (no auto) or vary its fields")
            layouts[id(variant.workload)] = spec_layout(variant)
        found = True
        lay = layouts[id(variant.workload)]
        # The same section instances (cached above) give the same figures.
        ekey = (id(variant.workload), variant.cluster.gpu, lay)
        if per_variant or ekey not in efficiency:
            anchor = base or solve_anchor(variant, catalog)
            efficiency[ekey] = float(layout_efficiencies(anchor, variant, catalog, [lay])[0])
        dkey = (id(variant.cluster), id(variant.options), id(variant.workload))
        if dkey not in designs:
            listed = tuple(enumerate_designs(variant, catalog))
            designs[dkey] = interned.setdefault(listed, listed)
        yield _Variant(
            combo=combo,
            designs=designs[dkey],
            layout=lay,
            efficiency=efficiency[ekey],
            scalars=workload_scalars(variant, catalog),
        )
    if not found:
        raise InputError(skipped[0] + f" (and every other of the {len(skipped)} combinations is invalid too)")


def _table_of(catalog: Catalog, run: Sequence[_Variant], design_cache: dict[tuple[Design, ...], Any]) -> Table:
    """The table of variants that share one design list: build_table's columns, each variant's
    scalars repeated over its designs and the designs' columns tiled over the variants."""
    designs = run[0].designs
    if designs not in design_cache:
        design_cache[designs] = design_columns(catalog, designs)
    per = len(designs)
    keys = list(run[0].scalars)
    # one array for every scalar of every variant (a column per key was 80 list passes)
    values = np.repeat(
        np.array(list(map(operator.itemgetter(*keys), (v.scalars for v in run))), dtype=float).T, per, axis=1
    )
    cols: dict[str, np.ndarray] = dict(zip(keys, values, strict=True))
    cols["compute_eff"] = np.repeat(np.array([v.efficiency for v in run], dtype=float), per)
    for k, col in design_cache[designs].items():
        cols[k] = np.tile(col, len(run)) if len(col) else np.zeros(per * len(run))
    for k, col in layout_columns([v.layout for v in run]).items():
        cols[k] = np.repeat(col, per)
    for k in BOOL_FIELDS:
        cols[k] = cols[k].astype(bool)
    return Table(**cols)


def stream_sweep(
    spec: Spec, catalog: Catalog, varies: Sequence[Vary], *, chunk_rows: int = CHUNK_ROWS // 4
) -> Iterator[SweepResult]:
    """The sweep in chunks of about ``chunk_rows`` rows (whole variants each), evaluated one
    chunk at a time as the layout search evaluates its rows (plan/search.py): memory stays
    flat in the number of rows (a quarter of the search's chunk: 115 MB peak for a
    100,800-row sweep written to CSV, docs/performance.md). ``skipped`` of the last chunk
    lists every skipped combination."""
    skipped: list[str] = []
    design_cache: dict[tuple[Design, ...], Any] = {}
    pending: list[_Variant] = []
    rows = 0
    keys = tuple(v.key for v in varies)
    for variant in _variant_rows(spec, catalog, varies, skipped):
        pending.append(variant)
        rows += len(variant.designs)
        if rows >= chunk_rows:
            yield _evaluate(catalog, keys, pending, design_cache, ())
            pending, rows = [], 0
    yield _evaluate(catalog, keys, pending, design_cache, tuple(skipped))


def _evaluate(
    catalog: Catalog,
    keys: tuple[str, ...],
    variants_: Sequence[_Variant],
    design_cache: dict[tuple[Design, ...], Any],
    skipped: tuple[str, ...],
) -> SweepResult:
    runs: list[list[_Variant]] = []
    for v in variants_:  # consecutive variants with one design list share one table
        if runs and runs[-1][0].designs is v.designs:
            runs[-1].append(v)
        else:
            runs.append([v])
    tables = [_table_of(catalog, run, design_cache) for run in runs]
    out = evaluate_table(tables[0] if len(tables) == 1 else concat_tables(tables)) if tables else None
    per = [len(v.designs) for v in variants_]
    ids: dict[int, list[str]] = {}  # per design list (interned): its ids, built once
    texts: dict[Layout, str] = {}
    combos: list[tuple[Any, ...]] = []
    design_ids: list[str] = []
    layouts: list[str] = []
    for v, n in zip(variants_, per, strict=True):  # per variant: a row-wise lookup of a Layout key was 0.1 s
        if id(v.designs) not in ids:
            ids[id(v.designs)] = [d.id for d in v.designs]
        if v.layout not in texts:
            texts[v.layout] = v.layout.text
        combos += [v.combo] * n
        design_ids += ids[id(v.designs)]
        layouts += [texts[v.layout]] * n
    return SweepResult(
        keys=keys,
        combos=combos,
        design_ids=design_ids,
        layouts=layouts,
        compute_efficiency=np.repeat(np.array([v.efficiency for v in variants_], dtype=float), per),
        out=out if out is not None else _empty(),
        skipped=skipped,
    )


def _empty() -> Evaluation:
    return Evaluation(**{f: np.zeros(0) for f in EVAL_FIELDS})


def run_sweep(spec: Spec, catalog: Catalog, varies: Sequence[Vary]) -> SweepResult:
    """Evaluate every variant's designs (the chunks of :func:`stream_sweep`, joined)."""
    chunks = list(stream_sweep(spec, catalog, varies))
    if len(chunks) == 1:
        return chunks[0]
    return SweepResult(
        keys=chunks[0].keys,
        combos=[c for chunk in chunks for c in chunk.combos],
        design_ids=[d for chunk in chunks for d in chunk.design_ids],
        layouts=[x for chunk in chunks for x in chunk.layouts],
        compute_efficiency=np.concatenate([chunk.compute_efficiency for chunk in chunks]),
        out=Evaluation(**{f: np.concatenate([np.asarray(getattr(c.out, f)) for c in chunks]) for f in EVAL_FIELDS}),
        skipped=chunks[-1].skipped,
    )


@dataclass(slots=True, kw_only=True)
class SweepSummary:
    """What :func:`write_sweep` wrote."""

    rows: int = 0
    variants: int = 0
    skipped: tuple[str, ...] = ()


def write_sweep(result: SweepResult | Iterable[SweepResult], path: Path) -> SweepSummary:
    """CSV, or Parquet when ``path`` ends in .parquet (needs pyarrow), one chunk at a time.

    The rows go to a temporary file beside ``path``, renamed over it at the end: a sweep
    refused part way (no valid combination, Ctrl-C) leaves no partial file.
    """
    chunks = [result] if isinstance(result, SweepResult) else result
    summary = SweepSummary()
    check_format(path)
    write = _write_parquet if path.suffix == ".parquet" else _write_csv
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(chunks, Path(name), summary)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return summary


def check_format(path: Path) -> None:
    """Refuse a Parquet ``path`` without pyarrow (before any work is done)."""
    if path.suffix != ".parquet":
        return
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:
        raise InputError(f"{path}: writing Parquet needs pyarrow (pip install pyarrow); or write .csv") from exc


def _write_parquet(chunks: Iterable[SweepResult], path: Path, summary: SweepSummary) -> None:
    check_format(path)
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    try:
        for chunk in chunks:
            _count(summary, chunk)
            table = pa.table(dict(zip(chunk.columns, chunk.column_values(), strict=True)))
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def _write_csv(chunks: Iterable[SweepResult], path: Path, summary: SweepSummary) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        header = True
        for chunk in chunks:
            _count(summary, chunk)
            if header:
                fh.write(",".join(_csv_text(c) for c in chunk.columns) + _EOL)
                header = False
            for text in _csv_blocks(chunk):
                fh.write(text)


#: Rows formatted and written at a time (~1.2 MB of text). A block's cell objects fit the
#: memory the allocators keep; a whole chunk's (~60 MB) were mapped afresh and returned per
#: chunk: ~90,000 page faults, 0.3-0.4 s of system time for 100,800 rows (docs/performance.md).
_BLOCK_ROWS = 1024


def _csv_blocks(chunk: SweepResult) -> Iterator[str]:
    """The chunk's CSV text, ``_BLOCK_ROWS`` rows at a time.

    Runs of adjacent columns that follow the designs alone (or the variants alone) are
    joined once per design (or variant) and repeated; a column of few distinct values
    holds each distinct value's text once. Each text carries the separator after it, so a
    block is one ``"".join`` over a grid of cells: no Python runs per row or per cell.
    """
    n = len(chunk)
    if not n:
        return
    per = _designs_per_variant(chunk)
    count = n // per if per else 0
    segments: list[tuple[str, Any]] = []
    for column in chunk.column_arrays():
        kind, cells = _csv_cells(column, per)
        if segments and kind != "full" and segments[-1][0] == kind:
            segments[-1] = (kind, [f"{a},{b}" for a, b in zip(segments[-1][1], cells, strict=True)])
        else:
            segments.append((kind, cells))
    columns: list[np.ndarray | str] = []  # a str: the same text in every row
    for i, (kind, cells) in enumerate(segments):
        sep = _EOL if i == len(segments) - 1 else ","
        if kind == "design":
            columns.append(np.tile(np.array([c + sep for c in cells], dtype=object), count))
        elif kind == "variant":
            columns.append(np.repeat(np.array([c + sep for c in cells], dtype=object), per))
        else:
            columns.extend(_full_cells(cells, sep))
    grid = np.empty((min(n, _BLOCK_ROWS), len(columns)), dtype=object)
    for j, cells in enumerate(columns):
        if isinstance(cells, str):
            grid[:, j] = cells
    filled = [(j, cells) for j, cells in enumerate(columns) if not isinstance(cells, str)]
    for start in range(0, n, _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, n)
        block = grid[: stop - start]
        for j, cells in filled:
            part = cells[start:stop]
            block[:, j] = part if part.dtype.kind == "O" else list(map(str, part.tolist()))
        yield "".join(block.ravel().tolist())


def _csv_cells(column: np.ndarray | list[Any], per: int) -> tuple[str, Any]:
    """("design", one variant's cells) for a column that follows the designs alone,
    ("variant", one cell per variant) for one that follows the variants alone, else
    ("full", the column as it is: :func:`_full_cells` formats it); ``per`` designs per
    variant (0: no such structure)."""
    if per and len(column) > per:
        if isinstance(column, np.ndarray) and column.dtype.kind in "fiub":
            grid = column.reshape(-1, per)
            same = (grid == grid[:1]) | ((grid != grid) & (grid[:1] != grid[:1]))  # NaN equals NaN here
            if same.all() and (np.signbit(grid) == np.signbit(grid[:1])).all():
                return "design", _csv_column(grid[0])
            down = (grid == grid[:, :1]) | ((grid != grid) & (grid[:, :1] != grid[:, :1]))
            if down.all() and (np.signbit(grid) == np.signbit(grid[:, :1])).all():
                return "variant", _csv_column(grid[:, 0])
        elif isinstance(column, list):
            if column[:per] * (len(column) // per) == column:
                return "design", _csv_column(column[:per])
            firsts = column[::per]
            if [c for c in firsts for _ in range(per)] == column:
                return "variant", _csv_column(firsts)
    return "full", column


def _full_cells(column: np.ndarray | list[Any], sep: str) -> list[np.ndarray | str]:
    """A column's cells, each followed by ``sep``, as grid columns for :func:`_csv_blocks`:
    an object array of each row's text (each distinct value formatted once: np.unique's
    sort costs ~30 ns a value, ``str`` on a float ~500 ns), or, for floats with a -0.0
    among them (np.unique takes it for 0.0, but the two are two texts), the floats
    themselves, formatted a block at a time, and ``sep`` after them."""
    if isinstance(column, np.ndarray) and column.dtype.kind in "fiub":
        if column.dtype.kind == "f" and np.any(np.signbit(column) & (column == 0)):
            return [column, sep]
        values, inverse = np.unique(column, return_inverse=True)  # NaNs are one value: all are "nan"
        # "%r": a number's str (floats, ints and bools alike), its separator in the same call
        return [np.array(list(map(("%r" + sep).__mod__, values.tolist())), dtype=object)[inverse]]
    return [np.array([c + sep for c in _csv_column(list(column))], dtype=object)]


def _count(summary: SweepSummary, chunk: SweepResult) -> None:
    summary.rows += len(chunk)
    summary.variants += len(dict.fromkeys(chunk.combos))
    summary.skipped = chunk.skipped or summary.skipped


#: The csv module's defaults (excel dialect): CRLF rows, a field quoted when it holds the
#: delimiter, a quote or a line break, its quotes doubled. Written here column by column:
#: csv.writer's per-cell calls were most of a 100,000-row sweep (docs/performance.md).
_EOL = "\r\n"


def _csv_text(value: object) -> str:
    text = str(csv_cell(value))
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _designs_per_variant(chunk: SweepResult) -> int:
    """Rows per variant when every variant of ``chunk`` has the same designs, else 0."""
    n = len(chunk)
    variants_ = len(dict.fromkeys(chunk.combos)) if n else 0
    per = n // variants_ if variants_ else 0
    if not per or per * variants_ != n or list(chunk.design_ids[:per]) * variants_ != list(chunk.design_ids):
        return 0
    return per


def _csv_column(column: np.ndarray | list[Any]) -> list[str]:
    """One column's cells as csv.writer writes them: numbers with ``str`` (the shortest repr
    for floats), text through :func:`csv_cell` and quoting, each distinct text once. (An
    array here is one variant's or one design's values: :func:`_full_cells` does the rest.)"""
    if isinstance(column, np.ndarray):
        return list(map(str, column.tolist()))
    # Lists: text, or a --vary list of 1, 1.5 and text, keyed by type too (1 == 1.0 == True).
    typed: dict[tuple[type, Any], str] = {}
    return [
        typed[(type(v), v)] if (type(v), v) in typed else typed.setdefault((type(v), v), _csv_text(v)) for v in column
    ]


#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection", as of 2026:
#: =, +, -, @, tab and carriage return; a cell "=HYPERLINK(...)" from a spec name runs on open).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A text cell that cannot start a formula (a leading apostrophe, as OWASP advises); numbers
    are left as numbers (a negative value is data, not a formula)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


__all__ = [
    "GIB",
    "SweepResult",
    "SweepSummary",
    "check_format",
    "Vary",
    "parse_vary",
    "run_sweep",
    "stream_sweep",
    "write_sweep",
]
