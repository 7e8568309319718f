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
