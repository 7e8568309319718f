"""``gpufabric ingest --tool TOOL FILE...``: import tool outputs produced elsewhere as one run.

For results users already have (nccl-tests under Slurm, fio on a storage node): each
file is parsed with the same parser the suite uses, so the run gets the same verdicts,
history, reports and comparisons. Every file is read and parsed before anything is
written: one malformed file is a one-line error naming it and what is wrong (exit 2),
and nothing is stored. Files of the same tool and test case are repeats of one test.
Exit 1 when an imported run reports its own failure (iperf3 ``error``, nccl-tests
``#wrong``) or an SLO from ``--thresholds`` fails.

``--tool auto`` detects each file's tool; a file that is not the named tool's output is
refused (exit 2) with the tool it looks like. A result whose values cannot be true
(negative bandwidth, NaN time, sizes that do not match counts) is stored as failed and
marked invalid, never ok. A file whose content was already ingested into the database
is refused unless ``--allow-duplicate`` (its SHA-256 is kept in the run's meta).
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpufabric.bench.parsers import collector_paused
from gpufabric.cli.bench import headline, result_row
from gpufabric.cli.options import db_option, format_option, refuse_unused
from gpufabric.cli.output import Format, command_line, stdout_console
from gpufabric.errors import InputError

#: Largest file ingest reads (docs/security.md). A 1,000-rank nccl-tests sweep is ~100 MB
#: (benchmarks/bench_ingest.py); 1 GiB leaves 10x room while /dev/zero or a disk image
#: passed by mistake ends in a one-line error instead of exhausting memory.
MAX_INGEST_BYTES = 1 << 30


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)


@collector_paused  # the command builds the results too, not only the parser
def ingest(
    files: list[Path] = typer.Argument(
        ..., help="Tool output files (fio/iperf3/perftest/nccl-tests JSON, sockperf or nccl-tests text)."
    ),
    tool: str = typer.Option(
        ..., "--tool", help="fio, iperf3, sockperf, perftest, nccl-tests, or auto (detect per file)."
    ),
    db: str | None = db_option(),
    host: str = typer.Option(
        None, "--host", help="Host the results came from (default: from the file when it says, else 'unknown')."
    ),
    thresholds: Path = typer.Option(None, "--thresholds", help="Thresholds YAML: judge the imported results."),
    plan: Path = typer.Option(
        None,
        "--plan",
        help="Plan JSON (with --spec): judge imported nccl-tests tables against the busbw the plan's fabric"
        " should give at each table's scale; tables from another GPU are not_planned_hardware.",
    ),
    spec: Path = typer.Option(None, "--spec", help="With --plan: the spec (its GPU and reproducibility)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Parse and show what would be stored; store nothing."),
    allow_duplicate: bool = typer.Option(
        False, "--allow-duplicate", help="Store a file even if the same content was ingested before."
    ),
    fmt: Format = format_option(),
) -> None:
    """Import tool outputs as one run (all files validated before anything is stored)."""
    from gpufabric.bench import ingest as ingest_lib
    from gpufabric.results.recorder import judge
    from gpufabric.results.verdicts import evaluate

    refuse_unused(dry_run, {"db": "--db", "allow_duplicate": "--allow-duplicate"}, "with --dry-run (nothing is stored)")
    if (plan is None) != (spec is None):
        raise InputError("--plan and --spec go together (the plan names the fabric, the spec the GPU)")
    ingested = ingest_lib.read_files(files, tool=tool, host=host, max_bytes=MAX_INGEST_BYTES)
    results = list(ingested.results)
    slos = []
    if thresholds is not None:
        from gpufabric.bench.slo import load_thresholds

        slos = load_thresholds(thresholds)
    verdicts = evaluate(results, slos) if slos else []
    if plan is not None and spec is not None:
        verdicts += _plan_verdicts(plan, spec, results)
    status = judge(results, verdicts)
    run_id = None
    if not dry_run:
        run_id, status = ingest_lib.record(
            ingested, verdicts, db=db, argv=command_line(), tool=tool, allow_duplicate=allow_duplicate
        )
    _report(run_id, status, results, verdicts, fmt, dry_run)
    if status.exit_code:
        raise typer.Exit(status.exit_code)


def _plan_verdicts(plan: Path, spec: Path, results: list) -> list:
    from gpufabric.bench.planned import mark_not_planned
    from gpufabric.bench.slo import gpu_mismatch, ingest_slos
    from gpufabric.results.verdicts import evaluate
    from gpufabric.spec import load_spec
    from gpufabric.spec.plan_file import load_plan

    loaded = load_spec(spec).spec
    verdicts = evaluate(results, ingest_slos(load_plan(plan), loaded, results, path=str(plan)))
    return mark_not_planned(verdicts, gpu_mismatch(loaded, results))


def _report(run_id, status, results, verdicts, fmt: Format, dry_run: bool) -> None:
    if fmt == Format.json:
        _print_json_rows(
            {"run_id": run_id, "dry_run": dry_run, "status": status},
            [result_row(r, host=r.host, file=r.params.get("file")) for r in results],
            {"verdicts": verdicts},
        )
        return
    out = stdout_console()
    head = "would import" if dry_run else f"imported as run {run_id}"
    out.print(f"{head}: {len(results)} results, {status}", markup=False)
    for r in results:
        note = r.reason or r.params.get("quality_warnings", "")
        out.print(
            f"  {r.name} [{r.host}] {r.status.value} {headline(r)}  {r.params['file']}"
            + (f"  ({note})" if note else ""),
            markup=False,
        )
    for v in verdicts:
        out.print(f"  {v.outcome.value.upper():<7} {v.test} {v.metric}: {v.reason}", markup=False)


def _row_json(row: dict) -> str:
    """One result row, compact, by the C encoder: rows hold only str, float and None, and a
    non-finite value (marked invalid above) goes through to_jsonable (None), as print_json does."""
    import json

    from gpufabric.jsonable import to_jsonable

    try:
        return json.dumps(row, allow_nan=False)
    except ValueError:
        return json.dumps(to_jsonable(row))


def _print_json_rows(head: dict, rows: list[dict], tail: dict) -> None:
    """print_json's document (same keys, order and envelope) with one result per line.

    print_json's indent=2 makes the json module fall back to its pure-Python encoder; a
    100 MB nccl-tests log gives 10,617 results with 680,000 metrics, and that rendering
    took 4 s of CPU (docs/performance.md). Each row here goes through the C encoder.
    """
    import json
    import sys

    from gpufabric.cli.output import envelope
    from gpufabric.jsonable import to_jsonable

    doc = json.dumps(to_jsonable(envelope(head)), indent=2)
    end = json.dumps(to_jsonable(tail), indent=2)
    body = ",\n    ".join(map(_row_json, rows))
    out = sys.stdout
    out.write(doc[:-2] + ',\n  "results": [' + (f"\n    {body}\n  " if rows else "") + "],\n" + end[2:] + "\n")
    out.flush()
