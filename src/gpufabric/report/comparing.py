"""``gpufabric compare`` as an application service: a typed request in, a typed outcome out.

The outcome owns the versioned JSON, the text lines and the exit status (1 on a
regression, or with ``strict`` on an inconclusive bad move or nothing tested);
``cli/compare.py`` declares the options and writes what the outcome renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufabric.errors import InputError
from gpufabric.results import document
from gpufabric.results.compare import Change, Comparison, MetricDelta, inconclusive_regressions
from gpufabric.results.records import RunRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareRequest:
    """Two runs (ids, 'latest~N' or JSON report files) and how to judge them."""

    base: str
    cand: str = "latest"
    db: str | None = None  # the results store, opened only for run references
    tolerance: float = 0.05  # minimum effect of latency and throughput metrics
    min_effect: Mapping[str, float] = field(default_factory=dict)  # per-class overrides
    alpha: float = 0.05  # error rate across all metrics compared (after the correction)
    correction: str = "holm"  # holm, bh or none
    strict: bool = False  # also fail on inconclusive bad moves and on nothing tested


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareOutcome:
    """The comparison and the gate's decision in one line."""

    request: CompareRequest
    base: RunRecord
    cand: RunRecord
    result: Comparison
    failed: bool
    reason: str

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    @property
    def counts(self) -> dict[str, int]:
        """Verdict -> metrics with it (each quantity once: duplicates left out)."""
        return {c.value: sum(d.verdict == c and not d.duplicate_of for d in self.result.deltas) for c in Change}

    def payload(self) -> dict[str, Any]:
        result = self.result
        return {
            "base": self.base.id,
            "cand": self.cand.id,
            "alpha": self.request.alpha,
            "correction": result.correction,
            "min_effect": result.min_effect,
            "strict": self.request.strict,
            "tested": result.tested,
            "deltas": result.deltas,
            "counts": self.counts,
            "regressions": len(result.regressions),
            "failed": self.failed,
            "reason": self.reason,
        }

    def to_json(self) -> str:
        """The versioned JSON document (``schema_version`` first)."""
        return document.dumps(self.payload())

    def text_lines(self) -> list[str]:
        """The text report: the header, one line per metric (regressions first), the counts
        and, when strict or failed, the reason. Names from tool output are made printable."""
        from gpufabric.report.common import printable

        result = self.result
        lines = [
            f"compare run {self.base.id} (base) -> run {self.cand.id} (candidate): {result.tested} metrics tested, "
            f"{result.correction} at alpha {self.request.alpha:g}, minimum effect "
            + ", ".join(f"{k} {v:.0%}" for k, v in result.min_effect.items())
        ]
        order = {Change.regression: 0, Change.inconclusive: 1, Change.improvement: 2, Change.unchanged: 3}
        for d in sorted(result.deltas, key=lambda d: (order[d.verdict], bool(d.duplicate_of), bool(d.part_of))):
            lines.append(printable(_delta_line(d)))
        lines.append(", ".join(f"{n} {c}" for c, n in self.counts.items() if n) or "nothing to compare")
        if self.request.strict or self.failed:
            lines.append(printable(self.reason))
        return lines


def _delta_line(d: MetricDelta) -> str:
    from gpufabric.report.common import num, pct

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
    return line + (f" [{d.note}]" if d.note else "")


def run(request: CompareRequest) -> CompareOutcome:
    """Load both runs, compare them metric by metric and decide the gate.

    Raises:
        InputError: alpha out of (0, 0.5), an unknown correction, a run or file that is not there.
    """
    from gpufabric.results.compare import compare_runs

    if not 0 < request.alpha < 0.5:
        raise InputError(f"--alpha must be between 0 and 0.5, got {request.alpha}")
    a, b = load_runs((request.base, request.cand), request.db)
    result = compare_runs(
        a,
        b,
        tolerance=request.tolerance,
        alpha=request.alpha,
        correction=request.correction,
        min_effect=dict(request.min_effect),
    )
    failed, reason = verdict(result, request.strict)
    return CompareOutcome(request=request, base=a, cand=b, result=result, failed=failed, reason=reason)


def load_runs(refs: Sequence[str], db: str | None) -> list[RunRecord]:
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


def verdict(result: Comparison, strict: bool) -> tuple[bool, str]:
    """(failed, why): the gate's decision in one line, whatever it is."""

    def names(deltas: Sequence[MetricDelta]) -> str:
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
