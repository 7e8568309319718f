"""What current training recipes run: Meta's 405B layout, NVL72 racks, context parallelism,
anchors at their own batch, ZeRO-3 per microbatch, and the search's efficiency envelope."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError
from gpufabric.plan import evaluate_candidates, make_plan
from gpufabric.plan.anchor import solve_anchor
from gpufabric.spec import load_spec
from gpufabric.spec.models import Spec
from tests.conftest import EXAMPLES

CAT = load_catalog()
LLAMA_405B = {
    "params": 405e9,
    "layers": 126,
    "hidden": 16384,
    "heads": 128,
    "kv_heads": 8,
    "ffn_hidden": 53248,
    "gated_mlp": True,
    "seq_len": 8192,
}
LLAMA_70B = {
    "params": 70.6e9,
    "layers": 80,
    "hidden": 8192,
    "heads": 64,
    "kv_heads": 8,
    "ffn_hidden": 28672,
    "gated_mlp": True,
    "seq_len": 8192,
}


def _spec(*, nodes, gpu="h100-sxm", gpn=8, model=LLAMA_405B, par, batch=16777216, **workload):
    return Spec.model_validate(
        {
            "name": "t",
            "cluster": {"nodes": nodes, "gpus_per_node": gpn, "gpu": gpu},
            "workload": {
                "model": model,
                "parallelism": par,
                "global_batch_tokens": batch,
                "total_tokens": 15.6e12,
                **workload,
            },
            "options": {"fabrics": ["roce-400g"], "storage": ["nvmeof-rdma"], "oversubscription": [1]},
        }
    )


def test_metas_405b_layout_fits_in_80_gb():
    """Llama 3 paper sec. 3.3.2: TP 8, PP 16, DP 128, interleaved, no recomputation at 8k."""
    spec = _spec(
        nodes=2048,
        par={"tp": 8, "pp": 16, "dp": 128, "virtual_stages": 4, "zero_stage": 1},
        recompute="none",
        throughput={"mfu": 0.41},
    )
    cand = evaluate_candidates(spec, CAT)[0]
    assert cand.memory_gb <= 80.0, cand.violations
    assert cand.memory_gb > 60.0  # activations of all 16 microbatches of 7 layers are held
    assert not [v for v in cand.violations if v.startswith("memory")]
    # With the ZeRO paper's 16-bit gradients it fits more easily; without the distributed
    # optimizer (18 B/param on 3 GB of parameters per GPU) it does not.
    assert (
        evaluate_candidates(
            spec.model_copy(update={"workload": spec.workload.model_copy(update={"main_grads": "bf16"})}), CAT
        )[0].memory_gb
        < cand.memory_gb
    )
    z0 = spec.model_copy(
        update={
            "workload": spec.workload.model_copy(
                update={"parallelism": spec.workload.parallelism.model_copy(update={"zero_stage": 0})}
            )
        }
    )
    assert evaluate_candidates(z0, CAT)[0].memory_gb > 80.0


def test_shipped_405b_example_lands_near_metas_gpu_hours():
    spec = load_spec(EXAMPLES / "llama3-405b-16k.yaml").spec
    plan = make_plan(spec, CAT)
    best = plan.get(plan.recommended)
    gpu_hours = best.time_to_train_days * 24 * spec.num_gpus
    assert gpu_hours == pytest.approx(30.84e6, rel=0.10)  # Llama 3 model card
    assert best.layout.recompute == "none" and best.memory_gb <= 80


def test_gb200_nvl72_rack_plans_tp8_on_nvlink():
    spec = load_spec(EXAMPLES / "gb200-nvl72-70b.yaml").spec
    assert spec.cluster.gpus_per_node == 4 and spec.num_gpus == 72
    plan = make_plan(spec, CAT)
    best = plan.get(plan.recommended)
    assert best.layout.tp == 8 and best.meets_requirements
    # The same TP 8 over 4-GPU nodes without an NVL72 domain crosses the NIC: far more exposed comm.
    b200 = _spec(
        nodes=18,
        gpu="b200",
        gpn=4,
        model=LLAMA_70B,
        par={"tp": 8, "pp": 1, "dp": 9, "zero_stage": 1, "allow_cross_node_tp": True},
        batch=4718592,
    )
    cross = evaluate_candidates(b200, CAT)[0]
    nvl = next(c for c in evaluate_candidates(spec, CAT) if c.fabric == "roce-400g")
    assert cross.comm_exposed_s > 2 * nvl.comm_exposed_s


def test_tp_beyond_the_nvlink_domain_is_refused_unless_allowed():
    spec = _spec(nodes=4, model=LLAMA_70B, par={"tp": 16, "pp": 1, "dp": 2}, batch=65536)
    with pytest.raises(InputError, match="exceeds the NVLink domain of 8 GPUs"):
        make_plan(spec, CAT)
    ok = _spec(nodes=8, gpu="gb200", gpn=4, model=LLAMA_70B, par={"tp": 16, "pp": 1, "dp": 2}, batch=65536)
    assert evaluate_candidates(ok, CAT)  # 32 GPUs of one rack: inside the domain
    # Two racks (144 GPUs): groups of 16 do not tile 72, so some would straddle the racks.
    two = _spec(nodes=36, gpu="gb200", gpn=4, model=LLAMA_70B, par={"tp": 16, "pp": 1, "dp": 9}, batch=9 * 8192 * 4)
    with pytest.raises(InputError, match="does not tile"):
        make_plan(two, CAT)


def test_context_parallelism_divides_activations_and_costs_ring_traffic():
    par = {"tp": 8, "pp": 16, "dp": 8, "virtual_stages": 4, "zero_stage": 1}
    long = dict(LLAMA_405B, seq_len=131072)
    cp16 = evaluate_candidates(_spec(nodes=2048, model=long, par={**par, "cp": 16}), CAT)[0]
    assert cp16.memory_gb <= 80.0
    assert cp16.layout.cp == 16 and "cp16" in cp16.layout.text
    # Without cp the same sequence needs 16x the activations (8 x 16 = 128 GPUs short of nothing).
    no_cp = _spec(nodes=128, model=long, par={**par}, batch=16777216)
    assert evaluate_candidates(no_cp, CAT)[0].memory_gb > 5 * cp16.memory_gb


def test_cross_node_context_parallelism_exposes_traffic():
    """A short sequence split over nodes cannot hide its key/value passes behind attention."""
    from gpufabric.plan.candidates import prepare
    from gpufabric.plan.evaluate import evaluate_table
    from gpufabric.plan.table import build_table

    spec = _spec(nodes=4, model=LLAMA_70B, par={"tp": 8, "cp": 4, "pp": 1, "dp": 1}, batch=32768)
    p = prepare(spec, CAT)
    out = evaluate_table(build_table(spec, CAT, p.designs[:1], p.choice.layouts[:1], compute_efficiency=0.5))
    assert float(out.cp_exposed_s[0]) > 0.0
    inside = _spec(nodes=1, gpn=4, gpu="gb200", model=LLAMA_70B, par={"tp": 1, "cp": 4, "pp": 1, "dp": 1}, batch=32768)
    q = prepare(inside, CAT)
    out_in = evaluate_table(build_table(inside, CAT, q.designs[:1], q.choice.layouts[:1], compute_efficiency=0.5))
    assert float(out_in.cp_exposed_s[0]) < float(out.cp_exposed_s[0])


def test_the_search_covers_cp_when_asked():
    spec = _spec(
        nodes=256,
        model=dict(LLAMA_70B, seq_len=65536),
        par={"tp": 8, "cp": "auto", "pp": "auto", "dp": "auto", "zero_stage": 1},
        batch=16777216,
        throughput={"compute_efficiency": 0.5},
        recompute="none",
    )
    plan = make_plan(spec, CAT)
    best = plan.get(plan.recommended) if plan.recommended else plan.candidates[0]
    assert best.layout.cp > 1  # 64k tokens of 70B activations do not fit on one GPU's slice
    assert "compute efficiency 0.50-0.50 assumed" in best.layout_note


def _gpt3(gpus: int, batch_seqs: int, measured: dict | None = None) -> Spec:
    model = {
        "params": 12 * 96 * 12288**2 + 2 * 51200 * 12288,
        "layers": 96,
        "hidden": 12288,
        "heads": 96,
        "seq_len": 2048,
        "vocab": 51200,
    }
    th = {"tflops_per_gpu": 180.0, "flops": "megatron"}
    if measured is not None:
        th["measured_at"] = measured
    return _spec(
        nodes=gpus // 8,
        model=model,
        par={"tp": 4, "pp": 8, "dp": gpus // 32},
        batch=batch_seqs * 2048,
        throughput=th,
        recompute="full",
    )


def test_an_anchor_is_evaluated_at_its_own_batch():
    point = {"gpus": 512, "tp": 4, "pp": 8, "dp": 16, "recompute": "full"}
    own = solve_anchor(_gpt3(512, 2048, point), CAT)
    # Predicting 128 GPUs at 256 sequences from the 512-GPU run at 2,048 sequences: with its
    # batch the anchor solves the same compute efficiency as the run itself ...
    moved = solve_anchor(_gpt3(128, 256, {**point, "global_batch_tokens": 2048 * 2048}), CAT)
    assert moved.compute_efficiency == pytest.approx(own.compute_efficiency, rel=1e-6)
    assert moved.anchor_step_s == pytest.approx(own.anchor_step_s, rel=1e-9)
    assert "4,194,304 tokens per step of 2,048" in moved.text
    # ... without it the anchor is modelled at 1/8 of its work and solves something else.
    lost = solve_anchor(_gpt3(128, 256, point), CAT)
    # (its bubble, 7 of 16 microbatches instead of 7 of 128, would eat the figure).
    assert abs(lost.compute_efficiency / own.compute_efficiency - 1) > 0.2


def test_zero3_gathers_every_microbatch():
    from gpufabric.plan.evaluate import evaluate_table
    from gpufabric.plan.layouts import spec_layout
    from gpufabric.plan.table import Design, build_table

    d = [Design(fabric="roce-400g", topology="rail-optimized", oversubscription=1.0, storage="nvmeof-rdma")]

    def dp_time(zero: int, mbs: int) -> float:
        spec = _spec(
            nodes=8,
            model=dict(LLAMA_70B, seq_len=4096),
            par={"tp": 1, "pp": 1, "dp": 64, "zero_stage": zero, "microbatch_size": mbs},
            batch=64 * 4096 * 8,
        )
        return float(
            evaluate_table(build_table(spec, CAT, d, [spec_layout(spec)], compute_efficiency=0.5)).dp_allreduce_s[0]
        )

    # ZeRO 3: 8 microbatches of 1 gather 4x as often as 2 microbatches of 4; ZeRO 1 once per step.
    assert dp_time(3, 1) == pytest.approx(4 * dp_time(3, 4), rel=1e-6)
    assert dp_time(1, 1) == pytest.approx(dp_time(1, 4), rel=1e-6)
    assert dp_time(3, 1) > 3 * dp_time(1, 1)


def test_search_beyond_the_anchor_says_so():
    """A 70B H200 run measured at 42% MFU: the search may find layouts the anchor did not
    measure; the note names the efficiency range and any extrapolation."""
    spec = _spec(
        nodes=64,
        gpu="h200",
        model=LLAMA_70B,
        par={
            "tp": "auto",
            "pp": "auto",
            "dp": "auto",
            "virtual_stages": "auto",
            "microbatch_size": "auto",
            "zero_stage": "auto",
        },
        batch=4194304,
        recompute="auto",
        throughput={"mfu": 0.42, "measured_at": {"gpus": 512, "tp": 8, "pp": 4, "dp": 16, "fabric": "roce-400g"}},
    )
    plan = make_plan(spec, CAT)
    best = plan.get(plan.recommended) if plan.recommended else plan.candidates[0]
    assert "assumed across them (the anchor moved by the compute-efficiency model)" in best.layout_note
    assert best.mfu < 0.57
    if best.mfu > 0.42 * 1.10 or best.layout.tp != 8:
        assert "outside the anchor's envelope" in best.layout_note


@settings(max_examples=25, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    cp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2, 4]),
    mbs=st.sampled_from([1, 2]),
    gpu=st.sampled_from(["a100-sxm", "h100-sxm", "b200", "gb200"]),
    precision=st.sampled_from(["bf16", "fp8"]),
)
def test_no_layout_beats_its_ceilings(tp, cp, pp, mbs, gpu, precision):
    """Without a figure: the compute efficiency stays under the generation's GEMM ceiling,
    and the end-to-end 6PT MFU under the compute efficiency (6PT <= executed FLOPs, step >= compute)."""
    from gpufabric.model import efficiency as eff

    gpn = 4 if gpu == "gb200" else 8
    gpus = 64
    assume(tp * cp * pp <= gpus)
    dp = gpus // (tp * cp * pp)
    spec = _spec(
        nodes=gpus // gpn,
        gpu=gpu,
        gpn=gpn,
        model=dict(LLAMA_70B, layers=16, params=70.6e9 * 16 / 80),
        par={"tp": tp, "cp": cp, "pp": pp, "dp": dp, "microbatch_size": mbs, "zero_stage": 1},
        batch=dp * mbs * 4 * 8192,
        precision=precision,
    )
    if gpu == "a100-sxm":  # a PCIe Gen4 server feeds 200G NICs
        spec = spec.model_copy(update={"options": spec.options.model_copy(update={"fabrics": ["ib-hdr"]})})
    cand = evaluate_candidates(spec, CAT)[0]
    ceiling = eff.GEMM_EFFICIENCY[eff.generation_of(gpu)][precision]
    assert 0 < cand.compute_efficiency <= ceiling
    assert 0 < cand.mfu <= cand.compute_efficiency + 1e-9


def test_kv_heads_must_divide_the_heads():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="not a multiple of kv_heads = 3"):
        _spec(nodes=1, model=dict(LLAMA_70B, kv_heads=3), par={"tp": 8, "pp": 1, "dp": 1}, batch=8192)
    with pytest.raises(ValidationError, match=r"heads = 64 \(hidden / 128\)"):
        _spec(nodes=1, model={**LLAMA_70B, "heads": None, "kv_heads": 128}, par={"tp": 8, "pp": 1, "dp": 1}, batch=8192)
