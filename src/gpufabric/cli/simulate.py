"""``gpufabric simulate``: step-time distributions under jitter, stragglers, checkpoint
stalls and failures, for a plan candidate (SPEC) or a synthetic job (flags)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.limits import check_max
from gpufabric.cli.options import format_option, gpus_per_node_option
from gpufabric.cli.output import Format, print_json
from gpufabric.errors import InputError

_DIST_HELP = (
    "const:1ms | normal:SIGMA | normal:MEAN:SIGMA | lognormal:MEDIAN:SIGMA | exp:MEAN | exp:SHIFT:MEAN | "
    "hiccup:PROB:DELAY | empirical:FILE[:UNIT]; bare numbers are ms."
)


#: Pooled step times are kept for exact percentiles: 8 bytes each, so 400 MB at the limit.
_MAX_STEP_SAMPLES = 50_000_000


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)


def simulate(
    spec: Path | None = typer.Argument(None, help="A spec: simulate one of its plan candidates."),
    candidate: str | None = typer.Option(
        None, "--candidate", help="Candidate id (spec mode; default: the recommended one)."
    ),
    ranks: int | None = typer.Option(None, "--ranks", help="Ranks (GPUs) in the synchronous step (synthetic mode)."),
    ranks_per_node: int = gpus_per_node_option(1, "GPUs (ranks) per node (stragglers are whole nodes)."),
    ranks_per_leaf: int = typer.Option(0, "--ranks-per-leaf", help="Ranks under one leaf switch (0: no grouping)."),
    steps: int = typer.Option(10_000, "--steps", help="Steps simulated per run."),
    train_steps: int = typer.Option(0, "--train-steps", help="Steps of the whole training run (default: --steps)."),
    runs: int = typer.Option(1, "--runs", help="Independent runs R (run-to-run spread)."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives the same output bit for bit."),
    compute_ms: float = typer.Option(100.0, "--compute-ms", help="Mean per-rank compute time per step, ms."),
    jitter: str | None = typer.Option(
        None, "--jitter", help="Per-rank jitter added to the compute time: " + _DIST_HELP
    ),
    compute_cv: float | None = typer.Option(
        None,
        "--compute-cv",
        help="Spec mode: per-rank compute-time CV (default: the candidate's, from the GPU's catalog estimate; use a measured value).",
    ),
    hiccup: str | None = typer.Option(
        None, "--hiccup", help="PROB:DELAY: per rank per step, probability PROB of an extra DELAY (e.g. 0.001:5ms)."
    ),
    straggler: str | None = typer.Option(
        None,
        "--straggler",
        help="FRACTIONxFACTOR: each node is slow with probability FRACTION for a whole run, by FACTOR (e.g. 0.01x1.5).",
    ),
    leaf_jitter: str | None = typer.Option(
        None, "--leaf-jitter", help="Per-step delay shared by all ranks of a leaf switch: " + _DIST_HELP
    ),
    fixed_ms: float = typer.Option(
        0.0, "--fixed-ms", help="Deterministic critical-path time per step (bubble, bandwidth term), ms."
    ),
    comm_latency: str | None = typer.Option(
        None, "--comm-latency", help="Latency of one transfer in one dependent collective step: " + _DIST_HELP
    ),
    ring_steps: int = typer.Option(
        0, "--ring-steps", help="Dependent collective steps per step (2(p-1) for a flat ring all-reduce)."
    ),
    ring_width: int = typer.Option(0, "--ring-width", help="Transfers each dependent step waits for (default: nodes)."),
    slow_links: str | None = typer.Option(
        None, "--slow-links", help="FRACTIONxFACTOR: persistently slow links among them."
    ),
    checkpoint_every: str | None = typer.Option(
        None,
        "--checkpoint-every",
        help="STEPS:WRITE[:sync|async[:SNAPSHOT[:SLOWDOWN]]], e.g. 500:8s:sync or 500:8s:async:1s:0.1.",
    ),
    node_mttf_h: float = typer.Option(
        0.0, "--node-mttf-h", help="Mean time to failure per node, hours (0: no failures)."
    ),
    restart_min: float = typer.Option(10.0, "--restart-min", help="Minutes from a failure to training again."),
    tokens_per_step: float = typer.Option(0.0, "--tokens-per-step", help="Tokens per step, to report tokens/s."),
    brute_force: bool = typer.Option(False, "--brute-force", help="Draw every rank (the slow reference path)."),
    no_attribution: bool = typer.Option(
        False, "--no-attribution", help="Skip the straggler-free rerun used to attribute lost time."
    ),
    format: Format = format_option(),
    requests: int | None = typer.Option(
        None, "--requests", help="Inference spec: requests to simulate (default 100,000)."
    ),
) -> int:
    """Simulate synchronous training steps: the step ends when the slowest rank ends.

    Synthetic: gpufabric simulate --ranks 16384 --steps 100000 --compute-ms 100 --jitter normal:2ms --seed 1
    """
    from dataclasses import replace

    from gpufabric.cli.plan_inference import is_inference
    from gpufabric.sim import simulate as run_sim

    for flag, value, high in (
        ("--ranks", ranks, 1 << 31),
        ("--gpus-per-node", ranks_per_node, 1 << 31),
        ("--ranks-per-leaf", ranks_per_leaf, 1 << 31),
        ("--steps", steps, 10**9),
        ("--train-steps", train_steps, 10**15),
        ("--runs", runs, 10**6),
        ("--seed", seed, 2**63 - 1),
        ("--ring-steps", ring_steps, 10**9),
        ("--ring-width", ring_width, 1 << 31),
        ("--compute-ms", compute_ms, 1e9),
        ("--fixed-ms", fixed_ms, 1e9),
        ("--node-mttf-h", node_mttf_h, 1e9),
        ("--restart-min", restart_min, 1e7),
        ("--tokens-per-step", tokens_per_step, 1e15),
        ("--compute-cv", compute_cv, 1e3),
    ):
        check_max(flag, value, high)
    if spec is not None and is_inference(spec):  # workload.kind: inference (docs/inference.md)
        from gpufabric.cli.simulate_inference import simulate_inference

        _refuse_other_modes("inference")
        return simulate_inference(spec, candidate, requests=requests, seed=seed, fmt=format)
    if spec is not None:
        if ranks is not None:
            raise InputError("give either a SPEC or --ranks (synthetic mode), not both")
        _refuse_other_modes("spec")
        try:
            cfg, meta = _spec_config(
                spec,
                candidate,
                steps=steps,
                train_steps=train_steps,
                runs=runs,
                seed=seed,
                compute_cv=compute_cv,
                straggler=straggler,
                hiccup_text=hiccup,
            )
        except _NoRecommendation as exc:
            typer.echo(f"gpufabric: simulate: {exc}", err=True)
            return 1
    else:
        if ranks is None:
            raise InputError("give a SPEC, or --ranks N for a synthetic job (see gpufabric simulate --help)")
        if candidate is not None:
            raise InputError("--candidate needs a SPEC")
        _refuse_other_modes("synthetic")
        cfg = _synthetic_config(
            ranks=ranks,
            ranks_per_node=ranks_per_node,
            ranks_per_leaf=ranks_per_leaf,
            steps=steps,
            train_steps=train_steps,
            runs=runs,
            seed=seed,
            compute_ms=compute_ms,
            jitter=jitter,
            hiccup=hiccup,
            straggler=straggler,
            leaf_jitter=leaf_jitter,
            fixed_ms=fixed_ms,
            comm_latency=comm_latency,
            ring_steps=ring_steps,
            ring_width=ring_width,
            slow_links=slow_links,
            checkpoint_every=checkpoint_every,
            node_mttf_h=node_mttf_h,
            restart_min=restart_min,
            tokens_per_step=tokens_per_step,
        )
        meta = {"mode": "synthetic"}
    if cfg.runs * cfg.steps > _MAX_STEP_SAMPLES:
        raise InputError(
            f"--runs x --steps = {cfg.runs * cfg.steps:,} step times would not fit in memory comfortably "
            f"(limit {_MAX_STEP_SAMPLES:,}); use --train-steps for long runs, it cycles the simulated steps"
        )
    if no_attribution:
        cfg = replace(cfg, attribution=False)
    result = run_sim(cfg, brute_force=brute_force)
    payload = _payload(result, meta)
    if format == Format.json:
        print_json(payload)
    else:
        typer.echo(render_text(payload))
    return 0


def _synthetic_config(
    *,
    ranks,
    ranks_per_node,
    ranks_per_leaf,
    steps,
    train_steps,
    runs,
    seed,
    compute_ms,
    jitter,
    hiccup,
    straggler,
    leaf_jitter,
    fixed_ms,
    comm_latency,
    ring_steps,
    ring_width,
    slow_links,
    checkpoint_every,
    node_mttf_h,
    restart_min,
    tokens_per_step,
):
    from gpufabric.sim import (
        CommLatency,
        Constant,
        Distribution,
        Failures,
        Normal,
        SimConfig,
        parse_checkpoint,
        parse_distribution,
        parse_hiccup,
        parse_stragglers,
    )

    for name, value in (
        ("--compute-ms", compute_ms),
        ("--fixed-ms", fixed_ms),
        ("--node-mttf-h", node_mttf_h),
        ("--restart-min", restart_min),
        ("--tokens-per-step", tokens_per_step),
    ):
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"{name} must be a finite number >= 0, got {value}")
    if compute_ms + fixed_ms <= 0:  # throughput and shares divide by the step time
        raise InputError("--compute-ms plus --fixed-ms must be > 0: a training step takes time")
    if ring_steps < 0 or ring_width < 0 or ranks_per_leaf < 0:
        raise InputError("--ring-steps, --ring-width and --ranks-per-leaf must be >= 0")
    if ranks < 1 or steps < 1 or ranks_per_node < 1:
        raise InputError("--ranks, --steps and --gpus-per-node must be >= 1")
    base_s = compute_ms * 1e-3
    compute: Distribution = Constant(value_s=base_s)
    if jitter:
        j = parse_distribution(jitter)
        # A normal jitter is centred on the compute time and the total is truncated at 0;
        # any other jitter is a non-negative delay added to it.
        compute = Normal(mu_s=base_s + j.mu_s, sigma_s=j.sigma_s) if isinstance(j, Normal) else j.affine(loc_s=base_s)
    comm = None
    if comm_latency or ring_steps:
        if not (comm_latency and ring_steps):
            raise InputError("--comm-latency and --ring-steps go together")
        comm = CommLatency(
            alpha=parse_distribution(comm_latency),
            dependent_steps=ring_steps,
            width=ring_width or max(1, ranks // ranks_per_node),
            slow_links=parse_stragglers(slow_links) if slow_links else None,
        )
    elif slow_links:
        raise InputError("--slow-links needs --comm-latency and --ring-steps")
    return SimConfig(
        num_ranks=ranks,
        ranks_per_node=ranks_per_node,
        ranks_per_leaf=ranks_per_leaf,
        compute=compute,
        leaf_jitter=parse_distribution(leaf_jitter) if leaf_jitter else None,
        hiccup=parse_hiccup(hiccup) if hiccup else None,
        stragglers=parse_stragglers(straggler) if straggler else None,
        fixed_s=fixed_ms * 1e-3,
        comm=comm,
        checkpoint=parse_checkpoint(checkpoint_every) if checkpoint_every else None,
        failures=Failures(node_mttf_s=node_mttf_h * 3600, restart_s=restart_min * 60) if node_mttf_h > 0 else None,
        steps=steps,
        train_steps=train_steps,
        runs=runs,
        seed=seed,
        tokens_per_step=tokens_per_step,
    )


class _NoRecommendation(Exception):
    """The plan found no design to recommend and no --candidate was given (exit 1, like plan)."""


def _spec_config(
    path: Path, candidate: str | None, *, steps, train_steps, runs, seed, compute_cv, straggler, hiccup_text
):
    from gpufabric.catalog import load_catalog
    from gpufabric.plan import evaluate_candidates, rank, recommend
    from gpufabric.sim import config_from_breakdown, parse_hiccup, parse_stragglers
    from gpufabric.spec import load_spec

    catalog = load_catalog()
    known = {
        "cluster.gpu": set(catalog.gpus),
        "options.fabrics": set(catalog.fabrics),
        "options.storage": set(catalog.storage),
    }
    spec = load_spec(path, known_ids=known).spec
    cands = rank(evaluate_candidates(spec, catalog))
    ids = [c.id for c in cands]
    if candidate is None:
        rec = recommend(cands, spec.requirements)
        if rec.recommended is None:  # plan's contract: no design fits => exit 1
            raise _NoRecommendation(
                f"{path}: the plan recommends no design, so there is nothing to simulate by default."
                f" {rec.rationale} Simulate one anyway with --candidate ID (one of {', '.join(ids)})."
            )
        chosen_id = rec.recommended
    else:
        chosen_id = candidate
    if chosen_id not in ids:
        raise InputError(f"unknown candidate {candidate!r}: choose one of {', '.join(ids)}")
    chosen = cands[ids.index(chosen_id)]
    total = math.ceil(spec.workload.total_tokens / spec.workload.global_batch_tokens)
    if compute_cv is not None and not (math.isfinite(compute_cv) and compute_cv >= 0):
        raise InputError(f"--compute-cv must be a finite number >= 0, got {compute_cv}")
    # Compute CV and hiccups come with the candidate's breakdown (the planner's own
    # inputs); --compute-cv and --hiccup override them.
    cfg = config_from_breakdown(
        chosen.breakdown,
        steps=steps,
        train_steps=train_steps or total,
        runs=runs,
        seed=seed,
        compute_cv=compute_cv,
        hiccup=parse_hiccup(hiccup_text) if hiccup_text else None,
        stragglers=parse_stragglers(straggler) if straggler else None,
        tokens_per_step=spec.workload.global_batch_tokens,
    )
    meta = {
        "mode": "spec",
        "spec": str(path),
        "name": spec.name,
        "candidate": chosen.id,
        "planner": {
            "step_time_s": chosen.step_time_s,
            "step_time_p99_s": chosen.step_time_p99_s,
            "step_time_cv": chosen.step_time_cv,
            "goodput": chosen.goodput,
        },
    }
    return cfg, meta


def _payload(r, meta: dict[str, Any]) -> dict[str, Any]:
    from gpufabric.jsonable import to_jsonable

    # The raw samples (runs x steps floats) are not part of the output: left out before the
    # conversion, which otherwise built and dropped a million-element list (docs/performance.md).
    body = {f.name: to_jsonable(getattr(r, f.name)) for f in dataclasses.fields(r) if f.name != "step_times_s"}
    return {**meta, **body}


def _bar_chart(edges: list[float], counts: list[int], width: int = 50) -> list[str]:
    top = max(counts) or 1
    lines = []
    for lo, hi, n in zip(edges[:-1], edges[1:], counts, strict=True):
        bar = "#" * max(1 if n else 0, round(width * n / top))
        lines.append(f"  {lo:10.3f} - {hi:10.3f} ms | {bar} {n}")
    return lines


def _planner_line(p: dict[str, Any]) -> list[str]:
    pl = p.get("planner")
    if not pl:
        return []
    return [
        f"  planner (closed form): mean {pl['step_time_s'] * 1e3:.3f} ms, p99 {pl['step_time_p99_s'] * 1e3:.3f} ms, "
        f"CV {pl['step_time_cv']:.4f}, goodput {_pct(pl['goodput']).strip()}"
    ]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:6.2f}%"


def render_text(p: dict[str, Any]) -> str:
    st, ttt, lost = p["step_time_ms"], p["time_to_train_s"], p["lost"]
    head = f"simulate: {p['ranks']} ranks, {p['steps']} steps x {p['runs']} run(s), seed {p['seed']} ({p['method']})"
    if p.get("mode") == "spec":
        head += f"\n  spec {p['spec']} ({p['name']}), candidate {p['candidate']}"
    lines = [
        head,
        "",
        "step time (ms)   mean {mean:.3f}   p50 {p50:.3f}   p90 {p90:.3f}   p99 {p99:.3f}   p99.9 {p999:.3f}   CV {cv:.4f}".format(
            **st
        ),
        f"  mean-value model {p['mean_value_step_ms']:.3f} ms; ideal (no latency) {p['ideal_step_ms']:.3f} ms",
        *_planner_line(p),
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


#: Options each mode reads (param name -> flag); any other given option would do nothing.
_SYNTHETIC_ONLY = {
    "ranks_per_node": "--gpus-per-node",
    "ranks_per_leaf": "--ranks-per-leaf",
    "compute_ms": "--compute-ms",
    "jitter": "--jitter",
    "leaf_jitter": "--leaf-jitter",
    "fixed_ms": "--fixed-ms",
    "comm_latency": "--comm-latency",
    "ring_steps": "--ring-steps",
    "ring_width": "--ring-width",
    "slow_links": "--slow-links",
    "checkpoint_every": "--checkpoint-every",
    "node_mttf_h": "--node-mttf-h",
    "restart_min": "--restart-min",
    "tokens_per_step": "--tokens-per-step",
}
_TRAINING_SPEC_ONLY = {"compute_cv": "--compute-cv"}
_SHARED_TRAINING = {
    "steps": "--steps",
    "train_steps": "--train-steps",
    "runs": "--runs",
    "straggler": "--straggler",
    "hiccup": "--hiccup",
    "brute_force": "--brute-force",
    "no_attribution": "--no-attribution",
}
_INFERENCE_ONLY = {"requests": "--requests"}


def _refuse_other_modes(mode: str) -> None:
    """Exit 2 when an option of another mode was given: it would be silently ignored (issue 10)."""
    from gpufabric.cli.options import refuse_unused

    if mode == "inference":
        refuse_unused(
            True,
            {**_SYNTHETIC_ONLY, **_TRAINING_SPEC_ONLY, **_SHARED_TRAINING},
            "with an inference spec (see docs/inference.md)",
        )
    elif mode == "spec":
        refuse_unused(
            True,
            {**_SYNTHETIC_ONLY, **_INFERENCE_ONLY},
            "with a training SPEC (the spec sets the job; they are synthetic-mode options)",
        )
    else:
        refuse_unused(True, {**_TRAINING_SPEC_ONLY, **_INFERENCE_ONLY}, "without a SPEC")
