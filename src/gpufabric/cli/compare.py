"""``gpufabric compare BASE CAND``: per-metric deltas with significance; exit 1 on a regression."""

from __future__ import annotations

from pathlib import Path

import typer

from gpufabric.cli.options import db_option, format_option
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)


def _load(refs: tuple[str, str], db: str | None) -> list:
    """The runs of ``refs``: JSON report files are read as they are; the store is opened
    only for run references, so comparing two files neither needs nor creates one."""
    from gpufabric.report import load_json_report
    from gpufabric.results.store import Store

    is_file = [ref.endswith(".json") or Path(ref).is_file() for ref in refs]
    stored = {}
    if not all(is_file):
        with Store.open(db, create=False) as store:
            stored = {ref: store.get_run(ref) for ref, f in zip(refs, is_file, strict=True) if not f}
    return [load_json_report(ref) if f else stored[ref] for ref, f in zip(refs, is_file, strict=True)]


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
    from gpufabric.report.common import num, pct, printable
    from gpufabric.results.compare import Change, compare_runs

    if not 0 < alpha < 0.5:
        raise InputError(f"--alpha must be between 0 and 0.5, got {alpha}")
    overrides = _min_effects(min_effect)
    a, b = _load((base, cand), db)
    result = compare_runs(a, b, tolerance=tolerance, alpha=alpha, correction=correction, min_effect=overrides)
    failed, reason = _verdict(result, strict)
    counts = {c.value: sum(d.verdict == c and not d.duplicate_of for d in result.deltas) for c in Change}
    if fmt is Format.json:
        print_json(
            {
                "base": a.id,
                "cand": b.id,
                "alpha": alpha,
                "correction": result.correction,
                "min_effect": result.min_effect,
                "strict": strict,
                "tested": result.tested,
                "deltas": result.deltas,
                "counts": counts,
                "regressions": len(result.regressions),
                "failed": failed,
                "reason": reason,
            }
        )
        return 1 if failed else 0
    console = stdout_console()
    console.print(
        f"compare run {a.id} (base) -> run {b.id} (candidate): {result.tested} metrics tested, "
        f"{result.correction} at alpha {alpha:g}, minimum effect "
        + ", ".join(f"{k} {v:.0%}" for k, v in result.min_effect.items()),
        markup=False,
    )
    order = {Change.regression: 0, Change.inconclusive: 1, Change.improvement: 2, Change.unchanged: 3}
    for d in sorted(result.deltas, key=lambda d: (order[d.verdict], bool(d.duplicate_of), bool(d.part_of))):
        evidence = ""
        if d.p_adjusted is not None:
            evidence = (
                f"effect {pct(d.effect)} [{pct(d.ci_low)}, {pct(d.ci_high)}], "
                f"p_adj={d.p_adjusted:.2g}, n={d.n_base}/{d.n_cand}"
            )
        if d.regime:
            values = f"{d.unit} curve ({d.regime}, {d.sizes} sizes, median change {pct(d.delta)}"
        else:
            values = f"{num(d.base)} -> {num(d.cand)} {d.unit} ({pct(d.delta)}"
        line = (
            f"{d.verdict.value.upper():12} {d.test} @{d.host} {d.metric}: {values}"
            f", {d.direction.value} is better; {d.method}"
            f"{', ' + evidence if evidence else ''})"
        )
        if d.note:
            line += f" [{d.note}]"
        # Test, host and metric names come from tool output and files: never let them drive the terminal.
        console.print(printable(line), markup=False)
    console.print(", ".join(f"{n} {c}" for c, n in counts.items() if n) or "nothing to compare", markup=False)
    if strict or failed:
        console.print(printable(reason), markup=False)
    return 1 if failed else 0


def _verdict(result, strict: bool) -> tuple[bool, str]:
    """(failed, why): the gate's decision in one line, whatever it is."""
    from gpufabric.results.compare import inconclusive_regressions

    def names(deltas) -> str:
        shown = ", ".join(
            f"{d.test} @{d.host} {d.metric} ({d.effect if d.effect is not None else d.delta:+.1%})" for d in deltas[:3]
        )
        return shown + (f" and {len(deltas) - 3} more" if len(deltas) > 3 else "")

    regressions = list(result.regressions)
    if regressions:
        return True, f"failed: {len(regressions)} regression(s): {names(regressions)}"
    if not strict:
        return False, "passed: no regression"
    if result.tested == 0:
        return True, (
            "failed (--strict): no metric was tested: the runs have no measurement in common that can be "
            "compared (different tests, hosts or metrics, or one value per side); a gate that tests nothing "
            "cannot pass"
        )
    moved = list(inconclusive_regressions(result))
    if moved:
        return True, (
            f"failed (--strict): {len(moved)} inconclusive metric(s) moved the bad way beyond their minimum "
            f"effect: {names(moved)}"
        )
    return False, (
        f"passed (--strict): {result.tested} metrics tested, no regression, no inconclusive move beyond its "
        "minimum effect"
    )
