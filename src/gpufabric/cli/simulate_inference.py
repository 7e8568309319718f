"""``gpufabric simulate SPEC`` on an inference spec: one planned serving design, many requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.output import Format, print_json
from gpufabric.errors import InputError

#: Requests simulated by default: enough for a p99 from 1,000 samples beyond it.
DEFAULT_REQUESTS = 100_000
#: Upper bound on --requests (memory: ~20 float arrays of this length).
MAX_REQUESTS = 20_000_000


def simulate_inference(spec_file: Path, candidate: str | None, *, requests: int | None, seed: int, fmt: Format) -> int:
    """Plan, simulate the chosen design; exit 1 when it misses an SLO."""
    from gpufabric.catalog import load_catalog
    from gpufabric.plan.inference import _violations, make_serving_plan, serving_config
    from gpufabric.sim.serving import simulate_serving
    from gpufabric.spec.inference import load_inference_spec, read_located

    n = DEFAULT_REQUESTS if requests is None else requests
    if not 1 <= n <= MAX_REQUESTS:
        raise InputError(f"--requests must be between 1 and {MAX_REQUESTS:,}, got {n}")
    catalog = load_catalog([])
    spec = load_inference_spec(read_located(spec_file), known_ids=catalog.known_ids())
    plan = make_serving_plan(spec, catalog, simulate=simulate_serving, seed=seed)
    chosen = candidate or plan.recommended or plan.candidates[0].id
    by_id = {c.id: c for c in plan.candidates}
    if chosen not in by_id:
        from gpufabric.spec.loader import did_you_mean

        raise InputError(f"unknown candidate {chosen!r}; {did_you_mean(chosen, sorted(by_id), 'candidates')}")
    cand = by_id[chosen]
    result = simulate_serving(serving_config(spec, catalog, cand, requests=n, seed=seed))
    summary = result.summary()
    violations = _violations(summary, spec.workload.slo)
    traffic = spec.workload.traffic
    load = f"at {traffic.rate_rps:g}/s" if traffic.rate_rps is not None else f"from {traffic.concurrency} clients"
    payload: dict[str, Any] = {
        "mode": "inference",
        "name": spec.name,
        "candidate": chosen,
        "rate_rps": traffic.rate_rps,
        "concurrency": traffic.concurrency,
        "prefill_replicas": cand.prefill_replicas,
        "decode_replicas": cand.decode_replicas,
        "gpus": cand.gpus,
        "seed": seed,
        **summary,
        # The service's requests; one engine of the design simulates its round-robin share of them.
        "requests": n,
        "simulated_requests": summary["requests"],
        "meets_slo": not violations,
        "violations": violations,
    }
    if fmt == Format.json:
        print_json(payload)
    else:
        typer.echo(
            "\n".join(
                [
                    f"{spec.name}: {chosen} ({cand.prefill_replicas}+{cand.decode_replicas} replicas, {cand.gpus} GPUs),"
                    f" {n:,} requests {load}, seed {seed}",
                    f"  TTFT  p50 {summary['ttft_p50_s']:.3g} s   p99 {summary['ttft_p99_s']:.3g} s",
                    f"  TPOT  p50 {summary['tpot_p50_s'] * 1e3:.3g} ms  p99 {summary['tpot_p99_s'] * 1e3:.3g} ms",
                    f"  ITL   p50 {summary['itl_p50_s'] * 1e3:.3g} ms  p99 {summary['itl_p99_s'] * 1e3:.3g} ms",
                    f"  output {summary['output_tokens_per_s']:.4g} tokens/s, {summary['preemptions']} preemptions",
                    f"  KV    p50 {summary['kv_transfer_p50_s'] * 1e3:.3g} ms  p99 {summary['kv_transfer_p99_s'] * 1e3:.3g} ms",
                    f"  goodput {summary['goodput_rps']:.3g} requests/s within SLO ({summary['slo_attainment']:.1%}),"
                    f" mean decode batch {summary['mean_decode_batch']:.3g}",
                    "  SLOs met" if not violations else "  SLO missed: " + "; ".join(violations),
                ]
            )
        )
    return 0 if not violations else 1
