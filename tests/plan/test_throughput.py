"""Throughput as users quote it: the anchor, FLOP conventions, and published scaling rows."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError, SpecError
from gpufabric.plan import evaluate_candidates, make_plan
from gpufabric.plan.anchor import solve_anchor
from gpufabric.plan.layouts import spec_layout
from gpufabric.spec import load_spec
from gpufabric.spec.models import Spec
from tests.cli.test_plan import CONTRACT
from tests.conftest import EXAMPLES

CAT = load_catalog()
SPEC_70B = load_spec(EXAMPLES / "llama3-70b-1k.yaml").spec


def _with(spec: Spec, **workload) -> Spec:
    data = spec.model_dump()
    data["workload"].pop("notes", None)
    data["workload"].update(workload)
    return Spec.model_validate(data)


def test_the_anchor_point_reproduces_the_figure():
    # No measured_at: the figure is the spec's own layout on the first fabric; the first
    # candidate is exactly that design, so its end-to-end MFU is the figure.
    plan = make_plan(SPEC_70B, CAT)
    first = next(c for c in plan.candidates if c.id == "ib-ndr/rail-optimized/1:1/nvmeof-rdma")
    assert first.mfu == pytest.approx(0.40, rel=1e-3)
    assert first.tflops_per_gpu == pytest.approx(0.40 * 989, rel=1e-3)
    assert "taken as measured with the spec's own layout on the first of options.fabrics" in plan.rationale
    assert plan.throughput["measured_at"]["assumed_from_spec"] is True
    # Bubble and communication come on top: the compute part runs well above the MFU.
    assert first.compute_efficiency > 0.45
    # A slower fabric gets a lower end-to-end MFU from the same compute efficiency.
    tcp = next(c for c in plan.candidates if c.fabric == "tcp-100g")
    assert tcp.mfu < first.mfu and tcp.compute_efficiency == first.compute_efficiency


def test_mfu_and_tflops_are_the_same_figure_and_compute_efficiency_is_taken_as_given():
    ce_mfu = solve_anchor(SPEC_70B, CAT).compute_efficiency
    ce_tf = solve_anchor(_with(SPEC_70B, throughput={"tflops_per_gpu": 0.40 * 989}), CAT).compute_efficiency
    assert ce_tf == pytest.approx(ce_mfu, rel=1e-6)
    given = solve_anchor(_with(SPEC_70B, throughput={"compute_efficiency": 0.40}), CAT)
    assert given.compute_efficiency == 0.40 and "compute efficiency 0.4 given" in given.text


def test_megatron_convention_counts_more_flops_so_the_same_figure_means_a_longer_step():
    six = solve_anchor(SPEC_70B, CAT)
    meg = solve_anchor(_with(SPEC_70B, throughput={"mfu": 0.40, "flops": "megatron"}), CAT)
    # Megatron FLOPs at 8k tokens include attention (+~15% for 70B): a longer step at the
    # same MFU, hence a lower compute efficiency.
    assert meg.anchor_step_s > six.anchor_step_s * 1.10
    assert meg.compute_efficiency < six.compute_efficiency
    assert "Narayanan et al. SC'21 eq. 3" in meg.text


def test_bare_mfu_is_read_as_end_to_end_with_a_note(tmp_path):
    text = (EXAMPLES / "llama3-70b-1k.yaml").read_text().replace("throughput: {mfu: 0.40}", "mfu: 0.40")
    path = tmp_path / "old.yaml"
    path.write_text(text)
    spec = load_spec(path).spec
    assert spec.workload.throughput.mfu == 0.40 and spec.workload.throughput.flops == "6pt"
    assert any("workload.mfu: 0.4 read as workload.throughput.mfu" in n for n in spec.workload.notes)
    plan = make_plan(spec, CAT)
    assert plan.throughput["notes"] == list(spec.workload.notes)


def test_exactly_one_figure(tmp_path):
    text = (EXAMPLES / "llama3-70b-1k.yaml").read_text()
    path = tmp_path / "two.yaml"
    path.write_text(text.replace("throughput: {mfu: 0.40}", "throughput: {mfu: 0.40, tflops_per_gpu: 400}"))
    with pytest.raises(SpecError, match="exactly one of mfu, tflops_per_gpu, compute_efficiency"):
        load_spec(path)


def test_an_unreachable_figure_is_a_user_error():
    with pytest.raises(InputError, match="even a compute efficiency of 1"):
        solve_anchor(_with(SPEC_70B, throughput={"mfu": 0.95}), CAT)


def test_no_figure_takes_the_compute_efficiency_model_per_layout():
    """No throughput in the spec: MFU 0.40 is a default, not the user's claim. Each layout
    gets the compute-efficiency model's value (model.efficiency), and the text says so;
    the same MFU written in the spec is a figure to reach (an error where it cannot be)."""
    from gpufabric.plan.anchor import layout_efficiencies, model_efficiency

    lab = load_spec(EXAMPLES / "lab-2node.yaml").spec
    data = lab.model_dump()
    data["workload"].pop("notes", None)
    data["workload"].pop("throughput")
    default = Spec.model_validate(data)
    anchor = solve_anchor(default, CAT)
    assert anchor.kind == "model" and "compute-efficiency model" in anchor.text
    lay = spec_layout(default)
    assert anchor.compute_efficiency == pytest.approx(float(model_efficiency(default, CAT, [lay])[0]))
    small = replace(lay, microbatch_size=1, tp=8)
    big = replace(lay, microbatch_size=8, tp=1)
    effs = layout_efficiencies(anchor, default, CAT, [small, big])
    assert effs[1] > effs[0]  # bigger GEMMs run closer to the roofline
    with pytest.raises(InputError, match="even a compute efficiency of 1"):
        solve_anchor(_with(lab, throughput={"mfu": 0.40}), CAT)


def test_searched_layout_needs_measured_at():
    spec = _with(SPEC_70B, parallelism="auto")
    with pytest.raises(InputError, match="needs throughput.measured_at"):
        solve_anchor(spec, CAT)


# Llama 3 405B (Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 4):
# 8,192 GPUs TP 8 PP 16 DP 64, 32 sequences of 8,192 per DP rank, 430 TFLOP/s per GPU;
# 16,384 GPUs DP 128, 16 per DP rank, 400 TFLOP/s (BF16 MFU 43% and 41%), 16M-token batches.
# The paper names an interleaved schedule without its depth; we take 4 virtual stages
# (about two layers each). The third row (context parallelism 16 at 131,072 tokens) is
# test_llama3_context_parallel_row_anchored_at_its_batch below.
LLAMA3_ROWS = {8192: (64, 430.0), 16384: (128, 400.0)}


def _llama3(gpus: int, anchor_gpus: int) -> Spec:
    base = load_spec(EXAMPLES / "llama3-405b-16k.yaml").spec
    data = base.model_dump()
    data["workload"].pop("notes", None)
    data["cluster"]["nodes"] = gpus // 8
    dp, _ = LLAMA3_ROWS[gpus]
    adp, atf = LLAMA3_ROWS[anchor_gpus]
    data["workload"]["parallelism"] = {"tp": 8, "pp": 16, "dp": dp, "virtual_stages": 4, "zero_stage": 1}
    data["workload"]["recompute"] = "none"
    data["workload"]["throughput"] = {
        "tflops_per_gpu": atf,
        "measured_at": {"gpus": anchor_gpus, "tp": 8, "pp": 16, "dp": adp, "virtual_stages": 4, "fabric": "roce-400g"},
    }
    data["options"].update(fabrics=["roce-400g"], storage=["nvmeof-rdma"], oversubscription=[1])
    return Spec.model_validate(data)


@pytest.mark.parametrize(("gpus", "anchor"), [(16384, 8192), (8192, 16384)])
def test_llama3_table4_scaling_rows_within_3_percent(gpus, anchor):
    cand = evaluate_candidates(_llama3(gpus, anchor), CAT)[0]
    published = LLAMA3_ROWS[gpus][1]
    assert cand.tflops_per_gpu == pytest.approx(published, rel=0.03)
    # Anchored at its own row, the row comes back exactly.
    same = evaluate_candidates(_llama3(anchor, anchor), CAT)[0]
    assert same.tflops_per_gpu == pytest.approx(LLAMA3_ROWS[anchor][1], rel=1e-3)


def test_plan_json_states_convention_and_anchor(cli):
    code, out, _ = cli("plan", str(EXAMPLES / "llama3-70b-1k.yaml"), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    th = doc["throughput"]
    assert th["given"] == "mfu" and th["flops"] == "6pt" and th["measured_at"]["fabric"] == "ib-ndr"
    assert doc["rationale"].startswith("Throughput: end-to-end MFU 0.4 in 6PT FLOPs")
    for key in (*CONTRACT, "mfu", "memory_gb", "layout"):  # DESIGN.md keys stay; the new ones are added
        assert key in doc["candidates"][0], key
    assert {"schema_version", "name", "candidates", "pareto", "recommended", "rationale"} <= set(doc)


def test_llama3_context_parallel_row_anchored_at_its_batch():
    """Table 4's third row: 16,384 GPUs, TP 8, CP 16, PP 16, DP 8, 131,072-token sequences,
    380 TFLOP/s. Anchored on the 8k row at its own batch and sequence (measured_at), the
    row is expressible and predicted; Meta's figures count causal attention, so both are
    read in the 6PT + half-attention convention via their step times."""
    from gpufabric.model.flops import flops_per_token

    def f_tok(seq: int) -> float:  # 6PT + causal attention (half the 12 L h s term)
        six = float(
            flops_per_token(
                params_active=405e9, layers=126, hidden=16384, seq_len=seq, vocab=128256, recompute=0, convention="6pt"
            )
        )
        return six + 6.0 * 126 * 16384 * seq

    base = load_spec(EXAMPLES / "llama3-405b-16k.yaml").spec
    data = base.model_dump()
    data["workload"].pop("notes", None)
    data["workload"]["model"]["seq_len"] = 131072
    data["workload"]["parallelism"] = {"tp": 8, "cp": 16, "pp": 16, "dp": 8, "virtual_stages": 4, "zero_stage": 1}
    data["workload"]["recompute"] = "none"
    # The 8k row's figure as the step time it implies, restated in the tool's 6PT convention.
    step_8k = f_tok(8192) * 16777216 / (16384 * 400e12)
    six_8k = 6.0 * 405e9 * 16777216 / (16384 * step_8k) / 1e12
    data["workload"]["throughput"] = {
        "tflops_per_gpu": six_8k,
        "measured_at": {
            "gpus": 16384,
            "tp": 8,
            "pp": 16,
            "dp": 128,
            "virtual_stages": 4,
            "fabric": "roce-400g",
            "seq_len": 8192,
            "global_batch_tokens": 16777216,
        },
    }
    data["options"].update(fabrics=["roce-400g"], storage=["nvmeof-rdma"], oversubscription=[1])
    cand = evaluate_candidates(Spec.model_validate(data), CAT)[0]
    published_step = f_tok(131072) * 16777216 / (16384 * 380e12)
    assert cand.memory_gb <= 80
    assert cand.step_time_s == pytest.approx(published_step, rel=0.10)
