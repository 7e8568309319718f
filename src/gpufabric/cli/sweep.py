"""``gpufabric sweep SPEC --vary key=v1,v2``: many variants of a spec in one vectorised pass, to CSV/Parquet."""

from __future__ import annotations

from pathlib import Path

import typer

from gpufabric.cli.options import SPEC_MODELS, format_option
from gpufabric.cli.output import Format

#: The pydantic model modules this command builds at start-up (cli/app.py ALL_MODEL_MODULES).
MODELS = SPEC_MODELS


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)


def sweep(
    spec_file: Path = typer.Argument(..., help="Spec YAML (see `gpufabric init`)."),
    vary: list[str] = typer.Option(
        ..., "--vary", help="key=v1,v2,... with a dotted spec path (repeatable; combinations multiply)."
    ),
    out: Path = typer.Option(..., "--out", help="Output file: .csv, or .parquet (needs pyarrow)."),
    catalog_files: list[Path] = typer.Option([], "--catalog", help="Catalog override file (repeatable; later wins)."),
    fmt: Format = format_option(),
) -> int:
    """Evaluate every combination of the varied fields x every design; write one row each."""
    from gpufabric.catalog import load_catalog
    from gpufabric.errors import InputError
    from gpufabric.plan.sweep import check_format, parse_vary, stream_sweep, write_sweep
    from gpufabric.spec import load_spec

    if out.suffix not in (".csv", ".parquet"):
        raise InputError(f"--out {out}: use a .csv or .parquet file name")
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: directory {out.parent} does not exist")
    catalog = load_catalog(catalog_files)
    spec = load_spec(spec_file, known_ids=catalog.known_ids()).spec
    varies = [parse_vary(v) for v in vary]
    check_format(out)  # Parquet without pyarrow: refused before any work
    done = write_sweep(stream_sweep(spec, catalog, varies), out)
    if fmt is Format.json:
        from gpufabric.cli.output import print_json

        print_json({"out": str(out), "rows": done.rows, "variants": done.variants, "skipped": list(done.skipped)})
        return 0
    typer.echo(f"{done.rows:,} rows ({done.variants} variants x designs) -> {out}")
    if done.skipped:
        typer.echo(f"skipped {len(done.skipped)} invalid combination(s), first: {done.skipped[0]}", err=True)
    return 0
