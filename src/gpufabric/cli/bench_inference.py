"""``gpufabric bench inference SPEC``: KV-block transfers and a weight-load probe for a serving plan."""

from __future__ import annotations

from pathlib import Path

import typer

from gpufabric.cli.bench_probes import OPT, _argv, _dry_run, launch_options
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


def register(bench_app: typer.Typer) -> None:
    bench_app.command("inference")(inference)


def inference(
    spec_file: Path = typer.Argument(..., help="Inference spec (workload.kind: inference)."),
    fabric: str = typer.Option("", "--fabric", help="Fabric whose model sets the KV SLO (default: the spec's first)."),
    directory: Path = typer.Option(None, "--dir", help="Storage path for the weight-load probe (omit to skip it)."),
    scale: int = typer.Option(
        1000, "--scale", min=1, max=10**9, help="Divide the weight bytes by this for the load probe."
    ),
    iters: int = typer.Option(20, "--iters", min=1, max=100000, help="Timed transfers per KV size."),
    warmup: int = typer.Option(3, "--warmup", min=0, max=1000, help="Untimed transfers per KV size."),
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
    """Measure the plan's KV-cache messages (torch send/recv) and a safetensors weight load; judge against the model."""
    from gpufabric.bench.probes import service
    from gpufabric.bench.probes.inference import kv_probe_sizes, kv_verdicts
    from gpufabric.catalog import load_catalog
    from gpufabric.model import inference as m
    from gpufabric.spec.inference import load_inference_spec, read_located

    catalog = load_catalog([])
    spec = load_inference_spec(read_located(spec_file), known_ids=catalog.known_ids())
    fabric_id = fabric or spec.options.fabrics[0]
    catalog.fabric(fabric_id)  # unknown id -> CatalogError (exit 2) before anything runs
    tp = spec.workload.replica.tp
    if not isinstance(tp, int):
        raise InputError("bench inference needs workload.replica.tp as a number (run `gpufabric plan` to choose one)")
    sizes = kv_probe_sizes(spec, catalog, fabric=fabric_id, tp=tp)
    opts = launch_options(
        launcher=launcher,
        nodes=nodes,
        nproc=nproc,
        hosts=hosts,
        lab=lab,
        plane=plane,
        master_port=master_port,
        timeout=timeout,
        init_timeout=init_timeout,
        op_timeout=op_timeout,
        backend=backend,
        work_dir=work_dir,
        data_ifname=data_ifname,
    )
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
    if dry_run:
        return _dry_run("collectives", kv_config, opts, fmt)
    kv_report = service.run_collectives(kv_config, opts, db=db, argv=_argv())
    verdicts = kv_verdicts(sizes, kv_report.rows, fabric=fabric_id)
    load_report = None
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
        load_opts = launch_options(
            launcher=launcher,
            nodes=nodes,
            nproc=nproc,
            hosts=hosts,
            lab=lab,
            plane=plane,
            master_port=master_port,
            timeout=timeout,
            init_timeout=init_timeout,
            op_timeout=op_timeout,
            backend="gloo" if backend == "auto" else backend,
            work_dir=work_dir,
            data_ifname=data_ifname,
        )
        load_report = service.run_checkpoint(load_config, load_opts, db=db, argv=_argv())
    slo_failed = any(v.outcome.value == "failed" for v in verdicts)
    code = 1 if (kv_report.exit_code or (load_report is not None and load_report.exit_code) or slo_failed) else 0
    payload = {
        "kind": "inference",
        "name": spec.name,
        "fabric": fabric_id,
        "tp": tp,
        "kv_sizes": [
            {
                "label": s.label,
                "prompt_tokens": s.prompt_tokens,
                "size_bytes": s.size_bytes,
                "model_time_us": s.model_time_us,
            }
            for s in sizes
        ],
        "kv_run": kv_report.to_dict(),
        "kv_verdicts": [
            {
                "test": v.test,
                "outcome": v.outcome.value,
                "measured": v.measured,
                "expected": v.expected,
                "reason": v.reason,
            }
            for v in verdicts
        ],
        "weight_load_run": None if load_report is None else load_report.to_dict(),
        "weight_bytes": weight_bytes,
        "weight_scale": scale,
        "status": "passed" if code == 0 else "failed",
    }
    if fmt is Format.json:
        print_json(payload)
        return code
    console = stdout_console()
    console.print(
        f"bench inference: {spec.name}, KV over {fabric_id} model, run {kv_report.run_id} ({kv_report.status})",
        markup=False,
    )
    for v in verdicts:
        console.print(f"{'PASS' if v.outcome.value == 'passed' else 'FAIL'} {v.test}: {v.reason}", markup=False)
    if load_report is not None:
        for row in load_report.rows:
            full_s = weight_bytes / (row.read_gbps * 1e9) if row.read_gbps else float("nan")
            console.print(
                f"weight load: {row.size_bytes} B safetensors read at {row.read_gbps:.3g} GB/s"
                f" (run {load_report.run_id}); the full {weight_bytes / 1e9:.0f} GB at this rate: {full_s:.3g} s",
                markup=False,
            )
    for line in kv_report.failures + (load_report.failures if load_report else ()):
        console.print(f"FAIL {line}", markup=False)
    return code
