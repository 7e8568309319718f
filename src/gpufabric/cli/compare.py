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


def _load(ref: str, store):  # noqa: ANN001, ANN202
    from gpufabric.report import load_json_report

    if ref.endswith(".json") or Path(ref).is_file():
        return load_json_report(ref)
    return store.get_run(ref)


def _num(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


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
    from gpufabric.results.compare import Change, compare_runs, untestable_regressions
    from gpufabric.results.store import Store

    if tolerance < 0:
        raise InputError(f"--tolerance must be >= 0, got {tolerance}")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha must be between 0 and 1, got {alpha}")
    with Store.open(db) as store:
        a, b = _load(base, store), _load(cand, store)
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
        delta = "-" if d.delta is None or not math.isfinite(d.delta) else f"{d.delta:+.1%}"
        evidence = ((f"p={d.p_value:.2g}" if d.p_value > 0 else "p<1e-300") if d.p_value is not None else
                    f"CI [{d.ci_low:+.1%}, {d.ci_high:+.1%}]" if d.ci_low is not None and math.isfinite(d.ci_low) else "")
        line = (f"{d.change.value.upper():12} {d.test} @{d.host} {d.metric}: {_num(d.base)} -> {_num(d.cand)} {d.unit}"
                f" ({delta}, {d.direction.value} is better; {d.method}{', ' + evidence if evidence else ''})")
        if d.note:
            line += f" [{d.note}]"
        console.print(line, markup=False)
    counts = {c: sum(d.change == c for d in result.deltas) for c in Change}
    console.print(", ".join(f"{n} {c.value}" for c, n in counts.items() if n) or "nothing to compare", markup=False)
    return 1 if failing else 0
