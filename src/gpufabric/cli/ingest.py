"""``gpufabric ingest --tool TOOL FILE...``: import tool outputs produced elsewhere as one run.

For results users already have (nccl-tests under Slurm, fio on a storage node): each
file is parsed with the same parser the suite uses, so the run gets the same verdicts,
history, reports and comparisons. Every file is read and parsed before anything is
written: one malformed file is a one-line error naming it and what is wrong (exit 2),
and nothing is stored. Files of the same tool and test case are repeats of one test.
Exit 1 when an imported run reports its own failure (iperf3 ``error``, nccl-tests
``#wrong``) or an SLO from ``--thresholds`` fails.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from gpufabric.cli.bench import headline, result_row
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)


def ingest(
    files: list[Path] = typer.Argument(..., help="Tool output files (fio/iperf3/perftest/nccl-tests JSON, sockperf or nccl-tests text)."),
    tool: str = typer.Option(..., "--tool", help="fio, iperf3, sockperf, perftest or nccl-tests."),
    db: Path = typer.Option(None, "--db", help="Results database (default: $GPUFABRIC_DB or the user data dir)."),
    host: str = typer.Option(None, "--host", help="Host the results came from (default: from the file when it says, else 'unknown')."),
    thresholds: Path = typer.Option(None, "--thresholds", help="Thresholds YAML: judge the imported results."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Parse and show what would be stored; store nothing."),
    fmt: Format = typer.Option(Format.text, "--format", help="text or json."),
) -> None:
    """Import tool outputs as one run (all files validated before anything is stored)."""
    from gpufabric.bench.parsers import TOOLS, parser_for
    from gpufabric.bench.runners import RAW_OUTPUT_LIMIT
    from gpufabric.bench.suite import run_status
    from gpufabric.results.records import Status, TestResult
    from gpufabric.results.verdicts import evaluate

    if tool not in TOOLS:
        raise InputError(f"--tool {tool!r}: choose one of {', '.join(TOOLS)}")
    parse = parser_for(tool)
    # The suite names nccl-tests results nccl.<op>; the other tools by their own name.
    prefix = "nccl" if tool == "nccl-tests" else tool
    results: list[TestResult] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="strict")
            mtime = path.stat().st_mtime
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not a text file (is it {tool} output?)") from None
        for parsed in parse(text, source=str(path)):  # a ParseError names the file
            results.append(TestResult(
                name=f"{prefix}.{parsed.case}", tool=tool,
                host=host or parsed.info.get("host") or parsed.info.get("hosts") or "unknown",
                status=Status.failed if parsed.error else Status.ok, metrics=parsed.metrics, reason=parsed.error,
                started_at=mtime, raw_output=text[:RAW_OUTPUT_LIMIT], params={"file": str(path), **parsed.params()}))
    slos = []
    if thresholds is not None:
        from gpufabric.bench.slo import load_thresholds

        slos = load_thresholds(thresholds)
    verdicts = evaluate(results, slos) if slos else []
    status = run_status(results, verdicts)
    run_id = None
    if not dry_run:
        from gpufabric.results.store import Store

        with Store.open(db) as store:
            run_id = store.begin_run(kind="ingest", argv=["ingest", "--tool", tool, *map(str, files)],
                                     fingerprint={"source": "ingested", "files": [str(f) for f in files]},
                                     meta={"tool": tool, "imported_at": time.time()})
            for result in results:
                store.add_result(run_id, result)
            if verdicts:
                store.add_verdicts(run_id, verdicts)
            store.finish_run(run_id, status)
    _report(run_id, status, results, verdicts, fmt, dry_run)
    if status != "passed":
        raise typer.Exit(1)


def _report(run_id, status, results, verdicts, fmt: Format, dry_run: bool) -> None:  # noqa: ANN001
    if fmt == Format.json:
        print_json({"run_id": run_id, "dry_run": dry_run, "status": status,
                    "results": [result_row(r, host=r.host, file=r.params.get("file")) for r in results],
                    "verdicts": verdicts})
        return
    out = stdout_console()
    head = "would import" if dry_run else f"imported as run {run_id}"
    out.print(f"{head}: {len(results)} results, {status}", markup=False)
    for r in results:
        note = r.reason or r.params.get("quality_warnings", "")
        out.print(f"  {r.name} [{r.host}] {r.status.value} {headline(r)}  {r.params['file']}" + (f"  ({note})" if note else ""),
                  markup=False)
    for v in verdicts:
        out.print(f"  {v.outcome.value.upper():<7} {v.test} {v.metric}: {v.reason}", markup=False)
