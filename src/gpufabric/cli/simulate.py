"""``gpufabric simulate``: step-time distributions under jitter, stragglers, checkpoint
stalls and failures, for a plan candidate (SPEC) or a synthetic job (flags); on an
inference spec, one planned serving design request by request."""

from __future__ import annotations

from typing import Any

import typer

from gpufabric.app.requests import INFERENCE, SPEC, SYNTHETIC, SimulateRequest
from gpufabric.cli.options import format_option
from gpufabric.cli.output import Format, print_json
from gpufabric.cli.request_options import refuse_other_modes, request_options

#: Why an option another mode reads would do nothing (each option's ``modes`` say which read it).
_UNUSED = {
    SYNTHETIC: "without a SPEC",
    SPEC: "with a training SPEC (the spec sets the job; they are synthetic-mode options)",
    INFERENCE: "with an inference spec (see docs/inference.md)",
}


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)


@request_options(SimulateRequest, place={"format": "no_attribution"})
def simulate(request: SimulateRequest, format: Format = format_option()) -> int:
    """Simulate synchronous training steps: the step ends when the slowest rank ends.

    Synthetic: gpufabric simulate --ranks 16384 --steps 100000 --compute-ms 100 --jitter normal:2ms --seed 1
    """
    from gpufabric.app.services import prepare_simulation
    from gpufabric.app.training import Declined

    job = prepare_simulation(request)
    refuse_other_modes(SimulateRequest, job.mode, _UNUSED[job.mode])
    outcome = job.run()
    if isinstance(outcome, Declined):
        typer.echo(f"gpufabric: simulate: {outcome.message}", err=True)
    elif format == Format.json:
        print_json(outcome.to_json())
    else:
        typer.echo(_TEXT[outcome.kind](outcome.to_json()))
    return outcome.exit_code


def _bar_chart(edges: list[float], counts: list[int], width: int = 50) -> list[str]:
    top = max(counts) or 1
    lines = []
    for lo, hi, n in zip(edges[:-1], edges[1:], counts, strict=True):
        bar = "#" * max(1 if n else 0, round(width * n / top))
        lines.append(f"  {lo:10.3f} - {hi:10.3f} ms | {bar} {n}")
    return lines


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:6.2f}%"


def render_text(p: dict[str, Any]) -> str:
    """The text report of a step simulation's JSON document."""
    st, ttt, lost, pl = p["step_time_ms"], p["time_to_train_s"], p["lost"], p.get("planner")
    head = f"simulate: {p['ranks']} ranks, {p['steps']} steps x {p['runs']} run(s), seed {p['seed']} ({p['method']})"
    if p.get("mode") == SPEC:
        head += f"\n  spec {p['spec']} ({p['name']}), candidate {p['candidate']}"
    planner = (
        [
            f"  planner (closed form): mean {pl['step_time_s'] * 1e3:.3f} ms, p99 {pl['step_time_p99_s'] * 1e3:.3f} ms,"
            f" CV {pl['step_time_cv']:.4f}, goodput {_pct(pl['goodput']).strip()}"
        ]
        if pl
        else []
    )
    lines = [
        head,
        "",
        "step time (ms)   mean {mean:.3f}   p50 {p50:.3f}   p90 {p90:.3f}   p99 {p99:.3f}   p99.9 {p999:.3f}   CV {cv:.4f}".format(
            **st
        ),
        f"  mean-value model {p['mean_value_step_ms']:.3f} ms; ideal (no latency) {p['ideal_step_ms']:.3f} ms",
        *planner,
        "",
        *_bar_chart(p["histogram_ms"]["edges"], p["histogram_ms"]["counts"]),
        "",
        f"time to train    {ttt['mean'] / 3600:.4g} h over {p['train_steps']} steps"
        f"   run-to-run CV {ttt['cv']:.4f} (min {ttt['min'] / 3600:.4g} h, max {ttt['max'] / 3600:.4g} h)",
        f"throughput       {p['throughput_steps_per_s']:.4g} steps/s"
        + (f", {p['throughput_tokens_per_s']:.4g} tokens/s" if p.get("throughput_tokens_per_s") else ""),
        f"goodput          {_pct(p['goodput'])}   efficiency vs ideal {_pct(p['efficiency'])}",
        f"failures/run     {p['failures_per_run']:.3g}   slow nodes/run {', '.join(map(str, p['slow_nodes_per_run'][:8]))}",
        "",
        "wall time lost to",
        f"  compute imbalance (stragglers)  {_pct(lost['compute_imbalance'])}",
        f"  communication latency           {_pct(lost['communication_latency'])}",
        f"  jitter (max over ranks)         {_pct(lost['jitter'])}",
        f"  checkpoints                     {_pct(lost['checkpoints'])}",
        f"  failures                        {_pct(lost['failures'])}",
    ]
    return "\n".join(lines)


def render_serving(p: dict[str, Any]) -> str:
    """The text report of a serving simulation's JSON document."""
    load = f"at {p['rate_rps']:g}/s" if p["rate_rps"] is not None else f"from {p['concurrency']} clients"
    lines = [
        f"{p['name']}: {p['candidate']} ({p['prefill_replicas']}+{p['decode_replicas']} replicas, {p['gpus']} GPUs),"
        f" {p['requests']:,} requests {load}, seed {p['seed']}",
        f"  TTFT  p50 {p['ttft_p50_s']:.3g} s   p99 {p['ttft_p99_s']:.3g} s",
        f"  TPOT  p50 {p['tpot_p50_s'] * 1e3:.3g} ms  p99 {p['tpot_p99_s'] * 1e3:.3g} ms",
        f"  ITL   p50 {p['itl_p50_s'] * 1e3:.3g} ms  p99 {p['itl_p99_s'] * 1e3:.3g} ms",
        f"  output {p['output_tokens_per_s']:.4g} tokens/s, {p['preemptions']} preemptions",
        f"  KV    p50 {p['kv_transfer_p50_s'] * 1e3:.3g} ms  p99 {p['kv_transfer_p99_s'] * 1e3:.3g} ms",
        f"  goodput {p['goodput_rps']:.3g} requests/s within SLO ({p['slo_attainment']:.1%}),"
        f" mean decode batch {p['mean_decode_batch']:.3g}",
        "  SLOs met" if p["meets_slo"] else "  SLO missed: " + "; ".join(p["violations"]),
    ]
    return "\n".join(lines)


#: Text renderers per workload kind (``app.workloads.KINDS``; a synthetic job is training steps).
_TEXT = {"training": render_text, "inference": render_serving}
