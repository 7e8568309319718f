"""SLO verdicts: measured vs expected, with direction, margin, k-of-n repeats and noise awareness.

Rules (documented in docs and asserted in tests/results/test_verdicts.py):

* **Bounds.** An SLO passes a value when every bound it sets holds: ``expected`` with
  ``tolerance`` is one-sided on the bad side (higher-is-better: ``value >= expected *
  (1 - tolerance)``; lower-is-better: ``value <= expected * (1 + tolerance)``), and
  ``minimum``/``maximum`` are absolute.
* **Margin.** Signed relative distance from the binding limit: ``+0.12`` means 12 %
  of headroom, ``-0.30`` means 30 % short. With several bounds, the tightest counts. A
  limit of 0 has no relative scale, so the margin is then absolute (ReFrame hit the same
  wall: reframe-hpc/reframe#2857).
* **Repeats.** Results with the same test case (name plus ``records.CASE_PARAMS``, so
  each message size of a sweep is its own case) and host are repeats. The SLO passes
  when ``k`` of the ``n`` judged repeats pass: ``Slo.min_pass`` if set, else a strict
  majority ``n // 2 + 1`` (1 of 1, 2 of 2, 2 of 3, 3 of 5), so one noisy repeat does not
  fail healthy hardware (the Azure HPC health checks added repeats for the same reason,
  Azure/azurehpc#690). Skipped repeats are not judged; a failed or timed-out repeat
  counts as a failing one. The reported ``measured`` is the median of the repeats.
* **Noise.** Each repeat's raw samples are summarised; a CV >= 10 % or fewer than 30
  samples (``stats.CV_WARN``/``MIN_SAMPLES``) add a warning. A warned result whose
  limit lies inside the 95 % confidence interval of its own value (relative half-width
  ``t(0.975, n-1) * CV / sqrt(n)``, so both the CV and the sample count decide) cannot
  be judged either way and gets the ``noisy`` outcome; a warned result clear of its
  limit keeps its pass/fail, with the warnings attached. A CV >= 10 % *across repeats* only adds a warning: the
  k-of-n rule is what absorbs disagreeing repeats.
* **Skips.** A test whose every repeat was skipped gets a ``skipped`` verdict with the
  tool's reason; an SLO with no matching result at all gets ``skipped`` with "no result".
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Sequence

from gpufabric.results.records import Direction, Outcome, Slo, Status, TestResult, Verdict
from gpufabric.results.stats import CV_WARN, summarize


def limits(slo: Slo) -> list[tuple[float, Direction]]:
    """Every bound of ``slo`` as (limit, which side is good)."""
    out: list[tuple[float, Direction]] = []
    if slo.expected is not None:
        if slo.direction == Direction.higher:
            out.append((slo.expected * (1 - slo.tolerance), Direction.higher))
        else:
            out.append((slo.expected * (1 + slo.tolerance), Direction.lower))
    if slo.minimum is not None:
        out.append((slo.minimum, Direction.higher))
    if slo.maximum is not None:
        out.append((slo.maximum, Direction.lower))
    return out


def judge(value: float, slo: Slo) -> tuple[bool, float | None]:
    """(passes, margin) of one value; a NaN value fails with no margin."""
    if not math.isfinite(value):
        return False, None
    margins = []
    for limit, good in limits(slo):
        diff = value - limit if good == Direction.higher else limit - value
        margins.append(diff / abs(limit) if limit != 0 else diff)
    if not margins:  # an SLO without bounds records the value and passes
        return True, None
    margin = min(margins)
    return margin >= 0, margin


def _ci_half_width(cv: float, n: int) -> float:
    """Relative half-width of the 95 % confidence interval of a mean: t(0.975, n-1) * CV / sqrt(n).

    The uncertainty of the measured value, not the width of the distribution: a latency
    distribution with a 60 % CV over 100,000 packets still pins its centre to 0.4 %.
    """
    if n < 2 or not math.isfinite(cv):
        return math.inf
    # scipy.special, not scipy.stats: the latter costs ~1 s of import on every `bench` run.
    from scipy.special import stdtrit

    return float(stdtrit(n - 1, 0.975)) * cv / math.sqrt(n)


def _required(slo: Slo, n: int) -> int:
    return min(slo.min_pass, n) if slo.min_pass else n // 2 + 1


def _matches(slo: Slo, name: str) -> bool:
    return name == slo.test or fnmatch.fnmatchcase(name, slo.test)


def _groups(results: Sequence[TestResult]) -> dict[tuple[str, str, str], list[TestResult]]:
    """(name, case, host) -> repeats; ``case`` tells the sizes of a sweep apart (records.CASE_PARAMS)."""
    groups: dict[tuple[str, str, str], list[TestResult]] = {}
    for result in results:
        groups.setdefault((result.name, result.case, result.host), []).append(result)
    return groups


def evaluate(results: Sequence[TestResult], slos: Sequence[Slo]) -> list[Verdict]:
    """One verdict per (SLO, test, host); see the module docstring for the rules."""
    groups = _groups(results)
    verdicts: list[Verdict] = []
    for slo in slos:
        matched = [(key, group) for key, group in groups.items() if _matches(slo, key[0]) or _matches(slo, key[1])]
        if not matched:
            verdicts.append(_verdict(slo, slo.test, "", Outcome.skipped, reason=f"no result for test {slo.test!r}"))
            continue
        for (_name, case, host), group in matched:
            verdicts.append(_evaluate_group(slo, case, host, group))
    return verdicts


def _verdict(
    slo: Slo,
    test: str,
    host: str,
    outcome: Outcome,
    *,
    measured: float | None = None,
    margin: float | None = None,
    **kw,
) -> Verdict:
    return Verdict(
        test=test,
        metric=slo.metric,
        host=host,
        outcome=outcome,
        expected=_expected(slo),
        direction=slo.direction,
        source=slo.source,
        measured=measured,
        margin=margin,
        **kw,
    )


def _expected(slo: Slo) -> float | None:
    if slo.expected is not None:
        return slo.expected
    return slo.minimum if slo.direction == Direction.higher and slo.minimum is not None else slo.maximum


def _evaluate_group(slo: Slo, name: str, host: str, group: list[TestResult]) -> Verdict:
    judged = [r for r in group if r.status != Status.skipped]
    if not judged:
        reasons = sorted({r.reason for r in group if r.reason}) or ["skipped"]
        return _verdict(slo, name, host, Outcome.skipped, reason="; ".join(reasons))
    values: list[float] = []
    passes = 0
    problems: list[str] = []
    warnings: list[str] = []
    spread = 0.0
    unit = ""
    for r in judged:
        if not r.status.measured:
            problems.append(f"{r.status.value}: {r.reason}" if r.reason else r.status.value)
            continue
        metric = r.metric(slo.metric)
        if metric is None:
            problems.append(f"metric {slo.metric!r} not reported")
            continue
        unit = metric.unit
        if not math.isfinite(metric.value):
            problems.append(f"metric {slo.metric!r} is {metric.value}")  # a failing repeat, not a value
            continue
        values.append(metric.value)
        # Warnings the parser raised about the tool's own output (e.g. fio's nonsense
        # sync latencies) travel with the verdict so reports show them.
        warnings.extend(w for w in r.params.get("quality_warnings", "").split("; ") if w)
        ok, _ = judge(metric.value, slo)
        passes += ok
        if metric.samples:
            summary = summarize(metric.samples, unit=metric.unit)
            if summary.noisy:
                warnings.extend(w.message for w in summary.warnings if w.code in ("cv_high", "few_samples"))
                spread = max(spread, _ci_half_width(summary.cv, summary.count))
    n = len(judged)
    k = _required(slo, n)
    if len(values) >= 2:
        mean = statistics.fmean(values)
        if mean and math.isfinite(mean):
            across = statistics.stdev(values) / abs(mean)
            if across >= CV_WARN:
                # Only a warning: absorbing disagreeing repeats is what the k-of-n rule is for.
                warnings.append(f"repeats differ: CV {across:.0%} across {len(values)} repeats")
    measured = statistics.median(values) if values else None
    margin = judge(measured, slo)[1] if measured is not None else None
    outcome = Outcome.passed if passes >= k else Outcome.failed
    unique_warnings = tuple(dict.fromkeys(warnings))
    if unique_warnings and margin is not None and abs(margin) <= spread:
        outcome = Outcome.noisy
    reason = _reason(slo, outcome, measured, margin, unit, passes, n, k, problems)
    return _verdict(
        slo,
        name,
        host,
        outcome,
        measured=measured,
        margin=margin,
        reason=reason,
        warnings=unique_warnings,
        unit=unit,
        passed_repeats=passes,
        total_repeats=n,
    )


def _reason(
    slo: Slo,
    outcome: Outcome,
    measured: float | None,
    margin: float | None,
    unit: str,
    passes: int,
    n: int,
    k: int,
    problems: list[str],
) -> str:
    bounds = (
        " and ".join(f"{'>=' if good == Direction.higher else '<='} {limit:.4g}" for limit, good in limits(slo))
        or "no bound"
    )
    text = ""
    if measured is not None:
        text = f"measured {measured:.4g} {unit}".rstrip() + f", want {bounds}"
        if margin is not None:
            text += f" (margin {margin:+.1%})"
    if n > 1:
        text += f"; {passes} of {n} repeats passed, {k} needed"
    if problems:
        text += ("; " if text else "") + "; ".join(dict.fromkeys(problems))
    if outcome == Outcome.noisy:
        text += "; too noisy to judge: the limit lies inside the value's 95 % confidence interval"
    return text.strip("; ")


def overall(verdicts: Sequence[Verdict]) -> Outcome:
    """A run's outcome: failed if any verdict failed, else noisy if any was, else passed (skipped if all were)."""
    outcomes = {v.outcome for v in verdicts}
    for outcome in (Outcome.failed, Outcome.noisy, Outcome.passed):
        if outcome in outcomes:
            return outcome
    return Outcome.skipped
