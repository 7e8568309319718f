"""``gpufabric calibrate RUN``: fit alpha/beta from a measured run, write a catalog override."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.options import db_option, format_option, refuse_unused
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate(
        run_ref: str = typer.Argument(
            ..., metavar="RUN", help="Run id (or 'latest') with collective sweeps / fio results."
        ),
        fabric: str | None = typer.Option(
            None, "--fabric", help="Catalog fabric id the multi-node sweeps ran over (needed when the run spans nodes)."
        ),
        gpu: str | None = typer.Option(
            None, "--gpu", help="Catalog GPU id (default: read from the nccl-tests header of the run)."
        ),
        storage: str | None = typer.Option(
            None, "--storage", help="Catalog storage id the run's fio results measured."
        ),
        harness: str = typer.Option(
            "per-gpu",
            "--harness",
            help="How the run launched its ops: per-gpu (one process per GPU, default), single-process"
            " (nccl-tests -g N), torch. Its launch cost is modelled, not fitted into the GPU's.",
        ),
        catalog_files: list[Path] = typer.Option([], "--catalog", help="Base catalog override(s) to start from."),
        out: Path = typer.Option(Path("calibrated.yaml"), "--out", help="Override file to write."),
        db: str | None = db_option(),
        dry_run: bool = typer.Option(False, "--dry-run", help="Fit and report, but do not write --out."),
        force: bool = typer.Option(
            False,
            "--force",
            help="Write the fit even when it predicts the run's own points worse than the catalog did"
            " (otherwise refused, exit 1).",
        ),
        fmt: Format = format_option(),
    ) -> int:
        """Fit alpha and beta per link class from a run (suite, probe or ingested) and write `source: measured, run <id>` overrides."""
        from gpufabric.catalog import load_catalog
        from gpufabric.plan.calibrate import calibrate as fit
        from gpufabric.plan.calibrate import render_yaml
        from gpufabric.results.store import Store

        # Every id given is checked before anything is read or written (they become YAML keys).
        refuse_unused(dry_run, {"out": "--out"}, "with --dry-run (nothing is written)")
        catalog = load_catalog(catalog_files)
        for given, lookup in ((gpu, catalog.gpu), (fabric, catalog.fabric), (storage, catalog.storage_backend)):
            if given is not None:
                lookup(given)
        with Store.open(db, create=False) as store:
            run = store.get_run(int(run_ref) if run_ref.isdigit() else run_ref)
        if run.kind == "bench.gpu":
            return _calibrate_gpu(run, catalog, out=out, dry_run=dry_run, fmt=fmt, ids=(gpu, fabric, storage))
        cal = fit(run, gpu=gpu, fabric=fabric, storage=storage, base_catalog=catalog_files, harness=harness)
        # A fit that predicts its own points worse than the catalog did is not written: the
        # catalog was closer to this run (issue 25: a healthy NDR table once lowered NDR's
        # efficiency and flipped a plan's fabric).
        refused = bool(cal.worsened) and not force
        if not dry_run and not refused:
            try:
                out.write_text(render_yaml(cal), encoding="utf-8")
            except OSError as exc:
                raise InputError(f"{out}: cannot write: {exc.strerror}") from exc
        if fmt is Format.json:
            print_json(
                {
                    "run_id": cal.run_id,
                    "out": None if dry_run or refused else str(out),
                    "refused": refused,
                    "worsened": list(cal.worsened),
                    "gpu": cal.gpu,
                    "fabric": cal.fabric,
                    "notes": list(cal.notes),
                    "fits": cal.fits,
                    "override": cal.override,
                    "before": cal.before,
                    "after": cal.after,
                    "points": list(cal.comparison),
                }
            )
            return 1 if refused else 0
        console = stdout_console()
        for note in cal.notes:
            console.print(f"note: {note}", markup=False)
        for f in cal.fits:
            console.print(
                f"{f.link_class}: alpha {f.alpha_us:.1f} us, beta {f.beta_gbps:.4f} GB/s busbw"
                f" ({f.points} points, rms rel error {f.rms_rel_error:.1%})",
                markup=False,
            )
        for c in cal.before:
            console.print(
                f"{c}: predicted vs measured time, median error {cal.before[c]['median_abs_error_pct']:.0f}%"
                f" -> {cal.after[c]['median_abs_error_pct']:.0f}% (max {cal.before[c]['max_abs_error_pct']:.0f}%"
                f" -> {cal.after[c]['max_abs_error_pct']:.0f}%)",
                markup=False,
            )
        console.print(
            f"{'op':<15}{'nodes':>6}{'size':>13}{'measured':>12}{'before':>12}{'after':>12}  time, us", markup=False
        )
        for row in cal.comparison:
            console.print(
                f"{row['op']:<15}{row['nodes']:>6}{row['size_bytes']:>13}{row['measured_time_us']:>12.1f}"
                f"{row['predicted_before_us']:>12.1f}{row['predicted_after_us']:>12.1f}",
                markup=False,
            )
        if refused:
            worse = ", ".join(
                f"{c} {cal.before[c]['median_abs_error_pct']:.1f}% -> {cal.after[c]['median_abs_error_pct']:.1f}%"
                for c in cal.worsened
            )
            console.print(
                f"refused: the fit predicts the run's own points worse than the catalog does ({worse} median"
                f" error); {out} not written. Check the run (a disturbed or misconfigured cluster?) or keep"
                " the fit anyway with --force.",
                markup=False,
            )
            return 1
        if cal.worsened:
            console.print(f"note: --force: kept a fit that worsens {', '.join(cal.worsened)}", markup=False)
        if not dry_run:
            console.print(f"wrote {out}; use it with: gpufabric plan SPEC --catalog {out}", markup=False)
        return 0


def _calibrate_gpu(run: Any, catalog: Any, *, out: Path, dry_run: bool, fmt: Format, ids: tuple[Any, ...]) -> int:
    """A ``bench gpu`` run: the GPU's gemm/HBM efficiency and host copy rate (plan/calibrate_gpu.py)."""
    from gpufabric.plan.calibrate_gpu import calibrate_gpu, render_yaml

    if any(i is not None for i in ids):
        raise InputError("--gpu/--fabric/--storage: a bench gpu run names its GPU itself; drop them")
    cal = calibrate_gpu(run, catalog=catalog)
    if not dry_run:
        try:
            out.write_text(render_yaml(cal), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{out}: cannot write: {exc.strerror}") from exc
    if fmt is Format.json:
        print_json({**cal.to_dict(), "out": None if dry_run else str(out)})
        return 0
    console = stdout_console()
    for key, entry in cal.override["gpus"][cal.gpu].items():
        console.print(f"{cal.gpu}.{key}: {entry['value']:g} ({entry['source']})", markup=False)
    for note in cal.notes:
        console.print(f"note: {note}", markup=False)
    if cal.comparison:
        console.print(f"{'test':<18}{'measured':>10}{'before':>10}{'after':>10}  decode step, ms", markup=False)
    for row in cal.comparison:
        console.print(
            f"{row['test']:<18}{row['measured_ms']:>10.3f}{row['predicted_before_ms']:>10.3f}{row['predicted_after_ms']:>10.3f}",
            markup=False,
        )
    if not dry_run:
        console.print(f"wrote {out}; use it with: gpufabric plan SPEC --catalog {out}", markup=False)
    return 0
