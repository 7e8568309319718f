"""``gpufabric bench inference SPEC``: KV-block transfers and a weight-load probe for a serving plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.bench_probes import OPT, _argv, _dry_run, launch_options
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


def register(bench_app: typer.Typer) -> None:
    bench_app.command("inference")(inference)


def inference(
    spec_file: Path = typer.Argument(..., help="Inference spec (workload.kind: inference)."),
    fabric: str = typer.Option(
        "",
        "--fabric",
        help="Fabric whose model sets the KV SLO (default: the fabric of the design `gpufabric plan` recommends).",
    ),
    directory: Path = typer.Option(None, "--dir", help="Storage path for the weight-load probe (omit to skip it)."),
    scale: int = typer.Option(
        1000, "--scale", min=1, max=10**9, help="Divide the weight bytes by this for the load probe."
    ),
    iters: int = typer.Option(20, "--iters", min=1, max=100000, help="Timed transfers per KV size."),
    warmup: int = typer.Option(3, "--warmup", min=0, max=1000, help="Untimed transfers per KV size."),
    thresholds: Path = OPT["thresholds"],
    launcher: str = OPT["launcher"],
    nodes: int = OPT["nodes"],
    nproc: int = OPT["nproc"],
    hosts: str = OPT["hosts"],
    lab: str = OPT["lab"],
    plane: str = OPT["plane"],
    backend: str = OPT["backend"],
    master_port: int = OPT["master_port"],
    timeout: str = OPT["timeout"],
    init_timeout: str = OPT["init_timeout"],
    op_timeout: str = OPT["op_timeout"],
    work_dir: str = OPT["work_dir"],
    db: str | None = OPT["db"],
    data_ifname: str = OPT["data_ifname"],
    dry_run: bool = OPT["dry_run"],
    fmt: Format = OPT["fmt"],
) -> int:
    """Measure the plan's KV-cache messages (torch send/recv) and a safetensors weight load; judge against the model.

    One run holds both parts. The KV SLO is the model's time on the design `gpufabric plan`
    recommends for the spec (or --fabric); on hardware that is not that design the verdicts
    are not_planned_hardware and the run fails, as the suite's do.
    """
    from gpufabric.bench.planned import for_design
    from gpufabric.bench.probes.inference import kv_probe_sizes, run_inference
    from gpufabric.bench.probes.service import Judging
    from gpufabric.bench.slo import load_thresholds
    from gpufabric.catalog import load_catalog
    from gpufabric.model import inference as m
    from gpufabric.spec.inference import load_inference_spec, read_located

    catalog = load_catalog([])
    spec = load_inference_spec(read_located(spec_file), known_ids=catalog.known_ids())
    design = _design(spec, catalog, fabric)
    sizes = kv_probe_sizes(spec, catalog, fabric=design.fabric, tp=design.tp)
    common: dict[str, Any] = {
        "launcher": launcher,
        "nodes": nodes,
        "nproc": nproc,
        "hosts": hosts,
        "lab": lab,
        "plane": plane,
        "master_port": master_port,
        "timeout": timeout,
        "init_timeout": init_timeout,
        "op_timeout": op_timeout,
        "work_dir": work_dir,
        "data_ifname": data_ifname,
    }
    opts = launch_options(backend=backend, **common)
    kv_config = {
        "ops": ["send_recv"],
        "sizes": [s.size_bytes for s in sizes],
        "dtypes": ["bfloat16"],
        "iters": iters,
        "warmup": warmup,
        "corrupt_rank": None,
        "die_rank": None,
        "die_after": 0,
    }
    weight_bytes = m.shape_from_spec(spec.workload.model).weight_bytes
    slos = load_thresholds(thresholds) if thresholds is not None else []
    if dry_run:
        from gpufabric.bench.probes.inference import kv_slos

        return _dry_run(
            "collectives", kv_config, opts, fmt, Judging(slos=tuple(slos), plan_slos=tuple(kv_slos(sizes, design)))
        )
    load_config = None
    load_opts = None
    if directory is not None:
        from gpufabric.bench.probes.shapes import CheckpointShape

        # Weights only (no optimizer state): one file of per-layer tensors, like a safetensors shard.
        shape = CheckpointShape(
            total_bytes=max(1 << 20, int(weight_bytes // scale)),
            layers=min(spec.workload.model.layers, 32),
            tensors_per_layer=4,
            hidden=max(64, spec.workload.model.hidden // 16),
        )
        load_config = {
            **shape.as_config(),
            "directory": str(directory.resolve()),
            "keep": False,
            "formats": ["safetensors"],
        }
        load_opts = launch_options(backend="gloo" if backend == "auto" else backend, **common)
    planned = for_design(design.fabric, gpu=spec.cluster.gpu, gpus_per_node=spec.cluster.gpus_per_node, catalog=catalog)
    outcome = run_inference(
        sizes=sizes,
        design=design,
        kv_config=kv_config,
        opts=opts,
        load_config=load_config,
        load_opts=load_opts,
        db=db,
        argv=_argv(),
        judging=Judging(slos=tuple(slos), planned=planned),
        spec_name=spec.name,
    )
    payload = {
        "kind": "inference",
        "name": spec.name,
        "run_id": outcome.run_id,
        "fabric": design.fabric,
        "design": design.source,
        "tp": design.tp,
        "kv_sizes": [
            {
                "label": s.label,
                "prompt_tokens": s.prompt_tokens,
                "size_bytes": s.size_bytes,
                "model_time_us": s.model_time_us,
            }
            for s in sizes
        ],
        "kv_run": outcome.kv.to_dict(),
        "kv_verdicts": [
            {
                "test": v.test,
                "outcome": v.outcome.value,
                "measured": v.measured,
                "expected": v.expected,
                "reason": v.reason,
            }
            for v in outcome.kv_verdicts
        ],
        "weight_load_run": None
        if not outcome.loaded
        else {"run_id": outcome.run_id, "results": [r.to_dict() for r in outcome.load_rows]},
        "weight_bytes": weight_bytes,
        "weight_scale": scale,
        "status": outcome.status.value,
        "failures": list(outcome.failures),
        "warnings": list(outcome.warnings),
        "error": outcome.error or None,
    }
    if fmt is Format.json:
        print_json(payload)
        return outcome.exit_code
    console = stdout_console()
    console.print(
        f"bench inference: {spec.name}, KV over {design.fabric} model ({design.source}),"
        f" run {outcome.run_id} ({outcome.status.value})",
        markup=False,
    )
    for v in outcome.kv_verdicts:
        word = {"passed": "PASS", "not_planned_hardware": "NOT PLANNED"}.get(v.outcome.value, "FAIL")
        console.print(f"{word} {v.test}: {v.reason}", markup=False)
    for row in outcome.load_rows:
        full_s = weight_bytes / (row.read_gbps * 1e9) if row.read_gbps else float("nan")
        console.print(
            f"weight load: {row.size_bytes} B safetensors read at {row.read_gbps:.3g} GB/s"
            f" (run {outcome.run_id}); the full {weight_bytes / 1e9:.0f} GB at this rate: {full_s:.3g} s",
            markup=False,
        )
    kv_lines = {f"{v.reason} ({v.test})" for v in outcome.kv_verdicts}
    for line in outcome.failures:
        if line not in kv_lines:
            console.print(f"FAIL {line}", markup=False)
    if outcome.error:
        console.print(f"error: {outcome.error}", markup=False)
    return outcome.exit_code


def _design(spec: Any, catalog: Any, fabric: str) -> Any:  # bench.probes.inference.Design
    """The design to judge against: --fabric with the spec's TP, else the plan's recommendation."""
    from gpufabric.bench.probes.inference import Design

    if fabric:
        catalog.fabric(fabric)  # unknown id -> CatalogError (exit 2) before anything runs
        tp = spec.workload.replica.tp
        if not isinstance(tp, int):
            raise InputError("bench inference --fabric needs workload.replica.tp as a number (or omit --fabric)")
        return Design(fabric=fabric, tp=tp, source=f"--fabric {fabric}")
    from gpufabric.plan.inference import make_serving_plan
    from gpufabric.sim.serving import simulate_serving

    plan = make_serving_plan(spec, catalog, simulate=simulate_serving)
    best = next((c for c in plan.candidates if c.id == plan.recommended), None)
    if best is None:
        raise InputError(
            f"{spec.name}: `gpufabric plan` recommends no serving design (none meets the SLOs);"
            " pass --fabric to judge against one anyway"
        )
    return Design(fabric=best.fabric, tp=best.tp, source=f"plan recommendation {best.id}")
