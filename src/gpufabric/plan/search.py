"""Layout search: the best feasible layout for every design (docs/planner.md, "Layout search").

1. Every layout the spec allows (plan/layouts.py) gets its per-GPU memory, which does not
   depend on the design; layouts that do not fit in HBM are dropped (when none fits, the
   one closest to fitting is kept, so the plan reports the memory violation).
2. Every remaining layout x design is evaluated in vectorised chunks, the tail integral
   shared on a 2% grid (``model.tail.barrier_stats(quantise=True)``).
3. Per design the layout with the shortest time to train wins (for one design, capex and
   $/GPU-hour are fixed, so this is also the cheapest run); the runner-up layout and what
   makes it slower are kept for the rationale. The chosen layouts are then evaluated
   exactly by the caller.
4. The note says which compute efficiencies were assumed (each layout's own, from the
   compute-efficiency model or the anchor moved by it), and when the winner lies outside
   the anchor's envelope: GEMM shapes the anchor did not measure (tp, cp, microbatch), or
   an end-to-end MFU above the anchor's by more than ``ENVELOPE_MFU`` (bubble or
   communication the measured run paid and this layout is predicted not to: an upper bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.plan.anchor import Anchor, layout_efficiencies
from gpufabric.plan.evaluate import evaluate_table, memory_of
from gpufabric.plan.layouts import Layout, enumerate_layouts, spec_layout
from gpufabric.plan.table import Design, build_table, nvlink_domain
from gpufabric.spec.models import Spec

#: Relative rise of the end-to-end MFU over the anchor's beyond which the note calls the
#: prediction an extrapolation (the anchor measured bubble and communication the winner
#: is predicted to avoid).
ENVELOPE_MFU = 0.10
#: Rows per evaluation chunk: bounds memory (~1 kB per row across the columns).
CHUNK_ROWS = 65_536
#: Step-time parts compared to say why the runner-up is slower.
_PARTS = (
    ("compute_s", "compute (recomputation, GEMM efficiency)"),
    ("bubble_s", "pipeline bubble"),
    ("tp_exposed_s", "tensor-parallel comm"),
    ("dp_exposed_s", "data-parallel comm"),
    ("pp_exposed_s", "pipeline comm"),
    ("ep_exposed_s", "expert all-to-all"),
    ("cp_exposed_s", "context-parallel ring"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutChoice:
    """The layout chosen for each design (same order as the designs), with the runner-up."""

    layouts: list[Layout]
    runner_ups: list[str | None]
    notes: list[str]
    searched: int
    feasible: int
    evaluated_rows: int


def feasible_layouts(
    spec: Spec, catalog: Catalog, layouts: Sequence[Layout], design: Design
) -> tuple[list[int], np.ndarray]:
    """Indices of the layouts that fit in memory (or the closest one), and every layout's memory bytes."""
    t = build_table(spec, catalog, [design], layouts)
    mem = memory_of(t)
    total = np.asarray(mem.total_bytes)
    fits = np.flatnonzero(total <= np.asarray(mem.capacity_bytes))
    return (list(fits) if len(fits) else [int(np.argmin(total - mem.capacity_bytes))]), total


def envelope_note(anchor: Anchor, spec: Spec, layout: Layout, efficiency: float, step_s: float) -> str:
    """'; outside the anchor's envelope: ...' when ``layout`` extrapolates the anchor (module docstring), else ''."""
    lay = anchor.measured_layout
    if lay is None:
        return ""
    shapes = [
        f"{k} {getattr(layout, k)} (measured {getattr(lay, k)})"
        for k in ("tp", "cp", "microbatch_size")
        if getattr(layout, k) != getattr(lay, k)
    ]
    figure = float(anchor.figure_flops_per_token([layout])[0])
    mfu = figure * spec.workload.global_batch_tokens / (spec.num_gpus * step_s * anchor.peak_tflops * 1e12)
    measured = anchor.figure if anchor.kind == "mfu" else anchor.figure / anchor.peak_tflops
    out = []
    if shapes:
        out.append(
            f"GEMM shapes it did not measure ({', '.join(shapes)}): compute efficiency {efficiency:.2f} from the"
            f" model against the {anchor.compute_efficiency:.2f} measured at the anchor's shapes"
        )
    if mfu > measured * (1 + ENVELOPE_MFU):
        out.append(
            f"end-to-end MFU {mfu:.0%} against the {measured:.0%} measured: bubble and communication it paid are"
            " predicted away, an upper bound"
        )
    return f"; outside the anchor's envelope: {'; '.join(out)}" if out else ""


def search_layouts(
    spec: Spec, catalog: Catalog, designs: Sequence[Design], anchor: Anchor, *, layout: Layout | None = None
) -> LayoutChoice:
    """Best layout per design (module docstring); ``layout``: ``spec_layout(spec)`` of a fixed
    spec, when the caller has it already (the anchor's measured layout, assumed)."""
    if layout is not None:
        layouts = [layout]
    elif spec.searched:
        layouts = enumerate_layouts(spec, nvlink_domain(spec, catalog.gpu(spec.cluster.gpu)))
    else:  # a fixed layout (enumerate_layouts' answer, without the NVLink domain it does not read)
        layouts = [spec_layout(spec)]
    if len(layouts) == 1 or not designs:
        return LayoutChoice(
            layouts=[layouts[0]] * len(designs),
            runner_ups=[None] * len(designs),
            notes=[""] * len(designs),
            searched=1,
            feasible=1,
            evaluated_rows=0,
        )
    effs = layout_efficiencies(anchor, spec, catalog, layouts)
    keep, _ = feasible_layouts(spec, catalog, layouts, designs[0])
    D = len(designs)
    li_all = np.repeat(np.asarray(keep), D)
    di_all = np.tile(np.arange(D), len(keep))
    days = np.empty(len(li_all))
    parts = {k: np.empty(len(li_all)) for k, _ in _PARTS}
    step = np.empty(len(li_all))
    for lo in range(0, len(li_all), CHUNK_ROWS):
        sl = slice(lo, lo + CHUNK_ROWS)
        t = build_table(spec, catalog, designs, layouts, pairs=(li_all[sl], di_all[sl]), compute_efficiency=effs)
        out = evaluate_table(t, quantise_tail=True)
        days[sl] = out.time_to_train_days
        step[sl] = out.step_time_s
        for k, _ in _PARTS:
            parts[k][sl] = getattr(out, k)
    chosen, runner_ups, notes = [], [], []
    kept = effs[np.asarray(keep)]
    source = {"model": "the compute-efficiency model", "compute_efficiency": "given"}.get(
        anchor.kind, "the anchor moved by the compute-efficiency model"
    )
    assumed = f"compute efficiency {kept.min():.2f}-{kept.max():.2f} assumed across them ({source})"
    for d in range(D):
        rows = np.flatnonzero(di_all == d)
        order = rows[np.argsort(days[rows], kind="stable")]
        best = order[0]
        chosen.append(layouts[li_all[best]])
        note = f"searched {len(layouts)} layouts, {len(keep)} fit in memory; {assumed}"
        note += envelope_note(anchor, spec, layouts[li_all[best]], float(effs[li_all[best]]), float(step[best]))
        if len(order) > 1:
            ru = order[1]
            runner_ups.append(layouts[li_all[ru]].text)
            diffs = sorted(((parts[k][ru] - parts[k][best], label) for k, label in _PARTS), reverse=True)
            why = f"more {diffs[0][1]} (+{diffs[0][0]:.3g} s)" if diffs[0][0] > 0 else "a longer tail"
            note += f"; runner-up {layouts[li_all[ru]].text}: step {step[ru] / step[best] - 1:+.1%}, {why}"
        else:
            runner_ups.append(None)
        notes.append(note)
    return LayoutChoice(
        layouts=chosen,
        runner_ups=runner_ups,
        notes=notes,
        searched=len(layouts),
        feasible=len(keep),
        evaluated_rows=len(li_all),
    )
