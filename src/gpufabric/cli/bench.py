"""``gpufabric bench --suite quick|full``: run the validation suite and judge it.

``bench`` is a group: without a subcommand it runs a suite; ``gpufabric.cli.bench_probes``
adds ``bench collectives|checkpoint|train``.
Exit codes: 0 all passed (skipped tests and noisy verdicts do not fail a run), 1 an SLO
failed, the node is not the hardware of --plan (bench.planned), or a tool failed or hung,
2 bad input, 130 / 143 interrupted by Ctrl-C / SIGTERM (finished results kept).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpufabric.cli.limits import check_max
from gpufabric.cli.options import (
    PLAIN_HELP,
    db_option,
    duration_s,
    format_option,
    quiet_option,
    refuse_group_options,
    refuse_unused,
    timeout_option,
)
from gpufabric.cli.output import Format, command_line, print_json, stderr_console, stdout_console
from gpufabric.errors import InputError

if TYPE_CHECKING:
    from gpufabric.spec.plan_file import SavedPlan


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
    from gpufabric.cli import bench_probes

    bench_probes.register(bench_app)
    bench_app.command("thresholds")(write_thresholds)
    from gpufabric.cli import bench_inference

    bench_inference.register(bench_app)
    from gpufabric.cli import bench_gpu

    bench_gpu.register(bench_app)


def write_thresholds(
    run_ref: str = typer.Argument("latest", metavar="RUN", help="A bench run on known-good hardware: id or 'latest'."),
    out: Path = typer.Option(..., "--out", help="Thresholds YAML to write (then: bench --thresholds FILE)."),
    hardware: str = typer.Option("", "--hardware", help="What the thresholds are for (default: the run's host)."),
    db: str | None = db_option(),
    fmt: Format = format_option(),
) -> int:
    """Calibrate: write a thresholds file whose targets are a good run's medians (golden values)."""
    from gpufabric.bench.slo import thresholds_from_run
    from gpufabric.results.store import Store

    with Store.open(db) as store:
        run = store.get_run(run_ref)
    text = thresholds_from_run(run, hardware=hardware or str(run.fingerprint.get("host", "")))
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write: {exc.strerror}") from exc
    if fmt is Format.json:
        print_json({"out": str(out), "run_id": run.id})
        return 0
    stdout_console().print(
        f"wrote {out} from run {run.id}; use it with: gpufabric bench --suite ... --thresholds {out}", markup=False
    )
    return 0


def bench(
    ctx: typer.Context,
    suite: str = typer.Option(None, "--suite", help="quick (about a minute here) or full."),
    plan: Path = typer.Option(
        None,
        "--plan",
        help="Plan JSON (gpufabric plan SPEC --format json): SLOs for its recommended design (add --spec for the checkpoint, dataset and busbw SLOs).",
    ),
    spec: Path = typer.Option(None, "--spec", help="Spec YAML: shapes the storage profiles and derives SLOs."),
    thresholds: Path = typer.Option(
        None,
        "--thresholds",
        help="Thresholds YAML for this hardware type (target/tolerance, min, max per test metric).",
    ),
    target_dir: Path = typer.Option(
        None,
        "--target-dir",
        help="Directory on the storage to test (default: a temp dir). Must be empty unless --force.",
    ),
    db: str | None = db_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print every command and SLO; run nothing."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Use a non-empty --target-dir (files still go into a new subdirectory, removed afterwards).",
    ),
    fmt: Format = format_option(),
    repeats: int = typer.Option(
        None, "--repeats", min=1, help="Runs per test (default: 3 quick, 5 full); an SLO passes on a majority."
    ),
    server: str = typer.Option(
        None,
        "--server",
        help="Remote host running iperf3 -s / sockperf server / perftest server; default: loopback servers started here.",
    ),
    timeout: str | None = timeout_option(None, "Per-test timeout (default: the test's duration plus a grace)"),
    quiet: bool = quiet_option("no progress bar and no live per-test lines (CI); the report only"),
) -> None:
    """Run the validation suite: real tools, each result stored as it arrives, verdicts against SLOs."""
    if ctx.invoked_subcommand is not None:
        refuse_group_options(ctx)
        return
    if suite is None:
        raise InputError("give --suite quick|full, or a subcommand (see gpufabric bench --help)")
    from gpufabric.bench import scratch as scratch_mod
    from gpufabric.bench.suite import SUITES, plan_suite

    if suite not in SUITES:
        raise InputError(f"--suite {suite!r}: choose quick or full")
    check_max("--repeats", repeats, 1000)
    timeout_s = duration_s("--timeout", timeout, low_s=0.1)
    refuse_unused(dry_run, {"db": "--db", "quiet": "--quiet"}, "with --dry-run (nothing runs or is stored)")
    refuse_unused(target_dir is None, {"force": "--force"}, "without --target-dir")
    if server is not None and not _is_host(server):
        raise InputError(f"--server {server[:80]!r} is not a host name or IP address")
    loaded_spec, plan_doc, slos = _slos(plan, spec, thresholds)
    if target_dir is not None:
        scratch_mod.check_target(target_dir, force=force)
    argv = command_line()
    if dry_run:
        tests = plan_suite(
            suite,
            scratch=scratch_mod.plan_path(target_dir),
            spec=loaded_spec,
            repeats=repeats,
            server_addr=server,
            timeout_s=timeout_s,
            detect=False,
        )
        _print_dry_run(tests, slos, fmt)
        return
    planned = None
    if plan_doc is not None:
        from gpufabric.bench.planned import planned_hardware

        planned = planned_hardware(plan_doc, loaded_spec, path=str(plan))
    code = _run(
        suite, argv, loaded_spec, plan_doc, slos, target_dir, force, db, repeats, server, timeout_s, fmt, planned, quiet
    )
    if code:
        raise typer.Exit(code)


def _is_host(text: str) -> bool:
    """A host name or an IP address: it becomes a tool argument, so never an option ('-...')."""
    import ipaddress
    import re

    from gpufabric.spec.types import HOSTNAME

    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return len(text) <= 253 and re.fullmatch(HOSTNAME, text) is not None


def _slos(plan: Path | None, spec: Path | None, thresholds: Path | None) -> tuple[Any, SavedPlan | None, list]:
    from gpufabric.bench import slo
    from gpufabric.spec.plan_file import load_plan

    loaded = None
    if spec is not None:
        from gpufabric.spec import load_spec

        loaded = load_spec(spec).spec
    plan_doc = None
    slos: list = []
    if plan is not None:
        plan_doc = load_plan(plan)
        if loaded is None:
            typer.echo(
                f"note: --plan {plan} without --spec: checkpoint, dataset and busbw SLOs need the"
                " spec's sizes; only fabric and storage SLOs apply",
                err=True,
            )
        slos += slo.from_plan(plan_doc, loaded, path=str(plan))
    elif loaded is not None and spec is not None:  # loaded comes from spec; the test narrows spec too
        slos += slo.from_spec(loaded, source=f"spec {spec.name}")
    if thresholds is not None:
        slos += slo.load_thresholds(thresholds)
    return loaded, plan_doc, slos


def _print_dry_run(tests: list, slos: list, fmt: Format) -> None:
    from gpufabric.bench.slo import describe

    if fmt == Format.json:
        print_json(
            {
                "dry_run": True,
                "tests": [
                    {
                        "name": t.name,
                        "repeat": t.repeat,
                        "argv": list(t.argv),
                        "timeout_s": t.timeout_s,
                        "server_argv": list(t.server.argv) if t.server else None,
                        "skip_reason": t.skip_reason,
                    }
                    for t in tests
                ],
                "slos": slos,
            }
        )
        return
    out = stdout_console()
    for t in tests:
        out.print(
            f"# {t.name} (repeat {t.repeat}, timeout {t.timeout_s:g} s)"
            + (f"  [{t.skip_reason}]" if t.skip_reason else ""),
            markup=False,
        )
        for line in t.command_lines():
            out.print(line, markup=False)
    out.print(
        f"# {len(tests)} tests; SLOs:"
        if slos
        else f"# {len(tests)} tests; no SLOs (give --plan/--spec or --thresholds)",
        markup=False,
    )
    for line in describe(slos):
        out.print(f"#   {line}", markup=False)


def _run(
    suite: str,
    argv: list[str],
    spec: Any,
    plan_doc: SavedPlan | None,
    slos: list,
    target_dir: Path | None,
    force: bool,
    db: str | None,
    repeats: int | None,
    server: str | None,
    timeout: float | None,
    fmt: Format,
    planned: Any = None,
    quiet: bool = False,
) -> int:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from gpufabric.bench import scratch as scratch_mod
    from gpufabric.bench.fingerprint import collect as collect_fingerprint
    from gpufabric.bench.runners import LocalExecutor
    from gpufabric.bench.suite import plan_suite, record_suite

    scratch = scratch_mod.prepare(target_dir, force=force)
    try:
        tests = plan_suite(
            suite, scratch=scratch.path, spec=spec, repeats=repeats, server_addr=server, timeout_s=timeout
        )
        fingerprint = collect_fingerprint()
        not_planned: tuple[str, ...] = ()
        if planned is not None:
            from gpufabric.bench.planned import mismatches

            not_planned = mismatches(planned, fingerprint)
            if not_planned:
                stderr_console().print("not the planned hardware: " + "; ".join(not_planned), markup=False)
        err = stderr_console()
        # A bar only for people at a terminal: in CI logs (stdout or stderr not a TTY) it is noise.
        show_bar = not quiet and sys.stdout.isatty() and err.is_terminal
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not show_bar,
        )
        task = bar.add_task(f"bench {suite}", total=len(tests))
        width = max((len(t.name) for t in tests), default=10)

        def progress(event) -> None:
            if event.result is None:
                bar.update(task, description=f"{event.test.name} #{event.test.repeat}")
                return
            bar.advance(task)
            if not quiet:  # each test as it finishes, above the bar (stderr: stdout stays the report)
                r = event.result
                bar.console.print(
                    f"[{event.index + 1}/{event.total}] {r.name:<{width}} #{event.test.repeat:<2} "
                    f"{r.status.value:<7} {r.duration_s:6.1f} s  {headline(r)}",
                    markup=False,
                    highlight=False,
                )

        with bar:
            outcome = record_suite(
                tests,
                db=db,
                argv=argv,
                fingerprint=fingerprint,
                spec_name=spec.name if spec is not None else "",
                plan=plan_doc.document if plan_doc is not None else None,
                meta={"suite": suite, "tests": len(tests), "server": server or "loopback", "slos": len(slos)},
                executor=LocalExecutor(),
                slos=slos,
                progress=progress,
                not_planned=not_planned,
            )
    finally:
        scratch.cleanup()
    _report(outcome, fmt)
    return outcome.exit_code


def headline(result) -> str:
    """The first metric of a result, for one-line listings ("" when it has none)."""
    if not result.metrics:
        return ""
    m = result.metrics[0]
    return f"{m.name}={m.value:.4g} {m.unit}"


def result_row(result, **extra: Any) -> dict[str, Any]:
    """A result's JSON entry in ``bench`` and ``ingest`` reports; ``extra`` adds keys."""
    return {
        "name": result.name,
        **extra,
        "status": result.status.value,
        "reason": result.reason,
        "warnings": result.params.get("quality_warnings", ""),
        "metrics": {m.name: m.value for m in result.metrics},
    }


def _report(outcome, fmt: Format) -> None:
    if fmt == Format.json:
        print_json(
            {
                "run_id": outcome.run_id,
                "status": outcome.status,
                "wall_s": outcome.wall_s,
                "tool_s": outcome.tool_s,
                "results": [
                    result_row(r, repeat=r.params.get("repeat"), duration_s=r.duration_s) for r in outcome.results
                ],
                "verdicts": outcome.verdicts,
            }
        )
        return
    out = stdout_console()
    # Plain aligned lines, not a table: they survive 80-column pipes and grep.
    width = max((len(r.name) for r in outcome.results), default=10)
    out.print(f"run {outcome.run_id}: {outcome.status}", markup=False)
    for r in outcome.results:
        note = r.reason or r.params.get("quality_warnings", "")
        out.print(
            f"  {r.name:<{width}} #{r.params.get('repeat', '1'):<2} {r.status.value:<7} {r.duration_s:6.1f} s  "
            f"{headline(r)}" + (f"  ({note})" if note else ""),
            markup=False,
        )
    if outcome.verdicts:
        out.print("verdicts:", markup=False)
        for v in outcome.verdicts:
            text = "; ".join([v.reason, *v.warnings]).strip("; ")
            out.print(
                f"  {v.outcome.value.upper():<7} {v.test} {v.metric}"
                + (f" on {v.host}" if v.host else "")
                + (f": {text}" if text else ""),
                markup=False,
            )
    out.print(
        f"wall {outcome.wall_s:.1f} s, in tools {outcome.tool_s:.1f} s; stored as run {outcome.run_id}", markup=False
    )
