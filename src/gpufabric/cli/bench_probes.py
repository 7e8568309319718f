"""``gpufabric bench collectives|train|checkpoint``: torch.distributed probes.

cli/bench.py calls ``register(bench_app)``. Each command builds a probe config and a
``Judging`` (``--thresholds``, ``--plan``), and hands them to ``bench.probes.service``,
which records one run, launches the ranks and stores every finished size/step; this
module renders the outcome. Exit: 0 (all good), 1 (wrong elements, a failed rank, a
straggler, non-reproducible, an SLO missed, not the planned hardware), 2 (bad input),
130 / 143 (Ctrl-C / SIGTERM; finished results kept).
"""

from __future__ import annotations

import math
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from gpufabric.cli import probe_live
from gpufabric.cli.limits import check_range
from gpufabric.cli.options import (
    bytes_option,
    db_option,
    duration_s,
    format_option,
    gpus_per_node_option,
    hosts_option,
    nodes_option,
    quiet_option,
    refuse_unused,
    site_options,
    sizes_option,
    timeout_option,
)
from gpufabric.cli.output import Format, command_line, envelope, print_json, stderr_console, stdout_console
from gpufabric.errors import InputError
from gpufabric.units import format_size, parse_size


def parse_sizes(text: str) -> list[int]:
    """``1K:1G`` (powers of two, factor 2, both ends included), ``1K,64K,1M`` or one size."""
    if ":" in text:
        lo_text, _, hi_text = text.partition(":")
        lo, hi = parse_size(lo_text), parse_size(hi_text)
        if lo <= 0 or hi < lo:
            raise InputError(f"--sizes {text!r}: need 0 < start <= end")
        sizes = []
        size = lo
        while size <= hi:
            sizes.append(size)
            size *= 2
        return sizes
    sizes = [parse_size(t) for t in text.split(",") if t.strip()]
    if not sizes or min(sizes) <= 0:
        raise InputError(f"--sizes {text!r}: give positive sizes such as 1K:1G or 1M,16M")
    return sizes


def _csv(text: str, allowed: tuple[str, ...], flag: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise InputError(f"{flag}: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(allowed)}")
    return items


def launch_options(
    *,
    launcher: str,
    nodes: int,
    nproc: int,
    hosts: str,
    lab: str,
    plane: str,
    master_port: int,
    timeout: str,
    init_timeout: str,
    op_timeout: str,
    backend: str,
    work_dir: str,
    slurm_mode: str = "srun",
    control_ifname: str = "",
    data_ifname: str = "",
    k8s_image: str = "",
    k8s_namespace: str = "default",
    k8s_rdma: str = "",
    site: Any = None,  # exec.site.SiteOptions (cli.options.site_options)
) -> Any:
    from gpufabric.bench.probes.run import LaunchOptions
    from gpufabric.exec import launch

    if launcher not in (*launch.LAUNCHERS, "k8s"):
        raise InputError(f"--launcher {launcher!r}: use one of {', '.join(launch.LAUNCHERS)}, k8s")
    refuse_unused(
        launcher != "k8s",
        {"k8s_image": "--k8s-image", "k8s_namespace": "--k8s-namespace", "k8s_rdma": "--k8s-rdma"},
        "without --launcher k8s",
    )
    refuse_unused(launcher != "slurm", {"slurm_mode": "--slurm-mode"}, "without --launcher slurm")
    refuse_unused(not lab, {"plane": "--plane"}, "without --lab")
    refuse_unused(bool(lab), {"hosts": "--hosts"}, "with --lab (the lab's hosts are used)")
    if not 0 <= master_port <= 65535:
        raise InputError(f"--master-port {master_port}: not a port (0: one per job)")
    # Each rank is a process on its node: the spec's own bound on cluster.gpus_per_node.
    check_range("--gpus-per-node", nproc, 1, MAX_RANKS_PER_NODE)
    from gpufabric.spec.models import MAX_RANKS  # here: importing the spec models was half of --help

    check_range("--nodes", nodes, 1, MAX_RANKS)
    host_list: list[launch.Host] = []
    if lab:
        from gpufabric.lab.net import lab_hosts

        host_list = lab_hosts(lab, plane=plane)
        nodes = nodes if nodes > 1 else len(host_list)
    elif hosts:
        host_list = launch.parse_hosts(hosts)
    # NCCL needs a GPU; nvidia-smi on PATH is the cheap test here (only asked when the ranks run here).
    backend = launch.resolve_backend(
        backend,
        launcher=launcher,
        hosts=host_list,
        have_gpu=bool(shutil.which("nvidia-smi")),
        hostfile=site.hostfile if site is not None else "",
    )
    return LaunchOptions(
        launcher=launcher,
        nodes=nodes,
        nproc=nproc,
        hosts=tuple(host_list),
        master_port=master_port,
        timeout_s=duration_s("--timeout", timeout),
        init_timeout_s=duration_s("--init-timeout", init_timeout),
        op_timeout_s=duration_s("--op-timeout", op_timeout),
        backend=backend,
        work_dir=work_dir,
        slurm_mode=slurm_mode,
        control_ifname=control_ifname,
        data_ifname=data_ifname,
        k8s_image=k8s_image,
        k8s_namespace=k8s_namespace,
        k8s_rdma=k8s_rdma,
        **({"site": site} if site is not None else {}),
    )


#: Ranks per node a probe may launch: the bound spec.models puts on cluster.gpus_per_node
#: (a 10**9-rank request must fail before any process starts). Nodes: spec.models.MAX_RANKS.
MAX_RANKS_PER_NODE = 1024


def judging(
    thresholds: Path | None,
    plan: Path | None,
    spec: Any,
    *,
    kind: str,
    opts: Any,
    config: dict[str, Any],
) -> Any:  # bench.probes.service.Judging
    """What a probe is judged against: ``--thresholds`` bounds and ``--plan``'s expectations."""
    from gpufabric.bench import slo
    from gpufabric.bench.probes.service import Judging

    slos = slo.load_thresholds(thresholds) if thresholds is not None else []
    if plan is None:
        return Judging(slos=tuple(slos))
    from gpufabric.bench.planned import planned_hardware
    from gpufabric.spec.plan_file import load_plan

    doc = load_plan(plan)
    return Judging(
        slos=tuple(slos),
        plan_slos=tuple(
            slo.probe_slos(kind, doc, spec, path=str(plan), nodes=opts.nodes, nproc=opts.nproc, config=config)
        ),
        planned=planned_hardware(doc, spec, path=str(plan)),
    )


def _argv() -> list[str]:
    """The command line as the user typed it, stored with the run (the one way: ``output.command_line``)."""
    return command_line()


def print_dry_run(prep: Any, fmt: Format, slos: Any = ()) -> None:
    """The launch commands (and script), then the SLOs the run would be judged by, one a line."""
    from gpufabric.bench.slo import describe

    if fmt is Format.json:
        print_json(
            {
                "dry_run": True,
                "launcher": prep.plan.launcher,
                "commands": [c.shell() for c in prep.plan.commands],
                "sbatch_script": prep.plan.script,
                "config": prep.config,
                "slos": list(slos),
            }
        )
        return
    for cmd in prep.plan.commands:
        sys.stdout.write(cmd.shell() + "\n")
    if prep.plan.script:
        what = "TrainJob manifest" if prep.plan.launcher == "k8s" else "sbatch script (kept with the run)"
        sys.stdout.write(f"# {what}:\n" + prep.plan.script)
    if slos:
        sys.stdout.write("# SLOs:\n" + "".join(f"#   {line}\n" for line in describe(slos)))


#: Launch options shared by the three probes (typer OptionInfo objects are read-only metadata).
OPT = {
    "launcher": typer.Option("local", "--launcher", help="local | torchrun | slurm | mpirun | k8s."),
    "slurm_mode": typer.Option(
        "srun", "--slurm-mode", help="slurm launcher: srun, or sbatch --wait on the generated script."
    ),
    "nodes": nodes_option(1),
    "nproc": gpus_per_node_option(2),
    "hosts": hosts_option(),
    "lab": typer.Option("", "--lab", help="Run on the hosts of this gpufabric lab (see `gpufabric lab`)."),
    "plane": typer.Option("data", "--plane", help="Lab plane carrying the ranks' data traffic."),
    "backend": typer.Option(
        "auto",
        "--backend",
        help="auto, gloo or nccl. auto: ranks on this host use nccl with GPUs here, else gloo;"
        " slurm, k8s and ssh hosts use nccl with --gpus-per-node GPUs requested.",
    ),
    "master_port": typer.Option(
        0, "--master-port", help="Rendezvous port on the first host (default: one per job, e.g. from SLURM_JOB_ID)."
    ),
    "timeout": timeout_option("600s", "Limit for the whole launch"),
    "init_timeout": typer.Option(
        "60s", "--init-timeout", help="Limit for rendezvous and process-group init (a duration, as --timeout)."
    ),
    "op_timeout": typer.Option(
        "60s", "--op-timeout", help="Limit for any single collective, step or write (a duration, as --timeout)."
    ),
    "work_dir": typer.Option(
        "",
        "--run-dir",
        "--work-dir",
        help="Run directory for the rank config and records; on storage every node sees"
        " (checked before launch; required for multi-node slurm and ssh hosts).",
    ),
    "control_ifname": typer.Option(
        "", "--control-ifname", help="Control-plane interface: torchrun --local-addr, mpirun oob/btl_tcp_if_include."
    ),
    "data_ifname": typer.Option(
        "", "--data-ifname", help="Data-plane interface for GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME."
    ),
    "k8s_image": typer.Option("", "--k8s-image", help="k8s launcher: container image with gpufabric and torch."),
    "k8s_namespace": typer.Option("default", "--k8s-namespace", help="k8s launcher: namespace of the TrainJob."),
    "k8s_rdma": typer.Option(
        "",
        "--k8s-rdma",
        help="k8s launcher: RDMA resources per node, RESOURCE[=COUNT],..."
        " (default rdma/rdma_shared_device_a=1 for nccl; none).",
    ),
    "thresholds": typer.Option(
        None,
        "--thresholds",
        help="Thresholds YAML (as for `bench --suite`): bounds on the metrics this probe measures, by test"
        " name (torch.all_reduce, torch.train, torch.checkpoint.dcp, ...); a miss fails the run.",
    ),
    "plan": typer.Option(
        None,
        "--plan",
        help="Plan JSON (gpufabric plan SPEC --format json): judge against its recommended design, and"
        " mark every SLO verdict not_planned_hardware on other hardware (add --spec for the GPU).",
    ),
    "db": db_option(),
    "dry_run": typer.Option(False, "--dry-run", help="Print every command and exit."),
    "fmt": format_option(),
}


def _load_spec(path: Path | None) -> Any:
    if path is None:
        return None
    from gpufabric.spec.loader import load_spec

    return load_spec(path).spec


def _dry_run(kind: str, config: dict[str, Any], opts: Any, fmt: Format, judge: Any = None) -> int:
    from gpufabric.bench.probes import run as probe_run

    refuse_unused(True, {"db": "--db"}, "with --dry-run (nothing runs or is stored)")
    prep = probe_run.prepare(kind, config, opts, write=False)  # nothing lands in --run-dir
    try:
        print_dry_run(prep, fmt, (*judge.slos, *judge.plan_slos) if judge is not None else ())
    finally:
        probe_run.cleanup(prep)
    return 0


def _k8s_apply(kind: str, config: dict[str, Any], opts: Any, fmt: Format, judge: Any = None, db: Any = None) -> int:
    """Apply the TrainJob and follow it (recorded as a run); the ranks' records stay in the pods."""
    from gpufabric.bench.probes import service

    if judge is not None and judge.count:
        raise InputError("--thresholds/--plan with --launcher k8s: the measurements stay in the pods; judge them there")
    outcome = service.run_k8s(kind, config, opts, db=db, argv=_argv())
    if fmt is Format.json:
        print_json(
            {
                "launcher": "k8s",
                "run_id": outcome.run_id,
                "manifest": outcome.manifest,
                "returncode": outcome.returncode,
                "timed_out": outcome.timed_out,
                "log": outcome.log,
                "status": outcome.status.value,
            }
        )
    else:
        sys.stdout.write(outcome.log)
    return outcome.exit_code


def _failures(report: Any, console: Any) -> None:  # a service.ProbeOutcome
    for line in report.failures:
        console.print(f"FAIL {line}", markup=False)
    for line in report.warnings:
        console.print(f"WARN {line}", markup=False)
    if report.error:
        console.print(f"error: {report.error}", markup=False)
        console.print(f"{len(report.rows)} finished result(s) stored in run {report.run_id}", markup=False)


def print_json_line(payload: dict[str, Any]) -> None:
    """One compact JSON document per line on stdout, flushed (JSON lines for streaming consumers)."""
    import json

    from gpufabric.jsonable import to_jsonable

    sys.stdout.write(json.dumps(to_jsonable(envelope(payload)), separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _live_sizes(fmt: Format, *, quiet: bool, stream: bool) -> Any:
    """The per-size callback of a sweep: nccl-tests-style lines on stderr as sizes finish (text),
    JSON lines on stdout (``--format json --stream``), or nothing (``--quiet``, plain JSON)."""
    if fmt is Format.json:
        return print_json_line if stream else None
    if quiet:
        return None
    err = stderr_console()
    header = [False]

    def line(row: dict[str, Any]) -> None:
        if not header[0]:
            err.print(
                "# live, rank 0's timings as each size finishes (the table after the run combines all ranks)",
                markup=False,
                highlight=False,
            )
            err.print(
                f"  {'op':<15}{'dtype':<10}{'size':>10}{'p50 us':>11}{'algbw GB/s':>12}{'busbw GB/s':>12}{'#wrong':>8}",
                markup=False,
                highlight=False,
            )
            header[0] = True
        err.print(
            f"  {row['op']:<15}{row['dtype']:<10}{format_size(row['size_bytes']):>10}{row['time_p50_us']:>11.1f}"
            f"{row['algbw_gbps']:>12.4f}{row['busbw_gbps']:>12.4f}{row['wrong']:>8d}",
            markup=False,
            highlight=False,
        )

    return line


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("collectives")
    @site_options
    def collectives(
        ops: str = typer.Option(
            "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv",
            "--ops",
            help="Comma-separated collectives.",
        ),
        sizes: str = sizes_option("1K:16M"),
        dtypes: str = typer.Option(
            "float32", "--dtypes", help="float32, float16, bfloat16, float64 (comma-separated)."
        ),
        iters: int = typer.Option(10, "--iters", min=1, help="Timed iterations per size."),
        warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed iterations per size."),
        thresholds: Path = OPT["thresholds"],
        plan: Path = OPT["plan"],
        spec: Path | None = typer.Option(
            None, "--spec", help="With --plan: the spec, for the GPU (planned hardware) and the busbw expectation."
        ),
        launcher: str = OPT["launcher"],
        slurm_mode: str = OPT["slurm_mode"],
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
        control_ifname: str = OPT["control_ifname"],
        data_ifname: str = OPT["data_ifname"],
        k8s_image: str = OPT["k8s_image"],
        k8s_namespace: str = OPT["k8s_namespace"],
        k8s_rdma: str = OPT["k8s_rdma"],
        site: Any = None,
        dry_run: bool = OPT["dry_run"],
        fmt: Format = OPT["fmt"],
        quiet: bool = quiet_option("no live per-size lines (CI logs): the final table only"),
        stream: bool = typer.Option(
            False,
            "--stream",
            help="With --format json: one JSON line per size as it "
            "finishes, then the report as the last line (JSON lines).",
        ),
        corrupt_rank: int = typer.Option(-1, "--inject-corrupt-rank", hidden=True),
        die_rank: int = typer.Option(-1, "--inject-die-rank", hidden=True),
        die_after: str = typer.Option("0", "--inject-die-after", hidden=True),
    ) -> int:
        """torch.distributed collective sweeps: busbw per nccl-tests, p50/p99/CV, #wrong, stragglers."""
        from gpufabric.bench.probes import service
        from gpufabric.bench.probes.collectives import DTYPES
        from gpufabric.model.collectives import OPS

        refuse_unused(dry_run, {"quiet": "--quiet", "stream": "--stream"}, "with --dry-run (nothing runs or is stored)")
        refuse_unused(fmt is not Format.json, {"stream": "--stream"}, "without --format json")
        refuse_unused(fmt is Format.json, {"quiet": "--quiet"}, "with --format json (it prints no live lines)")
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
            slurm_mode=slurm_mode,
            control_ifname=control_ifname,
            data_ifname=data_ifname,
            k8s_image=k8s_image,
            k8s_namespace=k8s_namespace,
            k8s_rdma=k8s_rdma,
            site=site,
        )
        config = {
            "ops": _csv(ops, OPS, "--ops"),
            "sizes": parse_sizes(sizes),
            "dtypes": _csv(dtypes, DTYPES, "--dtypes"),
            "iters": iters,
            "warmup": warmup,
            "corrupt_rank": corrupt_rank if corrupt_rank >= 0 else None,
            "die_rank": die_rank if die_rank >= 0 else None,
            "die_after": parse_size(die_after),
        }
        refuse_unused(plan is None, {"spec": "--spec"}, "without --plan")
        judge = judging(thresholds, plan, _load_spec(spec), kind="collectives", opts=opts, config=config)
        if dry_run:
            return _dry_run("collectives", config, opts, fmt, judge)
        if opts.launcher == "k8s":
            return _k8s_apply("collectives", config, opts, fmt, judge, db)
        report = service.run_collectives(
            config, opts, db=db, argv=_argv(), on_size=_live_sizes(fmt, quiet=quiet, stream=stream), judging=judge
        )
        if fmt is Format.json:
            if stream:  # the last JSON line is the report
                print_json_line({"event": "report", **report.to_dict()})
            else:
                print_json(report.to_dict())
            return report.exit_code
        console = stdout_console()
        console.print(f"collectives: {len(report.rows)} size(s), run {report.run_id}, {report.status}", markup=False)
        console.print(
            f"{'op':<15}{'dtype':<10}{'size':>10}{'p50 us':>11}{'p99 us':>11}{'CV':>6}"
            f"{'algbw GB/s':>12}{'busbw GB/s':>12}{'#wrong':>8}",
            markup=False,
        )
        for row in report.rows:
            console.print(
                f"{row.op:<15}{row.dtype:<10}{format_size(row.size_bytes):>10}"
                f"{row.time_p50_us:>11.1f}{row.time_p99_us:>11.1f}{row.time_cv:>6.2f}"
                f"{row.algbw_gbps:>12.4f}{row.busbw_gbps:>12.4f}{row.wrong_elements:>8.0f}",
                markup=False,
            )
        _failures(report, console)
        return report.exit_code

    @bench_app.command("train")
    @site_options
    def train(
        spec: Path | None = typer.Option(None, "--spec", help="Spec whose model shape is scaled down."),
        scale: int = typer.Option(64, "--scale", min=1, help="Divide hidden size and sequence length by this."),
        blocks: int = typer.Option(2, "--blocks", min=1, help="Transformer blocks."),
        steps: int = typer.Option(10, "--steps", min=1, help="Timed training steps (K)."),
        warmup: int = typer.Option(2, "--warmup", min=0, help="Untimed steps first."),
        seed: int = typer.Option(0, "--seed", help="Seed for weights and data."),
        mode: str = typer.Option("ddp", "--mode", help="ddp or fsdp (FSDP2 fully_shard)."),
        repeat: int = typer.Option(1, "--repeat", min=1, max=10, help="Runs; 2+ gives the bitwise verdict."),
        against: str | None = typer.Option(None, "--against", help="Compare parameters with a stored train run."),
        deterministic: bool = typer.Option(
            True,
            "--deterministic/--no-deterministic",
            help="torch.use_deterministic_algorithms and CUBLAS_WORKSPACE_CONFIG.",
        ),
        thresholds: Path = OPT["thresholds"],
        launcher: str = OPT["launcher"],
        slurm_mode: str = OPT["slurm_mode"],
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
        control_ifname: str = OPT["control_ifname"],
        data_ifname: str = OPT["data_ifname"],
        k8s_image: str = OPT["k8s_image"],
        k8s_namespace: str = OPT["k8s_namespace"],
        k8s_rdma: str = OPT["k8s_rdma"],
        site: Any = None,
        dry_run: bool = OPT["dry_run"],
        fmt: Format = OPT["fmt"],
        delay_rank: int = typer.Option(-1, "--inject-delay-rank", hidden=True),
        delay_ms: float = typer.Option(0.0, "--inject-delay-ms", hidden=True),
    ) -> int:
        """A small deterministic transformer under DDP/FSDP: step-time p50/p99/CV per rank, bitwise reproducibility."""
        import os

        from gpufabric.bench.probes import service
        from gpufabric.bench.probes.shapes import train_shape

        if mode not in ("ddp", "fsdp"):
            raise InputError(f"--mode {mode!r}: use ddp or fsdp")
        loaded = _load_spec(spec)
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
            slurm_mode=slurm_mode,
            control_ifname=control_ifname,
            data_ifname=data_ifname,
            k8s_image=k8s_image,
            k8s_namespace=k8s_namespace,
            k8s_rdma=k8s_rdma,
            site=site,
        )
        config = {
            **train_shape(loaded, scale=scale, blocks=blocks).as_config(),
            "steps": steps,
            "warmup": warmup,
            "seed": seed,
            "mode": mode,
            "deterministic": deterministic,
            "delay_rank": delay_rank if delay_rank >= 0 else None,
            "delay_rank_ms": delay_ms,
        }
        # No --plan: the probe's model is scaled down, so the plan's step time says nothing about it.
        judge = judging(thresholds, None, loaded, kind="train", opts=opts, config=config)
        if dry_run:
            return _dry_run("train", config, opts, fmt, judge)
        if opts.launcher == "k8s":
            return _k8s_apply("train", config, opts, fmt, judge, db)
        live = probe_live.train_steps(fmt, steps=steps, warmup=warmup)
        report = service.run_train(
            config,
            opts,
            repeat=repeat,
            against=against,
            db=db,
            argv=_argv(),
            env=dict(os.environ),
            judging=judge,
            on_record=live,
        )
        if fmt is Format.json:
            print_json(report.to_dict())
            return report.exit_code
        console = stdout_console()
        shape = report.shape
        console.print(
            f"train: hidden {shape['hidden']}, {shape['layers']} blocks, seq {shape['seq_len']},"
            f" batch {shape['batch']}/rank, {shape['mode']}, spec layout {shape['spec_layout']};"
            f" run {report.run_id}, {report.status}",
            markup=False,
        )
        for row in report.rows:
            console.print(
                f"repeat {row.repeat}: {row.num_ranks} ranks, step p50 {row.step_time_p50_s * 1e3:.2f} ms,"
                f" p99 {row.step_time_p99_s * 1e3:.2f} ms, CV {row.step_time_cv:.3f},"
                f" loss {row.final_loss:.4f}, sha256 {row.sha256[:16]}",
                markup=False,
            )
            for s in row.ranks.ranks:
                console.print(
                    f"  rank {s.rank} ({s.host}): p50 {(s.p50 or math.nan) * 1e3:.2f} ms,"
                    f" p99 {(s.p99 or math.nan) * 1e3:.2f} ms, CV {s.cv if s.cv is not None else math.nan:.3f}",
                    markup=False,
                )
        for comp in report.reproducibility:
            rep = comp.result
            if rep.identical:
                console.print(f"{comp.compared}: bitwise identical ({rep.num_params} parameters)", markup=False)
            else:
                console.print(
                    f"{comp.compared}: NOT identical: {rep.differing_elements} parameters differ,"
                    f" max abs {rep.max_abs_diff:.3g}, max rel {rep.max_rel_diff:.3g}",
                    markup=False,
                )
                for d in rep.differences:
                    console.print(f"  setup differs: {d}", markup=False)
                if rep.unpinned:
                    console.print(f"  not pinned: {', '.join(rep.unpinned)}", markup=False)
        _failures(report, console)
        return report.exit_code

    @bench_app.command("checkpoint")
    @site_options
    def checkpoint(
        directory: Path = typer.Option(..., "--dir", help="Directory on the storage under test (shared for dcp)."),
        spec: Path | None = typer.Option(
            None, "--spec", help="Spec whose checkpoint (params x bytes/param) is scaled."
        ),
        scale: int = typer.Option(10000, "--scale", min=1, help="Divide the spec's checkpoint size by this."),
        size: str = bytes_option("", "Total checkpoint size instead of the spec's"),
        formats: str = typer.Option("torch,safetensors,dcp", "--formats", help="torch, safetensors, dcp."),
        keep: bool = typer.Option(False, "--keep", help="Keep the written files."),
        thresholds: Path = OPT["thresholds"],
        plan: Path = OPT["plan"],
        launcher: str = OPT["launcher"],
        slurm_mode: str = OPT["slurm_mode"],
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
        control_ifname: str = OPT["control_ifname"],
        data_ifname: str = OPT["data_ifname"],
        k8s_image: str = OPT["k8s_image"],
        k8s_namespace: str = OPT["k8s_namespace"],
        k8s_rdma: str = OPT["k8s_rdma"],
        site: Any = None,
        dry_run: bool = OPT["dry_run"],
        fmt: Format = OPT["fmt"],
    ) -> int:
        """Write and read back a spec-shaped state dict (torch.save, safetensors, dcp), fsync'd, cache defeated."""
        from gpufabric.bench.probes import service
        from gpufabric.bench.probes.shapes import checkpoint_shape

        loaded = _load_spec(spec)
        shape = checkpoint_shape(loaded, scale=scale)
        if size:
            shape = replace(shape, total_bytes=parse_size(size))
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
            backend="gloo" if backend == "auto" else backend,
            work_dir=work_dir,
            slurm_mode=slurm_mode,
            control_ifname=control_ifname,
            data_ifname=data_ifname,
            k8s_image=k8s_image,
            k8s_namespace=k8s_namespace,
            k8s_rdma=k8s_rdma,
            site=site,
        )
        config = {
            **shape.as_config(),
            "directory": str(directory.resolve()),
            "keep": keep,
            "formats": _csv(formats, ("torch", "safetensors", "dcp"), "--formats"),
        }
        judge = judging(thresholds, plan, loaded, kind="checkpoint", opts=opts, config=config)
        if dry_run:
            return _dry_run("checkpoint", config, opts, fmt, judge)
        if opts.launcher == "k8s":
            return _k8s_apply("checkpoint", config, opts, fmt, judge, db)
        report = service.run_checkpoint(
            config, opts, db=db, argv=_argv(), judging=judge, on_record=probe_live.checkpoint_formats(fmt)
        )
        if fmt is Format.json:
            print_json(report.to_dict())
            return report.exit_code
        console = stdout_console()
        console.print(f"checkpoint: {directory}, run {report.run_id}, {report.status}", markup=False)
        console.print(
            "GB/s = total bytes / slowest rank's time; 'rank min' = the slowest rank's own rate;"
            " commit phases of the slowest rank in ms",
            markup=False,
        )
        console.print(
            f"{'format':<12}{'size':>10}{'write s':>9}{'GB/s':>8}{'rank min':>9}{'data':>8}{'fsync':>8}"
            f"{'rename':>8}{'dirsync':>8}{'read s':>9}{'GB/s':>8}{'rank min':>9}{'wrong':>7}",
            markup=False,
        )
        for row in report.rows:
            phases = "".join(
                f"{row.phases_s.get(k, math.nan) * 1e3:>8.1f}"
                for k in ("write_data_s", "fsync_s", "rename_s", "dir_fsync_s")
            )
            console.print(
                f"{row.format:<12}{format_size(row.size_bytes):>10}{row.write_duration_s:>9.3f}"
                f"{row.write_gbps:>8.3f}{row.write_min_rank_gbps:>9.3f}{phases}"
                f"{row.read_duration_s:>9.3f}{row.read_gbps:>8.3f}{row.read_min_rank_gbps:>9.3f}"
                f"{row.wrong_tensors:>7.0f}",
                markup=False,
            )
        _failures(report, console)
        return report.exit_code
