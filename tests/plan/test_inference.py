"""Serving planner: sizing by simulation, SLOs, fabric and storage effects, infeasible specs."""

from __future__ import annotations

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError
from gpufabric.plan.inference import make_serving_plan as _make_plan
from gpufabric.sim.serving import simulate_serving
from gpufabric.spec.inference import InferenceSpec

CAT = load_catalog([])


def make_serving_plan(spec, catalog, **kw):
    return _make_plan(spec, catalog, simulate=simulate_serving, **kw)


def _spec(**over) -> InferenceSpec:
    workload = {
        "kind": "inference",
        "model": {"params": 70.6e9, "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8},
        "traffic": {
            "rate_rps": 10,
            "prompt_tokens": {"mean": 2048, "cv": 0.5},
            "output_tokens": {"mean": 256, "cv": 0.5},
        },
        "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.015},
        "replica": {"tp": 8},
    }
    workload.update(over.pop("workload", {}))
    doc = {
        "name": "t",
        "cluster": {"nodes": over.pop("nodes", 8), "gpu": "h100-sxm"},
        "workload": workload,
        "options": {"fabrics": ["ib-ndr", "tcp-100g"], "storage": ["local-nvme", "nfs"]},
    }
    return InferenceSpec.model_validate(doc)


PLAN = make_serving_plan(_spec(), CAT, requests=5000)
BY_ID = {c.id: c for c in PLAN.candidates}


def test_every_design_is_listed_and_the_recommendation_meets_the_slo():
    assert len(PLAN.candidates) == 2 * 2 * 2  # modes x fabrics x storage
    rec = BY_ID[PLAN.recommended]
    assert rec.meets_slo and rec.fits_cluster and rec.ttft_p99_s <= 1.0 and rec.tpot_p99_s <= 0.015
    assert rec.usd_per_million_output_tokens == min(
        c.usd_per_million_output_tokens for c in PLAN.candidates if c.meets_slo
    )
    assert PLAN.recommended in PLAN.rationale


def test_fabric_sets_kv_transfer_and_storage_sets_cold_start():
    ib, tcp = BY_ID["disaggregated/ib-ndr/local-nvme"], BY_ID["disaggregated/tcp-100g/local-nvme"]
    assert ib.kv_transfer_s_at_mean_prompt < tcp.kv_transfer_s_at_mean_prompt
    assert ib.kv_transfer_p99_s < tcp.kv_transfer_p99_s
    assert BY_ID["colocated/ib-ndr/local-nvme"].kv_transfer_p99_s == 0
    assert BY_ID["colocated/ib-ndr/nfs"].weight_load_s > BY_ID["colocated/ib-ndr/local-nvme"].weight_load_s


def test_disaggregation_removes_prefill_interference_from_tpot():
    colo, dis = BY_ID["colocated/ib-ndr/local-nvme"], BY_ID["disaggregated/ib-ndr/local-nvme"]
    # With the TPOT SLO binding, colocated serving needs more replicas to dilute prefill stalls.
    assert colo.gpus > dis.gpus


def test_higher_rate_never_needs_fewer_gpus():
    low = make_serving_plan(
        _spec(
            workload={
                "traffic": {
                    "rate_rps": 5,
                    "prompt_tokens": {"mean": 2048, "cv": 0.5},
                    "output_tokens": {"mean": 256, "cv": 0.5},
                }
            }
        ),
        CAT,
        requests=5000,
    )
    low_by = {c.id: c for c in low.candidates}
    for cid, c in BY_ID.items():
        assert low_by[cid].gpus <= c.gpus


def test_infeasible_rate_has_no_recommendation():
    plan = make_serving_plan(_spec(nodes=1), CAT, requests=3000)
    assert plan.recommended is None
    assert all(not c.meets_slo for c in plan.candidates)
    assert "No design meets" in plan.rationale


def test_model_that_does_not_fit_is_an_input_error():
    spec = _spec(workload={"replica": {"tp": 1, "pp": 1}})
    with pytest.raises(InputError, match="KV cache"):
        make_serving_plan(spec, CAT, requests=1000)


def test_search_sizes_tp_for_ttft_and_closed_loop_plans():
    # 70B fp8 on H200 at 50 requests/s, 4k prompts: TP 1-2 cannot prefill a long prompt in 0.5 s,
    # so the search must size a wider TP (the bar: within SLOs on at most 96 of 128 GPUs).
    from gpufabric.spec.inference import load_inference_spec, read_located
    from tests.conftest import EXAMPLES

    spec = load_inference_spec(read_located(EXAMPLES / "serving" / "llama3-70b-fp8-h200-50rps.yaml"))
    plan = make_serving_plan(spec, CAT)
    rec = {c.id: c for c in plan.candidates}[plan.recommended]
    assert rec.meets_slo and rec.gpus <= 96 and rec.tp >= 4
    assert any(r.status == "infeasible" and r.tp == 1 for r in plan.search)
    assert sum(r.status == "winner" for r in plan.search) == 1


def test_concurrency_is_an_alternative_to_rate():
    spec = _spec(
        workload={
            "traffic": {"concurrency": 32, "prompt_tokens": {"mean": 1000}, "output_tokens": {"mean": 200}},
            "disaggregation": "none",
        }
    )
    plan = make_serving_plan(spec, CAT)
    assert plan.concurrency == 32 and plan.rate_rps is None
    c = plan.candidates[0]
    assert c.output_tokens_per_s > 0 and c.itl_p99_s >= c.itl_p50_s > 0
    with pytest.raises(ValueError, match="exactly one"):
        _spec(
            workload={
                "traffic": {
                    "rate_rps": 1,
                    "concurrency": 2,
                    "prompt_tokens": {"mean": 10},
                    "output_tokens": {"mean": 10},
                }
            }
        )


def test_no_design_that_meets_is_cheaper_than_the_winner_after_the_final_check():
    """A design that looks cheaper at sizing is checked too before another wins: the search
    never reports a cheaper design that meets the SLOs beside a dearer winner."""
    from gpufabric.catalog import load_catalog
    from gpufabric.plan.inference import make_serving_plan
    from gpufabric.sim.serving import simulate_serving
    from gpufabric.spec.inference import load_inference_spec, read_located
    from tests.conftest import EXAMPLES

    spec = load_inference_spec(read_located(EXAMPLES / "serving" / "llama3-70b-fp8-h200-50rps.yaml"))
    plan = make_serving_plan(spec, load_catalog(), simulate=simulate_serving)
    (winner,) = [r for r in plan.search if r.status == "winner"]
    cheaper = [
        r
        for r in plan.search
        if r.status == "meets" and r.usd_per_million_output_tokens < winner.usd_per_million_output_tokens
    ]
    assert not cheaper, cheaper


class _Summary:
    def __init__(self, s):
        self.s = s

    def summary(self):
        return self.s


def test_the_final_check_stops_once_the_replicas_it_needs_are_priced_out():
    """A check that would need more replicas than could still win ends there, unsimulated; with
    no ceiling it goes on until the design passes (issue 32: one 2,000-request run fewer)."""
    from gpufabric.plan.serving_search import VERIFY_REQUESTS_PER_ENGINE, Layout, _Sizer

    spec = _spec(workload={"disaggregation": "none"})
    runs = []

    def simulate(cfg):  # passes from 4 replicas on, at any sample size
        runs.append((cfg.prefill_replicas, cfg.engine_requests))
        good = cfg.prefill_replicas >= 4
        keys = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p99_s")
        return _Summary({k: (0.001 if good else 9.0) for k in keys})

    lay = Layout(tp=8, pp=1, ep=1, dp_attention=False, max_batch=256, token_budget=8192)
    sizer = _Sizer(spec, CAT, simulate, 0)
    assert sizer.verify(lay, "ib-ndr", 2, 0, lambda p, d: p < 3) == (3, 0, None)
    assert runs == [(2, VERIFY_REQUESTS_PER_ENGINE)]
    p, d, s = sizer.verify(lay, "ib-ndr", 2, 0)
    assert (p, d) == (4, 0) and s is not None and sizer.ok(s)
    assert runs[1:] == [(3, VERIFY_REQUESTS_PER_ENGINE), (4, VERIFY_REQUESTS_PER_ENGINE)]
