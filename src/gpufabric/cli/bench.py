"""``gpufabric bench --suite quick|full``: run the validation suite and judge it.

``bench`` is a group: without a subcommand it runs a suite (``bench.suite_service``: the
options are derived from ``SuiteRequest``; this module draws the progress and renders the
outcome); ``gpufabric.cli.bench_probes`` adds ``bench collectives|checkpoint|train``.
Exit codes: 0 all passed (skipped tests and noisy verdicts do not fail a run), 1 an SLO
failed, the node is not the hardware of --plan (bench.planned), or a tool failed or hung,
2 bad input, 130 / 143 interrupted by Ctrl-C / SIGTERM (finished results kept).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from gpufabric.bench.documents import headline, result_row  # noqa: F401  (cli.ingest renders with them)
from gpufabric.bench.suite_service import SuiteRequest
from gpufabric.cli.options import (
    PLAIN_HELP,
    db_option,
    format_option,
    quiet_option,
    refuse_group_options,
    refuse_unused,
)
from gpufabric.cli.output import Format, command_line, print_json, print_lines, stderr_console
from gpufabric.cli.request_options import request_options


def register(app: typer.Typer) -> None:
    # A fresh group per app: main() builds a new app on every call (tests call it often).
    bench_app = typer.Typer(
        name="bench",
        help="Validate a cluster with real tools (fio, iperf3, sockperf, perftest, nccl-tests) against SLOs from the plan.",
        no_args_is_help=False,
        rich_markup_mode=PLAIN_HELP,
    )
    bench_app.callback(invoke_without_command=True)(bench)
    app.add_typer(bench_app, name="bench")
    from gpufabric.cli import bench_gpu, bench_inference, bench_probes

    bench_probes.register(bench_app)
    bench_app.command("thresholds")(write_thresholds)
    bench_inference.register(bench_app)
    bench_gpu.register(bench_app)


def write_thresholds(
    run_ref: str = typer.Argument("latest", metavar="RUN", help="A bench run on known-good hardware: id or 'latest'."),
    out: Path = typer.Option(..., "--out", help="Thresholds YAML to write (then: bench --thresholds FILE)."),
    hardware: str = typer.Option("", "--hardware", help="What the thresholds are for (default: the run's host)."),
    db: str | None = db_option(),
    fmt: Format = format_option(),
) -> int:
    """Calibrate: write a thresholds file whose targets are a good run's medians (golden values)."""
    from gpufabric.bench.suite_service import write_thresholds as write

    run = write(run_ref, out, hardware=hardware, db=db)
    if fmt is Format.json:
        print_json({"out": str(out), "run_id": run.id})
        return 0
    print_lines([f"wrote {out} from run {run.id}; use it with: gpufabric bench --suite ... --thresholds {out}"])
    return 0


@request_options(SuiteRequest, place={"dry_run": "db", "fmt": "force"})
def bench(
    ctx: typer.Context,
    request: SuiteRequest,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print every command and SLO; run nothing."),
    fmt: Format = format_option(),
    quiet: bool = quiet_option("no progress bar and no live per-test lines (CI); the report only"),
) -> None:
    """Run the validation suite: real tools, each result stored as it arrives, verdicts against SLOs."""
    if ctx.invoked_subcommand is not None:
        refuse_group_options(ctx)
        return
    refuse_unused(dry_run, {"db": "--db", "quiet": "--quiet"}, "with --dry-run (nothing runs or is stored)")
    prep = request.prepare(note=lambda line: typer.echo(line, err=True))
    if dry_run:
        dry = prep.dry_run()
        print_json(dry.document()) if fmt == Format.json else print_lines(dry.lines())
        return
    bar: list[Any] = []
    try:
        outcome = prep.run(command_line(), start=lambda tests, why: _start(bar, tests, why, request.suite, quiet))
    finally:
        for b in bar:
            b.stop()
    _report(outcome, fmt)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


def _start(bar: list[Any], tests: list[Any], not_planned: tuple[str, ...], suite: Any, quiet: bool) -> Any:
    """Say why this is not the planned hardware, start the progress bar; the per-test callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = stderr_console()
    if not_planned:
        err.print("not the planned hardware: " + "; ".join(not_planned), markup=False)
    # A bar only for people at a terminal: in CI logs (stdout or stderr not a TTY) it is noise.
    show_bar = not quiet and sys.stdout.isatty() and err.is_terminal
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=err, transient=True, disable=not show_bar)
    task = progress.add_task(f"bench {suite}", total=len(tests))
    width = max((len(t.name) for t in tests), default=10)
    progress.start()
    bar.append(progress)

    def each(event: Any) -> None:  # bench.suite.Progress
        if event.result is None:
            progress.update(task, description=f"{event.test.name} #{event.test.repeat}")
            return
        progress.advance(task)
        if not quiet:  # each test as it finishes, above the bar (stderr: stdout stays the report)
            r = event.result
            progress.console.print(
                f"[{event.index + 1}/{event.total}] {r.name:<{width}} #{event.test.repeat:<2} "
                f"{r.status.value:<7} {r.duration_s:6.1f} s  {headline(r)}",
                markup=False,
                highlight=False,
            )

    return each


def note(r: Any) -> str:  # results.records.TestResult
    """Why a result failed, or its quality warnings, in parentheses after its line ('' if none)."""
    text = r.reason or r.params.get("quality_warnings", "")
    return f"  ({text})" if text else ""


def _report(outcome: Any, fmt: Format) -> None:  # bench.suite.SuiteOutcome
    if fmt == Format.json:
        print_json(outcome.document())
        return
    # Plain aligned lines, not a table: they survive 80-column pipes and grep.
    width = max((len(r.name) for r in outcome.results), default=10)
    lines = [f"run {outcome.run_id}: {outcome.status}"]
    lines += [
        f"  {r.name:<{width}} #{r.params.get('repeat', '1'):<2} {r.status.value:<7} {r.duration_s:6.1f} s  "
        f"{headline(r)}{note(r)}"
        for r in outcome.results
    ]
    lines += ["verdicts:"] if outcome.verdicts else []
    for v in outcome.verdicts:
        text = "; ".join([v.reason, *v.warnings]).strip("; ")
        host = f" on {v.host}" if v.host else ""
        lines.append(f"  {v.outcome.value.upper():<7} {v.test} {v.metric}{host}" + (f": {text}" if text else ""))
    lines.append(f"wall {outcome.wall_s:.1f} s, in tools {outcome.tool_s:.1f} s; stored as run {outcome.run_id}")
    print_lines(lines)
