"""``gpufabric bench collectives|train|checkpoint``: torch.distributed probes.

cli/bench.py calls ``register(bench_app)``. Each command's options are derived from its
request record (``bench.probes.requests``: the probe's knobs, the launch's, the site's);
the library checks the request, records the run through the probe service and returns a
typed outcome; this module renders it. Exit: 0 (all good), 1 (wrong elements, a failed
rank, a straggler, non-reproducible, an SLO missed, not the planned hardware), 2 (bad
input), 130 / 143 (Ctrl-C / SIGTERM; finished results kept).
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

import typer

from gpufabric.bench.probes.requests import CheckpointRequest, CollectivesRequest, TrainRequest
from gpufabric.cli import probe_live
from gpufabric.cli.options import format_option, quiet_option, refuse_unused
from gpufabric.cli.output import Format, command_line, print_json, print_lines
from gpufabric.cli.request_options import defaults, request_options
from gpufabric.units import format_size

if TYPE_CHECKING:  # loaded when a probe runs (numpy), not when the CLI starts
    from gpufabric.bench.probes.outcomes import (
        CheckpointOutcome,
        CollectivesOutcome,
        DryRun,
        ProbeOutcome,
        TrainOutcome,
    )
    from gpufabric.exec.launch import Host

#: The probes' shared options, derived from the request records (bench inference and bench gpu use them).
OPT: dict[str, Any] = defaults(CollectivesRequest) | {
    "dry_run": typer.Option(False, "--dry-run", help="Print every command and exit."),
    "fmt": format_option(),
}


#: --help has always listed --db among the launch options.
DB_AMONG_LAUNCH = {"db": "work_dir"}


def _argv() -> list[str]:
    """The command line as the user typed it, stored with the run (the one way: ``output.command_line``)."""
    return command_line()


def _lab_hosts(name: str, plane: str) -> list[Host]:
    from gpufabric.lab.net import lab_hosts

    return lab_hosts(name, plane=plane)


def _failures(report: Any) -> list[str]:  # a ProbeOutcome
    lines = [f"FAIL {line}" for line in report.failures] + [f"WARN {line}" for line in report.warnings]
    if report.error:
        lines += [f"error: {report.error}", f"{len(report.rows)} finished result(s) stored in run {report.run_id}"]
    return lines


def _probe(request: Any, dry_run: bool, live: Any = None) -> DryRun | ProbeOutcome:
    """Check ``request``; what it would run (DryRun), or the outcome of its recorded run."""
    from gpufabric.bench.probes import requests

    prep = request.prepare(_lab_hosts)
    if dry_run:
        refuse_unused(True, {"db": "--db"}, "with --dry-run (nothing runs or is stored)")
        return requests.dry_run(request.kind, prep.config, prep.opts, prep.judging)
    return requests.run(prep, argv=_argv(), on_record=live)


def _render(outcome: DryRun | ProbeOutcome, fmt: Format, text: Any, *args: Any, last: Any = print_json) -> int:
    """Print ``outcome`` (its JSON document, or text) and return its exit code."""
    from gpufabric.bench.probes.outcomes import DryRun, FollowedOutcome

    if fmt is Format.json:
        last(outcome.document())
    elif isinstance(outcome, DryRun):
        sys.stdout.write(outcome.text())
    elif isinstance(outcome, FollowedOutcome):  # a followed job (k8s): its log is the output
        sys.stdout.write(outcome.log)
    else:
        text(outcome, *args)
    return int(outcome.exit_code)


def _collectives_text(report: CollectivesOutcome) -> None:
    lines = [
        f"collectives: {len(report.rows)} size(s), run {report.run_id}, {report.status}",
        f"{'op':<15}{'dtype':<10}{'size':>10}{'p50 us':>11}{'p99 us':>11}{'CV':>6}"
        f"{'algbw GB/s':>12}{'busbw GB/s':>12}{'#wrong':>8}",
    ]
    lines += [
        f"{row.op:<15}{row.dtype:<10}{format_size(row.size_bytes):>10}"
        f"{row.time_p50_us:>11.1f}{row.time_p99_us:>11.1f}{row.time_cv:>6.2f}"
        f"{row.algbw_gbps:>12.4f}{row.busbw_gbps:>12.4f}{row.wrong_elements:>8.0f}"
        for row in report.rows
    ]
    print_lines(lines + _failures(report))


def _train_text(report: TrainOutcome) -> None:
    shape = report.shape
    lines = [
        f"train: hidden {shape['hidden']}, {shape['layers']} blocks, seq {shape['seq_len']},"
        f" batch {shape['batch']}/rank, {shape['mode']}, spec layout {shape['spec_layout']};"
        f" run {report.run_id}, {report.status}"
    ]
    for row in report.rows:
        lines.append(
            f"repeat {row.repeat}: {row.num_ranks} ranks, step p50 {row.step_time_p50_s * 1e3:.2f} ms,"
            f" p99 {row.step_time_p99_s * 1e3:.2f} ms, CV {row.step_time_cv:.3f},"
            f" loss {row.final_loss:.4f}, sha256 {row.sha256[:16]}"
        )
        lines += [
            f"  rank {s.rank} ({s.host}): p50 {(s.p50 or math.nan) * 1e3:.2f} ms,"
            f" p99 {(s.p99 or math.nan) * 1e3:.2f} ms, CV {s.cv if s.cv is not None else math.nan:.3f}"
            for s in row.ranks.ranks
        ]
    for comp in report.reproducibility:
        rep = comp.result
        if rep.identical:
            lines.append(f"{comp.compared}: bitwise identical ({rep.num_params} parameters)")
            continue
        lines.append(
            f"{comp.compared}: NOT identical: {rep.differing_elements} parameters differ,"
            f" max abs {rep.max_abs_diff:.3g}, max rel {rep.max_rel_diff:.3g}"
        )
        lines += [f"  setup differs: {d}" for d in rep.differences]
        lines += [f"  not pinned: {', '.join(rep.unpinned)}"] if rep.unpinned else []
    print_lines(lines + _failures(report))


def _checkpoint_text(report: CheckpointOutcome, directory: Any) -> None:
    lines = [
        f"checkpoint: {directory}, run {report.run_id}, {report.status}",
        "GB/s = total bytes / slowest rank's time; 'rank min' = the slowest rank's own rate;"
        " commit phases of the slowest rank in ms",
        f"{'format':<12}{'size':>10}{'write s':>9}{'GB/s':>8}{'rank min':>9}{'data':>8}{'fsync':>8}"
        f"{'rename':>8}{'dirsync':>8}{'read s':>9}{'GB/s':>8}{'rank min':>9}{'wrong':>7}",
    ]
    for row in report.rows:
        phases = "".join(
            f"{row.phases_s.get(k, math.nan) * 1e3:>8.1f}"
            for k in ("write_data_s", "fsync_s", "rename_s", "dir_fsync_s")
        )
        lines.append(
            f"{row.format:<12}{format_size(row.size_bytes):>10}{row.write_duration_s:>9.3f}"
            f"{row.write_gbps:>8.3f}{row.write_min_rank_gbps:>9.3f}{phases}"
            f"{row.read_duration_s:>9.3f}{row.read_gbps:>8.3f}{row.read_min_rank_gbps:>9.3f}"
            f"{row.wrong_tensors:>7.0f}"
        )
    print_lines(lines + _failures(report))


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("collectives")
    @request_options(CollectivesRequest, place=DB_AMONG_LAUNCH)
    def collectives(
        request: CollectivesRequest,
        dry_run: bool = OPT["dry_run"],
        fmt: Format = OPT["fmt"],
        quiet: bool = quiet_option("no live per-size lines (CI logs): the final table only"),
        stream: bool = typer.Option(
            False,
            "--stream",
            help="With --format json: one JSON line per size as it "
            "finishes, then the report as the last line (JSON lines).",
        ),
    ) -> int:
        """torch.distributed collective sweeps: busbw per nccl-tests, p50/p99/CV, #wrong, stragglers."""
        refuse_unused(dry_run, {"quiet": "--quiet", "stream": "--stream"}, "with --dry-run (nothing runs or is stored)")
        refuse_unused(fmt is not Format.json, {"stream": "--stream"}, "without --format json")
        refuse_unused(fmt is Format.json, {"quiet": "--quiet"}, "with --format json (it prints no live lines)")
        live = probe_live.sizes(fmt, quiet=quiet, stream=stream)
        last = probe_live.report_line if stream else print_json
        return _render(_probe(request, dry_run, live), fmt, _collectives_text, last=last)

    @bench_app.command("train")
    @request_options(TrainRequest, place=DB_AMONG_LAUNCH)
    def train(request: TrainRequest, dry_run: bool = OPT["dry_run"], fmt: Format = OPT["fmt"]) -> int:
        """A small deterministic transformer under DDP/FSDP: step-time p50/p99/CV per rank, bitwise reproducibility."""
        live = probe_live.train_steps(fmt, steps=request.steps, warmup=request.warmup)
        return _render(_probe(request, dry_run, live), fmt, _train_text)

    @bench_app.command("checkpoint")
    @request_options(CheckpointRequest, place=DB_AMONG_LAUNCH)
    def checkpoint(request: CheckpointRequest, dry_run: bool = OPT["dry_run"], fmt: Format = OPT["fmt"]) -> int:
        """Write and read back a spec-shaped state dict (torch.save, safetensors, dcp), fsync'd, cache defeated."""
        live = probe_live.checkpoint_formats(fmt)
        return _render(_probe(request, dry_run, live), fmt, _checkpoint_text, request.directory)
