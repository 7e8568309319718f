"""``gpufabric bench gpu --spec SPEC``: GEMM, HBM, decode, prefill and host-copy figures of one GPU.

The options are derived from ``bench.probes.gpu_service.GpuRequest``; the library checks the
request, records the run and returns a ``GpuOutcome``; this module renders it.
"""

from __future__ import annotations

from typing import Any

import typer

from gpufabric.bench.probes.requests import GpuRequest
from gpufabric.cli.bench_probes import OPT, _argv, _failures
from gpufabric.cli.options import refuse_unused
from gpufabric.cli.output import Format, print_json, print_lines
from gpufabric.cli.request_options import request_options


def register(bench_app: typer.Typer) -> None:
    bench_app.command("gpu")(gpu)


@request_options(GpuRequest)
def gpu(request: GpuRequest, dry_run: bool = OPT["dry_run"], fmt: Format = OPT["fmt"]) -> int:
    """Measure the GEMM shapes of a spec's layout, HBM bandwidth, a spec-shaped decode step and prefill,
    and host<->device copies on one device; compare decode with the serving model."""
    prep = request.prepare()
    if dry_run:
        refuse_unused(True, {"db": "--db"}, "with --dry-run (nothing runs or is stored)")
        print_json(prep.document()) if fmt is Format.json else print_lines(prep.dry_run_lines())
        return 0
    report = prep.run(_argv())
    if fmt is Format.json:
        print_json(report.document())
        return report.exit_code
    name = report.device.get("name", prep.device)
    print_lines(
        [
            f"gpu: {name} ({prep.device}), spec {prep.spec.name}, run {report.run_id}, {report.status}",
            f"{'measurement':<40}{'time':>12}{'figure':>18}{'efficiency':>12}{'model':>12}",
            *map(_row, report.rows),
            "model: the serving model's decode step relative to the measured one (+ = predicted slower)",
            *_failures(report),
        ]
    )
    return report.exit_code


def _row(row: Any) -> str:  # gpu_service.GpuRow
    m = row.metrics
    time = f"{m['time_us']:.1f} us" if "time_us" in m else f"{m['time_ms']:.3f} ms" if "time_ms" in m else "-"
    figures = (("tflops", "{:.1f} TFLOP/s"), ("bw_gbps", "{:.1f} GB/s"), ("tokens_per_s", "{:.0f} tok/s"))
    figure = next((f.format(m[k]) for k, f in figures if k in m), row.reason[:18])
    eff = f"{m['efficiency']:.2f}" if "efficiency" in m else ""
    model = f"{row.error_pct:+.0f}%" if row.error_pct is not None else ""
    return f"{row.label:<40}{time:>12}{figure:>18}{eff:>12}{model:>12}"
