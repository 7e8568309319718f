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

import hashlib
import time
from pathlib import Path

import typer

from gpufabric.bench.parsers import collector_paused
from gpufabric.boundary import read_capped
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
    db: Path = db_option(),
    host: str = typer.Option(
        None, "--host", help="Host the results came from (default: from the file when it says, else 'unknown')."
    ),
    thresholds: Path = typer.Option(None, "--thresholds", help="Thresholds YAML: judge the imported results."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Parse and show what would be stored; store nothing."),
    allow_duplicate: bool = typer.Option(
        False, "--allow-duplicate", help="Store a file even if the same content was ingested before."
    ),
    fmt: Format = format_option(),
) -> None:
    """Import tool outputs as one run (all files validated before anything is stored)."""
    from dataclasses import replace

    from gpufabric.bench.parsers import TOOLS, detect_tool, parser_for, to_result
    from gpufabric.bench.runners import RAW_OUTPUT_LIMIT
    from gpufabric.errors import ParseError
    from gpufabric.results.recorder import judge, run_info
    from gpufabric.results.records import TestResult
    from gpufabric.results.verdicts import evaluate

    refuse_unused(dry_run, {"db": "--db", "allow_duplicate": "--allow-duplicate"}, "with --dry-run (nothing is stored)")
    if tool not in (*TOOLS, "auto"):
        raise InputError(f"--tool {tool!r}: choose one of {', '.join(TOOLS)} or auto")
    results: list[TestResult] = []
    digests: list[str] = []
    tools_seen: list[str] = []
    for path in files:
        try:
            text = read_capped(path, MAX_INGEST_BYTES, "tool output").decode("utf-8")
            mtime = path.stat().st_mtime
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not a text file (is it {tool} output?)") from None
        detected = detect_tool(text)
        file_tool = tool
        if tool == "auto":
            if not detected:
                raise InputError(f"{path}: cannot tell which tool wrote it; name it with --tool {'|'.join(TOOLS)}")
            file_tool = detected
        try:
            parsed_all = parser_for(file_tool)(text, source=str(path))  # a ParseError names the file
        except ParseError as exc:
            if detected and detected != file_tool:
                raise InputError(
                    f"{exc}; it looks like {detected} output: use --tool {detected} or --tool auto"
                ) from None
            raise
        digests.append(hashlib.sha256(text.encode()).hexdigest())
        tools_seen.append(file_tool)
        # The suite names nccl-tests results nccl.<op>; the other tools by their own name.
        prefix = "nccl" if file_tool == "nccl-tests" else file_tool
        raw = text[:RAW_OUTPUT_LIMIT]
        for index, parsed in enumerate(parsed_all):
            result = to_result(  # the suite's conversion: the same verdict on the same data
                parsed,
                name=f"{prefix}.{parsed.case}",
                host=host or parsed.info.get("host") or parsed.info.get("hosts") or "unknown",
                # A file's raw text is stored once, with its first result: a 100 MB log of 10,000
                # tables would otherwise store 10,000 copies of the same 200 kB.
                started_at=mtime,
                raw_output=raw if index == 0 else "",
                params={
                    "file": str(path),
                    **({"raw_output": "stored with the file's first result"} if index else {}),
                },
            )
            results.append(result if result.tool == file_tool else replace(result, tool=file_tool))
    slos = []
    if thresholds is not None:
        from gpufabric.bench.slo import load_thresholds

        slos = load_thresholds(thresholds)
    verdicts = evaluate(results, slos) if slos else []
    status = judge(results, verdicts)
    run_id = None
    if not dry_run:
        from gpufabric.results.store import Store

        with Store.open(db) as store:
            if not allow_duplicate:
                _refuse_duplicates(store, files, digests)
            with store.recording(
                "ingest",
                command_line(),
                {"source": "ingested", "files": [str(f) for f in files]},
                meta={
                    "tool": tool if tool != "auto" else ",".join(sorted(set(tools_seen))),
                    "imported_at": time.time(),
                    "sha256": digests,
                },
            ) as rec:
                rec.add_results(results)  # one transaction: all or none, and one fsync, not 10,617
                rec.add_verdicts(verdicts)
                rec.describe(run_info(hosts=(r.host for r in results), env={}))  # the files' hosts, not ours
                run_id = rec.run_id
            status = rec.status
    _report(run_id, status, results, verdicts, fmt, dry_run)
    if status.exit_code:
        raise typer.Exit(status.exit_code)


def _refuse_duplicates(store, files: list[Path], digests: list[str]) -> None:
    seen: dict[str, int] = {}
    for run in store.list_runs(limit=1_000_000):
        if run.kind == "ingest":
            for digest in run.meta.get("sha256") or ():
                seen.setdefault(digest, run.id)
    for path, digest in zip(files, digests, strict=True):
        if digest in seen:
            raise InputError(
                f"{path}: already ingested as run {seen[digest]} (same content); "
                "pass --allow-duplicate to store it again"
            )
    if len(set(digests)) < len(digests):
        dup = next(p for p, d in zip(files, digests, strict=True) if digests.count(d) > 1)
        raise InputError(f"{dup}: given twice (same content); pass --allow-duplicate to store both")


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
