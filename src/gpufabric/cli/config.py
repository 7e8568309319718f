"""``gpufabric config``: render the configuration bundle of a design, per node role."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpufabric.cli.options import format_option
from gpufabric.cli.output import Format

if TYPE_CHECKING:
    from gpufabric.configure.outcome import ConfigOutcome

#: Bundles larger than this are summarised per directory instead of listed file by file.
MAX_LISTED = 80


def register(app: typer.Typer) -> None:
    app.command("config")(config)


def config(
    spec_path: Path = typer.Argument(..., metavar="SPEC", help="The spec YAML file."),
    plan: Path | None = typer.Option(
        None, "--plan", help="A `gpufabric plan --format json` file; its recommended design is configured."
    ),
    design_text: str | None = typer.Option(
        None,
        "--design",
        metavar="fabric=ID,storage=ID",
        help="Configure this design instead of the planner's recommendation.",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Directory to write the bundle into (required unless --dry-run)."
    ),
    seed: str | None = typer.Option(None, "--seed", help="Make secrets reproducible from this seed (tests only)."),
    key_file: Path | None = typer.Option(None, "--key-file", help="Make secrets reproducible from this file's bytes."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Render and list the files without writing them."),
    catalog_files: list[Path] = typer.Option(
        [], "--catalog", help="Catalog override file (repeatable; later wins), as for `gpufabric plan`."
    ),
    fmt: Format = format_option(),
) -> int:
    """Render nftables, NVMe-oF, OpenSM/RoCE, NCCL, tuned/sysctl and launch artefacts for every node role."""
    from gpufabric.configure.outcome import ConfigRequest, run
    from gpufabric.plan import make_plan

    request = ConfigRequest(
        spec_path=spec_path,
        plan=plan,
        design_text=design_text,
        out=out,
        seed=seed,
        key_file=key_file,
        dry_run=dry_run,
        catalog_files=tuple(catalog_files),
    )
    outcome = run(request, warn=lambda line: typer.echo(line, err=True), recommend=make_plan)
    if outcome.failure:
        typer.echo(f"gpufabric: failed: {outcome.failure}", err=True)
    elif fmt is Format.json:
        sys.stdout.write(outcome.to_json())
        sys.stdout.flush()
    else:
        _text(outcome)
    return outcome.exit_code


def _text(outcome: ConfigOutcome) -> None:
    design, bundle, checks = outcome.design, outcome.bundle, outcome.checks
    assert design is not None and bundle is not None and checks is not None  # not a failure
    dry_run, out = outcome.request.dry_run, outcome.request.out
    artefacts = bundle.sorted_artefacts()
    verb = "would write" if dry_run else "wrote"
    secret = sum(a.secret for a in artefacts)
    typer.echo(f"design: fabric {design.fabric} ({design.fabric_kind}), storage {design.storage}; from {design.source}")
    typer.echo(f"policy: {bundle.policy_source}")
    for note in bundle.notes:
        typer.echo(f"note: {note}")
    typer.echo(f"checked: {len(checks.checked)} files load in their consumer (bash -n, sh -n, nft -c)")
    for skipped in checks.skipped:
        typer.echo(f"warning: not checked: {skipped}", err=True)
    typer.echo(f"{verb} {len(artefacts)} files{' to ' + str(out) if out else ''} ({secret} secret, mode 0600):")
    if len(artefacts) <= MAX_LISTED:
        for a in artefacts:
            typer.echo(f"  {a.mode:04o} {a.path}{'  (secret)' if a.secret else ''}")
    else:
        groups: dict[str, list[int]] = {}
        for a in artefacts:
            top = "/".join(a.path.split("/")[:2]) if a.path.startswith("roles/") else a.path.split("/")[0]
            counts = groups.setdefault(top, [0, 0])
            counts[0] += 1
            counts[1] += a.secret
        for top, (count, secrets) in sorted(groups.items()):
            typer.echo(
                f"  {top}: {count} file{'s' if count != 1 else ''}" + (f" ({secrets} secret)" if secrets else "")
            )
        typer.echo("  (every file with its mode is listed in manifest.json and README.md)")
    if not dry_run:
        typer.echo(f"next: read {out}/README.md for what goes where, then `gpufabric audit --config {out}`")
