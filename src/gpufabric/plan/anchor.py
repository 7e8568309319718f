"""The throughput anchor: from a published figure to the compute efficiency that reproduces it.

A published MFU or TFLOP/s per GPU is end to end: model FLOPs of one step (under a
named convention, model.flops) over GPUs x peak x the measured step time, bubble and
communication included. The planner needs the efficiency of the compute part alone
(executed FLOPs / peak while computing), because bubble and communication differ per
candidate. So it evaluates the measured point (``throughput.measured_at``, else the
spec's own layout on the first of ``options.fabrics``) for a grid of compute
efficiencies, and solves for the one whose predicted mean step time equals the step time
the figure implies: ``T* = F_figure / (GPUs x peak x MFU)`` or ``F_figure / (GPUs x TFLOP/s)``.
The mean step time is decreasing in the efficiency, so the root is unique.

The measured point is evaluated at its own work per step: ``measured_at.global_batch_tokens``
and ``measured_at.seq_len`` (defaults: the spec's) and its context parallelism. The
efficiency it solves is then moved to every other layout by the compute-efficiency model
(model.efficiency): ``eff(layout) = eff_anchor x model(layout) / model(anchor layout)``,
so a layout with other GEMM shapes (tp, cp, microbatch, sequence) gets the model's ratio,
not the anchor's number. A spec with no throughput figure at all takes the model's
efficiency directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model import efficiency as eff_model
from gpufabric.model.flops import RECOMPUTE, flops_per_token
from gpufabric.model.memory import activation_bytes_per_layer
from gpufabric.plan.evaluate import CommFixed, comm_fixed, step_and_compute_s, step_time_s
from gpufabric.plan.layouts import Layout, enumerate_layouts, spec_layout
from gpufabric.plan.table import Design, Table, _peak, model_scalars, nvlink_domain, table_block, table_from_block
from gpufabric.spec.models import AUTO, Spec


@dataclass(frozen=True, slots=True, kw_only=True)
class Anchor:
    """How the spec's throughput figure was read, and the compute efficiency it implies."""

    kind: str  # mfu | tflops_per_gpu | compute_efficiency | model (no figure: model.efficiency)
    figure: float
    flops: str  # 6pt | megatron
    measured_gpus: int
    measured_layout: Layout | None
    measured_fabric: str | None
    assumed: bool  # measured_at omitted: the spec's layout on the first fabric
    compute_efficiency: float
    peak_tflops: float
    anchor_step_s: float | None  # the step time the figure implies at the measured point
    params_active: float
    model_shape: tuple[float, float, float, float]  # layers, hidden, seq_len, vocab
    notes: tuple[str, ...]
    scale: float = 1.0  # solved efficiency / the model's at the anchor layout (1: model or given)
    model_at_anchor: float | None = None  # the efficiency model at the measured layout
    measured_batch_tokens: int | None = None
    measured_seq_len: int | None = None

    def figure_flops_per_token(self, layouts: Sequence[Layout]) -> np.ndarray:
        """Model FLOPs per token under the figure's convention, for each layout (megatron counts its recomputation)."""
        return np.array(self.figure_flops_floats(layouts), dtype=float)

    def figure_flops_floats(self, layouts: Sequence[Layout]) -> tuple[float, ...]:
        """``figure_flops_per_token`` as Python floats (without the array: a record reads one)."""
        codes = tuple(RECOMPUTE.index(lay.recompute) for lay in layouts)
        return _figure_flops(self.params_active, self.model_shape, codes, self.flops)

    @property
    def text(self) -> str:
        """One paragraph for the plan: convention, anchor point, and the solved efficiency."""
        conv = (
            "6PT FLOPs (6 x active params x tokens)"
            if self.flops == "6pt"
            else "Megatron FLOPs (Narayanan et al. SC'21 eq. 3: attention and recomputation counted)"
        )
        if self.kind == "model":
            return (
                "Throughput: no figure given; each layout's compute efficiency comes from the compute-efficiency"
                " model (model.efficiency: GEMM shapes, attention and memory-bound work on this GPU and precision,"
                " docs/accuracy.md for its error); bubble and communication come on top, and each candidate's"
                " end-to-end MFU follows from its step time (reported in " + conv + ")."
            )
        if self.kind == "compute_efficiency":
            return (
                f"Throughput: compute efficiency {self.figure:g} {'assumed' if self.assumed else 'given'} (executed FLOPs, attention and recomputation"
                " included, over peak while computing); bubble and communication come on top, and each candidate's"
                " end-to-end MFU follows from its step time (reported in " + conv + ")."
            )
        what = (
            f"end-to-end MFU {self.figure:g}" if self.kind == "mfu" else f"end-to-end {self.figure:g} TFLOP/s per GPU"
        )
        lay = self.measured_layout
        assert lay is not None  # set for every figure but compute_efficiency (handled above)
        batch = (
            f", {self.measured_batch_tokens:,} tokens per step of {self.measured_seq_len:,}"
            if self.measured_batch_tokens
            else ""
        )
        where = (
            f"{self.measured_gpus:,} GPUs, tp{lay.tp}{f' cp{lay.cp}' if lay.cp > 1 else ''} pp{lay.pp} dp{lay.dp}"
            f"{f' v{lay.virtual_stages}' if lay.virtual_stages > 1 else ''}, {lay.microbatches} microbatches,"
            f" recompute {lay.recompute}{batch}, on {self.measured_fabric}"
        )
        src = (
            "taken as measured with the spec's own layout on the first of options.fabrics (no"
            " throughput.measured_at given)"
            if self.assumed
            else "measured at throughput.measured_at"
        )
        return (
            f"Throughput: {what} in {conv}, {src}: {where} (step {self.anchor_step_s:.3g} s). The compute efficiency"
            f" that reproduces it there is {self.compute_efficiency:.3f}; every candidate is predicted from it,"
            " moved to other layouts by the compute-efficiency model's ratio"
            + (f" (the model gives {self.model_at_anchor:.3f} at the anchor)." if self.model_at_anchor else ".")
        )


@lru_cache(maxsize=1024)
def _figure_flops(
    params_active: float, shape: tuple[float, float, float, float], codes: tuple[int, ...], convention: str
) -> tuple[float, ...]:
    """``model.flops.flops_per_token`` of ``Anchor.figure_flops_per_token``, by its inputs (a
    batch of one model's specs asks for the same few; numpy on one layout costs ~10 us)."""
    layers, hidden, seq, vocab = shape
    out = flops_per_token(
        params_active=params_active,
        layers=layers,
        hidden=hidden,
        seq_len=seq,
        vocab=vocab,
        recompute=np.array(codes, dtype=float),
        convention=convention,
    )
    return tuple(np.broadcast_to(out, (len(codes),)).tolist())


def _measured(spec: Spec) -> tuple[Layout, int, str, bool, int, int]:
    """The measured layout, GPUs, fabric, whether it was assumed, and its batch tokens and sequence."""
    th = spec.workload.throughput
    ma = th.measured_at
    par = spec.workload.parallelism
    w = spec.workload
    if ma is None:
        if spec.searched:
            raise InputError(
                f"{spec.name}: workload.throughput.{th.kind} needs throughput.measured_at when the layout is searched"
                " (parallelism: auto): say which layout and fabric the figure was measured on, or give"
                " throughput.compute_efficiency"
            )
        return spec_layout(spec), spec.num_gpus, spec.options.fabrics[0], True, w.global_batch_tokens, w.model.seq_len
    gpn = spec.cluster.gpus_per_node
    if ma.gpus % gpn:
        raise InputError(f"workload.throughput.measured_at.gpus = {ma.gpus} is not a multiple of gpus_per_node = {gpn}")
    batch = ma.global_batch_tokens or w.global_batch_tokens
    seq = ma.seq_len or w.model.seq_len
    if seq % ma.cp:
        raise InputError(
            f"workload.throughput.measured_at: cp = {ma.cp} does not divide its seq_len = {seq}; give the measured"
            " seq_len or cp"
        )
    seqs = batch // seq
    if seqs // ma.dp < ma.microbatch_size:
        raise InputError(
            f"workload.throughput.measured_at: dp = {ma.dp} leaves less than one microbatch per replica"
            f" of the global batch ({seqs} sequences of {seq:,} tokens); give measured_at.global_batch_tokens"
        )
    rc = ma.recompute or (w.recompute if w.recompute != AUTO else ("full" if th.flops == "megatron" else "none"))
    zero = ma.zero_stage if ma.zero_stage is not None else (int(par.zero_stage) if par.zero_stage != AUTO else 0)
    ep = par.ep if ma.dp % par.ep == 0 else 1
    lay = Layout(
        tp=ma.tp,
        pp=ma.pp,
        dp=ma.dp,
        ep=ep,
        microbatch_size=ma.microbatch_size,
        microbatches=ma.microbatches or seqs // ma.dp // ma.microbatch_size,
        virtual_stages=ma.virtual_stages,
        zero_stage=zero,
        recompute=rc,
        cp=ma.cp,
    )
    return lay, ma.gpus, ma.fabric or spec.options.fabrics[0], False, batch, seq


def _efficiency_inputs(spec: Spec, catalog: Catalog, layouts: Sequence[Layout]) -> dict[str, Any]:
    """``model.efficiency.layer_efficiency``'s arguments for each layout of ``spec`` on its GPU,
    with the inputs ``activation_bytes`` needs that are not arguments already (``_ACT_ONLY``)
    instead of it (``_layer_efficiency``)."""
    w = spec.workload
    m = w.model
    sc = model_scalars(spec)
    peak_bf16, hbm, gemm, attention, sms = _gpu_efficiency_inputs(catalog, spec.cluster.gpu, w.precision)
    # One conversion of a fields x layouts list (tp, cp, microbatch_size, ep, recompute code).
    tp, cp, mbs, ep, rc = np.array(
        [[getattr(lay, k) for lay in layouts] for k in ("tp", "cp", "microbatch_size", "ep")]
        + [[RECOMPUTE.index(lay.recompute) for lay in layouts]],
        dtype=float,
    ).reshape(5, len(layouts))
    col = {"tp": tp, "cp": cp, "microbatch_size": mbs, "ep": ep}
    # MoE: each GPU's experts (experts / ep of them) see top_k x ep / experts of the tokens each.
    expert_tokens = m.top_k * col["ep"] / m.experts if m.experts > 1 else 1.0
    local_experts = m.experts / col["ep"] if m.experts > 1 else 1.0
    # model.flops.layer_params on one spec's scalars, in Python floats (the same operations in
    # the same order, so the same bits; numpy on scalars costs ~10 us a call).
    per_layer = max(float(sc["params_active"]) - 2.0 * m.vocab * m.hidden, 0.0) / m.layers
    base = dict(
        hidden=m.hidden,
        ffn_hidden=sc["ffn_hidden"],
        kv_ratio=sc["kv_ratio"],
        gated=m.gated_mlp,
        seq_len=m.seq_len,
        microbatch_size=col["microbatch_size"],
        tp=col["tp"],
        cp=col["cp"],
        layer_params=per_layer,
        recompute=rc,
        peak_tflops=_peak(catalog.gpu(spec.cluster.gpu), w.precision),
        peak_bf16_tflops=peak_bf16,
        hbm_gbps=hbm,
        gemm_efficiency=gemm,
        attention_efficiency=attention,
        fp8=w.precision == "fp8",
        sms=sms,
        heads=sc["heads"],
        flash_attention=w.flash_attention,
        expert_tokens=expert_tokens,
        local_experts=local_experts,
    )
    return base | {"sequence_parallel": w.parallelism.sequence_parallel, "dropout": m.dropout}


#: ``activation_bytes_per_layer``'s inputs that ``layer_efficiency`` does not take.
_ACT_ONLY = ("sequence_parallel", "dropout")


def _activation_bytes(cols: dict[str, Any]) -> np.ndarray:
    """The activation bytes per layer the efficiency model reads (elementwise: one spec's
    scalars and layouts, or a batch's stacked columns give the same numbers)."""
    return activation_bytes_per_layer(
        seq_len=cols["seq_len"],
        microbatch_size=cols["microbatch_size"],
        hidden=cols["hidden"],
        heads=cols["heads"],
        tp=cols["tp"],
        sequence_parallel=cols["sequence_parallel"],
        recompute=0,
        flash_attention=cols["flash_attention"],
        ffn_hidden=cols["ffn_hidden"],
        kv_ratio=cols["kv_ratio"],
        gated=cols["gated"],
        dropout=cols["dropout"],
        cp=cols["cp"],
    )


def _layer_efficiency(stacked: dict[str, Any]) -> np.ndarray:
    """``layer_efficiency`` of ``_efficiency_inputs`` (one spec's), or of the same inputs as a
    table's columns (``table_efficiencies``)."""
    stacked = dict(stacked)
    stacked["activation_bytes"] = _activation_bytes(stacked)
    for k in _ACT_ONLY:
        del stacked[k]
    return np.asarray(eff_model.layer_efficiency(**stacked), dtype=float)


def _gpu_efficiency_inputs(catalog: Catalog, gpu_id: str, precision: str) -> tuple[float, float, float, float, float]:
    """The GPU's figures ``_efficiency_inputs`` reads besides the table's: bf16 peak, HBM GB/s,
    GEMM and attention efficiency, SMs."""
    gpu = catalog.gpu(gpu_id)
    gen = eff_model.generation_of(gpu_id, gpu.generation)
    return (
        gpu.peak_bf16_tflops,
        gpu.hbm_gbps,
        eff_model.gemm_efficiency(gpu, gen, precision),
        eff_model.ATTENTION_EFFICIENCY[gen],
        eff_model.SMS[gen],
    )


def table_efficiencies(specs: Sequence[Spec], table: Table, catalog: Catalog) -> np.ndarray:
    """``model_efficiency`` of each row of ``table``, row i a layout of ``specs[i]`` on its GPU.

    The table's columns are the model's inputs (``table_block`` wrote them from the same spec
    and layout: ``model_scalars``, the layout's fields), so only the GPU's figures and the
    expert count are read per spec: a batch's measured points without ``_efficiency_inputs``
    per spec (~10 us each). Every input is a float the model would convert to the same float,
    and the few derived here are the same operations in the same order, so the numbers are
    ``model_efficiency``'s to the bit (tests/api/test_evaluate_batch.py)."""
    gpus: dict[tuple[str, str], tuple[float, ...]] = {}
    rows = []
    for spec in specs:
        key = (spec.cluster.gpu, spec.workload.precision)
        g = gpus.get(key)
        if g is None:
            g = gpus[key] = (*_gpu_efficiency_inputs(catalog, *key), key[1] == "fp8")
        rows.append((*g, spec.workload.model.experts))
    bf16, hbm, gemm, attn, sms, fp8, experts = np.array(rows, dtype=float).reshape(len(specs), 7).T
    t = table
    moe = experts > 1
    with np.errstate(divide="ignore", invalid="ignore"):  # ep > 0 and experts >= 1 (spec); the guard
        expert_tokens = np.where(moe, t.top_k * t.ep / experts, 1.0)
        local_experts = np.where(moe, experts / t.ep, 1.0)
    return _layer_efficiency(
        dict(
            hidden=t.hidden,
            ffn_hidden=t.ffn_hidden,
            kv_ratio=t.kv_ratio,
            gated=t.gated_mlp,
            seq_len=t.seq_len,
            microbatch_size=t.microbatch_size,
            tp=t.tp,
            cp=t.cp,
            # model.flops.layer_params, as _efficiency_inputs takes it.
            layer_params=np.maximum(t.params_active - 2.0 * t.vocab * t.hidden, 0.0) / t.layers,
            recompute=t.recompute,
            peak_tflops=t.peak_tflops,
            peak_bf16_tflops=bf16,
            hbm_gbps=hbm,
            gemm_efficiency=gemm,
            attention_efficiency=attn,
            fp8=fp8.astype(bool),
            sms=sms,
            heads=t.heads,
            flash_attention=t.flash_attention,
            expert_tokens=expert_tokens,
            local_experts=local_experts,
            sequence_parallel=t.sequence_parallel,
            dropout=t.dropout,
        )
    )


def model_efficiency(spec: Spec, catalog: Catalog, layouts: Sequence[Layout]) -> np.ndarray:
    """The compute-efficiency model (model.efficiency) for each layout of ``spec`` on its GPU."""
    return _layer_efficiency(_efficiency_inputs(spec, catalog, layouts))


def layout_efficiencies(anchor: Anchor, spec: Spec, catalog: Catalog, layouts: Sequence[Layout]) -> np.ndarray:
    """Compute efficiency of each layout: the given one, the model's, or the anchor's moved by the model.

    A layout with the anchor's GEMM shapes (tp, cp, microbatch size and sequence) gets the
    model x the anchor's scale, so the anchor point reproduces its figure. Other shapes get
    the model's value scaled by at most 1: an anchor above the model shows that the model
    overcounted something at *that* layout (overlap, tuned kernels), and it cannot say
    whether compute or communication, so the planner does not carry the excess to shapes
    it did not measure (the search's note says when it extrapolates, plan.search).
    """
    if anchor.kind == "compute_efficiency" or not layouts:
        return np.full(len(layouts), anchor.compute_efficiency)
    lay = anchor.measured_layout
    same_seq = anchor.measured_seq_len in (None, spec.workload.model.seq_len)
    if anchor.kind != "model" and anchor.model_at_anchor is not None and same_seq and layouts == [lay]:
        # One layout, the measured one (a fixed layout): the lines below in Python floats
        # (the same operations, so the same bits; numpy on one element costs ~10 us).
        return np.array([min(anchor.model_at_anchor * anchor.scale, 1.0)])
    if anchor.model_at_anchor is not None and same_seq and all(x == lay for x in layouts):
        # The measured layout itself (a fixed layout): the model's value there is already known
        # (model_efficiency reads neither the node count nor the batch, where the two points differ).
        model = np.full(len(layouts), anchor.model_at_anchor)
    else:
        model = model_efficiency(spec, catalog, layouts)
    if anchor.kind == "model":
        return model
    measured = np.array(
        [
            same_seq and lay is not None and (x.tp, x.cp, x.microbatch_size) == (lay.tp, lay.cp, lay.microbatch_size)
            for x in layouts
        ]
    )
    scale = np.where(measured, anchor.scale, min(anchor.scale, 1.0))
    return np.minimum(model * scale, 1.0)


#: The efficiencies the solve brackets the root on: a coarse geometric grid, then 65 linear
#: points between the two coarse neighbours of the root (interpolated in 1 / efficiency).
GRID = np.geomspace(1e-3, 1.0, 61)
FINE_POINTS = 65
#: Where the solve's first guess probes: a typical compute efficiency (docs/accuracy.md: the
#: anchors of the shipped examples solve to 0.3-0.7); only the number of passes depends on it.
GUESS_EFFICIENCY = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class _Problem:
    """One spec's measured point, ready to solve: its one-row table and the step time to reach."""

    #: The Anchor's fields but the solve's (compute_efficiency, anchor_step_s, scale,
    #: model_at_anchor): the record is built once, solved (``solve_anchors``).
    fields: dict[str, Any]
    at: Spec  # the spec at the measured point's size and work per step
    block: np.ndarray  # its one-row table (plan.table.table_block)
    target_s: float


def _stage(spec: Spec, catalog: Catalog, memo: dict[Any, Any] | None = None) -> Anchor | _Problem:
    """The spec's anchor when no solve is needed (a given efficiency, or none: the model), else its problem
    (``memo``: the batch's, ``table_block``)."""
    w = spec.workload
    th = w.throughput
    kind = th.kind  # a property that searches the fields: read once
    scal = model_scalars(spec)
    peak = _peak(catalog.gpu(spec.cluster.gpu), w.precision)
    shape = (float(w.model.layers), float(w.model.hidden), float(w.model.seq_len), float(w.model.vocab))
    figure = float(getattr(th, kind))  # th.value
    params_active = float(scal["params_active"])
    # The Anchor's fields every branch sets alike.
    common: dict[str, Any] = dict(
        kind=kind,
        figure=figure,
        flops=th.flops,
        peak_tflops=peak,
        params_active=params_active,
        model_shape=shape,
        notes=w.notes,
    )

    def anchor(*, assumed: bool, efficiency: float) -> Anchor:
        """No measured point: the anchor at the spec's own size."""
        return Anchor(
            **common,
            measured_gpus=spec.num_gpus,
            measured_layout=None,
            measured_fabric=None,
            assumed=assumed,
            compute_efficiency=efficiency,
            anchor_step_s=None,
        )

    if kind == "compute_efficiency":
        return anchor(assumed=False, efficiency=figure)
    if "throughput" not in w.model_fields_set:
        # No figure in the spec: the compute-efficiency model, at the spec's own layout for
        # the record (every layout gets its own value, layout_efficiencies).
        if spec.searched:  # no one layout: the median over the layouts the search will consider
            domain = nvlink_domain(spec, catalog.gpu(spec.cluster.gpu))
            at_spec = float(np.median(model_efficiency(spec, catalog, enumerate_layouts(spec, domain))))
        else:
            at_spec = float(model_efficiency(spec, catalog, [spec_layout(spec)])[0])
        return replace(
            anchor(assumed=True, efficiency=at_spec),
            kind="model",
            figure=at_spec,
        )
    layout, gpus, fabric, assumed, batch, seq = _measured(spec)
    catalog.fabric(fabric)  # unknown id: CatalogError naming the known ones
    o = spec.options
    design = Design(
        fabric=fabric, topology=o.topologies[0], oversubscription=float(o.oversubscription[0]), storage=o.storage[0]
    )
    # The measured point at its own size and work per step (measured_at.global_batch_tokens, seq_len).
    same = gpus == spec.num_gpus and batch == w.global_batch_tokens and seq == w.model.seq_len
    at = (
        spec
        if same
        else spec.model_copy(
            update={
                "cluster": spec.cluster.model_copy(update={"nodes": gpus // spec.cluster.gpus_per_node}),
                "workload": w.model_copy(
                    update={"global_batch_tokens": batch, "model": w.model.model_copy(update={"seq_len": seq})}
                ),
            }
        )
    )
    fields = dict(
        common,
        measured_gpus=gpus,
        measured_layout=layout,
        measured_fabric=fabric,
        assumed=assumed,
        measured_batch_tokens=batch if batch != w.global_batch_tokens or seq != w.model.seq_len else None,
        measured_seq_len=seq,
    )
    # Anchor.figure_flops_per_token([layout]) at the measured sequence length, as a Python float.
    at_seq = (shape[0], shape[1], float(seq), shape[3])
    f_fig = _figure_flops(params_active, at_seq, (RECOMPUTE.index(layout.recompute),), th.flops)[0]
    tflops = figure * peak if kind == "mfu" else figure
    target = f_fig * batch / (gpus * tflops * 1e12)
    return _Problem(
        fields=fields, at=at, block=table_block(at, catalog, [design], [layout], memo=memo), target_s=target
    )


def _bracket(
    table: Table, effs: np.ndarray, target: np.ndarray, known: list[dict[int, float]], fixed: CommFixed
) -> np.ndarray:
    """Per problem (row p of ``table`` and ``effs``), the first index of ``effs[p]`` whose step
    time is at or below ``target[p]`` (``np.searchsorted(-steps, -target)`` over the whole
    grid, the step time being decreasing in the efficiency), evaluating only the points it
    needs: ``known[p]`` (index -> step time) holds the grid's ends and gains every point evaluated.

    Every round probes the two neighbours of the root of ``a / eff + b`` through the
    bracket's ends (the step is nearly that: compute and bubble scale as 1 / eff), from the
    third round on the bracket's midpoint too, so a poor fit still halves it. Every round
    is one vectorised pass over the problems still open (``fixed``: ``comm_fixed(table)``).
    """
    P, M = effs.shape
    lo = np.zeros(P, dtype=int)  # step > target there
    hi = np.full(P, M - 1)  # step <= target there
    rounds = 0
    while np.any(hi - lo > 1):
        rows, cols = [], []
        for p in np.flatnonzero(hi - lo > 1):
            a, b = int(lo[p]), int(hi[p])
            x0, x1, y0, y1 = 1 / effs[p, a], 1 / effs[p, b], known[p][a], known[p][b]
            x = x0 + (target[p] - y0) * (x1 - x0) / (y1 - y0) if y1 != y0 else x1
            k = int(np.searchsorted(effs[p], 1 / x)) if x > 0 else b
            probes = {min(max(k - 1, a + 1), b - 1), min(max(k, a + 1), b - 1)}
            if rounds >= 2:
                probes.add((a + b) // 2)
            for k in sorted(probes):
                rows.append(p)
                cols.append(k)
        r, c = np.asarray(rows), np.asarray(cols)
        steps = step_time_s(table.take(r).replace(compute_eff=effs[r, c]), fixed=fixed.take(r))
        for p, k, s in zip(r.tolist(), c.tolist(), steps.tolist(), strict=True):
            known[p][k] = s
            if s <= target[p]:
                hi[p] = min(hi[p], k)
            else:
                lo[p] = max(lo[p], k)
        rounds += 1
    return hi


def _fine(k: np.ndarray) -> np.ndarray:
    """The fine grid between the coarse points k - 1 and k, one row per problem."""
    return np.linspace(GRID[k - 1], GRID[k], FINE_POINTS, axis=1)


def _predict(table: Table, target: np.ndarray, fixed: CommFixed) -> np.ndarray:
    """Each problem's root, approximately (nan: none in the grid's range): a probe at
    ``GUESS_EFFICIENCY`` splits its step into the part that scales as 1 / eff (compute and
    bubble) and the rest; a second probe at that model's root does the same, and its root
    lands within ~1e-4 of the solve's (the tail taken on its shared 2% grid: only a guess)."""
    eff = np.full(len(target), GUESS_EFFICIENCY)
    for _ in range(2):
        at = np.clip(eff, GRID[0], GRID[-1])
        s0, cb0 = step_and_compute_s(table.replace(compute_eff=at), quantise_tail=True, fixed=fixed)
        rest = target - (s0 - cb0)
        with np.errstate(divide="ignore", invalid="ignore"):
            eff = np.where(rest > 0, cb0 * at / rest, np.nan)
    return eff


def _probe_cell(
    table: Table, target: np.ndarray, eff: np.ndarray, fixed: CommFixed
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fine cell holding each guess ``eff``, checked: (k, j, the step times at fine points
    j - 1 and j (nan: not probed), whether they bracket the target).

    When they do (step above the target at j - 1, at or below it at j) the step time's
    decrease makes k and j the ones the full grid's searches would find, and also rules out
    both errors of the solve.
    """
    P = len(target)
    inside = (eff > GRID[0]) & (eff <= GRID[-1])
    k = np.clip(np.searchsorted(GRID, np.where(inside, eff, 1.0)), 1, len(GRID) - 1)
    fine = _fine(k)
    # np.searchsorted(fine[p], eff[p]) of every row at once: the count of fine points below eff
    # (each row increases), NaN last as searchsorted sorts it.
    below = np.where(np.isnan(eff), FINE_POINTS, np.count_nonzero(fine < eff[:, None], axis=1))
    j = np.clip(below, 1, FINE_POINTS - 1)
    rows = np.flatnonzero(inside)
    s_lo, s_hi = np.full(P, np.nan), np.full(P, np.nan)
    if len(rows):
        # Two passes over the same rows (a row's step time does not depend on the other rows,
        # so the numbers are the same), with the communication the efficiency does not change.
        at, fx = (table, fixed) if len(rows) == P else (table.take(rows), fixed.take(rows))
        s_lo[rows] = step_time_s(at.replace(compute_eff=fine[rows, j[rows] - 1]), fixed=fx)
        s_hi[rows] = step_time_s(at.replace(compute_eff=fine[rows, j[rows]]), fixed=fx)
    return k, j, np.stack([s_lo, s_hi], axis=1), inside & (s_lo > target) & (s_hi <= target)


def _retry(
    table: Table, target: np.ndarray, k: np.ndarray, j: np.ndarray, s: np.ndarray, fixed: CommFixed
) -> tuple[np.ndarray, ...]:
    """``_probe_cell`` again at the secant (in 1 / eff) through the two fine points a missed guess probed."""
    fine = _fine(k)
    r = np.arange(len(k))
    x0, x1 = 1 / fine[r, j - 1], 1 / fine[r, j]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = x0 + (target - s[:, 0]) * (x1 - x0) / (s[:, 1] - s[:, 0])
        eff = np.where(np.isfinite(x) & (x > 0), 1 / x, np.nan)
    return _probe_cell(table, target, eff, fixed)


def _search(
    problems: Sequence[_Problem], table: Table, target: np.ndarray, fixed: CommFixed
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(k, j, step times at fine points j - 1 and j) by bracketing, from the grid's ends
    (which also check the figure can be reached)."""
    P = len(problems)
    twice = np.repeat(np.arange(P), 2)
    ends = step_time_s(table.take(twice).replace(compute_eff=np.tile(GRID[[0, -1]], P)), fixed=fixed.take(twice))
    for p, prob in enumerate(problems):
        a = prob.fields
        lay = a["measured_layout"]
        if target[p] < ends[2 * p + 1]:
            raise InputError(
                f"workload.throughput.{a['kind']} = {a['figure']:g} implies a {target[p]:.3g} s"
                f" step at {a['measured_gpus']:,} GPUs ({lay.text}) on {a['measured_fabric']}, but even a compute"
                f" efficiency of 1 gives {ends[2 * p + 1]:.3g} s there (bubble and communication); check the"
                " figure, its flops convention and measured_at"
            )
        if target[p] >= ends[2 * p]:  # at the grid's lower end (equal: a root exactly on it)
            raise InputError(
                "workload.throughput implies a compute efficiency below 0.001 at its measured point; check the figure"
            )
    coarse = [{0: ends[2 * p], len(GRID) - 1: ends[2 * p + 1]} for p in range(P)]
    k = _bracket(table, np.broadcast_to(GRID, (P, len(GRID))), target, coarse, fixed)
    known = [{0: coarse[p][k[p] - 1], FINE_POINTS - 1: coarse[p][k[p]]} for p in range(P)]
    j = _bracket(table, _fine(k), target, known, fixed)
    return k, j, np.array([[known[p][j[p] - 1], known[p][j[p]]] for p in range(P)])


def _solve(problems: Sequence[_Problem], table: Table) -> list[float]:
    """The compute efficiency of each problem (``table``: their stacked blocks) whose mean step
    time at the measured point equals its target: the full grid's root (the fine neighbours of the first point at or below the
    target, interpolated), its bracket guessed (``_predict``, ``_probe_cell``, once more ``_retry``) or else searched (``_search``)."""
    if not problems:
        return []
    target = np.array([p.target_s for p in problems])
    # The communication no compute efficiency changes, once for every pass of the solve.
    fixed = comm_fixed(table)
    k, j, s, ok = _probe_cell(table, target, _predict(table, target, fixed), fixed)
    miss = np.flatnonzero(~ok & np.isfinite(s[:, 0]))
    if len(miss):
        k2, j2, s2, ok2 = _retry(table.take(miss), target[miss], k[miss], j[miss], s[miss], fixed.take(miss))
        hit = miss[ok2]
        k[hit], j[hit], s[hit], ok[hit] = k2[ok2], j2[ok2], s2[ok2], True
    miss = np.flatnonzero(~ok)
    if len(miss):
        k[miss], j[miss], s[miss] = _search(
            [problems[int(p)] for p in miss], table.take(miss), target[miss], fixed.take(miss)
        )
    fine = _fine(k)
    rows = np.arange(len(problems))
    # Python floats, as this loop always took them (numpy scalars cost ~1 us an operation).
    lo, hi = fine[rows, j - 1].tolist(), fine[rows, j].tolist()
    out = []
    for f0, f1, (y0, y1), tgt in zip(lo, hi, s.tolist(), target.tolist(), strict=True):
        # Step ~ a / eff + b between neighbours: interpolate linearly in 1/eff.
        x0, x1 = 1 / f0, 1 / f1
        x = x0 + (tgt - y0) * (x1 - x0) / (y1 - y0) if y1 != y0 else x1
        out.append(float(min(1.0, 1.0 / x if x else math.copysign(math.inf, x))))  # numpy's 1 / 0
    return out


def _solved(fields: dict[str, Any], eff: float, step_s: float, at_model: float) -> Anchor:
    """The anchor of a problem's ``fields`` with its solve's results."""
    return Anchor(
        **fields, compute_efficiency=eff, anchor_step_s=step_s, scale=eff / at_model, model_at_anchor=at_model
    )


def solve_anchors(specs: Sequence[Spec], catalog: Catalog, memo: dict[Any, Any] | None = None) -> list[Anchor]:
    """``solve_anchor`` of every spec, the solves of all of them batched into shared table passes
    (``memo``: the batch's, ``plan.table.table_block``)."""
    memo = {} if memo is None else memo
    staged = [_stage(spec, catalog, memo) for spec in specs]
    problems = [p for p in staged if isinstance(p, _Problem)]
    table = table_from_block(np.concatenate([p.block for p in problems], axis=1)) if problems else None
    # The efficiency model at each measured point: one pass over the problems' own table.
    at_models = table_efficiencies([p.at for p in problems], table, catalog).tolist() if table is not None else []
    solved = iter(zip(problems, _solve(problems, table) if table is not None else [], at_models, strict=True))
    out = []
    for item in staged:
        if isinstance(item, Anchor):
            out.append(item)
            continue
        prob, eff, at_model = next(solved)
        out.append(_solved(prob.fields, eff, float(prob.target_s), at_model))
    return out


def solve_anchor(spec: Spec, catalog: Catalog) -> Anchor:
    """Read the spec's throughput figure and solve the compute efficiency (module docstring).

    The old solve evaluated all 61 coarse and 65 fine points; ``_bracket`` finds the same
    neighbours of the root from a handful of them, so the efficiency is the same number.

    Raises:
        InputError: the figure cannot be reached at its measured point (even a compute
            efficiency of 1 gives a longer step), or it needs measured_at.
    """
    return solve_anchors([spec], catalog)[0]
