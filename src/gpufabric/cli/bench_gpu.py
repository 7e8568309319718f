"""``gpufabric bench gpu --spec SPEC``: GEMM, HBM, decode, prefill and host-copy figures of one GPU."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.bench_probes import OPT, _argv, _failures
from gpufabric.cli.options import refuse_unused
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


def register(bench_app: typer.Typer) -> None:
    bench_app.command("gpu")(gpu)


def gpu(
    spec_file: Path = typer.Option(..., "--spec", help="Training or inference spec whose shapes are measured."),
    device: str = typer.Option(
        "auto", "--device", help="cuda, cpu, or auto (cuda when nvidia-smi is on PATH; cpu scales every shape down)."
    ),
    repeats: int = typer.Option(
        0, "--repeats", min=0, max=10000, help="Timed repeats per measurement (0: 10 on CUDA, 3 on CPU)."
    ),
    thresholds: Path | None = typer.Option(
        None,
        "--thresholds",
        help="Thresholds YAML (tests: gpu.gemm.*, gpu.hbm.read, ...; metrics tflops, bw_gbps, time_ms ...).",
    ),
    catalog_files: list[Path] = typer.Option([], "--catalog", help="Catalog override file (the GPU's peaks)."),
    timeout: str = OPT["timeout"],
    op_timeout: str = OPT["op_timeout"],
    db: str | None = OPT["db"],
    dry_run: bool = OPT["dry_run"],
    fmt: Format = OPT["fmt"],
) -> int:
    """Measure the GEMM shapes of a spec's layout, HBM bandwidth, a spec-shaped decode step and prefill,
    and host<->device copies on one device; compare decode with the serving model."""
    from gpufabric.bench.probes.gpu_plan import plan_for_spec
    from gpufabric.bench.probes.gpu_service import run_gpu
    from gpufabric.bench.probes.run import LaunchOptions
    from gpufabric.bench.probes.service import Judging
    from gpufabric.bench.slo import describe, load_thresholds
    from gpufabric.catalog import load_catalog
    from gpufabric.cli.options import duration_s
    from gpufabric.spec.inference import load_inference_spec, read_located, workload_kind
    from gpufabric.spec.loader import load_spec

    if device == "auto":
        device = "cuda" if shutil.which("nvidia-smi") else "cpu"
    if device not in ("cuda", "cpu"):
        raise InputError(f"--device {device!r}: use auto, cuda or cpu")
    catalog = load_catalog(catalog_files)
    located = read_located(spec_file)
    spec: Any
    if workload_kind(located) == "inference":
        spec = load_inference_spec(located, known_ids=catalog.known_ids())
    else:
        spec = load_spec(spec_file).spec
    plan = plan_for_spec(spec, device=device, repeats=repeats or None)
    judging = Judging(slos=tuple(load_thresholds(thresholds))) if thresholds else Judging()
    if dry_run:
        refuse_unused(True, {"db": "--db"}, "with --dry-run (nothing runs or is stored)")
        lines = plan.describe()
        if fmt is Format.json:
            print_json({"dry_run": True, "device": device, "measurements": lines, "config": plan.as_config()})
        else:
            out = stdout_console()
            out.print(
                f"bench gpu {spec.name} on {device} ({plan.warmup} warm-up, {plan.repeats} timed repeats each):",
                markup=False,
            )
            for line in lines:
                out.print(f"  {line}", markup=False)
            for line in describe(judging.slos):
                out.print(f"  SLO {line}", markup=False)
        return 0
    opts = LaunchOptions(
        nproc=1,
        backend="gloo",
        timeout_s=duration_s("--timeout", timeout),
        op_timeout_s=duration_s("--op-timeout", op_timeout),
    )
    report = run_gpu(plan, opts, spec=spec, catalog=catalog, judging=judging, db=db, argv=_argv())
    if fmt is Format.json:
        print_json(report.to_dict())
        return report.exit_code
    console = stdout_console()
    name = report.device.get("name", device)
    console.print(f"gpu: {name} ({device}), spec {spec.name}, run {report.run_id}, {report.status}", markup=False)
    console.print(f"{'measurement':<40}{'time':>12}{'figure':>18}{'efficiency':>12}{'model':>12}", markup=False)
    for row in report.rows:
        m = row.metrics
        time = f"{m['time_us']:.1f} us" if "time_us" in m else f"{m['time_ms']:.3f} ms" if "time_ms" in m else "-"
        figure = (
            f"{m['tflops']:.1f} TFLOP/s"
            if "tflops" in m
            else f"{m['bw_gbps']:.1f} GB/s"
            if "bw_gbps" in m
            else f"{m['tokens_per_s']:.0f} tok/s"
            if "tokens_per_s" in m
            else row.reason[:18]
        )
        eff = f"{m['efficiency']:.2f}" if "efficiency" in m else ""
        model = f"{row.error_pct:+.0f}%" if row.error_pct is not None else ""
        console.print(f"{row.label:<40}{time:>12}{figure:>18}{eff:>12}{model:>12}", markup=False)
    console.print(
        "model: the serving model's decode step relative to the measured one (+ = predicted slower)", markup=False
    )
    _failures(report, console)
    return report.exit_code
