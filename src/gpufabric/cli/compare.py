"""``gpufabric compare BASE CAND``: per-metric deltas with significance; exit 1 on a regression."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.cli.runs import DB_HELP
from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)


def _load(refs: tuple[str, str], db: Path | None) -> list:
    """The runs of ``refs``: JSON report files are read as they are; the store is opened
    only for run references, so comparing two files neither needs nor creates one."""
    from gpufabric.report import load_json_report
    from gpufabric.results.store import Store

    is_file = [ref.endswith(".json") or Path(ref).is_file() for ref in refs]
    stored = {}
    if not all(is_file):
        with Store.open(db, create=False) as store:
            stored = {ref: store.get_run(ref) for ref, f in zip(refs, is_file) if not f}
    return [load_json_report(ref) if f else stored[ref] for ref, f in zip(refs, is_file)]


def compare(
    base: str = typer.Argument(..., help="Baseline: run id, 'latest~N', or a JSON report file (report --format json)."),
    cand: str = typer.Argument("latest", help="Candidate: run id, 'latest', or a JSON report file."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    tolerance: float = typer.Option(0.05, "--tolerance", help="Relative change that counts (0.05 = 5 %)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of each metric's test."),
    strict: bool = typer.Option(False, "--strict", help="Also fail on untestable moves beyond the tolerance (single values, no samples)."),
    fmt: Format = typer.Option(Format.text, "--format", help="Output format."),
) -> int:
    """Compare two runs metric by metric (Mann-Whitney U on raw samples, else bootstrap over repeats).

    Exit 1 when a metric got significantly worse by more than --tolerance.
    """
    from gpufabric.report.common import num, pct
    from gpufabric.results.compare import Change, compare_runs, untestable_regressions

    if tolerance < 0:
        raise InputError(f"--tolerance must be >= 0, got {tolerance}")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha must be between 0 and 1, got {alpha}")
    a, b = _load((base, cand), db)
    result = compare_runs(a, b, tolerance=tolerance, alpha=alpha)
    failing = list(result.regressions) + (list(untestable_regressions(result)) if strict else [])
    if fmt is Format.json:
        print_json({"base": a.id, "cand": b.id, "tolerance": tolerance, "alpha": alpha, "strict": strict,
                    "deltas": result.deltas, "regressions": len(result.regressions), "failed": bool(failing)})
        return 1 if failing else 0
    console = stdout_console()
    console.print(f"compare run {a.id} (base) -> run {b.id} (candidate): tolerance {tolerance:.0%}, alpha {alpha:g}",
                  markup=False)
    order = {Change.regression: 0, Change.untestable: 1, Change.improvement: 2, Change.missing: 3, Change.unchanged: 4}
    for d in sorted(result.deltas, key=lambda d: order[d.change]):
        evidence = ((f"p={d.p_value:.2g}" if d.p_value > 0 else "p<1e-300") if d.p_value is not None else
                    f"CI [{d.ci_low:+.1%}, {d.ci_high:+.1%}]" if d.ci_low is not None and math.isfinite(d.ci_low) else "")
        line = (f"{d.change.value.upper():12} {d.test} @{d.host} {d.metric}: {num(d.base)} -> {num(d.cand)} {d.unit}"
                f" ({pct(d.delta)}, {d.direction.value} is better; {d.method}{', ' + evidence if evidence else ''})")
        if d.note:
            line += f" [{d.note}]"
        console.print(line, markup=False)
    counts = {c: sum(d.change == c for d in result.deltas) for c in Change}
    console.print(", ".join(f"{n} {c.value}" for c, n in counts.items() if n) or "nothing to compare", markup=False)
    return 1 if failing else 0
