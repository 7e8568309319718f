"""``gpufabric calibrate RUN``: fit alpha/beta from a measured run, write a catalog override."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from gpufabric.app.requests import CalibrateRequest
from gpufabric.cli.options import format_option, refuse_unused
from gpufabric.cli.output import Format, print_json, print_lines
from gpufabric.cli.request_options import request_options

if TYPE_CHECKING:  # imported when text is rendered: start-up stays lean (cli/app.py)
    from gpufabric.app.calibration import FabricCalibration, GpuCalibrationOutcome


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)


@request_options(CalibrateRequest)
def calibrate(request: CalibrateRequest, fmt: Format = format_option()) -> int:
    """Fit alpha and beta per link class from a run (suite, probe or ingested) and write `source: measured, run <id>` overrides."""
    from gpufabric.app.services import calibrate as run

    refuse_unused(request.dry_run, {"out": "--out"}, "with --dry-run (nothing is written)")
    outcome = run(request)
    if fmt is Format.json:
        print_json(outcome.to_json())
        return outcome.exit_code
    from gpufabric.app.calibration import FabricCalibration

    lines = _fabric_text(outcome) if isinstance(outcome, FabricCalibration) else _gpu_text(outcome)
    if outcome.written:
        lines.append(f"wrote {outcome.out}; use it with: gpufabric plan SPEC --catalog {outcome.out}")
    print_lines(lines)
    return outcome.exit_code


def _fabric_text(outcome: FabricCalibration) -> list[str]:
    cal, out = outcome.calibration, outcome.out
    lines = [f"note: {note}" for note in cal.notes]
    lines += [
        f"{f.link_class}: alpha {f.alpha_us:.1f} us, beta {f.beta_gbps:.4f} GB/s busbw"
        f" ({f.points} points, rms rel error {f.rms_rel_error:.1%})"
        for f in cal.fits
    ]
    for c in cal.before:
        before, after = cal.before[c], cal.after[c]
        lines.append(
            f"{c}: predicted vs measured time, median error {before['median_abs_error_pct']:.0f}%"
            f" -> {after['median_abs_error_pct']:.0f}% (max {before['max_abs_error_pct']:.0f}%"
            f" -> {after['max_abs_error_pct']:.0f}%)"
        )
    lines.append(f"{'op':<15}{'nodes':>6}{'size':>13}{'measured':>12}{'before':>12}{'after':>12}  time, us")
    lines += [
        f"{row['op']:<15}{row['nodes']:>6}{row['size_bytes']:>13}{row['measured_time_us']:>12.1f}"
        f"{row['predicted_before_us']:>12.1f}{row['predicted_after_us']:>12.1f}"
        for row in cal.comparison
    ]
    if outcome.refused:
        worse = ", ".join(
            f"{c} {cal.before[c]['median_abs_error_pct']:.1f}% -> {cal.after[c]['median_abs_error_pct']:.1f}%"
            for c in cal.worsened
        )
        return [
            *lines,
            f"refused: the fit predicts the run's own points worse than the catalog does ({worse} median"
            f" error); {out} not written. Check the run (a disturbed or misconfigured cluster?) or keep"
            " the fit anyway with --force.",
        ]
    if cal.worsened:
        lines.append(f"note: --force: kept a fit that worsens {', '.join(cal.worsened)}")
    return lines


def _gpu_text(outcome: GpuCalibrationOutcome) -> list[str]:
    cal = outcome.calibration
    lines = [f"{cal.gpu}.{key}: {e['value']:g} ({e['source']})" for key, e in cal.override["gpus"][cal.gpu].items()]
    lines += [f"note: {note}" for note in cal.notes]
    if cal.comparison:
        lines.append(f"{'test':<18}{'measured':>10}{'before':>10}{'after':>10}  decode step, ms")
    lines += [
        f"{row['test']:<18}{row['measured_ms']:>10.3f}{row['predicted_before_ms']:>10.3f}{row['predicted_after_ms']:>10.3f}"
        for row in cal.comparison
    ]
    return lines
