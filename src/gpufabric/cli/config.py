"""``gpufabric config``: render the configuration bundle of a design, per node role."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpufabric.cli.options import format_option
from gpufabric.cli.output import Format, print_json
from gpufabric.errors import InputError

if TYPE_CHECKING:
    from gpufabric.plan import Candidate, Plan

#: Bundles larger than this are summarised per directory instead of listed file by file.
MAX_LISTED = 80


def register(app: typer.Typer) -> None:
    app.command("config")(config)


#: Why the planner left ``recommended`` None, by its ``binding`` (plan/recommend.py).
_NO_RECOMMENDATION = {"memory": "no layout fits in GPU memory", "model_output": "no design has finite model outputs"}


def _closest(result: Plan) -> Candidate | None:
    """The recommended candidate, else the one nearest to fitting (the planner's own ranking otherwise).

    The planner leaves ``recommended`` None when no layout fits in GPU memory or no design has
    finite model outputs; the user still needs the nearest design's id and what it violates.
    """
    if result.recommended is not None:
        return result.get(result.recommended)
    if not result.candidates:
        return None
    if result.binding == "memory":  # same choice as plan.recommend's "Closest:" sentence
        return min(result.candidates, key=lambda c: c.memory_gb - c.memory_capacity_gb)
    return result.candidates[0]


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
    from gpufabric.catalog import load_catalog
    from gpufabric.configure import (
        KeySource,
        design_from_plan,
        render_bundle,
        write_bundle,
    )
    from gpufabric.configure.bundle import MANIFEST
    from gpufabric.configure.design import design_from_candidate, design_from_option
    from gpufabric.configure.verify import CheckReport, verify_tree
    from gpufabric.plan import make_plan
    from gpufabric.spec import load_spec

    if out is None and not dry_run:
        raise InputError("--out DIR is required (or pass --dry-run)")
    keys = KeySource.from_options(seed=seed, key_file=key_file)
    if seed is not None:
        typer.echo("warning: --seed makes every secret derivable from the seed; use it for tests only", err=True)
    if plan is not None and design_text is not None:
        raise InputError("give --plan or --design, not both")
    catalog = load_catalog(catalog_files)
    spec = load_spec(spec_path, known_ids=catalog.known_ids()).spec
    if design_text is not None:
        design = design_from_option(design_text, catalog)
    elif plan is not None:
        design = design_from_plan(plan, catalog.known_ids())
    else:
        # Without --plan or --design, configure what `gpufabric plan` would recommend.
        result = make_plan(spec, catalog)
        best = _closest(result)
        if best is None:  # no candidate at all (every design filtered out before evaluation)
            typer.echo(
                f"gpufabric: failed: the planner evaluated no design for {spec_path}: {result.rationale}; "
                f"pass --design fabric=...,storage=... to configure one anyway",
                err=True,
            )
            return 1
        design = design_from_candidate(
            fabric=best.fabric, storage=best.storage, candidate_id=best.id, rented=best.capacity == "rent"
        )
        if result.recommended is None or not best.meets_requirements:
            why = "; ".join(best.violations) or result.rationale
            head = (
                "no design meets every requirement"
                if result.recommended is not None
                else f"no design is recommended ({_NO_RECOMMENDATION.get(result.binding or '', result.binding)})"
            )
            typer.echo(
                f"gpufabric: failed: {head} for {spec_path}: closest {best.id}: {why}; "
                f"pass --design fabric=...,storage=... to configure one anyway "
                f"(the closest is --design fabric={design.fabric},storage={design.storage})",
                err=True,
            )
            return 1
    if out is not None and out.is_symlink():
        raise InputError(f"--out {out} is a symbolic link; give the real directory")
    if out is not None and out.exists():
        if not out.is_dir():
            raise InputError(f"--out {out} is not a directory")
        if any(out.iterdir()) and not (out / MANIFEST).exists():
            raise InputError(f"--out {out} is not empty and holds no gpufabric bundle; choose an empty directory")
    bundle = render_bundle(spec, design, keys)
    artefacts = bundle.sorted_artefacts()
    reports: list[CheckReport] = []

    def verify(root: Path, paths: list[str]) -> None:
        reports.append(verify_tree(root, paths))

    if not dry_run and out is not None:
        write_bundle(bundle, out, verify=verify)
    else:
        with tempfile.TemporaryDirectory(prefix="gpufabric-config-") as scratch:
            write_bundle(bundle, Path(scratch) / "bundle", verify=verify)
    checks = reports[0]
    if fmt is Format.json:
        print_json(
            {
                "spec": spec.name,
                "dry_run": dry_run,
                "out": str(out) if out else None,
                "design": {
                    "fabric": design.fabric,
                    "storage": design.storage,
                    "fabric_kind": design.fabric_kind,
                    "source": design.source,
                },
                "policy_source": bundle.policy_source,
                "notes": bundle.notes,
                "files": bundle.file_list(),
                "checks": {"passed": checks.checked, "skipped": checks.skipped},
            }
        )
        return 0
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
    return 0
