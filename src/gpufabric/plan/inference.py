"""Plan a serving deployment: search the layouts, size them with the simulator, cost, pick one.

The search over what the spec leaves open (tp, pp, DP attention, max batch, token budget,
colocated vs disaggregated) is plan/serving_search.py. Each mode's winning layout is then
costed on every fabric x storage, and with ``options.capacity: [build, rent]`` on the
rented offerings (fabric of the offering, its price per GPU-hour for each term).
Colocated serving does not use the scale-out fabric on the request path (TP stays inside
the NVLink domain), so its latencies are simulated once; the fabric still changes its
cost. Storage sets the cold start (weight load + engine start, graph capture, warm-up).
Recommended: the cheapest design per million output tokens that meets the SLOs on the
fleet; ties go to the lower p99 TTFT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model import inference as m
from gpufabric.model.cost import rented_usd_per_gpu_hour
from gpufabric.model.inference import ServingConfig
from gpufabric.plan.serving_search import (
    AUTO_MAX_BATCH,
    AUTO_TOKEN_BUDGET,
    SIZING_REQUESTS_PER_ENGINE,
    VERIFY_REQUESTS_PER_ENGINE,
    Layout,
    SearchRow,
    _config,
    _layouts,
    _longest,
    _row,
    _Sizer,
    _tokens,
    _violations,
)
from gpufabric.spec.inference import ColdStart, InferenceSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingCandidate:
    """One serving design, sized and predicted."""

    id: str
    mode: str
    fabric: str
    storage: str
    tp: int
    pp: int
    gpus_per_replica: int
    prefill_replicas: int
    decode_replicas: int
    gpus: int
    max_batch: int
    kv_bytes_per_token: float
    prefill_s_at_mean_prompt: float
    decode_step_s_at_batch_1: float
    tp_comm_s_per_decode_step: float
    kv_transfer_s_at_mean_prompt: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    itl_p50_s: float
    itl_p99_s: float
    output_tokens_per_s: float
    preemptions: int
    kv_transfer_p99_s: float
    goodput_rps: float
    slo_attainment: float
    mean_decode_batch: float
    weight_load_s: float
    cold_start_s: float
    scale_out_s: float
    usd_per_gpu_hour: float
    usd_per_million_output_tokens: float
    fits_cluster: bool
    meets_slo: bool
    violations: list[str] = field(default_factory=list)
    capacity: str = "build"  # build | rent (options.capacity)
    rental: str | None = None  # catalog rentals id of a rented design
    term: str | None = None  # on_demand | 1y | 3y
    ep: int = 1
    dp_attention: bool = False
    token_budget: int = 8192


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingPlan:
    """Result of ``gpufabric plan`` on an inference spec."""

    name: str
    rate_rps: float | None
    concurrency: int | None
    candidates: list[ServingCandidate]
    search: list[SearchRow]
    recommended: str | None
    rationale: str


def serving_config(
    spec: InferenceSpec, catalog: Catalog, cand: ServingCandidate, *, requests: int, seed: int = 0
) -> ServingConfig:
    """The simulator configuration of one planned design (for ``gpufabric simulate``)."""
    lay = Layout(
        tp=cand.tp,
        pp=cand.pp,
        ep=cand.ep,
        dp_attention=cand.dp_attention,
        max_batch=cand.max_batch,
        token_budget=cand.token_budget,
    )
    return _config(
        spec, catalog, lay, cand.fabric, cand.prefill_replicas, cand.decode_replicas, requests=requests, seed=seed
    )


def _usd_gpu_h(spec: InferenceSpec, catalog: Catalog, fabric_id: str, rental: str | None, term: str | None) -> float:
    o = spec.options
    if rental is None:  # owned: paid whether busy or not (model/cost.py)
        fabric = catalog.fabric(fabric_id)
        return (
            m.fleet_usd_per_gpu_hour(
                gpu=catalog.gpu(spec.cluster.gpu),
                fabric=fabric,
                switch=catalog.switches[fabric.switch],
                nic_optic=catalog.optics[fabric.nic_optic],
                site=catalog.site,
            )
            / o.utilisation
        )
    return float(
        rented_usd_per_gpu_hour(
            usd_per_gpu_hour=catalog.rental(rental).usd_per_gpu_hour(term or ""),
            committed=term != "on_demand",
            utilisation=o.utilisation,
        )
    )


def make_serving_plan(
    spec: InferenceSpec,
    catalog: Catalog,
    *,
    simulate: Callable[[ServingConfig], Any],
    requests: int | None = None,
    seed: int = 0,
) -> ServingPlan:
    """Search, size, predict and cost the serving designs of ``spec``.

    The search (docs/inference.md "Search"): every replica layout the spec leaves open
    (tp, pp inside the NVLink domain, DP attention where TP would replicate KV heads) x
    mode (colocated, disaggregated), each sized by simulation to the fewest replicas that
    meet every SLO, visited cheapest lower bound first and pruned once a sized design
    beats a layout's bound; then the batching knobs left to ``auto`` (max batch, token
    budget) are searched on the winning layout. The winner of each mode is then costed
    on every fabric x storage (and rented offering).

    ``simulate`` is the request-level simulator (sim/serving.py ``simulate_serving``),
    passed in by the caller so that plan/ does not import sim/ (docs/architecture.md).
    ``requests`` lowers the requests per simulated engine while sizing below
    SIZING_REQUESTS_PER_ENGINE (tests use it for speed); the final check is unchanged.

    Raises:
        InputError: the model does not fit the NVLink domain of the spec's GPU at any layout.
    """
    w = spec.workload
    layouts = _layouts(spec, catalog)
    if not layouts:
        shape = m.shape_from_spec(w.model)
        raise InputError(
            f"{shape.weight_bytes / 1e9:.0f} GB of weights plus the KV cache of one {_longest(spec):.0f}-token request"
            f" do not fit {spec.cluster.gpus_per_node} x {spec.cluster.gpu} at any tp x pp (or the pinned"
            " workload.replica); relax workload.replica, lower kv_precision or use a larger GPU"
        )
    sizer = _Sizer(
        spec, catalog, simulate, seed, min(requests or SIZING_REQUESTS_PER_ENGINE, SIZING_REQUESTS_PER_ENGINE)
    )
    search = _Search(spec, catalog, sizer)
    search.layouts(layouts)
    search.batching_knobs()
    rechecked = search.final_check()
    cands = _candidates(spec, catalog, sizer, search.best, search.verified)
    cands.sort(key=lambda c: (not c.meets_slo, c.usd_per_million_output_tokens, c.ttft_p99_s, c.weight_load_s))
    rec = cands[0] if cands and cands[0].meets_slo else None
    rows = _mark(search.rows, search.best, rec, rechecked)
    return ServingPlan(
        name=spec.name,
        rate_rps=w.traffic.rate_rps,
        concurrency=w.traffic.concurrency,
        candidates=cands,
        search=rows,
        recommended=rec.id if rec else None,
        rationale=_rationale(rec, cands, spec, rows),
    )


class _Search:
    """The search's state: the rows of the table, every sized design, the best per mode."""

    def __init__(self, spec: InferenceSpec, catalog: Catalog, sizer: _Sizer) -> None:
        o = spec.options
        self.spec, self.sizer = spec, sizer
        self.fabric0 = o.fabrics[0]
        self.usd0 = _usd_gpu_h(spec, catalog, self.fabric0, None, None) if "build" in o.capacity else 1.0
        self.out_tps = _output_tps(spec)
        self.rows: list[SearchRow] = []
        self.best: dict[str, tuple[float, Layout, int, int]] = {}  # mode -> $/M, layout, p, d
        self.sized: list[tuple[float, Layout, int, int, str]] = []  # every design sized to meet the SLOs
        self.verified: set[str] = set()
        d = spec.workload.disaggregation
        self.modes = (
            ("colocated", "disaggregated")
            if d in ("both", "auto")
            else (("colocated",) if d == "none" else ("disaggregated",))
        )

    def cost(self, gpus: int, tps: float) -> float:
        return float(m.usd_per_million_tokens(usd_per_gpu_hour=self.usd0, gpus=gpus, tokens_per_s=tps))

    def layouts(self, layouts: list[Layout]) -> None:
        """Every layout x mode, cheapest lower bound first."""
        order = sorted(
            (
                (self.sizer.lower_bound(lay) * lay.gpus, i, lay, mode)
                for i, lay in enumerate(layouts)
                for mode in self.modes
            ),
            key=lambda x: (x[0], x[1]),
        )
        for bound_replicas_gpus, _, lay, mode in order:
            self.visit(lay, mode, bound_replicas_gpus)

    def visit(self, lay: Layout, mode: str, bound_gpus: int, hint: tuple[int, int] | None = None) -> None:
        """Size one layout x mode (or prune it on its bound, or find it infeasible); one table row."""
        winner = min((v[0] for v in self.best.values()), default=float("inf"))
        lb = self.cost(bound_gpus, self.out_tps) if self.out_tps else 0.0
        if lb >= winner and self.spec.workload.traffic.rate_rps is not None:
            pruned = f"lower bound ${lb:.3g}/M >= ${winner:.3g}/M sized"
            self.rows.append(_row(lay, mode, 0, 0, bound_gpus, lb, {}, "pruned", pruned))
            return
        screened = self.sizer.screen(lay)
        if screened is not None:
            self.rows.append(_row(lay, mode, 0, 0, 0, float("inf"), {}, "infeasible", screened))
            return
        if hint is None and mode in self.best:
            # The best of this mode so far, scaled to this layout's GPUs per replica.
            _, blay, bp, bd = self.best[mode]
            scale = blay.gpus / lay.gpus
            hint = (max(1, round(bp * scale)), round(bd * scale))
        if mode == "colocated":
            pd = self.sizer.colocated(lay, hint)
        else:
            pd = self.sizer.disaggregated(lay, self.fabric0, hint)
        if pd is None:
            none = "no replica count within the cluster meets the SLOs"
            self.rows.append(_row(lay, mode, 0, 0, 0, float("inf"), {}, "infeasible", none))
            return
        p, d = pd
        s = self.sizer.run(lay, self.fabric0, p, d)
        gpus = (p + d) * lay.gpus
        c = self.cost(gpus, self.out_tps or s["output_tokens_per_s"])
        self.rows.append(_row(lay, mode, p, d, gpus, c, s, "meets", f"{p}+{d} replicas"))
        self.sized.append((c, lay, p, d, mode))
        if mode not in self.best or c < self.best[mode][0]:
            self.best[mode] = (c, lay, p, d)

    def batching_knobs(self) -> None:
        """Batching knobs left to auto, searched on each mode's winning layout."""
        b_auto = self.spec.workload.batching
        for mode in list(self.best):
            _, lay, _, _ = self.best[mode]
            # A budget below the batch is not a valid engine (vLLM refuses it): such pairs are skipped.
            batches = (
                []
                if isinstance(b_auto.max_batch, int)
                else [b for b in AUTO_MAX_BATCH if b != lay.max_batch and b <= lay.token_budget]
            )
            budgets = (
                []
                if isinstance(b_auto.max_batch_tokens, int)
                else [t for t in AUTO_TOKEN_BUDGET if t != lay.token_budget and t >= lay.max_batch]
            )
            hint = self.best[mode][2:]
            ran = self.sizer.run(lay, self.fabric0, *hint)["mean_decode_batch"]
            for b in batches:
                var = replace(lay, max_batch=b)
                if b >= 2 * ran:
                    # A cap far above the batch the winner runs changes nothing: not simulated.
                    why = f"max batch {b} does not bind (mean batch {ran:.3g})"
                    self.rows.append(_row(var, mode, 0, 0, 0, float("inf"), {}, "pruned", why))
                    continue
                self.visit(var, mode, self.sizer.lower_bound(var) * var.gpus, hint)
            for t in budgets:
                var = replace(lay, token_budget=t)
                self.visit(var, mode, self.sizer.lower_bound(var) * var.gpus, hint)

    def affordable(self, lay: Layout, ceiling: float) -> Callable[[int, int], bool] | None:
        """Whether p + d replicas of ``lay`` cost less than ``ceiling``; None where that is not
        known ahead (no ceiling yet, or a closed loop, whose cost the simulation measures)."""
        if not self.out_tps or ceiling == float("inf"):
            return None
        return lambda p, d: self.cost((p + d) * lay.gpus, self.out_tps) < ceiling

    def final_check(self) -> dict[tuple[str, str], tuple[int, int, float, dict[str, Any] | None]]:
        """The final check, cheapest sized design first, of any layout and mode; the next one is
        checked only while it could still beat the cheapest checked one (a check only ever adds
        replicas, so a design that ties or barely wins at sizing may lose after it), and its
        check stops once the replicas it needs cost as much as that one (priced out).

        Returns: (mode, layout label) -> p, d, $/M, summary (None: priced out) of every rechecked design.
        """
        rechecked: dict[tuple[str, str], tuple[int, int, float, dict[str, Any] | None]] = {}
        cheapest = float("inf")
        for c, lay, p, d, mode in sorted(self.sized, key=lambda x: x[0]):
            if c >= cheapest:
                break
            p2, d2, summary = self.sizer.verify(lay, self.fabric0, p, d, self.affordable(lay, cheapest))
            c2 = self.cost((p2 + d2) * lay.gpus, self.out_tps or 1.0) if self.out_tps else c
            rechecked[(mode, lay.label)] = (p2, d2, c2, summary)
            if summary is None:
                continue  # priced out: it needs more than the cheapest checked design costs
            if mode not in self.verified or c2 < self.best[mode][0]:
                self.best[mode] = (c2, lay, p2, d2)
            self.verified.add(mode)
            cheapest = min(cheapest, c2)
        return rechecked


def _output_tps(spec: InferenceSpec) -> float:
    """Output tokens/s the open-loop load asks for (0 for a closed loop: measured by the simulator)."""
    t = spec.workload.traffic
    return t.rate_rps * t.output_tokens.mean if t.rate_rps is not None else 0.0


def _mark(
    rows: list[SearchRow],
    best: dict[str, tuple[float, Layout, int, int]],
    rec: ServingCandidate | None,
    rechecked: dict[tuple[str, str], tuple[int, int, float, dict[str, Any] | None]],
) -> list[SearchRow]:
    if rec is None or rec.mode not in best:
        return rows
    win_cost, win_lay, _, _ = best[rec.mode]
    out = []
    for r in rows:
        if r.status == "meets" and r.layout == win_lay.label and r.mode == rec.mode:
            checked = (rec.prefill_replicas, rec.decode_replicas) != (r.prefill_replicas, r.decode_replicas)
            r = replace(
                r,
                status="winner",
                prefill_replicas=rec.prefill_replicas,
                decode_replicas=rec.decode_replicas,
                gpus=rec.gpus,
                usd_per_million_output_tokens=win_cost,
                ttft_p99_s=rec.ttft_p99_s,
                tpot_p99_s=rec.tpot_p99_s,
                reason=f"cheapest meeting every SLO: {rec.gpus} GPUs"
                + (
                    f" (sized {r.prefill_replicas}+{r.decode_replicas}; the final check added replicas)"
                    if checked
                    else ""
                ),
            )
        elif r.status == "meets" and (r.mode, r.layout) in rechecked:
            # Checked too (it was cheaper at sizing than the winner after its check): the row
            # shows what the check needed, so a cheaper-looking design is never a stale figure.
            p2, d2, c2, summary = rechecked[(r.mode, r.layout)]
            if summary is None:
                r = replace(
                    r,
                    status="pruned",
                    prefill_replicas=0,
                    decode_replicas=0,
                    gpus=r.gpus // max(1, r.prefill_replicas + r.decode_replicas) * (p2 + d2),
                    usd_per_million_output_tokens=c2,
                    ttft_p99_s=float("nan"),
                    tpot_p99_s=float("nan"),
                    reason=f"sized {r.prefill_replicas}+{r.decode_replicas}, which misses the final check;"
                    f" {p2}+{d2} would cost ${c2:.3g}/M >= ${win_cost:.3g}/M (not checked)",
                )
                out.append(r)
                continue
            r = replace(
                r,
                prefill_replicas=p2,
                decode_replicas=d2,
                gpus=r.gpus // max(1, r.prefill_replicas + r.decode_replicas) * (p2 + d2),
                usd_per_million_output_tokens=c2,
                ttft_p99_s=summary.get("ttft_p99_s", r.ttft_p99_s),
                tpot_p99_s=summary.get("tpot_p99_s", r.tpot_p99_s),
                reason=f"sized {r.prefill_replicas}+{r.decode_replicas}; the final check needed {p2}+{d2},"
                f" ${c2:.3g}/M vs ${win_cost:.3g}/M",
            )
        elif r.status == "meets":
            r = replace(
                r, reason=f"{r.reason}; {r.gpus} GPUs, ${r.usd_per_million_output_tokens:.3g}/M vs ${win_cost:.3g}/M"
            )
        out.append(r)
    return out


def _candidates(
    spec: InferenceSpec,
    catalog: Catalog,
    sizer: _Sizer,
    best: dict[str, tuple[float, Layout, int, int]],
    verified: set[str],
) -> list[ServingCandidate]:
    w = spec.workload
    o = spec.options
    gpu = catalog.gpu(spec.cluster.gpu)
    shape = m.shape_from_spec(w.model)
    gpn = spec.cluster.gpus_per_node
    prompt = _tokens(w.traffic.prompt_tokens)
    context = w.traffic.prompt_tokens.mean + w.traffic.output_tokens.mean
    cs = w.cold_start or ColdStart()
    boot = (
        (m.ENGINE_START_S if cs.engine_start_s is None else cs.engine_start_s)
        + (m.GRAPH_CAPTURE_S if cs.graph_capture_s is None else cs.graph_capture_s)
        + (m.WARMUP_S if cs.warmup_s is None else cs.warmup_s)
    )
    where: list[tuple[str, str | None, str | None]] = []
    if "build" in o.capacity:
        where += [(f, None, None) for f in o.fabrics]
    if "rent" in o.capacity:
        # Here, not at the top: plan.table loads the training step model (~8 ms of every serving plan's start-up).
        from gpufabric.plan.table import rental_ids

        where += [(catalog.rental(r).fabric, r, t) for r in rental_ids(spec, catalog) for t in o.rent_terms]
    out: list[ServingCandidate] = []
    for mode, (_, lay, p0, d0) in best.items():
        for fabric_id, rental, term in where:
            perf = sizer.perf(lay, fabric_id)
            kv = sizer.kv(lay.tp, fabric_id)
            p, d = p0, d0
            checked = VERIFY_REQUESTS_PER_ENGINE if mode in verified else None
            if d == 0 or fabric_id == o.fabrics[0]:
                # Colocated latencies do not depend on the fabric: one run serves every fabric.
                summary = sizer.run(lay, o.fabrics[0], p, d, checked)
            else:
                summary = sizer.run(lay, fabric_id, p, d)
                if not sizer.ok(summary) and p + d + 1 <= sizer.fleet_gpus // lay.gpus:
                    # The KV transfer depends on the fabric: one more decode replica where it is slower.
                    d += 1
                    summary = sizer.run(lay, fabric_id, p, d)
            usd_gpu_h = _usd_gpu_h(spec, catalog, fabric_id, rental, term)
            gpus = (p + d) * lay.gpus
            violations = _violations(summary, w.slo)
            fits = gpus <= spec.num_gpus
            if not fits:
                violations.append(f"gpus {gpus} > cluster {spec.num_gpus}")
            tps = _output_tps(spec) or summary["output_tokens_per_s"]
            label = fabric_id if rental is None else f"rent-{rental}-{term}"
            offered = catalog.rental(rental).storage if rental else o.storage
            for storage_id in (x for x in o.storage if x in offered):
                storage = catalog.storage_backend(storage_id)
                load = m.weight_load_s(shape=shape, storage=storage, gpu=gpu, tp=lay.tp, pp=lay.pp, gpus_per_node=gpn)
                burst = m.weight_load_s(
                    shape=shape,
                    storage=storage,
                    gpu=gpu,
                    tp=lay.tp,
                    pp=lay.pp,
                    gpus_per_node=gpn,
                    concurrent_replicas=p + d,
                )
                out.append(
                    ServingCandidate(
                        id=f"{mode}/{label}/{storage_id}",
                        mode=mode,
                        fabric=fabric_id,
                        storage=storage_id,
                        tp=lay.tp,
                        pp=lay.pp,
                        gpus_per_replica=lay.gpus,
                        prefill_replicas=p,
                        decode_replicas=d,
                        gpus=gpus,
                        max_batch=lay.max_batch,
                        kv_bytes_per_token=shape.kv_bytes_per_token,
                        prefill_s_at_mean_prompt=float(perf.prefill_s(prompt.mean)),
                        decode_step_s_at_batch_1=float(perf.decode_step_s(1, context)),
                        tp_comm_s_per_decode_step=perf.decode_comm_fixed_s + perf.decode_comm_s_per_seq,
                        kv_transfer_s_at_mean_prompt=float(kv.time_s(prompt.mean)) if mode == "disaggregated" else 0.0,
                        ttft_p50_s=summary["ttft_p50_s"],
                        ttft_p99_s=summary["ttft_p99_s"],
                        tpot_p50_s=summary["tpot_p50_s"],
                        tpot_p99_s=summary["tpot_p99_s"],
                        itl_p50_s=summary["itl_p50_s"],
                        itl_p99_s=summary["itl_p99_s"],
                        output_tokens_per_s=summary["output_tokens_per_s"],
                        preemptions=summary["preemptions"],
                        kv_transfer_p99_s=summary["kv_transfer_p99_s"],
                        goodput_rps=summary["goodput_rps"],
                        slo_attainment=summary["slo_attainment"],
                        mean_decode_batch=summary["mean_decode_batch"],
                        weight_load_s=load,
                        cold_start_s=load + boot,
                        scale_out_s=burst + boot,
                        usd_per_gpu_hour=usd_gpu_h,
                        usd_per_million_output_tokens=float(
                            m.usd_per_million_tokens(usd_per_gpu_hour=usd_gpu_h, gpus=gpus, tokens_per_s=tps)
                        ),
                        fits_cluster=fits,
                        meets_slo=not violations,
                        violations=violations,
                        capacity="rent" if rental else "build",
                        rental=rental,
                        term=term,
                        ep=lay.ep,
                        dp_attention=lay.dp_attention,
                        token_budget=lay.token_budget,
                    )
                )
    return out


def _rationale(
    best: ServingCandidate | None, cands: list[ServingCandidate], spec: InferenceSpec, search: list[SearchRow]
) -> str:
    t = spec.workload.traffic
    load = f"{t.rate_rps:g} requests/s" if t.rate_rps is not None else f"{t.concurrency} concurrent clients"
    if best is None:
        worst = cands[0].violations if cands else []
        return (
            f"No design meets the SLOs at {load} on {spec.num_gpus} GPUs"
            f" ({len(search)} layouts x modes searched; closest: {', '.join(worst) or 'none sized'})."
            " Add GPUs, relax the SLOs or lower the load."
        )
    text = (
        f"{best.id} serves {load} within the SLOs on {best.gpus} GPUs"
        + (
            f" ({best.prefill_replicas} prefill + {best.decode_replicas} decode"
            if best.decode_replicas
            else f" ({best.prefill_replicas}"
        )
        + (" replica" if best.prefill_replicas + best.decode_replicas == 1 else " replicas")
        + f" of tp {best.tp} x pp {best.pp}, max batch {best.max_batch}, token budget {best.token_budget})"
        f" at ${best.usd_per_million_output_tokens:.3g} per million output tokens;"
        f" p99 TTFT {best.ttft_p99_s:.3g} s, p99 TPOT {best.tpot_p99_s * 1e3:.3g} ms, p99 ITL {best.itl_p99_s * 1e3:.3g} ms."
    )
    sized = [r for r in search if r.status in ("meets", "winner")]
    text += f" Searched {len(search)} layouts x modes: {len(sized)} sized"
    losers = sorted((r for r in sized if r.status == "meets"), key=lambda r: r.usd_per_million_output_tokens)
    if losers:
        r = losers[0]
        text += f"; runner-up {r.mode} {r.layout} needs {r.gpus} GPUs (${r.usd_per_million_output_tokens:.3g}/M)"
    text += "."
    text += (
        f" Cold start of one replica from {best.storage}: {best.cold_start_s:.3g} s"
        f" ({best.weight_load_s:.3g} s weights + engine start, graph capture, warm-up); all at once: {best.scale_out_s:.3g} s."
    )
    rented = next((c for c in cands if c.capacity == "rent" and c.meets_slo), None)
    built = next((c for c in cands if c.capacity == "build" and c.meets_slo), None)
    if rented is not None:
        from gpufabric.plan.capacity import RENTED_CONFIG, RENTED_GIVES_UP

        text += (
            f" Rented: {rented.id} at ${rented.usd_per_gpu_hour:.2f}/GPU-h (${rented.usd_per_million_output_tokens:.3g}/M"
            " tokens)"
            + (f" vs built {built.id} at ${built.usd_per_gpu_hour:.2f}/GPU-h" if built else "")
            + f". A rented design gives up the fabric's controls: {RENTED_GIVES_UP}; {RENTED_CONFIG}."
        )
    return text
