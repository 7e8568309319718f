"""``gpufabric bench inference SPEC``: KV-block transfers, a weight load and a serving load, one run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.bench_probes import DB_AMONG_LAUNCH, OPT, _argv, _lab_hosts
from gpufabric.cli.options import refuse_unused
from gpufabric.cli.output import Format, print_json
from gpufabric.cli.request_options import request_options
from gpufabric.exec.launchers import LaunchRequest


def register(bench_app: typer.Typer) -> None:
    bench_app.command("inference")(inference)


#: The launch knobs ``bench inference`` offers (its KV probe is one torch job, its weight load another).
LAUNCH = (
    *("launcher", "nodes", "nproc", "hosts", "lab", "plane", "backend", "master_port"),
    *("timeout", "init_timeout", "op_timeout", "work_dir", "data_ifname"),
)


@request_options(LaunchRequest, "launch", place=DB_AMONG_LAUNCH, only=LAUNCH)
def inference(
    *,
    spec_file: Path = typer.Argument(..., help="Inference spec (workload.kind: inference)."),
    fabric: str = typer.Option("", "--fabric", help="Fabric whose model sets the KV SLO (default: the plan's design)."),
    directory: Path = typer.Option(None, "--dir", help="Storage path for the weight-load probe (omit to skip it)."),
    scale: int = typer.Option(1000, "--scale", min=1, max=10**9, help="Divide the weight bytes by this to load."),
    iters: int = typer.Option(20, "--iters", min=1, max=100000, help="Timed transfers per KV size."),
    warmup: int = typer.Option(3, "--warmup", min=0, max=1000, help="Untimed transfers per KV size."),
    kv: bool = typer.Option(True, "--kv/--no-kv", help="Measure the KV-cache transfers (--no-kv: only --dir, --url)."),
    url: str = typer.Option("", "--url", help="OpenAI-compatible endpoint http://host:port to drive with the load."),
    served_model: str = typer.Option("", "--served-model", help="The endpoint's model name (default: spec name)."),
    concurrency: int = typer.Option(None, "--concurrency", min=1, max=10000, help="Closed loop of N clients."),
    requests: int = typer.Option(None, "--requests", min=1, max=10**7, help="Requests (default 20 per client)."),
    thresholds: Path = OPT["thresholds"],
    launch: LaunchRequest,
    db: str | None = OPT["db"],
    dry_run: bool = OPT["dry_run"],
    fmt: Format = OPT["fmt"],
) -> int:
    """Measure the plan's KV-cache messages (torch send/recv), a safetensors weight load and (--url) a serving endpoint.

    One run holds every part. The KV SLO is the model's time on the design `gpufabric plan`
    recommends (or --fabric's); off that hardware its verdicts are not_planned_hardware. The
    serving load reports TTFT, TPOT, ITL p50/p99 and output tokens/s as AIPerf does, judged
    against the spec's SLOs.
    """
    from gpufabric.bench import inference_service as svc

    load_backend = "gloo" if launch.backend == "auto" else launch.backend  # the weight load is a single-rank torch job
    request = svc.InferenceBenchRequest(
        spec_file=spec_file,
        opts=launch.resolve(lab_hosts=_lab_hosts),
        load_opts=None if directory is None else launch.resolve(lab_hosts=_lab_hosts, backend=load_backend),
        fabric=fabric,
        directory=directory,
        scale=scale,
        iters=iters,
        warmup=warmup,
        thresholds=thresholds,
        kv=kv,
        url=url,
        served_model=served_model,
        concurrency=concurrency,
        requests=requests,
    )
    prepared = svc.prepare(request, recommend=_recommend)
    if dry_run:
        refuse_unused(True, {"db": "--db"}, "with --dry-run (nothing runs or is stored)")
        doc = svc.dry_run(prepared)
        print_json(doc) if fmt is Format.json else sys.stdout.write("".join(f"{x}\n" for x in svc.dry_run_lines(doc)))
        return 0
    report = svc.run(prepared, db=db, argv=_argv())
    text = "".join(f"{x}\n" for x in report.lines())
    print_json(report.to_dict()) if fmt is Format.json else sys.stdout.write(text)
    return report.exit_code


def _recommend(spec: Any, catalog: Any) -> Any:  # bench.probes.inference.Design | None
    """The design `gpufabric plan` recommends for the spec (None: no design meets its SLOs)."""
    from gpufabric.bench.probes.inference import Design
    from gpufabric.plan.inference import make_serving_plan
    from gpufabric.sim.serving import simulate_serving

    plan = make_serving_plan(spec, catalog, simulate=simulate_serving)
    best = next((c for c in plan.candidates if c.id == plan.recommended), None)
    return None if best is None else Design(fabric=best.fabric, tp=best.tp, source=f"plan recommendation {best.id}")
