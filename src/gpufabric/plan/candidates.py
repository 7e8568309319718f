"""Evaluate a spec's designs (each with its best layout) into :class:`Candidate` records, with their requirement checks."""

from __future__ import annotations

import dataclasses
import gc
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import Any, TypeVar

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model.collectives import ALGORITHMS
from gpufabric.model.memory import GIB
from gpufabric.model.step import StepBreakdown
from gpufabric.model.topology import nic_host_gbps
from gpufabric.plan.anchor import Anchor, layout_efficiencies, solve_anchor, solve_anchors
from gpufabric.plan.evaluate import ROW_FIELDS, Candidate, Evaluation, evaluate_table
from gpufabric.plan.layouts import Layout
from gpufabric.plan.search import LayoutChoice, search_layouts
from gpufabric.plan.table import (
    Design,
    concat_tables,
    enumerate_designs,
    scale_table,
    table_block,
    table_from_block,
)
from gpufabric.spec.models import Spec

_R = TypeVar("_R")


def memory_violation(row: Mapping[str, Any]) -> str | None:
    """'memory ... short by ...' when the row (an evaluated row's values by field) does not fit in HBM, else None."""
    need, cap = row["memory_bytes"], row["memory_capacity_bytes"]
    if need <= cap:
        return None
    return (
        f"memory {need / GIB:.1f} GiB per GPU > {cap / GIB:.0f} GiB HBM (short by {(need - cap) / GIB:.1f} GiB:"
        f" weights {row['memory_weights_bytes'] / GIB:.1f}, grads {row['memory_grads_bytes'] / GIB:.1f},"
        f" optimizer {row['memory_optimizer_bytes'] / GIB:.1f}, activations {row['memory_activations_bytes'] / GIB:.1f},"
        f" reserve {row['memory_reserve_bytes'] / GIB:.1f}); raise zero_stage, tp or pp, or recompute"
    )


def violations_of(spec: Spec, row: Mapping[str, Any]) -> tuple[str, ...]:
    """Requirement violations of one evaluated row (its values by ``Evaluation`` field), each
    'what actual > limit'; memory first."""
    req = spec.requirements
    found = []
    mem = memory_violation(row)
    if mem:
        found.append(mem)
    cv, stall, days = row["step_time_cv"], row["checkpoint_stall_fraction"], row["time_to_train_days"]
    if req.max_step_time_cv is not None and cv > req.max_step_time_cv:
        found.append(f"step_time_cv {cv:.3g} > {req.max_step_time_cv:g}")
    if req.max_checkpoint_stall_fraction is not None and stall > req.max_checkpoint_stall_fraction:
        found.append(f"checkpoint_stall_fraction {stall:.3g} > {req.max_checkpoint_stall_fraction:g}")
    if req.max_time_to_train_days is not None and days > req.max_time_to_train_days:
        found.append(f"time_to_train_days {days:.1f} > {req.max_time_to_train_days:g}")
    if req.budget_usd is not None and row["capex_usd"] > req.budget_usd:
        found.append(f"capex_usd {row['capex_usd'] / 1e6:.1f}M > budget {req.budget_usd / 1e6:.1f}M")
    if req.budget_usd is not None and row["rent_commitment_usd"] > req.budget_usd:
        found.append(
            f"rent_commitment_usd {row['rent_commitment_usd'] / 1e6:.1f}M > budget {req.budget_usd / 1e6:.1f}M"
        )
    if row["dataset_read_gbps_needed"] > row["storage_read_gbps"]:
        found.append(
            f"dataset_read_gbps {row['dataset_read_gbps_needed']:.3g} > storage {row['storage_read_gbps']:.3g}"
        )
    if row["goodput"] <= 0:
        found.append("goodput 0: failures arrive faster than checkpoints complete")
    return tuple(found)


def invalid_outputs(out: Evaluation | dict[str, np.ndarray]) -> dict[int, tuple[str, ...]]:
    """Rows whose model outputs include a NaN, an infinity or a negative number, with those columns.

    Every output is a time, a size, a count, a fraction or money, so none may be negative
    or non-finite; one that is means an input the models were not built for (a catalog
    figure or spec value at an extreme). The candidate then fails a requirement named
    ``model_output`` and is never recommended while a design with sound numbers exists.
    One vectorised pass over the columns: the check costs microseconds per plan.
    """
    columns = out if isinstance(out, dict) else {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    names = [n for n, col in columns.items() if np.ndim(col) == 1 and np.asarray(col).dtype.kind in "biuf"]
    values = np.vstack([np.asarray(columns[n], dtype=float) for n in names])
    bad = ~(np.isfinite(values) & (values >= 0))
    return {int(i): tuple(names[j] for j in np.flatnonzero(bad[:, i])) for i in np.flatnonzero(bad.any(axis=0))}


def _output_violation(columns: tuple[str, ...], design_id: str) -> tuple[str, ...]:
    if not columns:
        return ()
    shown = ", ".join(columns[:4]) + (" ..." if len(columns) > 4 else "")
    return (f"model_output {shown} not a finite non-negative number for design {design_id}",)


def end_to_end(
    step_time_s: float, spec: Spec, peak_tflops: float, figure_flops_per_token: float
) -> tuple[float, float]:
    """(MFU, TFLOP/s per GPU) end to end under the spec's FLOP convention."""
    tflops = figure_flops_per_token * spec.workload.global_batch_tokens / (spec.num_gpus * step_time_s) / 1e12
    return tflops / peak_tflops, tflops


#: StepBreakdown fields read from the evaluated row as they are: breakdown field -> Evaluation field.
_BREAKDOWN_FLOATS = {
    "step_time_s": "step_time_det_s",
    **{
        k: k
        for k in (
            "compute_s",
            "bubble_s",
            "comm_exposed_s",
            "latency_per_step_s",
            "jitter_per_step_s",
            "checkpoint_write_s",
            "checkpoint_block_s",
            "checkpoint_interval_s",
            "restart_s",
            "job_mttf_s",
            "compute_cv",
            "hiccup_prob",
            "hiccup_s",
            "checkpoint_lag_s",
            "checkpoint_drain_slowdown",
        )
    },
}


#: The Evaluation fields a record reads by row (requirement checks and the fields built from them).
_READ = (
    "memory_bytes",
    "memory_capacity_bytes",
    "memory_weights_bytes",
    "memory_grads_bytes",
    "memory_optimizer_bytes",
    "memory_activations_bytes",
    "memory_reserve_bytes",
    "step_time_cv",
    "checkpoint_stall_fraction",
    "time_to_train_days",
    "capex_usd",
    "rent_commitment_usd",
    "dataset_read_gbps_needed",
    "storage_read_gbps",
    "storage_write_gbps",
    "goodput",
    "step_time_s",
    "dependent_steps",
    "nodes_per_leaf",
    "dp_algorithm",
)


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """An evaluation's columns as Python lists, converted once for every record built from it:
    ``raw`` (the fields records read by row), ``copied`` (``ROW_FIELDS`` as ``kind(value) / per``
    and the breakdown's floats, by record field)."""

    raw: dict[str, list[Any]]
    copied: dict[str, list[Any]]
    #: The same by row (tuples in the order of ``raw``, of ``ROW_FIELDS`` and of
    #: ``_BREAKDOWN_FLOATS``): one ``zip`` for the batch, so a record is ``dict(zip(...))``
    #: in C rather than a comprehension over ~50 columns.
    raw_rows: list[tuple[Any, ...]]
    row_rows: list[tuple[Any, ...]]
    breakdown_rows: list[tuple[Any, ...]]


def record_columns(out: Evaluation) -> RecordColumns:
    """``out``'s columns for ``to_records`` (one conversion per column, not one per cell)."""
    lists = {f: getattr(out, f).tolist() for f in _READ}
    copied: dict[str, list[Any]] = {}
    for name, (source, per, kind) in ROW_FIELDS.items():
        copied[name] = _converted(getattr(out, source), per, kind)
    bd = {"bd:" + name: _converted(getattr(out, source), 1, float) for name, source in _BREAKDOWN_FLOATS.items()}
    raw = {f: lists[f] for f in _READ}
    return RecordColumns(
        raw=raw,
        copied=copied | bd,
        raw_rows=list(zip(*raw.values(), strict=True)),
        row_rows=list(zip(*(copied[name] for name in ROW_FIELDS), strict=True)),
        breakdown_rows=list(zip(*(bd["bd:" + name] for name in _BREAKDOWN_FLOATS), strict=True)),
    )


def _converted(col: np.ndarray, per: float, kind: type) -> list[Any]:
    """``[kind(v) / per for v in col]`` (``kind(v)`` for ``per`` 1). A float column's ``tolist``
    is its values as Python floats already, and numpy divides each the way Python does."""
    if kind is float and col.dtype == np.float64:
        return (col if per == 1 else col / per).tolist()
    values = col.tolist()
    return [kind(v) / per for v in values] if per != 1 else [kind(v) for v in values]


def frozen_maker(cls: type[_R], names: Sequence[str]) -> Callable[[Iterable[Any]], _R]:
    """A builder of ``cls`` (a frozen, slotted dataclass without ``__post_init__``) from its
    field values in the order of ``names``, which must name every field once.

    What the generated ``__init__`` of a frozen dataclass does (``object.__setattr__`` per
    field), with the loop in C (``map``) instead of ~60 keyword arguments bound and stored one
    by one: a Candidate costs ~4 us rather than ~8 (measured); a batch builds one per design.
    """
    fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if sorted(names) != sorted(fields) or hasattr(cls, "__post_init__"):
        raise TypeError(f"frozen_maker: {cls.__name__} needs its {len(fields)} fields named once, no __post_init__")
    names, new, store = tuple(names), object.__new__, object.__setattr__
    flush: Callable[[Iterable[None]], None] = deque[None](maxlen=0).extend

    def make(values: Iterable[Any]) -> _R:
        obj = new(cls)
        flush(map(store, repeat(obj), names, values))
        return obj

    return make


#: Candidate fields ``to_records`` sets besides ``ROW_FIELDS``, in the order it gives them.
_OWN = (
    "id",
    "fabric",
    "topology",
    "oversubscription",
    "storage",
    "dp_algorithm",
    "meets_requirements",
    "violations",
    "layout",
    "layout_runner_up",
    "layout_note",
    "mfu",
    "tflops_per_gpu",
    "compute_efficiency",
    "breakdown",
    "capacity",
    "rental",
    "term",
    "in_network_reduction",
    "storage_read_gbps_per_node",
    "storage_write_gbps_per_node",
)
#: The rest keep their defaults (a rented design's break-even fields, set by plan.recommend).
_DEFAULTED = tuple(f for f in dataclasses.fields(Candidate) if f.name not in ROW_FIELDS and f.name not in _OWN)
_DEFAULTS = tuple(f.default for f in _DEFAULTED)
if dataclasses.MISSING in _DEFAULTS:  # a new field without a plain default: to_records must set it
    raise TypeError(
        "to_records sets no value for " + ", ".join(f.name for f in _DEFAULTED if f.default is dataclasses.MISSING)
    )
_candidate = frozen_maker(Candidate, (*ROW_FIELDS, *_OWN, *(f.name for f in _DEFAULTED)))
#: StepBreakdown fields after ``_BREAKDOWN_FLOATS``, in the order ``to_records`` gives them.
_BD_OWN = ("dependent_latency_steps", "num_ranks", "num_nodes", "nodes_per_leaf", "checkpoint_async")
_breakdown = frozen_maker(StepBreakdown, (*_BREAKDOWN_FLOATS, *_BD_OWN))


def to_records(
    spec: Spec,
    designs: Sequence[Design],
    layouts: Sequence[Layout],
    out: Evaluation,
    *,
    peak_tflops: float,
    figure_flops_per_token: Sequence[float] | np.ndarray,
    compute_efficiency: float | Sequence[float] | np.ndarray,
    runner_ups: Sequence[str | None] | None = None,
    notes: Sequence[str] | None = None,
    invalid: dict[int, tuple[str, ...]] | None = None,
    start: int = 0,
    columns: RecordColumns | None = None,
) -> list[Candidate]:
    """Candidate records (with StepBreakdown) from evaluated rows; row ``start + i`` of ``out``
    is ``layouts[i]`` on ``designs[i]``.

    ``invalid``: ``invalid_outputs(out)``, when the caller checked a larger table at once;
    ``columns``: ``record_columns(out)``, when a batch converted them once.
    """
    records = []
    invalid = invalid_outputs(out) if invalid is None else invalid
    k = len(layouts)
    if (
        type(compute_efficiency) is np.ndarray
        and compute_efficiency.shape == (k,)
        and compute_efficiency.dtype == float
    ):
        ce = compute_efficiency.tolist()  # the batch's case, without broadcast_to's ~5 us
    else:
        ce = np.broadcast_to(np.asarray(compute_efficiency, dtype=float), (k,)).tolist()
    ffpt = (
        figure_flops_per_token
        if type(figure_flops_per_token) is tuple  # Anchor.figure_flops_floats
        else np.asarray(figure_flops_per_token, dtype=float).tolist()
    )
    columns = record_columns(out) if columns is None else columns
    raw_names = tuple(columns.raw)
    raw_rows, row_rows, bd_rows = columns.raw_rows, columns.row_rows, columns.breakdown_rows
    nodes, ranks, ckpt_async = spec.cluster.nodes, spec.num_gpus, spec.workload.checkpoint.mode == "async"
    for j, (d, lay) in enumerate(zip(designs, layouts, strict=True)):
        i = start + j
        row = dict(zip(raw_names, raw_rows[i], strict=True))
        bd = _breakdown(
            (
                *bd_rows[i],
                round(float(row["dependent_steps"])),
                ranks,
                nodes,
                int(row["nodes_per_leaf"]),
                ckpt_async,
            )
        )
        did = d.id
        v = _output_violation(invalid.get(i, ()), did) + violations_of(spec, row)
        mfu, tflops = end_to_end(row["step_time_s"], spec, peak_tflops, ffpt[j])
        records.append(
            _candidate(
                (
                    *row_rows[i],
                    # In the order of _OWN.
                    did,
                    d.fabric,
                    d.topology,
                    d.oversubscription,
                    d.storage,
                    ALGORITHMS[int(row["dp_algorithm"])] if lay.dp > 1 else "none",
                    not v,
                    v,
                    lay,
                    runner_ups[j] if runner_ups else None,
                    notes[j] if notes else "",
                    mfu,
                    tflops,
                    ce[j],
                    bd,
                    d.capacity,
                    d.rental or None,
                    d.term or None,
                    d.sharp,
                    float(row["storage_read_gbps"]) / nodes,
                    float(row["storage_write_gbps"]) / nodes,
                    *_DEFAULTS,
                )
            )
        )
    return records


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """What every scenario of one plan shares: the throughput anchor and the chosen layouts."""

    anchor: Anchor
    designs: list[Design]
    choice: LayoutChoice
    notes: tuple[str, ...] = ()


@lru_cache(maxsize=64)
def _nic_host_gbps(pcie_gen: Any, lanes: Any) -> float:
    """``model.topology.nic_host_gbps`` of one server, by its two inputs (numpy on scalars: ~5 us)."""
    return float(nic_host_gbps(pcie_gen, lanes))


def host_feasible(spec: Spec, catalog: Catalog, designs: Sequence[Design]) -> tuple[list[Design], list[str]]:
    """Designs whose NIC the server's PCIe slot can feed, and a note per fabric left out.

    Raises:
        InputError: no fabric in options.fabrics fits the server's host interface.
    """
    gpu = catalog.gpu(spec.cluster.gpu)
    host = _nic_host_gbps(gpu.nic_pcie_gen, gpu.nic_pcie_lanes)
    keep, notes = [], []
    for fabric in dict.fromkeys(d.fabric for d in designs):
        line = catalog.fabric(fabric).nic_line_gbps
        if line > host:
            notes.append(
                f"{fabric} left out: its NIC moves {line:g} GB/s but a {spec.cluster.gpu} server gives each NIC"
                f" PCIe Gen{gpu.nic_pcie_gen} x{gpu.nic_pcie_lanes} ({host:.1f} GB/s usable)"
            )
    dropped = {n.split(" ", 1)[0] for n in notes}
    keep = [d for d in designs if d.fabric not in dropped]
    if not keep:
        raise InputError(
            f"no fabric in options.fabrics fits the host interface of {spec.cluster.gpu}: " + "; ".join(notes)
        )
    return keep, notes


def prepare(
    spec: Spec, catalog: Catalog, anchor: Anchor | None = None, *, checked: bool = False, layout: Layout | None = None
) -> Prepared:
    """Solve the throughput anchor (unless given), drop NICs the host cannot feed, search the layouts (once per plan).

    ``checked``: the caller ran ``check_options`` on this spec already (a batch, before its solve);
    ``layout``: the spec's own layout (``spec_layout``) of a fixed spec, when the caller has it."""
    if not checked:
        from gpufabric.plan.capacity import check_options

        check_options(spec, catalog)  # also tp against the NVLink domain
    if anchor is None:
        anchor = solve_anchor(spec, catalog)
        layout = _own_layout(anchor) or layout
    designs, notes = host_feasible(spec, catalog, enumerate_designs(spec, catalog))
    return Prepared(
        anchor=anchor,
        designs=designs,
        notes=tuple(notes),
        choice=search_layouts(spec, catalog, designs, anchor, layout=layout),
    )


def _own_layout(anchor: Anchor) -> Layout | None:
    """``spec_layout(spec)`` where ``anchor`` was solved from ``spec`` and assumed its measured
    point (no measured_at: the spec's own fixed layout, plan.anchor), else None."""
    return anchor.measured_layout if anchor.assumed else None


def _chosen(
    spec: Spec, catalog: Catalog, p: Prepared, memo: dict[Any, Any] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The table block of every design on its chosen layout (row i: design i), and the layouts' efficiencies
    (``memo``: the batch's, ``table_block``)."""
    k = len(p.designs)
    effs = layout_efficiencies(p.anchor, spec, catalog, p.choice.layouts)
    pairs = (np.arange(k), np.arange(k)) if k != 1 else None  # one: the same row as no pairs
    block = table_block(spec, catalog, p.designs, p.choice.layouts, pairs=pairs, compute_efficiency=effs, memo=memo)
    return block, effs


def _records(
    spec: Spec,
    p: Prepared,
    effs: np.ndarray,
    out: Evaluation,
    invalid: dict[int, tuple[str, ...]] | None = None,
    *,
    start: int = 0,
    columns: RecordColumns | None = None,
) -> list[Candidate]:
    return to_records(
        spec,
        p.designs,
        p.choice.layouts,
        out,
        peak_tflops=p.anchor.peak_tflops,
        figure_flops_per_token=p.anchor.figure_flops_floats(p.choice.layouts),
        compute_efficiency=effs,
        runner_ups=p.choice.runner_ups,
        notes=p.choice.notes,
        invalid=invalid,
        start=start,
        columns=columns,
    )


def evaluate_scenarios(
    spec: Spec, catalog: Catalog, scenarios: Sequence[tuple[float, float]], prepared: Prepared | None = None
) -> list[list[Candidate]]:
    """Candidates under several (network_latency, storage_latency) multipliers, in one vectorised pass.

    The throughput anchor is solved and the layout searched once, at (1, 1) (``prepare``);
    the scenarios then re-evaluate the chosen layouts exactly.
    """
    p = prepared or prepare(spec, catalog)
    k = len(p.designs)
    block, effs = _chosen(spec, catalog, p)
    base = table_from_block(block)
    tables = [scale_table(base, network_latency=n, storage_latency=s) for n, s in scenarios]
    out = evaluate_table(concat_tables(tables))
    return [_records(spec, p, effs, out.take(slice(i * k, (i + 1) * k))) for i in range(len(scenarios))]


def evaluate_candidates(
    spec: Spec, catalog: Catalog, *, network_latency: float = 1.0, storage_latency: float = 1.0
) -> list[Candidate]:
    """Evaluate every design the spec's options allow (with the best layout for each).

    Args:
        network_latency, storage_latency: multipliers for sensitivity analysis.
    """
    return evaluate_scenarios(spec, catalog, [(network_latency, storage_latency)])[0]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (unless it was off already).

    A batch allocates ~10^3 objects per spec (records, anchors, layouts) and keeps them, so
    the collector's generation-0 threshold (700) fires over and over and its older
    generations rescan the batch's growing live set: ~10% of a 1,000-spec batch's CPU time
    (measured, interleaved). The batch builds no reference cycles of its own to collect;
    whatever the caller's other threads create meanwhile is collected once it is back on.
    Threads: one that finds it already off leaves it off on the way out, so the last one out
    turns it back on; at worst it is back on while another batch still runs.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def evaluate_batch(specs: Sequence[Spec], catalog: Catalog) -> list[list[Candidate]]:
    """``evaluate_candidates`` of every spec (the same records), in a few shared table passes:
    the throughput anchors solved together (``solve_anchors``), then every spec's chosen rows
    stacked into one table (spec-level inputs are columns like any other) and evaluated once.
    The layout search of a spec with several layouts still runs per spec. The garbage
    collector is paused meanwhile (``_collector_paused``)."""
    with _collector_paused():
        return _evaluate_batch(specs, catalog)


def _evaluate_batch(specs: Sequence[Spec], catalog: Catalog) -> list[list[Candidate]]:
    from gpufabric.plan.capacity import check_options

    for spec in specs:
        check_options(spec, catalog)  # before the solve, as prepare does
    memo: dict[Any, Any] = {}  # shared columns of the batch's table blocks (table_block)
    anchors = solve_anchors(specs, catalog, memo)
    preps = [prepare(s, catalog, a, checked=True, layout=_own_layout(a)) for s, a in zip(specs, anchors, strict=True)]
    chosen = [_chosen(s, catalog, p, memo) for s, p in zip(specs, preps, strict=True)]
    if not chosen:
        return []
    out = evaluate_table(table_from_block(np.concatenate([b for b, _ in chosen], axis=1)))
    ends = np.cumsum([0] + [b.shape[1] for b, _ in chosen]).tolist()
    bad = invalid_outputs(out)  # one pass over the whole table (global row numbers)
    columns = record_columns(out)  # one conversion for the batch
    return [
        _records(s, p, effs, out, bad, start=ends[i], columns=columns)
        for i, (s, p, (_, effs)) in enumerate(zip(specs, preps, chosen, strict=True))
    ]
