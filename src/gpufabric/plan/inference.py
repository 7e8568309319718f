"""Plan a serving deployment: size replicas per design with the simulator, cost it, pick one.

Designs are mode (colocated | disaggregated) x fabric x storage, and with
``options.capacity: [build, rent]`` the rented offerings (fabric of the offering, its
price per GPU-hour for each term) beside them. For each mode and
fabric the smallest replica counts that meet every SLO are found by bisection over the
request-level simulator (sim/serving.py), which is monotone in them in practice: more
replicas never raise a latency percentile of a FCFS queue. Colocated serving does not
use the scale-out fabric on the request path (TP stays inside the NVLink domain), so
its latencies are computed once; the fabric still changes its cost. Storage only sets
the cold-start and scale-out times (weight loads). Recommended: the cheapest design per
million output tokens that meets the SLOs on the fleet; ties go to the lower p99 TTFT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model import inference as m
from gpufabric.model.cost import rented_usd_per_gpu_hour
from gpufabric.model.inference import ServingConfig, Tokens
from gpufabric.plan.table import rental_ids
from gpufabric.spec.inference import ColdStart, InferenceSpec

#: Requests per simulated engine while sizing: p99 from 300 requests has 3 beyond it,
#: enough to rank designs and size replicas; `gpufabric simulate` runs more for a final check.
SIZING_REQUESTS_PER_ENGINE = 300
#: Requests per engine of the final check of each mode's winner (p99 on 20 beyond it): a
#: design sized on 400 can sit just inside an SLO by luck; it gets replicas until it passes.
VERIFY_REQUESTS_PER_ENGINE = 2000
#: The check asks for this share of each SLO: a p99 from 2,000 samples moves by a few
#: percent from seed to seed, and a design planned at the limit would miss it half the time.
VERIFY_MARGIN = 0.97
#: The searched values of what the spec leaves to ``auto`` (docs/inference.md "Search"):
#: vLLM's default max_num_seqs (256) and halvings; vLLM V1's max_num_batched_tokens for the
#: API server on large GPUs (8192) and its chunked-prefill latency setting (2048)
#: (docs.vllm.ai "Optimization and Tuning", as_of 2026-12).
AUTO_MAX_BATCH = (256, 128, 64)
AUTO_TOKEN_BUDGET = (8192, 2048)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One searched engine layout: replica parallelism and batching knobs."""

    tp: int
    pp: int
    ep: int
    dp_attention: bool
    max_batch: int
    token_budget: int

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def label(self) -> str:
        dp = " dpa" if self.dp_attention else ""
        return f"tp{self.tp} pp{self.pp}{dp} b{self.max_batch} t{self.token_budget}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRow:
    """One searched point (layout x mode): what it needs, what it costs, or why it lost."""

    layout: str
    mode: str
    tp: int
    pp: int
    dp_attention: bool
    max_batch: int
    token_budget: int
    prefill_replicas: int
    decode_replicas: int
    gpus: int
    usd_per_million_output_tokens: float
    ttft_p99_s: float
    tpot_p99_s: float
    status: str  # winner | meets | misses | pruned | infeasible
    reason: str


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


def _violations(summary: dict[str, Any], slo: Any, margin: float = 1.0) -> list[str]:
    out = []
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p99_s"):
        limit = getattr(slo, key)
        if limit is not None and summary[key] > limit * margin:
            out.append(f"{key} {summary[key]:.4g} > {limit:g}")
    return out


def _smallest(lo: int, hi: int, ok: Any) -> int:
    """Smallest n in [lo, hi] with ok(n), assuming monotone; hi when none."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _perf(spec: InferenceSpec, catalog: Catalog, lay: Layout, fabric: str) -> m.ReplicaPerf:
    w = spec.workload
    sp = w.speculative
    return m.replica_perf(
        shape=m.shape_from_spec(w.model),
        gpu=catalog.gpu(spec.cluster.gpu),
        links=m.serving_links(catalog, spec.cluster.gpu, fabric, spec.cluster.gpus_per_node),
        tp=lay.tp,
        pp=lay.pp,
        precision=w.model.precision,
        mfu=w.mfu_prefill,
        hbm_efficiency=w.hbm_efficiency,
        max_batch=lay.max_batch,
        jitter_cv=w.jitter_cv,
        ep=lay.ep,
        dp_attention=lay.dp_attention,
        step_overhead_s=w.engine.step_overhead_s if w.engine else None,
        seq_overhead_s=w.engine.seq_overhead_s if w.engine else None,
        draft_tokens=sp.draft_tokens if sp else 0,
        acceptance_rate=sp.acceptance_rate if sp else 0.0,
        draft_cost_fraction=sp.draft_cost_fraction if sp else 0.0,
    )


def _capacity(spec: InferenceSpec, catalog: Catalog, lay: Layout) -> float:
    return m.kv_capacity_tokens(
        shape=m.shape_from_spec(spec.workload.model),
        gpu=catalog.gpu(spec.cluster.gpu),
        tp=lay.tp,
        pp=lay.pp,
        memory_fraction=spec.workload.batching.kv_memory_fraction,
        dp_attention=lay.dp_attention,
    )


def _tokens(dist: Any) -> Tokens:
    return Tokens(mean=dist.mean, cv=dist.cv, max=dist.max)


def _config(
    spec: InferenceSpec,
    catalog: Catalog,
    lay: Layout,
    fabric: str,
    p: int,
    d: int,
    *,
    requests: int,
    seed: int,
    perf: m.ReplicaPerf | None = None,
) -> ServingConfig:
    w = spec.workload
    slo = w.slo
    kv = (
        m.kv_transfer(
            shape=m.shape_from_spec(w.model),
            tp=lay.tp,
            links=m.serving_links(catalog, spec.cluster.gpu, fabric, spec.cluster.gpus_per_node),
            fabric=catalog.fabric(fabric),
        )
        if d
        else None
    )
    over = w.engine.request_overhead_s if w.engine else None
    # Goodput counts a request as served within SLO when it meets the tighter of the p50/p99 limits.
    return ServingConfig(
        perf=perf or _perf(spec, catalog, lay, fabric),
        prefill_replicas=p,
        decode_replicas=d,
        kv=kv,
        max_batch=lay.max_batch,
        kv_capacity_tokens=_capacity(spec, catalog, lay) / lay.pp,
        token_budget=lay.token_budget,
        mixed=w.batching.mixed,
        rate_rps=w.traffic.rate_rps,
        concurrency=w.traffic.concurrency,
        prompt=_tokens(w.traffic.prompt_tokens),
        output=_tokens(w.traffic.output_tokens),
        requests=requests,
        jitter_cv=w.jitter_cv,
        request_overhead_s=m.REQUEST_OVERHEAD_S if over is None else over,
        api_s_per_token=m.API_S_PER_TOKEN,
        client_delay_s=m.CLIENT_DELAY_S,
        ttft_slo_s=min(slo.ttft_p99_s or float("inf"), slo.ttft_p50_s or float("inf")),
        tpot_slo_s=min(slo.tpot_p99_s or float("inf"), slo.tpot_p50_s or float("inf")),
        seed=seed,
    )


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


def _layouts(spec: InferenceSpec, catalog: Catalog) -> list[Layout]:
    """Parallel layouts to search: what the spec pins, powers of two inside the NVLink domain otherwise."""
    w = spec.workload
    r = w.replica
    gpn = spec.cluster.gpus_per_node
    twos = [x for x in (1, 2, 4, 8, 16, 32, 64) if x <= gpn]
    tps = [r.tp] if isinstance(r.tp, int) else twos
    pps = [r.pp] if isinstance(r.pp, int) else [x for x in twos if x <= 4]
    mb = w.batching.max_batch
    tb = w.batching.max_batch_tokens
    batch = mb if isinstance(mb, int) else AUTO_MAX_BATCH[0]
    budget = tb if isinstance(tb, int) else AUTO_TOKEN_BUDGET[0]
    out = []
    longest = _longest(spec)
    for tp in tps:
        for pp in pps:
            if tp * pp > gpn:
                continue
            dpas = [False, True] if r.dp_attention == "auto" else [r.dp_attention == "on"]
            for dpa in dpas:
                if dpa and tp <= w.model.kv_heads and r.dp_attention == "auto":
                    continue  # DP attention only pays where TP would replicate KV heads
                ep = (r.ep if isinstance(r.ep, int) else tp * pp) if w.model.experts > 1 else 1
                lay = Layout(tp=tp, pp=pp, ep=ep, dp_attention=dpa, max_batch=batch, token_budget=max(budget, batch))
                if _capacity(spec, catalog, lay) / pp * (1.0 - m.KV_WATERMARK) >= longest:
                    out.append(lay)
    return out


def _longest(spec: InferenceSpec) -> float:
    t = spec.workload.traffic

    def top(d: Any) -> float:
        return float(d.mean if d.cv == 0 else (d.max if d.max is not None else 8 * d.mean))

    return top(t.prompt_tokens) + top(t.output_tokens)


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


class _Sizer:
    """Smallest replica counts meeting the SLOs for one layout, mode and fabric (simulation-backed)."""

    def __init__(
        self,
        spec: InferenceSpec,
        catalog: Catalog,
        simulate: Callable[[ServingConfig], Any],
        seed: int,
        per_engine: int = SIZING_REQUESTS_PER_ENGINE,
    ):
        self.spec, self.catalog, self.simulate, self.seed = spec, catalog, simulate, seed
        self.per_engine = max(50, per_engine)
        self.cache: dict[tuple[Any, ...], dict[str, Any]] = {}
        # A layout's perf is built once per fabric: the collective model behind it is the
        # costly part of a sizing step.
        self.perfs: dict[tuple[Layout, str], m.ReplicaPerf] = {}
        self.fleet_gpus = spec.num_gpus

    def run(self, lay: Layout, fabric: str, p: int, d: int, per_engine: int | None = None) -> dict[str, Any]:
        per_engine = per_engine or self.per_engine
        key = (lay, fabric if d else "", p, d, per_engine)
        if key not in self.cache:
            engines = max(d, p) * lay.pp
            cfg = _config(
                self.spec,
                self.catalog,
                lay,
                fabric,
                p,
                d,
                requests=per_engine * engines,
                seed=self.seed,
                perf=self.perf(lay, fabric),
            )
            self.cache[key] = self.simulate(replace(cfg, engine_requests=per_engine)).summary()
        return self.cache[key]

    def verify(self, lay: Layout, fabric: str, p: int, d: int) -> tuple[int, int, dict[str, Any]]:
        """The sized design rerun on VERIFY_REQUESTS_PER_ENGINE; one more replica (the side
        that misses when disaggregated) until it passes, at most three, within the cluster."""
        fleet = self.fleet_gpus // lay.gpus
        s = self.run(lay, fabric, p, d, VERIFY_REQUESTS_PER_ENGINE)
        for _ in range(3):
            if self.ok(s, margin=VERIFY_MARGIN) or p + d + 1 > fleet:
                break
            if d and self.ok(s, "ttft", VERIFY_MARGIN):
                d += 1
            else:
                p += 1
            s = self.run(lay, fabric, p, d, VERIFY_REQUESTS_PER_ENGINE)
        return p, d, s

    def perf(self, lay: Layout, fabric: str) -> m.ReplicaPerf:
        key = (lay, fabric)
        if key not in self.perfs:
            self.perfs[key] = _perf(self.spec, self.catalog, lay, fabric)
        return self.perfs[key]

    def ok(self, s: dict[str, Any], only: str | None = None, margin: float = 1.0) -> bool:
        return not [v for v in _violations(s, self.spec.workload.slo, margin) if only is None or v.startswith(only)]

    def lower_bound(self, lay: Layout) -> int:
        """Replicas the load needs at the largest batch the TPOT SLO allows (GPU-seconds per request x rate).

        No design of this layout does with fewer: a larger batch would step slower than the
        TPOT limit, and prefill and decode time only add up.
        """
        w = self.spec.workload
        t = w.traffic
        if t.rate_rps is None:
            return 1
        perf = self.perf(lay, self.spec.options.fabrics[0])
        ctx = t.prompt_tokens.mean + t.output_tokens.mean / 2
        limit = min(w.slo.tpot_p99_s or float("inf"), w.slo.tpot_p50_s or float("inf")) * perf.tokens_per_step
        batches = np.arange(1, lay.max_batch + 1)
        steps = perf.decode_step_s(batches, ctx)
        allowed = batches[steps <= limit]
        b = int(allowed[-1]) if allowed.size else 1
        work = (
            float(perf.prefill_s(t.prompt_tokens.mean))
            + (t.output_tokens.mean - 1) / perf.tokens_per_step * float(perf.decode_step_s(b, ctx)) / b
        )
        return max(1, int(t.rate_rps * work / lay.pp))

    def screen(self, lay: Layout) -> str | None:
        """Why no replica count can help (the latency of one request alone already misses an SLO), or None."""
        w = self.spec.workload
        slo = w.slo
        perf = self.perf(lay, self.spec.options.fabrics[0])
        over = w.engine.request_overhead_s if w.engine else None
        over = m.REQUEST_OVERHEAD_S if over is None else over
        pt = w.traffic.prompt_tokens
        for key, q in (("ttft_p50_s", 0.5), ("ttft_p99_s", 0.99)):
            limit = getattr(slo, key)
            if limit is None:
                continue
            prompt = _quantile(pt.mean, pt.cv, q, pt.max)
            alone = float(perf.prefill_s(prompt)) + over
            if alone > limit:
                return f"{key}: a {prompt:.0f}-token prompt alone takes {alone:.3g} s > {limit:g} s"
        limit = min(slo.tpot_p99_s or float("inf"), slo.tpot_p50_s or float("inf"), slo.itl_p99_s or float("inf"))
        ctx = pt.mean + w.traffic.output_tokens.mean / 2
        step = float(perf.decode_step_s(1, ctx)) / perf.tokens_per_step
        if step > limit:
            return f"tpot: one sequence alone steps in {step * 1e3:.3g} ms > {limit * 1e3:g} ms"
        return None

    def smallest(self, lo: int, hi: int, good: Callable[[int], bool], hint: int | None = None) -> int | None:
        """Smallest n in [lo, hi] with good(n) (monotone); None if hi fails.

        From a hint (the answer of a similar layout scaled to this one's GPUs) it walks one
        step at a time, which is a couple of simulations when the hint is close; otherwise
        it doubles from lo, then bisects.
        """
        if hint is not None and lo <= hint <= hi:
            n = hint
            if good(n):
                while n > lo and good(n - 1):
                    n -= 1
                return n
            for _ in range(3):
                n += 1
                if n > hi:
                    return None
                if good(n):
                    return n
            lo = n + 1
            if lo > hi:
                return None
        step = lo
        while not good(step):
            if step >= hi:
                return None
            lo = step + 1
            step = min(hi, step * 2)
        hi = step
        while lo < hi:
            mid = (lo + hi) // 2
            if good(mid):
                hi = mid
            else:
                lo = mid + 1
        return hi

    def colocated(self, lay: Layout, hint: tuple[int, int] | None = None) -> tuple[int, int] | None:
        fleet = self.fleet_gpus // lay.gpus
        if fleet < 1:
            return None
        lo = min(fleet, self.lower_bound(lay))
        fabric = self.spec.options.fabrics[0]
        h = None if hint is None else max(lo, min(fleet, hint[0] + hint[1]))
        n = self.smallest(lo, fleet, lambda r: self.ok(self.run(lay, fabric, r, 0)), h)
        return None if n is None else (n, 0)

    def disaggregated(self, lay: Layout, fabric: str, hint: tuple[int, int] | None = None) -> tuple[int, int] | None:
        fleet = self.fleet_gpus // lay.gpus
        if fleet < 2:
            return None
        lo = max(1, self.lower_bound(lay) // 2)
        # Prefill replicas for TTFT with a generous decode pool, then the fewest decode replicas.
        d_hi = max(1, fleet // 4)
        hp = None if hint is None else max(1, min(fleet - 1, hint[0]))
        p = self.smallest(
            min(lo, fleet - 1),
            fleet - 1,
            lambda n: self.ok(self.run(lay, fabric, n, max(1, min(d_hi, fleet - n))), "ttft"),
            hp,
        )
        if p is None:
            return None
        hd = None if hint is None or not hint[1] else max(1, min(fleet - p, hint[1]))
        d = self.smallest(1, max(1, fleet - p), lambda n: self.ok(self.run(lay, fabric, p, n)), hd)
        return None if d is None else (p, d)


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
    shape = m.shape_from_spec(w.model)
    gpn = spec.cluster.gpus_per_node
    layouts = _layouts(spec, catalog)
    if not layouts:
        raise InputError(
            f"{shape.weight_bytes / 1e9:.0f} GB of weights plus the KV cache of one {_longest(spec):.0f}-token request"
            f" do not fit {gpn} x {spec.cluster.gpu} at any tp x pp (or the pinned workload.replica); relax"
            " workload.replica, lower kv_precision or use a larger GPU"
        )
    o = spec.options
    modes = (
        ("colocated", "disaggregated")
        if w.disaggregation in ("both", "auto")
        else (("colocated",) if w.disaggregation == "none" else ("disaggregated",))
    )
    sizer = _Sizer(
        spec, catalog, simulate, seed, min(requests or SIZING_REQUESTS_PER_ENGINE, SIZING_REQUESTS_PER_ENGINE)
    )
    fabric0 = o.fabrics[0]
    usd0 = _usd_gpu_h(spec, catalog, fabric0, None, None) if "build" in o.capacity else 1.0
    out_tps = _output_tps(spec)
    search: list[SearchRow] = []
    best: dict[str, tuple[float, Layout, int, int]] = {}

    def cost(gpus: int, tps: float) -> float:
        return float(m.usd_per_million_tokens(usd_per_gpu_hour=usd0, gpus=gpus, tokens_per_s=tps))

    def visit(lay: Layout, mode: str, bound_gpus: int, hint: tuple[int, int] | None = None) -> None:
        winner = min((v[0] for v in best.values()), default=float("inf"))
        lb = cost(bound_gpus, out_tps) if out_tps else 0.0
        if lb >= winner and w.traffic.rate_rps is not None:
            search.append(
                _row(lay, mode, 0, 0, bound_gpus, lb, {}, "pruned", f"lower bound ${lb:.3g}/M >= ${winner:.3g}/M sized")
            )
            return
        why = sizer.screen(lay)
        if why is not None:
            search.append(_row(lay, mode, 0, 0, 0, float("inf"), {}, "infeasible", why))
            return
        if hint is None and mode in best:
            # The best of this mode so far, scaled to this layout's GPUs per replica.
            _, blay, bp, bd = best[mode]
            scale = blay.gpus / lay.gpus
            hint = (max(1, round(bp * scale)), round(bd * scale))
        pd = sizer.colocated(lay, hint) if mode == "colocated" else sizer.disaggregated(lay, fabric0, hint)
        if pd is None:
            search.append(
                _row(
                    lay,
                    mode,
                    0,
                    0,
                    0,
                    float("inf"),
                    {},
                    "infeasible",
                    "no replica count within the cluster meets the SLOs",
                )
            )
            return
        p, d = pd
        s = sizer.run(lay, fabric0, p, d)
        gpus = (p + d) * lay.gpus
        tps = out_tps or s["output_tokens_per_s"]
        c = cost(gpus, tps)
        search.append(_row(lay, mode, p, d, gpus, c, s, "meets", f"{p}+{d} replicas"))
        if mode not in best or c < best[mode][0]:
            best[mode] = (c, lay, p, d)

    order = sorted(
        ((sizer.lower_bound(lay) * lay.gpus, i, lay, mode) for i, lay in enumerate(layouts) for mode in modes),
        key=lambda x: (x[0], x[1]),
    )
    for bound_replicas_gpus, _, lay, mode in order:
        visit(lay, mode, bound_replicas_gpus)
    # Batching knobs left to auto, searched on each mode's winning layout.
    for mode in list(best):
        _, lay, _, _ = best[mode]
        batches = [] if isinstance(w.batching.max_batch, int) else [b for b in AUTO_MAX_BATCH if b != lay.max_batch]
        budgets = (
            []
            if isinstance(w.batching.max_batch_tokens, int)
            else [t for t in AUTO_TOKEN_BUDGET if t != lay.token_budget]
        )
        hint = best[mode][2:]
        ran = sizer.run(lay, fabric0, *hint)["mean_decode_batch"]
        for b in batches:
            var = replace(lay, max_batch=b, token_budget=max(lay.token_budget, b))
            if b >= 2 * ran:
                # A cap far above the batch the winner runs changes nothing: not simulated.
                search.append(
                    _row(
                        var,
                        mode,
                        0,
                        0,
                        0,
                        float("inf"),
                        {},
                        "pruned",
                        f"max batch {b} does not bind (mean batch {ran:.3g})",
                    )
                )
                continue
            visit(var, mode, sizer.lower_bound(var) * var.gpus, hint)
        for t in budgets:
            var = replace(lay, token_budget=max(t, lay.max_batch))
            visit(var, mode, sizer.lower_bound(var) * var.gpus, hint)
    # The final check, cheapest mode first; another mode is checked only while it could
    # still beat the checked one (a check only ever adds replicas).
    verified: set[str] = set()
    for mode in sorted(best, key=lambda k: best[k][0]):
        if verified and best[mode][0] >= min(best[k][0] for k in verified):
            continue
        _, lay, p, d = best[mode]
        p2, d2, _ = sizer.verify(lay, fabric0, p, d)
        best[mode] = (cost((p2 + d2) * lay.gpus, out_tps or 1.0) if out_tps else best[mode][0], lay, p2, d2)
        verified.add(mode)
    cands = _candidates(spec, catalog, sizer, best, verified)
    cands.sort(key=lambda c: (not c.meets_slo, c.usd_per_million_output_tokens, c.ttft_p99_s, c.weight_load_s))
    rec = cands[0] if cands and cands[0].meets_slo else None
    search = _mark(search, best, rec)
    return ServingPlan(
        name=spec.name,
        rate_rps=w.traffic.rate_rps,
        concurrency=w.traffic.concurrency,
        candidates=cands,
        search=search,
        recommended=rec.id if rec else None,
        rationale=_rationale(rec, cands, spec, search),
    )


def _quantile(mean: float, cv: float, q: float, cap: int | None) -> float:
    """Quantile q of the lognormal token distribution (mean, cv), clipped like Tokens.draw."""
    if cv == 0:
        return float(mean)
    from statistics import NormalDist

    sigma = float(np.sqrt(np.log1p(cv**2)))
    x = float(np.exp(np.log(mean) - sigma**2 / 2 + sigma * NormalDist().inv_cdf(q)))
    return min(x, float(cap if cap is not None else 8 * mean))


def _output_tps(spec: InferenceSpec) -> float:
    """Output tokens/s the open-loop load asks for (0 for a closed loop: measured by the simulator)."""
    t = spec.workload.traffic
    return t.rate_rps * t.output_tokens.mean if t.rate_rps is not None else 0.0


def _row(
    lay: Layout, mode: str, p: int, d: int, gpus: int, usd: float, s: dict[str, Any], status: str, reason: str
) -> SearchRow:
    return SearchRow(
        layout=lay.label,
        mode=mode,
        tp=lay.tp,
        pp=lay.pp,
        dp_attention=lay.dp_attention,
        max_batch=lay.max_batch,
        token_budget=lay.token_budget,
        prefill_replicas=p,
        decode_replicas=d,
        gpus=gpus,
        usd_per_million_output_tokens=usd,
        ttft_p99_s=float(s.get("ttft_p99_s", float("nan"))),
        tpot_p99_s=float(s.get("tpot_p99_s", float("nan"))),
        status=status,
        reason=reason,
    )


def _mark(
    rows: list[SearchRow], best: dict[str, tuple[float, Layout, int, int]], rec: ServingCandidate | None
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
        where += [(catalog.rental(r).fabric, r, t) for r in rental_ids(spec, catalog) for t in o.rent_terms]
    out: list[ServingCandidate] = []
    for mode, (_, lay, p0, d0) in best.items():
        for fabric_id, rental, term in where:
            perf = _perf(spec, catalog, lay, fabric_id)
            links = m.serving_links(catalog, spec.cluster.gpu, fabric_id, gpn)
            kv = m.kv_transfer(shape=shape, tp=lay.tp, links=links, fabric=catalog.fabric(fabric_id))
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
