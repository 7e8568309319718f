"""``gpufabric compare BASE CAND``: per-metric deltas with significance; exit 1 on a regression."""

from __future__ import annotations

import typer

from gpufabric.cli.options import db_option, format_option
from gpufabric.cli.output import Format, show
from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)


def _min_effects(items: list[str] | None) -> dict[str, float]:
    out = {}
    for item in items or []:
        cls, sep, value = item.partition("=")
        try:
            out[cls.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise InputError(f"--min-effect {item!r}: expected CLASS=FRACTION, e.g. tail=0.15")
    return out


def compare(
    base: str = typer.Argument(..., help="Baseline: run id, 'latest~N', or a JSON report file (report --format json)."),
    cand: str = typer.Argument("latest", help="Candidate: run id, 'latest', or a JSON report file."),
    db: str | None = db_option(),
    tolerance: float = typer.Option(
        0.05, "--tolerance", help="Minimum effect of latency and throughput metrics (0.05 = 5 %)."
    ),
    min_effect: list[str] = typer.Option(
        None,
        "--min-effect",
        help="Per-class minimum effect, CLASS=FRACTION (latency, throughput, tail, spread, other); repeatable.",
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="Error rate across all metrics compared (after --correction)."),
    correction: str = typer.Option(
        "holm",
        "--correction",
        help="Multiple-comparison correction: holm (family-wise), bh (false discovery rate) or none.",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Also fail on inconclusive metrics that moved the bad way beyond their minimum effect, and when no "
        "metric could be tested; the last line says why it passed or failed.",
    ),
    fmt: Format = format_option(),
) -> int:
    """Compare two runs metric by metric: per-repeat summaries, minimum effect, Holm-corrected.

    Exit 1 when a metric got significantly worse by more than its minimum effect.
    """
    from gpufabric.report.comparing import CompareRequest, run

    request = CompareRequest(
        base=base,
        cand=cand,
        db=db,
        tolerance=tolerance,
        min_effect=_min_effects(min_effect),
        alpha=alpha,
        correction=correction,
        strict=strict,
    )
    outcome = run(request)
    return show(outcome, fmt)
