"""The serving search: layouts a spec leaves open, each sized by simulation (plan/inference.py uses it).

A point of the search is a replica layout (tp, pp, ep, DP attention, max batch, token
budget) x mode. :class:`_Sizer` screens a point analytically (one request alone already
misses an SLO: no replica count helps), bounds it from below (GPU-seconds per request at
the largest batch the TPOT limit allows, times the rate), and sizes it: the fewest replicas
meeting every SLO by simulation (sim/serving.py, passed in: plan/ does not import sim/),
from a hint or by doubling and bisection; the final check reruns a winner on a larger
sample. Simulations are cached per (layout, fabric, replicas, sample).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.model import inference as m
from gpufabric.model.inference import ServingConfig, Tokens
from gpufabric.spec.inference import InferenceSpec

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


def _violations(summary: dict[str, Any], slo: Any, margin: float = 1.0) -> list[str]:
    out = []
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p99_s"):
        limit = getattr(slo, key)
        if limit is not None and summary[key] > limit * margin:
            out.append(f"{key} {summary[key]:.4g} > {limit:g}")
    return out


def _miss_limits(slo: Any, only: str | None, margin: float) -> tuple[tuple[str, float, float], ...]:
    """The percentile limits a verdict-only run may stop at (ServingConfig.stop_on_miss): the
    TTFT and TPOT ones of :func:`_violations` (``only``: those whose key starts so), same
    products. ITL is a weighted percentile over token gaps: such a limit is judged at the end."""
    out = []
    for key, q in (("ttft_p50_s", 0.5), ("ttft_p99_s", 0.99), ("tpot_p50_s", 0.5), ("tpot_p99_s", 0.99)):
        limit = getattr(slo, key)
        if limit is not None and (only is None or key.startswith(only)):
            out.append((key, q, limit * margin))
    return tuple(out)


def hbm_efficiency(spec: InferenceSpec, catalog: Catalog) -> float:
    """The spec's ``hbm_efficiency`` when it sets one, else the GPU's measured one (``calibrate``
    on a ``bench gpu`` run), else the spec's default."""
    w = spec.workload
    measured = catalog.gpu(spec.cluster.gpu).hbm_efficiency
    return w.hbm_efficiency if "hbm_efficiency" in w.model_fields_set or measured is None else measured


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
        hbm_efficiency=hbm_efficiency(spec, catalog),
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
    kv: m.KvTransfer | None = None,
) -> ServingConfig:
    w = spec.workload
    slo = w.slo
    kv = (kv or _kv(spec, catalog, lay.tp, fabric)) if d else None
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
        api_s_per_token_rate=m.API_S_PER_TOKEN_RATE,
        prefix_tokens=w.traffic.prefix_tokens,
        client_delay_s=m.CLIENT_DELAY_S,
        ttft_slo_s=min(slo.ttft_p99_s or float("inf"), slo.ttft_p50_s or float("inf")),
        tpot_slo_s=min(slo.tpot_p99_s or float("inf"), slo.tpot_p50_s or float("inf")),
        seed=seed,
    )


def _kv(spec: InferenceSpec, catalog: Catalog, tp: int, fabric: str) -> m.KvTransfer:
    """The KV-cache transfer between a prefill and a decode replica of ``tp`` GPUs over ``fabric``."""
    return m.kv_transfer(
        shape=m.shape_from_spec(spec.workload.model),
        tp=tp,
        links=m.serving_links(catalog, spec.cluster.gpu, fabric, spec.cluster.gpus_per_node),
        fabric=catalog.fabric(fabric),
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
    # Auto batch under a pinned budget: the largest searched batch the budget can carry.
    fitting = [b for b in AUTO_MAX_BATCH if not isinstance(tb, int) or b <= tb] or [int(tb)]
    batch = mb if isinstance(mb, int) else max(fitting)
    budget = tb if isinstance(tb, int) else max(AUTO_TOKEN_BUDGET[0], batch)
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
                lay = Layout(tp=tp, pp=pp, ep=ep, dp_attention=dpa, max_batch=batch, token_budget=budget)
                if _capacity(spec, catalog, lay) / pp * (1.0 - m.KV_WATERMARK) >= longest:
                    out.append(lay)
    return out


def _longest(spec: InferenceSpec) -> float:
    t = spec.workload.traffic

    def top(d: Any) -> float:
        return float(d.mean if d.cv == 0 else (d.max if d.max is not None else 8 * d.mean))

    return top(t.prompt_tokens) + top(t.output_tokens)


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
        # Runs stopped at a certain miss (verdict only, no figures): (cache key, stop) -> summary.
        self.missed: dict[tuple[Any, ...], dict[str, Any]] = {}
        # A layout's perf is built once per fabric: the collective model behind it is the
        # costly part of a sizing step.
        self.perfs: dict[tuple[Layout, str], m.ReplicaPerf] = {}  # (layout less its budget, fabric)
        # The configuration of a layout x fabric (the KV-transfer model, the cache) less its replica
        # counts and sample, and each layout's lower bound: built once, not once per simulation.
        self.templates: dict[tuple[Layout, str], ServingConfig] = {}
        self.bounds: dict[Layout, int] = {}
        self.kvs: dict[tuple[int, str], m.KvTransfer] = {}  # (tp, fabric): the KV-transfer model
        self.fleet_gpus = spec.num_gpus

    def run(
        self,
        lay: Layout,
        fabric: str,
        p: int,
        d: int,
        per_engine: int | None = None,
        *,
        stop: tuple[str | None, float] | None = None,
    ) -> dict[str, Any]:
        """The summary of one design's simulation. ``stop`` = (only, margin): the caller needs
        only ``ok(summary, only, margin)``, so the run may stop at its first certain miss of
        those limits (its summary then has ``missed`` and no figures; the verdict is the whole
        run's, exactly: sim/batching.py MissRule). A run that does not stop is a whole run."""
        per_engine = per_engine or self.per_engine
        key = (lay, fabric if d else "", p, d, per_engine)
        if key in self.cache:
            return self.cache[key]
        if stop is not None and (key, stop) in self.missed:
            return self.missed[(key, stop)]
        engines = max(d, p) * lay.pp
        cfg = replace(
            self.template(lay, fabric if d else ""),
            prefill_replicas=p,
            decode_replicas=d,
            requests=per_engine * engines,
            engine_requests=per_engine,
        )
        if stop is not None:
            cfg = replace(cfg, stop_on_miss=_miss_limits(self.spec.workload.slo, *stop))
        s = self.simulate(cfg).summary()
        if "missed" in s:
            self.missed[(key, stop)] = s
        else:
            self.cache[key] = s
        return s

    def verify(
        self, lay: Layout, fabric: str, p: int, d: int, affordable: Callable[[int, int], bool] | None = None
    ) -> tuple[int, int, dict[str, Any] | None]:
        """The sized design rerun on VERIFY_REQUESTS_PER_ENGINE; one more replica (the side
        that misses when disaggregated) until it passes, at most three, within the cluster.
        ``affordable(p, d)``: False once a design that size could no longer win; the check
        then stops there and returns that size with no summary (priced out, not simulated)."""
        fleet = self.fleet_gpus // lay.gpus
        # Disaggregated, the side that misses decides what to add: only a TTFT miss may stop a run.
        stop = ("ttft" if d else None, VERIFY_MARGIN)
        s = self.run(lay, fabric, p, d, VERIFY_REQUESTS_PER_ENGINE, stop=stop)
        for _ in range(3):
            if self.ok(s, margin=VERIFY_MARGIN) or p + d + 1 > fleet:
                break
            if d and self.ok(s, "ttft", VERIFY_MARGIN):
                d += 1
            else:
                p += 1
            if affordable is not None and not affordable(p, d):
                return p, d, None
            s = self.run(lay, fabric, p, d, VERIFY_REQUESTS_PER_ENGINE, stop=stop)
        if "missed" in s:  # the design it settles on is shown with its figures
            s = self.run(lay, fabric, p, d, VERIFY_REQUESTS_PER_ENGINE)
        return p, d, s

    def template(self, lay: Layout, fabric: str) -> ServingConfig:
        """``_config`` of ``lay`` less its replicas and sample; ``fabric`` "" for colocated (no KV transfer)."""
        key = (lay, fabric)
        if key not in self.templates:
            perf = self.perf(lay, fabric or self.spec.options.fabrics[0])
            d = 1 if fabric else 0
            self.templates[key] = _config(
                self.spec,
                self.catalog,
                lay,
                fabric or self.spec.options.fabrics[0],
                1,
                d,
                requests=1,
                seed=self.seed,
                perf=perf,
                kv=self.kv(lay.tp, fabric) if fabric else None,
            )
        return self.templates[key]

    def kv(self, tp: int, fabric: str) -> m.KvTransfer:
        if (tp, fabric) not in self.kvs:
            self.kvs[(tp, fabric)] = _kv(self.spec, self.catalog, tp, fabric)
        return self.kvs[(tp, fabric)]

    def perf(self, lay: Layout, fabric: str) -> m.ReplicaPerf:
        # _perf reads every knob but the token budget: the budget variants share one perf.
        key = (replace(lay, token_budget=0), fabric)
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
        if lay not in self.bounds:
            self.bounds[lay] = self._lower_bound(lay)
        return self.bounds[lay]

    def _lower_bound(self, lay: Layout) -> int:
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
            float(perf.prefill_s(t.prompt_tokens.mean, t.prefix_tokens))
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
            alone = float(perf.prefill_s(prompt, w.traffic.prefix_tokens)) + over
            if alone > limit:
                return f"{key}: a {prompt:.0f}-token prompt alone takes {alone:.3g} s > {limit:g} s"
        limit = min(slo.tpot_p99_s or float("inf"), slo.tpot_p50_s or float("inf"), slo.itl_p99_s or float("inf"))
        ctx = pt.mean + w.traffic.output_tokens.mean / 2
        step = float(perf.decode_step_s(1, ctx)) / perf.tokens_per_step
        if step > limit:
            return f"tpot: one sequence alone steps in {step * 1e3:.3g} ms > {limit * 1e3:g} ms"
        return None

    def smallest(
        self, lo: int, hi: int, good: Callable[[int], bool], hint: int | None = None, *, hi_first: bool = False
    ) -> int | None:
        """Smallest n in [lo, hi] with good(n) (monotone); None if hi fails.

        From a hint (the answer of a similar layout scaled to this one's GPUs) it walks one
        step at a time, which is a couple of simulations when the hint is close; otherwise
        it doubles from lo, then bisects. ``hi_first``: try hi before anything else, one
        simulation that settles an infeasible point (which the walk would reach only after
        all its steps).
        """
        if hi_first and lo <= hi and not good(hi):
            return None
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
        n = self.smallest(lo, fleet, lambda r: self.ok(self.run(lay, fabric, r, 0, stop=(None, 1.0))), h)
        return None if n is None else (n, 0)

    def disaggregated(self, lay: Layout, fabric: str, hint: tuple[int, int] | None = None) -> tuple[int, int] | None:
        fleet = self.fleet_gpus // lay.gpus
        if fleet < 2:
            return None
        lo = max(1, self.lower_bound(lay) // 2)
        # Prefill replicas for TTFT with a generous decode pool, then the fewest decode replicas.
        # Without a hint, the whole fleet first: a prefill pool that misses TTFT at any size is
        # common (the KV transfer and a long prompt's prefill add up) and costs one simulation.
        d_hi = max(1, fleet // 4)
        hp = None if hint is None else max(1, min(fleet - 1, hint[0]))
        p = self.smallest(
            min(lo, fleet - 1),
            fleet - 1,
            lambda n: self.ok(self.run(lay, fabric, n, max(1, min(d_hi, fleet - n)), stop=("ttft", 1.0)), "ttft"),
            hp,
            hi_first=hp is None,  # with a hint (a similar layout that met TTFT) the walk is cheaper
        )
        if p is None:
            return None
        hd = None if hint is None or not hint[1] else max(1, min(fleet - p, hint[1]))
        d = self.smallest(1, max(1, fleet - p), lambda n: self.ok(self.run(lay, fabric, p, n, stop=(None, 1.0))), hd)
        return None if d is None else (p, d)


#: Standard normal quantiles of the percentiles the screen reads: ``statistics.NormalDist().inv_cdf(q)``
#: to the last bit (tests/plan/test_serving_search.py), without importing statistics in every plan.
_NORMAL_QUANTILE = {0.5: 0.0, 0.99: 2.3263478740408408}


def _quantile(mean: float, cv: float, q: float, cap: int | None) -> float:
    """Quantile q (0.5 or 0.99) of the lognormal token distribution (mean, cv), clipped like Tokens.draw."""
    if cv == 0:
        return float(mean)
    sigma = float(np.sqrt(np.log1p(cv**2)))
    x = float(np.exp(np.log(mean) - sigma**2 / 2 + sigma * _NORMAL_QUANTILE[q]))
    return min(x, float(cap if cap is not None else 8 * mean))


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
