"""``gpufabric fingerprint``: write the reproducibility manifest, or diff manifests for drift."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpufabric.cli.options import format_option, refuse_unused
from gpufabric.cli.output import Format, show, stdout_console
from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    @app.command("fingerprint")
    def fingerprint(
        files: list[Path] = typer.Argument(
            None, help="Manifests to compare (with --compare); the first is the baseline."
        ),
        compare: bool = typer.Option(
            False, "--compare", help="Diff the given manifests against the first; exit 1 on drift."
        ),
        out: Path | None = typer.Option(None, "--out", help="Write this host's manifest to FILE (JSON)."),
        fmt: Format = format_option(),
    ) -> int:
        """Manifest of everything that can change results (versions, env, NCCL_*, topology), or drift between manifests."""
        from gpufabric.bench import manifests as fingerprints

        if compare or files:
            refuse_unused(True, {"out": "--out"}, "with --compare (it writes no manifest)")
            if not compare:
                raise InputError("manifest files given without --compare; use --compare A B [C ...]")
            drift = fingerprints.drift(files or [])
            if fmt is Format.json:
                sys.stdout.write(drift.to_json())
            console = stdout_console()
            for line, markup in drift.text_lines() if fmt is not Format.json else ():
                console.print(line, markup=markup)
            return drift.exit_code
        return show(fingerprints.manifest(out), fmt)
