"""The planner's closed-form tail model (gpufabric.model.tail via plan) against this engine.

Both describe the same step: a barrier over N ranks with Normal compute jitter, S
dependent latency steps each waiting for the slowest of p links, rare hiccups. Where the
hiccup is small next to the barrier spread (RDMA fabrics) they must agree closely; the
TCP disagreement (a 200 ms RTO hiccup) is documented in docs/simulation.md.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama3-70b-1k.yaml"

plan = pytest.importorskip("gpufabric.plan")


@pytest.mark.skipif(not EXAMPLE.exists(), reason="example spec not shipped")
def test_planner_tail_matches_the_engine_on_rdma_fabrics():
    from gpufabric.catalog import load_catalog
    from gpufabric.sim import Hiccup, config_from_breakdown, simulate
    from gpufabric.spec import load_spec

    spec = load_spec(EXAMPLE).spec
    catalog = load_catalog()
    gpu = catalog.gpus[spec.cluster.gpu]
    checked = 0
    seen = set()
    for cand in plan.evaluate_candidates(spec, catalog):
        fabric = catalog.fabrics[cand.fabric]
        if fabric.kind == "tcp" or cand.fabric in seen:
            continue
        seen.add(cand.fabric)
        cfg = config_from_breakdown(
            cand.breakdown, steps=20_000, seed=1, compute_cv=gpu.compute_jitter_cv,
            hiccup=Hiccup(prob=fabric.hiccup_prob, delay_s=fabric.hiccup_ms * 1e-3),
        )
        r = simulate(cfg)
        assert r.step_time_ms.mean * 1e-3 == pytest.approx(cand.step_time_s, rel=1e-3), cand.id
        assert r.step_time_ms.p99 * 1e-3 == pytest.approx(cand.step_time_p99_s, rel=5e-3), cand.id
        assert r.step_time_ms.cv == pytest.approx(cand.step_time_cv, rel=0.1), cand.id
        assert math.isfinite(r.goodput)
        checked += 1
    assert checked >= 1
