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
from dataclasses import dataclass, field
from typing import Any

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model import inference as m
from gpufabric.model.cost import rented_usd_per_gpu_hour
from gpufabric.model.inference import ServingConfig, Tokens
from gpufabric.plan.table import rental_ids
from gpufabric.spec.inference import InferenceSpec

#: Requests per simulated design during sizing: p99 from 20,000 requests has ~200 samples
#: beyond it, enough to size replicas; `gpufabric simulate` runs more for a final check.
SIZING_REQUESTS = 20_000


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
    kv_transfer_p99_s: float
    goodput_rps: float
    slo_attainment: float
    mean_decode_batch: float
    weight_load_s: float
    scale_out_s: float
    usd_per_gpu_hour: float
    usd_per_million_output_tokens: float
    fits_cluster: bool
    meets_slo: bool
    violations: list[str] = field(default_factory=list)
    capacity: str = "build"  # build | rent (options.capacity)
    rental: str | None = None  # catalog rentals id of a rented design
    term: str | None = None  # on_demand | 1y | 3y


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingPlan:
    """Result of ``gpufabric plan`` on an inference spec."""

    name: str
    rate_rps: float
    candidates: list[ServingCandidate]
    recommended: str | None
    rationale: str


def _violations(summary: dict[str, Any], slo: Any) -> list[str]:
    out = []
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        limit = getattr(slo, key)
        if limit is not None and summary[key] > limit:
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


def serving_config(
    spec: InferenceSpec, catalog: Catalog, cand: ServingCandidate, *, requests: int, seed: int = 0
) -> ServingConfig:
    """The simulator configuration of one planned design (for ``gpufabric simulate``)."""
    w = spec.workload
    gpu = catalog.gpu(spec.cluster.gpu)
    shape = m.shape_from_spec(w.model)
    links = m.serving_links(catalog, spec.cluster.gpu, cand.fabric, spec.cluster.gpus_per_node)
    perf = m.replica_perf(
        shape=shape,
        gpu=gpu,
        links=links,
        tp=cand.tp,
        pp=cand.pp,
        precision=w.model.precision,
        mfu=w.mfu_prefill,
        hbm_efficiency=w.hbm_efficiency,
        max_batch=w.batching.max_batch,
        jitter_cv=w.jitter_cv,
    )
    kv = m.kv_transfer(shape=shape, tp=cand.tp, links=links, fabric=catalog.fabric(cand.fabric))
    return _config(
        spec,
        perf,
        kv if cand.decode_replicas else None,
        cand.prefill_replicas,
        cand.decode_replicas,
        cand.max_batch,
        requests,
        seed,
    )


def _tokens(dist: Any) -> Tokens:
    return Tokens(mean=dist.mean, cv=dist.cv, max=dist.max)


def _config(
    spec: InferenceSpec,
    perf: m.ReplicaPerf,
    kv: m.KvTransfer | None,
    p: int,
    d: int,
    max_batch: int,
    requests: int,
    seed: int,
) -> ServingConfig:
    w = spec.workload
    slo = w.slo
    # Goodput counts a request as served within SLO when it meets the tighter of the p50/p99 limits.
    return ServingConfig(
        perf=perf,
        prefill_replicas=p,
        decode_replicas=d,
        kv=kv,
        max_batch=max_batch,
        rate_rps=w.traffic.rate_rps,
        prompt=_tokens(w.traffic.prompt_tokens),
        output=_tokens(w.traffic.output_tokens),
        requests=requests,
        jitter_cv=w.jitter_cv,
        ttft_slo_s=min(slo.ttft_p99_s or float("inf"), slo.ttft_p50_s or float("inf")),
        tpot_slo_s=min(slo.tpot_p99_s or float("inf"), slo.tpot_p50_s or float("inf")),
        seed=seed,
    )


def make_serving_plan(
    spec: InferenceSpec,
    catalog: Catalog,
    *,
    simulate: Callable[[ServingConfig], Any],
    requests: int = SIZING_REQUESTS,
    seed: int = 0,
) -> ServingPlan:
    """Size, predict and cost every serving design of ``spec``.

    ``simulate`` is the request-level simulator (sim/serving.py ``simulate_serving``),
    passed in by the caller so that plan/ does not import sim/ (docs/architecture.md).

    Raises:
        InputError: the model does not fit a node of the spec's GPU at any TP degree.
    """
    w = spec.workload
    gpu = catalog.gpu(spec.cluster.gpu)
    shape = m.shape_from_spec(w.model)
    gpn = spec.cluster.gpus_per_node
    context = w.traffic.prompt_tokens.mean + w.traffic.output_tokens.mean
    tp = (
        w.replica.tp
        if isinstance(w.replica.tp, int)
        else m.auto_tp(
            shape=shape,
            gpu=gpu,
            pp=w.replica.pp,
            gpus_per_node=gpn,
            memory_fraction=w.batching.kv_memory_fraction,
            context_tokens=context,
            batch=min(w.batching.max_batch, 32),
        )
    )
    if tp == 0:
        raise InputError(
            f"{shape.weight_bytes / 1e9:.0f} GB of weights plus KV cache do not fit {gpn} x {spec.cluster.gpu};"
            " set workload.replica.pp > 1 or use a larger GPU"
        )
    pp = w.replica.pp
    capacity = m.kv_capacity_tokens(shape=shape, gpu=gpu, tp=tp, pp=pp, memory_fraction=w.batching.kv_memory_fraction)
    max_batch = int(min(w.batching.max_batch * pp, capacity // context))
    if max_batch < 1:
        raise InputError(
            f"tp = {tp} x pp = {pp} leaves no HBM for the KV cache of one {context:.0f}-token request; raise tp or pp"
        )
    per_replica = tp * pp
    fleet = spec.num_gpus // per_replica
    if fleet < 1:
        raise InputError(f"one replica needs {per_replica} GPUs but the cluster has {spec.num_gpus}")
    prompt = _tokens(w.traffic.prompt_tokens)
    slo = w.slo
    modes = (
        ("colocated", "disaggregated")
        if w.disaggregation == "both"
        else (("colocated",) if w.disaggregation == "none" else ("disaggregated",))
    )

    def run(perf: m.ReplicaPerf, kv: m.KvTransfer | None, p: int, d: int) -> dict[str, Any]:
        return simulate(_config(spec, perf, kv, p, d, max_batch, requests, seed)).summary()

    def ttft_ok(s: dict[str, Any]) -> bool:
        return not [v for v in _violations(s, slo) if v.startswith("ttft")]

    cands: list[ServingCandidate] = []
    colocated_cache: dict[str, Any] = {}
    o = spec.options
    util = o.utilisation
    # (fabric, offering, term): built fabrics first, then rented offerings (options.capacity).
    where: list[tuple[str, str | None, str | None]] = []
    if "build" in o.capacity:
        where += [(f, None, None) for f in o.fabrics]
    if "rent" in o.capacity:
        where += [(catalog.rental(r).fabric, r, t) for r in rental_ids(spec, catalog) for t in o.rent_terms]
    for fabric_id, rental, term in where:
        fabric = catalog.fabric(fabric_id)
        links = m.serving_links(catalog, spec.cluster.gpu, fabric_id, gpn)
        perf = m.replica_perf(
            shape=shape,
            gpu=gpu,
            links=links,
            tp=tp,
            pp=pp,
            precision=w.model.precision,
            mfu=w.mfu_prefill,
            hbm_efficiency=w.hbm_efficiency,
            max_batch=w.batching.max_batch,
            jitter_cv=w.jitter_cv,
        )
        kv = m.kv_transfer(shape=shape, tp=tp, links=links, fabric=fabric)
        if rental is None:  # owned: paid whether busy or not (model/cost.py)
            usd_gpu_h = (
                m.fleet_usd_per_gpu_hour(
                    gpu=gpu,
                    fabric=fabric,
                    switch=catalog.switches[fabric.switch],
                    nic_optic=catalog.optics[fabric.nic_optic],
                    site=catalog.site,
                )
                / util
            )
        else:
            usd_gpu_h = float(
                rented_usd_per_gpu_hour(
                    usd_per_gpu_hour=catalog.rental(rental).usd_per_gpu_hour(term or ""),
                    committed=term != "on_demand",
                    utilisation=util,
                )
            )
        label = fabric_id if rental is None else f"rent-{rental}-{term}"
        offered = catalog.rental(rental).storage if rental else o.storage
        for mode in modes:
            if mode == "colocated":
                if "colocated" not in colocated_cache:
                    r = _smallest(1, fleet, lambda n, perf=perf: not _violations(run(perf, None, n, 0), slo))
                    colocated_cache["colocated"] = (r, 0, run(perf, None, r, 0))
                p, d, summary = colocated_cache["colocated"]
            else:
                if fleet < 2:
                    continue
                p = _smallest(1, fleet - 1, lambda n, perf=perf, kv=kv: ttft_ok(run(perf, kv, n, fleet - n)))
                d = _smallest(
                    1, max(1, fleet - p), lambda n, perf=perf, kv=kv, p=p: not _violations(run(perf, kv, p, n), slo)
                )
                summary = run(perf, kv, p, d)
            gpus = (p + d) * per_replica
            violations = _violations(summary, slo)
            fits = gpus <= spec.num_gpus
            if not fits:
                violations.append(f"gpus {gpus} > cluster {spec.num_gpus}")
            out_tps = w.traffic.rate_rps * w.traffic.output_tokens.mean
            for storage_id in (s for s in o.storage if s in offered):
                storage = catalog.storage_backend(storage_id)
                load = m.weight_load_s(shape=shape, storage=storage, gpu=gpu, tp=tp, pp=pp, gpus_per_node=gpn)
                burst = m.weight_load_s(
                    shape=shape, storage=storage, gpu=gpu, tp=tp, pp=pp, gpus_per_node=gpn, concurrent_replicas=p + d
                )
                cands.append(
                    ServingCandidate(
                        id=f"{mode}/{label}/{storage_id}",
                        mode=mode,
                        fabric=fabric_id,
                        storage=storage_id,
                        tp=tp,
                        pp=pp,
                        gpus_per_replica=per_replica,
                        prefill_replicas=p,
                        decode_replicas=d,
                        gpus=gpus,
                        max_batch=max_batch,
                        kv_bytes_per_token=shape.kv_bytes_per_token,
                        prefill_s_at_mean_prompt=float(perf.prefill_s(prompt.mean)),
                        decode_step_s_at_batch_1=float(perf.decode_step_s(1, context)),
                        tp_comm_s_per_decode_step=perf.decode_comm_fixed_s + perf.decode_comm_s_per_seq,
                        kv_transfer_s_at_mean_prompt=float(kv.time_s(prompt.mean)) if mode == "disaggregated" else 0.0,
                        ttft_p50_s=summary["ttft_p50_s"],
                        ttft_p99_s=summary["ttft_p99_s"],
                        tpot_p50_s=summary["tpot_p50_s"],
                        tpot_p99_s=summary["tpot_p99_s"],
                        kv_transfer_p99_s=summary["kv_transfer_p99_s"],
                        goodput_rps=summary["goodput_rps"],
                        slo_attainment=summary["slo_attainment"],
                        mean_decode_batch=summary["mean_decode_batch"],
                        weight_load_s=load,
                        scale_out_s=burst,
                        usd_per_gpu_hour=usd_gpu_h,
                        usd_per_million_output_tokens=float(
                            m.usd_per_million_tokens(usd_per_gpu_hour=usd_gpu_h, gpus=gpus, tokens_per_s=out_tps)
                        ),
                        fits_cluster=fits,
                        meets_slo=not violations,
                        violations=violations,
                        capacity="rent" if rental else "build",
                        rental=rental,
                        term=term,
                    )
                )
    cands.sort(key=lambda c: (not c.meets_slo, c.usd_per_million_output_tokens, c.ttft_p99_s, c.weight_load_s))
    best = cands[0] if cands and cands[0].meets_slo else None
    return ServingPlan(
        name=spec.name,
        rate_rps=w.traffic.rate_rps,
        candidates=cands,
        recommended=best.id if best else None,
        rationale=_rationale(best, cands, spec),
    )


def _rationale(best: ServingCandidate | None, cands: list[ServingCandidate], spec: InferenceSpec) -> str:
    if best is None:
        worst = cands[0].violations if cands else []
        return (
            f"No design meets the SLOs at {spec.workload.traffic.rate_rps:g} requests/s on {spec.num_gpus} GPUs"
            f" (closest: {', '.join(worst)}). Add GPUs, relax the SLOs or lower the rate."
        )
    text = (
        f"{best.id} serves {spec.workload.traffic.rate_rps:g} requests/s within the SLOs on {best.gpus} GPUs"
        + (
            f" ({best.prefill_replicas} prefill + {best.decode_replicas} decode"
            if best.decode_replicas
            else f" ({best.prefill_replicas}"
        )
        + f" replicas of tp {best.tp} x pp {best.pp}) at ${best.usd_per_million_output_tokens:.3g} per million output tokens;"
        f" p99 TTFT {best.ttft_p99_s:.3g} s, p99 TPOT {best.tpot_p99_s * 1e3:.3g} ms."
    )
    other = next((c for c in cands if c.meets_slo and c.mode != best.mode), None)
    if other:
        text += (
            f" The best {other.mode} design needs {other.gpus} GPUs (${other.usd_per_million_output_tokens:.3g}/M tokens,"
            f" p99 TPOT {other.tpot_p99_s * 1e3:.3g} ms)."
        )
    text += f" Cold start of one replica from {best.storage}: {best.weight_load_s:.3g} s; all replicas at once: {best.scale_out_s:.3g} s."
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
