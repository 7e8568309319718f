"""The planner's closed forms (model.tail.step_tail, model.reliability.goodput) against
this engine, for every example spec and every fabric kind among its candidates.

Both read the same StepBreakdown (compute CV, hiccups, durability lag included) through
``config_from_breakdown``, so they describe the same step and the same failure process;
the engine is the reference. Tolerances (docs/simulation.md, "Agreement"): mean 0.5%,
p99 2%, CV 10% relative, goodput 0.5 points. 32 runs x 1,250 steps (40,000 pooled steps)
keep the engine's own noise well inside them (p99 and CV of a TCP step with 1% slow
steps are the noisiest; goodput at 16k GPUs sees ~800 failures per run).

Run as a module to print the agreement table of the docs:
``.venv/bin/python -m tests.sim.test_planner_agreement``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.plan import evaluate_candidates
from gpufabric.sim import config_from_breakdown, simulate
from gpufabric.spec import load_spec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
CAT = load_catalog()
STEPS, RUNS, SEED = 1_250, 32, 1
TOL = {"mean": 0.005, "p99": 0.02, "cv": 0.10, "goodput": 0.005}


def _groups() -> dict[tuple[str, str], list]:
    """(spec stem, fabric kind) -> [(candidate, total steps), ...], enough candidates to
    cover every fabric/topology/oversubscription (step time) and every storage backend
    (goodput) of that kind at least once."""
    out = defaultdict(list)
    for path in EXAMPLES:
        spec = load_spec(path, known_ids=CAT.known_ids()).spec
        total = math.ceil(spec.workload.total_tokens / spec.workload.global_batch_tokens)
        covered = set()
        for c in evaluate_candidates(spec, CAT):
            kind = CAT.fabrics[c.fabric].kind
            keys = {(kind, c.fabric, c.topology, c.oversubscription), (kind, c.storage)}
            if not keys <= covered:
                covered |= keys
                out[(path.stem, kind)].append((c, total))
    return dict(out)


GROUPS = _groups()


def errors(cand, total: int) -> dict[str, float]:
    """Engine minus planner: relative for mean, p99, CV; absolute (points/100) for goodput."""
    r = simulate(config_from_breakdown(cand.breakdown, steps=STEPS, runs=RUNS, seed=SEED, train_steps=total))
    st = r.step_time_ms
    return {
        "mean": st.mean * 1e-3 / cand.step_time_s - 1,
        "p99": st.p99 * 1e-3 / cand.step_time_p99_s - 1,
        "cv": st.cv / cand.step_time_cv - 1,
        "goodput": r.goodput - cand.goodput,
    }


def test_every_example_has_every_kind_it_lists():
    kinds = {kind for _, kind in GROUPS}
    assert kinds == {"ib", "roce", "tcp", "efa", "tcpx"}  # efa, tcpx: rented offerings (build-vs-rent example)
    assert {stem for stem, _ in GROUPS} == {p.stem for p in EXAMPLES}


@pytest.mark.parametrize("key", sorted(GROUPS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_planner_agrees_with_the_engine(key):
    for cand, total in GROUPS[key]:
        err = errors(cand, total)
        for what, tol in TOL.items():
            assert abs(err[what]) <= tol, f"{cand.id}: {what} engine vs planner {err[what]:+.4g} (tolerance {tol})"


def _span(errs: list[dict[str, float]], what: str, scale: float, fmt: str) -> str:
    lo, hi = (f"{f(e[what] for e in errs) * scale:{fmt}}" for f in (min, max))
    return lo if lo == hi else f"{lo} to {hi}"


def main() -> None:
    print("| spec | kind | candidates | mean | p99 | CV | goodput (points) |")
    print("|---|---|---|---|---|---|---|")
    for (stem, kind), group in sorted(GROUPS.items()):
        errs = [errors(c, total) for c, total in group]
        print(
            f"| {stem} | {kind} | {len(group)} | {_span(errs, 'mean', 100, '+.3f')}% "
            f"| {_span(errs, 'p99', 100, '+.3f')}% | {_span(errs, 'cv', 100, '+.1f')}% "
            f"| {_span(errs, 'goodput', 100, '+.2f')} |"
        )


if __name__ == "__main__":
    main()
