"""`gpufabric plan` on an inference spec: JSON, text, errors; training specs unchanged."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLES

SERVING = EXAMPLES / "serving" / "llama3-70b-serving.yaml"


def test_plan_inference_json(cli):
    code, out, err = cli("plan", SERVING, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 1 and doc["kind"] == "inference" and doc["rate_rps"] == 10
    ids = {c["id"] for c in doc["candidates"]}
    assert doc["recommended"] in ids and len(ids) == 2 * 3 * 4
    for c in doc["candidates"]:
        for key in (
            "ttft_p99_s",
            "tpot_p99_s",
            "kv_transfer_p99_s",
            "weight_load_s",
            "usd_per_million_output_tokens",
            "goodput_rps",
            "meets_slo",
            "violations",
        ):
            assert key in c


def test_plan_inference_text_and_markdown(cli):
    code, out, _ = cli("plan", SERVING, "--top", "4")
    assert code == 0 and "Recommendation: " in out and "TTFT p99" in out
    code, out, _ = cli("plan", SERVING, "--format", "markdown")
    assert code == 0 and out.startswith("# Serving plan: llama3-70b-serving")


def test_unknown_kind_and_bad_field_are_located_user_errors(cli, tmp_path):
    text = SERVING.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("kind: inference", "kind: serving"))
    code, _, err = cli("plan", bad)
    assert code == 2 and "workload.kind" in err and "Traceback" not in err
    bad.write_text(text.replace("kv_heads: 8", "kv_heads: 7"))
    code, _, err = cli("plan", bad)
    assert code == 2 and "kv_heads" in err and "bad.yaml:" in err
    bad.write_text(text.replace("tcp-100g", "tcp-100"))
    code, _, err = cli("plan", bad)
    assert code == 2 and "did you mean 'tcp-100g'" in err


def test_slo_nobody_meets_exits_1(cli, tmp_path):
    tight = tmp_path / "tight.yaml"
    tight.write_text(SERVING.read_text().replace("ttft_p99_s: 1.0", "ttft_p99_s: 0.01"))
    code, out, _ = cli("plan", tight, "--format", "json")
    assert code == 1 and json.loads(out)["recommended"] is None


def test_training_spec_with_explicit_kind_still_plans(cli, tmp_path):
    text = (EXAMPLES / "llama3-70b-1k.yaml").read_text().replace("workload:\n", "workload:\n  kind: training\n", 1)
    spec = tmp_path / "train.yaml"
    spec.write_text(text)
    code, out, err = cli("plan", spec, "--format", "json")
    assert code == 0, err
    assert "pareto" in json.loads(out)


def test_simulate_inference_spec(cli):
    code, out, err = cli("simulate", SERVING, "--requests", "20000", "--format", "json", "--seed", "3")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["mode"] == "inference" and doc["requests"] == 20000
    # The serving spec's SLO is ttft_p99_s 1.0 and tpot_p99_s 0.015: the verdict and the exit
    # code follow from the reported percentiles against those limits.
    assert doc["meets_slo"] == (doc["ttft_p99_s"] <= 1.0 and doc["tpot_p99_s"] <= 0.015)
    assert code == (0 if doc["meets_slo"] else 1)
    assert doc["ttft_p99_s"] >= doc["ttft_p50_s"] > 0 and doc["tpot_p99_s"] >= doc["tpot_p50_s"] > 0
    assert doc["meets_slo"] == (code == 0) == (not doc["violations"])
    code2, out2, _ = cli("simulate", SERVING, "--requests", "20000", "--format", "json", "--seed", "3")
    assert json.loads(out2)["ttft_p99_s"] == doc["ttft_p99_s"]  # same seed, same answer


def test_simulate_inference_bad_candidate_and_requests(cli):
    code, _, err = cli("simulate", SERVING, "--candidate", "colocated/roce-40g/nfs")
    assert code == 2 and "did you mean 'colocated/roce-400g/nfs'" in err
    code, _, err = cli("simulate", SERVING, "--requests", "0")
    assert code == 2 and "--requests" in err


CLOSED_MOE = """
name: moe-closed
cluster: {nodes: 1, gpus_per_node: 8, gpu: h100-sxm}
workload:
  kind: inference
  model: {params: 46.7e9, active_params: 12.9e9, experts: 8, experts_per_token: 2,
          layers: 32, hidden: 4096, heads: 32, kv_heads: 8, precision: bf16, kv_precision: fp8}
  traffic:
    concurrency: 16
    prompt_tokens: {mean: 1000}
    output_tokens: {mean: 200}
  slo: {ttft_p99_s: 2.0, tpot_p99_s: 0.05, itl_p99_s: 0.2}
  replica: {tp: 2, pp: 1}
  speculative: {draft_tokens: 2, acceptance_rate: 0.6}
  disaggregation: none
options:
  fabrics: [ib-ndr]
  storage: [local-nvme]
"""


def test_closed_loop_moe_speculative_spec_plans_and_simulates(cli, tmp_path):
    spec = tmp_path / "moe.yaml"
    spec.write_text(CLOSED_MOE)
    code, out, err = cli("plan", spec, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["concurrency"] == 16 and doc["rate_rps"] is None
    rec = next(c for c in doc["candidates"] if c["id"] == doc["recommended"])
    assert rec["tp"] == 2 and rec["ep"] == 2 and rec["itl_p99_s"] <= 0.2 and rec["output_tokens_per_s"] > 0
    assert {r["status"] for r in doc["search"]} >= {"winner"}
    code, out, err = cli("simulate", spec, "--requests", "400")
    assert code == 0, err
    assert "from 16 clients" in out and "ITL" in out and "tokens/s" in out


def test_both_loads_is_a_located_user_error(cli, tmp_path):
    spec = tmp_path / "both.yaml"
    spec.write_text(CLOSED_MOE.replace("concurrency: 16", "concurrency: 16\n    rate_rps: 3"))
    code, _, err = cli("plan", spec)
    assert code == 2 and "exactly one of rate_rps" in err and "Traceback" not in err


def test_token_budget_below_the_batch_is_a_located_user_error(cli, tmp_path):
    spec = tmp_path / "budget.yaml"
    spec.write_text(
        SERVING.read_text().replace("batching: {max_batch: 256}", "batching: {max_batch: 256, max_batch_tokens: 128}")
    )
    code, _, err = cli("plan", spec)
    assert code == 2 and "max_batch_tokens = 128 is below max_batch = 256" in err and "Traceback" not in err
