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

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpufabric.bench.parsers import collector_paused
from gpufabric.cli.options import SPEC_MODELS, db_option, format_option, refuse_unused
from gpufabric.cli.output import Format, command_line, print_lines

if TYPE_CHECKING:
    from gpufabric.bench.ingest import IngestOutcome


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)


def models_for(args: Sequence[str]) -> tuple[str, ...]:
    """The pydantic models an ingest reads with: the SLO file's for ``--thresholds``, a plan's
    spec and catalog for ``--plan``/``--spec``; none for a plain import (the parsers and the
    store are plain records), ~0.12 s of start-up that building them all cost (issue 32)."""

    def given(flag: str) -> bool:
        return any(a == flag or a.startswith(flag + "=") for a in args)

    slo = ("gpufabric.bench.slo",) if given("--thresholds") else ()
    return (*(SPEC_MODELS if given("--plan") or given("--spec") else ()), *slo)


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
    from gpufabric.bench.ingest import IngestRequest, run

    refuse_unused(dry_run, {"db": "--db", "allow_duplicate": "--allow-duplicate"}, "with --dry-run (nothing is stored)")
    request = IngestRequest(
        files=tuple(files),
        tool=tool,
        db=db,
        host=host,
        thresholds=thresholds,
        plan=plan,
        spec=spec,
        dry_run=dry_run,
        allow_duplicate=allow_duplicate,
        argv=tuple(command_line()),
    )
    outcome = run(request)
    if fmt == Format.json:
        sys.stdout.write(outcome.to_json())
        sys.stdout.flush()
    else:
        print_lines(_text(outcome))
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


def _text(outcome: IngestOutcome) -> list[str]:
    from gpufabric.cli.bench import headline, note

    head = "would import" if outcome.dry_run else f"imported as run {outcome.run_id}"
    lines = [f"{head}: {len(outcome.results)} results, {outcome.status}"]
    lines += [
        f"  {r.name} [{r.host}] {r.status.value} {headline(r)}  {r.params['file']}{note(r)}" for r in outcome.results
    ]
    return lines + [f"  {v.outcome.value.upper():<7} {v.test} {v.metric}: {v.reason}" for v in outcome.verdicts]
