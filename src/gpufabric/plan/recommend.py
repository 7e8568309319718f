"""Pareto frontier, one recommendation, its rationale and sensitivity.

- Frontier: candidates not dominated on (capex, time to train, step-time CV), all
  minimised; taken over the candidates that meet every requirement, or over all of them
  when none does.
- Recommendation: the frontier candidate best on ``requirements.objective``: by default
  the lowest cost of the whole run (it prices time: a faster design finishes sooner and
  costs fewer GPU-hours), else the lowest capex or the shortest time to train; ties go to
  the other two in turn. A runner-up within the model's uncertainty (2%) on the
  objective is reported as a near-tie. When no design meets every requirement, the
  frontier candidate with the fewest violations comes first.
- Binding constraint: the requirement most often violated by the designs that would
  have been cheaper than the recommendation.
- Sensitivity: the plan again with network latency and jitter doubled, and with storage
  commit latency and jitter doubled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufabric.model.congestion import MODEL_UNCERTAINTY, PLACEMENTS
from gpufabric.plan.evaluate import Candidate

OBJECTIVES = ("capex_usd", "time_to_train_days", "step_time_cv")


def pareto_front(cands: Sequence[Candidate], objectives: Sequence[str] = OBJECTIVES) -> list[str]:
    """Ids of the non-dominated candidates (minimising every objective)."""
    if not cands:
        return []
    x = np.array([[getattr(c, k) for k in objectives] for c in cands], dtype=float)
    le = (x[:, None, :] <= x[None, :, :]).all(axis=2)
    lt = (x[:, None, :] < x[None, :, :]).any(axis=2)
    dominated = np.asarray((le & lt).any(axis=0)).tolist()
    return [c.id for c, d in zip(cands, dominated, strict=True) if not d]


#: Sort keys per objective (requirements.objective), ties broken by the others.
_OBJECTIVE_KEYS = {
    "run_cost": ("run_cost_usd", "time_to_train_days", "capex_usd"),
    "capex": ("capex_usd", "run_cost_usd", "time_to_train_days"),
    "time_to_train": ("time_to_train_days", "run_cost_usd", "capex_usd"),
}
_OBJECTIVE_TEXT = {
    "run_cost": "lowest cost for the whole run",
    "capex": "lowest capex",
    "time_to_train": "shortest time to train",
}


def rank(cands: Sequence[Candidate], objective: str = "run_cost") -> list[Candidate]:
    """Candidates meeting requirements first, then by the objective (run cost, capex or time), then the others."""
    keys = _OBJECTIVE_KEYS[objective]
    return sorted(
        cands, key=lambda c: (not c.meets_requirements, len(c.violations), *(getattr(c, k) for k in keys), c.id)
    )


def _objective_value(c: Candidate, objective: str) -> float:
    return float(getattr(c, _OBJECTIVE_KEYS[objective][0]))


@dataclass(frozen=True, slots=True, kw_only=True)
class Recommendation:
    """The chosen design, the frontier it was taken from, and the reasons in plain language."""

    pareto: list[str]
    recommended: str | None  # None when no design has a layout that fits in memory
    runner_up: str | None
    binding: str | None
    rationale: str


def _req_name(violation: str) -> str:
    return violation.split(" ", 1)[0]


def _money(x: float) -> str:
    if abs(x) >= 1e6:
        return f"${x / 1e6:,.2f}M"
    return f"${x / 1e3:,.1f}k" if abs(x) >= 1e3 else f"${x:,.0f}"


def _slack(best: Candidate, requirements: Any) -> str:
    """The requirement the recommendation is closest to, as 'name at N% of its limit'."""
    if requirements is None:
        return ""
    ratios = []
    for name, value, limit in (
        ("step_time_cv", best.step_time_cv, requirements.max_step_time_cv),
        ("checkpoint_stall_fraction", best.checkpoint_stall_fraction, requirements.max_checkpoint_stall_fraction),
        ("time_to_train_days", best.time_to_train_days, requirements.max_time_to_train_days),
        ("budget_usd", best.capex_usd + best.rent_commitment_usd, requirements.budget_usd),  # one of them is 0
    ):
        if limit:
            ratios.append((value / limit, name))
    if not ratios:
        return ""
    ratio, name = max(ratios)
    return f"Tightest requirement: {name} at {ratio:.0%} of its limit."


def recommend(cands: Sequence[Candidate], requirements: Any = None, placement: str | None = None) -> Recommendation:
    """Pick one design and explain the choice in plain language.

    Args:
        requirements: the spec's requirements, to name the tightest one (optional).
        placement: the spec's options.placement, named on the recommendation line.
    """
    fits = [c for c in cands if not any(_req_name(v) == "memory" for v in c.violations)]
    if not fits:
        closest = min(cands, key=lambda c: c.memory_gb - c.memory_capacity_gb) if cands else None
        text = "No design is recommended: no layout fits in GPU memory."
        if closest is not None:
            text += f" Closest: {closest.id} with {closest.layout.text}: " + closest.violations[0] + "."
        return Recommendation(pareto=[], recommended=None, runner_up=None, binding="memory", rationale=text)
    cands = fits  # a layout that does not fit is never recommended
    objective = getattr(requirements, "objective", "run_cost") or "run_cost"
    feasible = [c for c in cands if c.meets_requirements]
    # A design whose model outputs are NaN/inf/negative cannot be judged: never recommended.
    sound = [c for c in cands if not any(v.startswith("model_output") for v in c.violations)]
    if not sound:
        text = (
            "No design is recommended: the models give no finite answer for any design"
            f" ({cands[0].violations[0]}); check the spec's and catalog's values for extremes."
        )
        return Recommendation(pareto=[], recommended=None, runner_up=None, binding="model_output", rationale=text)
    pool = feasible or sound
    front = pareto_front(pool)
    on_front_ids = set(front)
    on_front = [c for c in pool if c.id in on_front_ids]
    best = rank(on_front, objective)[0]  # with no feasible design: fewest violations, then the objective
    others = [c for c in rank(pool, objective) if c.id != best.id]
    # The runner-up answers "why not the other fabric?" first, then "why not the other storage?".
    runner = next(
        (c for c in others if c.fabric != best.fabric),
        next((c for c in others if c.storage != best.storage), others[0] if others else None),
    )
    cheaper = [c for c in cands if c.run_cost_usd < best.run_cost_usd and not c.meets_requirements]
    counts = Counter(_req_name(v) for c in cheaper for v in c.violations)
    binding = counts.most_common(1)[0][0] if counts else None

    under = f" under placement {PLACEMENTS.get(placement, placement)}" if placement else ""
    lines = _headline(best, cands, feasible, requirements, objective, under)
    if runner is not None:
        lines += _runner_up_lines(best, runner, objective)
    if binding:
        n = sum(1 for c in cheaper if any(_req_name(v) == binding for v in c.violations))
        lines.append(f"Binding constraint: {binding} rules out {n} cheaper design(s).")
    elif feasible:
        lines.append("No requirement rules out a cheaper design.")
    if feasible:
        tight = _slack(best, requirements)
        if tight:
            lines.append(tight)
    lines += _interval_notes(best)
    return Recommendation(
        pareto=front,
        recommended=best.id,
        runner_up=runner.id if runner else None,
        binding=binding,
        rationale=" ".join(lines),
    )


def _headline(
    best: Candidate,
    cands: Sequence[Candidate],
    feasible: Sequence[Candidate],
    requirements: Any,
    objective: str,
    under: str,
) -> list[str]:
    """The recommendation line, or with no feasible design the closest one and what fails most."""
    lines = []
    if feasible:
        lines.append(
            f"Recommended {best.id}{under}: of the {len(feasible)} of {len(cands)} designs that meet every requirement it has the "
            f"{_OBJECTIVE_TEXT[objective]} (objective {objective}; run {_money(best.run_cost_usd)}, capex {_money(best.capex_usd)}, "
            f"{best.time_to_train_days:.1f} days, step {best.step_time_s:.3g} s with CV {best.step_time_cv:.2%}, "
            f"goodput {best.goodput:.1%})."
        )
    else:
        lines.append(
            f"No design meets every requirement. Closest: {best.id}{under} with {len(best.violations)} violation(s): "
            + "; ".join(best.violations)
            + "."
        )
        most = Counter(_req_name(v) for c in cands for v in c.violations).most_common(1)[0][0]
        all_fail = all(any(_req_name(v) == most for v in c.violations) for c in cands)
        msg = f"{'Every' if all_fail else 'Most'} candidate{'' if all_fail else 's'} fail{'s' if all_fail else ''} on {most}"
        if most == "time_to_train_days":
            bd = best.breakdown
            floor_days = best.time_to_train_days * (bd.compute_s + bd.bubble_s) / best.step_time_s
            msg += (
                f": compute {bd.compute_s:.3g} s + pipeline bubble {bd.bubble_s:.3g} s of a {best.step_time_s:.3g} s step"
                f" already take {floor_days:.0f} days"
            )
            limit = getattr(requirements, "max_time_to_train_days", None)
            if limit and floor_days > limit:
                msg += (
                    "; no fabric or storage can fix that: raise MFU or microbatches, add nodes, or relax the deadline"
                )
        lines.append(msg + ".")
    return lines


def _runner_up_lines(best: Candidate, runner: Candidate, objective: str) -> list[str]:
    """How the runner-up differs, and a caveat when the two tie within the model's uncertainty."""
    lines = []
    diffs = []
    if runner.run_cost_usd > best.run_cost_usd + 1:
        diffs.append(f"costs {_money(runner.run_cost_usd - best.run_cost_usd)} more for the run")
    if runner.time_to_train_days > best.time_to_train_days * 1.001:
        diffs.append(f"takes {runner.time_to_train_days - best.time_to_train_days:.1f} more days")
    if runner.capex_usd < best.capex_usd:
        diffs.append(f"saves {_money(best.capex_usd - runner.capex_usd)} capex")
    if runner.step_time_cv > best.step_time_cv * 1.05:
        diffs.append(f"has a higher step-time CV ({runner.step_time_cv:.2%})")
    if runner.violations:
        diffs.append("violates " + ", ".join(_req_name(v) for v in runner.violations))
    if runner.storage != best.storage and runner.checkpoint_write_s != best.checkpoint_write_s:
        diffs.append(f"writes a checkpoint in {runner.checkpoint_write_s:.3g} s vs {best.checkpoint_write_s:.3g} s")
    if runner.comm_exposed_s > best.comm_exposed_s * 1.01:
        diffs.append(f"exposes {runner.comm_exposed_s:.3g} s of communication per step vs {best.comm_exposed_s:.3g} s")
    lines.append(f"Runner-up {runner.id}: " + ("; ".join(diffs) if diffs else "equivalent within the model") + ".")
    a, b = _objective_value(best, objective), _objective_value(runner, objective)
    if a > 0 and runner.meets_requirements and b <= a * (1 + MODEL_UNCERTAINTY):
        lines.append(
            f"Caveat: the runner-up is within {b / a - 1:.1%} of the recommendation on {objective}, inside the"
            f" model's uncertainty (about {MODEL_UNCERTAINTY:.0%}: congestion, tail and price estimates);"
            " treat them as a tie and decide on what the model leaves out (vendor, operations, lead time)."
        )
    return lines


def _interval_notes(best: Candidate) -> list[str]:
    """Where the recommended design's run cost goes, and what its checkpoint interval costs."""
    lines = []
    if best.run_cost_usd > 0:
        lines.append(
            f"Of its run cost, {_money(best.network_wait_usd)} is GPU time waiting on communication (exposed collectives,"
            f" tail), {_money(best.storage_wait_usd)} blocked on checkpoints and {_money(best.failure_usd)} lost to"
            f" {best.failures_expected:,.0f} expected failures (each redoes half an interval plus the durability lag"
            " on average, then restarts and restores)."
        )
    if best.goodput_at_optimal > best.goodput + 0.005:
        lines.append(
            f"Checkpoints every {best.checkpoint_interval_min:.3g} min give goodput {best.goodput:.1%}; the optimum for"
            f" this design is every {best.optimal_interval_min:.3g} min with {best.goodput_at_optimal:.1%}"
            " (exact goodput, Daly 2006): set checkpoint.interval_min: auto."
        )
    if best.min_interval_min > best.daly_interval_min:
        lines.append(
            f"The checkpoint interval is bounded below by {best.min_interval_min:.3g} min, the time a checkpoint"
            f" takes to become durable (one in flight at a time); Young/Daly's unbounded interval would be"
            f" {best.daly_interval_min:.3g} min."
        )
    bd = best.breakdown
    if not bd.checkpoint_async and best.young_interval_min * 60 < 0.5 * bd.checkpoint_interval_s:
        lines.append(
            f"Checkpoints block for {bd.checkpoint_block_s:.3g} s each; Young's interval sqrt(2 delta M) is "
            f"{best.young_interval_min:.0f} min, well under the spec's {bd.checkpoint_interval_s / 60:.0f} min."
        )
    return lines


def sensitivity_text(
    base: Sequence[Candidate], rec: Recommendation, label: str, alt: Sequence[Candidate], requirements: Any = None
) -> dict | None:
    """How the recommendation changes when ``label`` doubles (None when nothing was recommended)."""
    if rec.recommended is None:
        return None
    alt_rec = recommend(alt, requirements)  # only its choice is used: no placement text needed
    before = next(c for c in base if c.id == rec.recommended)
    after = next(c for c in alt if c.id == rec.recommended)
    delta = after.step_time_s / before.step_time_s - 1
    stall = after.checkpoint_stall_fraction - before.checkpoint_stall_fraction
    if alt_rec.recommended == rec.recommended:
        text = f"With {label} x2, the recommendation stays {rec.recommended} (step time {delta:+.2%}"
    else:
        text = f"With {label} x2, the recommendation changes to {alt_rec.recommended} (current choice: step time {delta:+.2%}"
    text += f", p99 {after.step_time_p99_s / before.step_time_p99_s - 1:+.2%}, stall {stall:+.4f}"
    text += f", meets requirements: {'yes' if after.meets_requirements else 'no'})."
    return {
        "condition": f"{label} x2",
        "recommended": alt_rec.recommended,
        "changed": alt_rec.recommended != rec.recommended,
        "step_time_change": delta,
        "text": text,
    }


#: Extra relative uncertainty of a fabric whose figures are catalog defaults when the plan
#: compares it with fabrics calibrated on measurements [U, estimate: the catalog's
#: uncalibrated fabrics (RoCE, EFA, TCP) have no public table they were fitted on, and a
#: cluster's own NIC efficiency differs from a catalog default by 10% or more (issue 25:
#: clusters 14-20% below the catalog's efficiency)].
UNCALIBRATED_UNCERTAINTY = 0.10


#: The fabric fields ``gpufabric calibrate`` fits (a user's price override is not a calibration).
_PERFORMANCE_FIELDS = ("nic_efficiency", "nic_line_gbps", "proxy_us", "net_latency_scale")


def calibrated_fabrics(catalog: Any, fabrics: Sequence[str]) -> list[str]:
    """The fabrics among ``fabrics`` whose catalog figures were measured (``gpufabric
    calibrate`` writes them with tag ``user``)."""
    return sorted(
        f
        for f in set(fabrics)
        if any(
            (prov := catalog.fabric(f).provenance.get(key)) is not None and prov.tag == "user"
            for key in _PERFORMANCE_FIELDS
        )
    )


def calibration_text(
    cands: Sequence[Candidate],
    recommended: str | None,
    catalog: Any,
    replan: Any,
    objective: str = "run_cost",
) -> str:
    """``uncalibrated: <fabrics>`` when the plan compares calibrated and uncalibrated fabrics.

    The uncalibrated ones' uncertainty is widened by UNCALIBRATED_UNCERTAINTY; a rival on
    the other side of the calibration line within that band is named; and ``replan`` (the
    recommended id of the plan with the calibrated fabrics back at their shipped figures,
    called only here) tells whether the choice flips only because of the calibration.
    """
    fabrics = sorted({c.fabric for c in cands})
    calibrated = calibrated_fabrics(catalog, fabrics)
    uncal = [f for f in fabrics if f not in calibrated]
    best = next((c for c in cands if c.id == recommended), None)
    if not calibrated or not uncal or best is None:
        return ""
    band = MODEL_UNCERTAINTY + UNCALIBRATED_UNCERTAINTY
    lines = [
        f"uncalibrated: {', '.join(uncal)} (only {', '.join(calibrated)} {'is' if len(calibrated) == 1 else 'are'}"
        f" calibrated from measurements; the uncalibrated fabrics' predictions carry about {band:.0%} uncertainty,"
        f" not {MODEL_UNCERTAINTY:.0%})."
    ]
    other_side = uncal if best.fabric in calibrated else calibrated
    rival = next((c for c in rank(cands, objective) if c.fabric in other_side and c.meets_requirements), None)
    base = replan()
    base_fabric = next((c.fabric for c in cands if c.id == base), None)
    if (
        base_fabric is not None
        and base_fabric != best.fabric
        and (base_fabric in calibrated) != (best.fabric in calibrated)
    ):
        measured = best.fabric if best.fabric in calibrated else base_fabric
        guessed = base_fabric if measured == best.fabric else best.fabric
        lines.append(
            f"The choice flips from {base_fabric} (shipped figures) to {best.fabric} only because {measured} is"
            f" calibrated and {guessed} is not: calibrate {guessed} on a run of its own"
            f" (gpufabric calibrate RUN --fabric {guessed}) before deciding."
        )
    elif rival is not None:
        a, b = _objective_value(best, objective), _objective_value(rival, objective)
        if a > 0 and b <= a * (1 + band):
            lines.append(
                f"{rival.id} is within {b / a - 1:.1%} of the recommendation on {objective}, inside that uncertainty:"
                f" calibrate {rival.fabric if best.fabric in calibrated else best.fabric} too before treating the"
                " choice as settled."
            )
    return " ".join(lines)
