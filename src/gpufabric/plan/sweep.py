"""Sweeps: many variants of one spec evaluated in one vectorised pass (``gpufabric sweep``).

Each ``--vary key=v1,v2,...`` names a dotted spec path and its values; every combination
is a spec (validated as a spec is; invalid pairings are skipped with their reason). The
throughput anchor is solved once on the base spec (a varied ``workload.throughput.*``
gives each variant its own), and all their
layouts x designs go through ``evaluate_table`` together. Rows come back as typed
:class:`SweepRow` records for CSV or Parquet.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import ValidationError

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model.memory import GIB
from gpufabric.plan.anchor import layout_efficiencies, solve_anchor
from gpufabric.plan.evaluate import EVAL_FIELDS, Evaluation, evaluate_table
from gpufabric.plan.layouts import spec_layout
from gpufabric.plan.table import build_table, concat_tables, enumerate_designs
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


def variants(spec: Spec, varies: Sequence[Vary]) -> tuple[list[tuple[tuple[Any, ...], Spec]], list[str]]:
    """Every valid combination of the varied values applied to ``spec``, and why the others were skipped.

    A product of independent lists often pairs values that do not fit together (64 nodes
    with dp 64 at tp 8, pp 4); those are skipped with their reason. When none is valid
    the first reason is an :class:`InputError`.
    """
    # counted before the product is built: 9 lists of 10 values would be 10^9 tuples in memory
    count = math.prod(len(v.values) for v in varies)
    if count > MAX_COMBINATIONS:
        raise InputError(f"--vary gives {count:,} combinations; at most {MAX_COMBINATIONS:,}")
    combos = list(itertools.product(*(v.values for v in varies)))
    base = spec.model_dump(exclude_none=True)
    out, skipped = [], []
    for combo in combos:
        data = yaml.safe_load(yaml.safe_dump(base))  # deep copy of plain data
        data["workload"].pop("notes", None)
        for vary, value in zip(varies, combo, strict=True):
            _set(data, vary.key, value)
        try:
            variant = Spec.model_validate(data)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err["loc"]) or "spec"
            label = ", ".join(f"{v.key}={c}" for v, c in zip(varies, combo, strict=True))
            skipped.append(f"--vary {label}: {where}: {err['msg'].removeprefix('Value error, ')}")
            continue
        if variant.searched:
            raise InputError("sweep evaluates the spec's own layout; fix parallelism (no auto) or vary its fields")
        out.append((combo, variant))
    if not out:
        raise InputError(skipped[0] + f" (and every other of the {len(combos)} combinations is invalid too)")
    return out, skipped


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """Evaluated rows: the varied values, the design and layout, and every model output."""

    keys: tuple[str, ...]
    combos: list[tuple[Any, ...]]
    design_ids: list[str]
    layouts: list[str]
    compute_efficiency: np.ndarray
    out: Evaluation
    skipped: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.design_ids)

    @property
    def columns(self) -> list[str]:
        return [*self.keys, "design", "layout", "compute_efficiency", "memory_fits", *EVAL_FIELDS]

    def rows(self) -> list[list[Any]]:
        cols = [np.asarray(getattr(self.out, f)) for f in EVAL_FIELDS]
        fits = np.asarray(self.out.memory_bytes) <= np.asarray(self.out.memory_capacity_bytes)
        return [
            [
                *self.combos[i],
                self.design_ids[i],
                self.layouts[i],
                float(self.compute_efficiency[i]),
                bool(fits[i]),
                *(c[i].item() for c in cols),
            ]
            for i in range(len(self))
        ]


def run_sweep(spec: Spec, catalog: Catalog, varies: Sequence[Vary]) -> SweepResult:
    """Evaluate every variant's designs in one pass."""
    tables, combos, ids, lays, effs = [], [], [], [], []
    valid, skipped = variants(spec, varies)
    # The figure was measured once, on the base spec: every variant is predicted from the
    # base spec's compute efficiency, unless the sweep varies the figure itself.
    per_variant = any(v.key.startswith("workload.throughput") for v in varies)
    base = None if per_variant else solve_anchor(spec, catalog)
    for combo, variant in valid:
        anchor = base or solve_anchor(variant, catalog)
        designs = enumerate_designs(variant, catalog)
        lay = spec_layout(variant)
        eff = float(layout_efficiencies(anchor, variant, catalog, [lay])[0])  # the anchor moved to this layout
        tables.append(build_table(variant, catalog, designs, [lay], compute_efficiency=eff))
        for d in designs:
            combos.append(combo)
            ids.append(d.id)
            lays.append(lay.text)
            effs.append(eff)
    out = evaluate_table(concat_tables(tables))
    return SweepResult(
        keys=tuple(v.key for v in varies),
        combos=combos,
        design_ids=ids,
        layouts=lays,
        compute_efficiency=np.asarray(effs),
        out=out,
        skipped=tuple(skipped),
    )


def write_sweep(result: SweepResult, path: Path) -> None:
    """CSV, or Parquet when ``path`` ends in .parquet (needs pyarrow)."""
    if path.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise InputError(f"{path}: writing Parquet needs pyarrow (pip install pyarrow); or write .csv") from exc
        rows = result.rows()
        table = pa.table({name: [r[i] for r in rows] for i, name in enumerate(result.columns)})
        pq.write_table(table, path)
        return
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([csv_cell(c) for c in result.columns])
        w.writerows([csv_cell(c) for c in row] for row in result.rows())


#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection", as of 2026:
#: =, +, -, @, tab and carriage return; a cell "=HYPERLINK(...)" from a spec name runs on open).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A text cell that cannot start a formula (a leading apostrophe, as OWASP advises); numbers
    are left as numbers (a negative value is data, not a formula)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


__all__ = ["GIB", "SweepResult", "Vary", "parse_vary", "run_sweep", "variants", "write_sweep"]
