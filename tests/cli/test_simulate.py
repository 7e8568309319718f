"""`gpufabric simulate`: synthetic mode, JSON contract, determinism, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ISSUE_ARGS = [
    "simulate",
    "--ranks",
    "16384",
    "--steps",
    "100000",
    "--compute-ms",
    "100",
    "--jitter",
    "normal:2ms",
    "--seed",
    "1",
    "--format",
    "json",
]


def test_issue_command_json_contract(cli):
    code, out, err = cli(*ISSUE_ARGS)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    assert (doc["ranks"], doc["steps"], doc["seed"]) == (16384, 100000, 1)
    st = doc["step_time_ms"]
    assert set(st) >= {"mean", "p50", "p90", "p99", "p999", "cv"}
    # E[max of 16,384 normals] ~ mu + 3.97 sigma (models.md 2.5 gives ~4.4 sigma for the
    # first-order sqrt(2 ln N), which overshoots); sigma = 2 ms.
    assert st["mean"] == pytest.approx(100 + 3.97 * 2, abs=0.05)
    assert st["p50"] < st["p90"] < st["p99"] < st["p999"]
    assert 0 < st["cv"] < 0.01
    assert doc["method"] == "order-statistics"
    for key in ("time_to_train_s", "throughput_steps_per_s", "goodput", "efficiency", "lost", "histogram_ms"):
        assert key in doc
    assert set(doc["lost"]) == {"compute_imbalance", "communication_latency", "jitter", "checkpoints", "failures"}
    assert "step_times_s" not in doc


def test_same_seed_identical_json(cli):
    args = [
        "simulate",
        "--ranks",
        "2048",
        "--gpus-per-node",
        "8",
        "--steps",
        "5000",
        "--jitter",
        "lognormal:1ms:0.5",
        "--straggler",
        "0.01x1.5",
        "--hiccup",
        "0.001:5ms",
        "--checkpoint-every",
        "500:8s:async:1s:0.1",
        "--node-mttf-h",
        "2000",
        "--runs",
        "3",
        "--seed",
        "42",
        "--format",
        "json",
    ]
    first, second = cli(*args), cli(*args)
    assert first[0] == 0 and first[1] == second[1]
    other = cli(*args[:-4], "--seed", "43", "--format", "json")
    assert json.loads(other[1])["step_time_ms"] != json.loads(first[1])["step_time_ms"]
    assert json.loads(first[1])["seed"] == 42


def test_text_output_has_a_histogram_and_the_causes(cli):
    code, out, _ = cli(
        "simulate",
        "--ranks",
        "1024",
        "--steps",
        "2000",
        "--jitter",
        "normal:2ms",
        "--straggler",
        "0.01x1.5",
        "--checkpoint-every",
        "500:8s:sync",
        "--seed",
        "3",
    )
    assert code == 0
    assert "p99" in out and "seed 3" in out
    bars = [line for line in out.splitlines() if " ms | " in line]
    assert len(bars) == 30 and any("#" in b for b in bars)
    for cause in ("compute imbalance", "communication latency", "jitter", "checkpoints", "failures"):
        assert cause in out


def test_brute_force_path_agrees(cli):
    common = [
        "simulate",
        "--ranks",
        "256",
        "--steps",
        "3000",
        "--jitter",
        "normal:2ms",
        "--seed",
        "5",
        "--format",
        "json",
    ]
    fast = json.loads(cli(*common)[1])
    brute = json.loads(cli(*common, "--brute-force")[1])
    assert brute["method"] == "brute-force"
    # Same distribution: the means of 3,000 steps agree to a few standard errors.
    se = fast["step_time_ms"]["std"] / 3000**0.5
    assert abs(fast["step_time_ms"]["mean"] - brute["step_time_ms"]["mean"]) < 6 * se


def test_leaf_and_ring_flags(cli):
    code, out, err = cli(
        "simulate",
        "--ranks",
        "1024",
        "--gpus-per-node",
        "8",
        "--ranks-per-leaf",
        "256",
        "--leaf-jitter",
        "exp:0.2ms",
        "--comm-latency",
        "normal:10us:2us",
        "--ring-steps",
        "254",
        "--slow-links",
        "0.05x2",
        "--steps",
        "2000",
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["lost"]["communication_latency"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "8", "--jitter", "gauss:2ms"], "unknown distribution 'gauss'"),
        (["--ranks", "8", "--jitter", "normal:-1ms"], "must be >= 0"),
        (["--ranks", "8", "--straggler", "1.5x2"], r"fraction must be in [0, 1]"),
        (["--ranks", "8", "--straggler", "-0.1x2"], r"fraction must be in [0, 1]"),
        (["--ranks", "8", "--hiccup", "2:5ms"], "must be in [0, 1]"),
        (["--ranks", "8", "--checkpoint-every", "0:8s"], ">= 1 step"),
        (["--ranks", "0"], "ranks"),
        (["--ranks", "8", "--steps", "0"], "steps"),
        (["--ranks", "8", "--compute-ms", "-5"], "--compute-ms must be"),
        (["--ranks", "1", "--steps", "1", "--compute-ms", "0"], "a training step takes time"),
        (["--ranks", "8", "--gpus-per-node", "3"], "multiple of ranks per node"),
        (
            ["--ranks", "8", "--gpus-per-node", "0", "--comm-latency", "const:10us", "--ring-steps", "2"],
            "--gpus-per-node must be >= 1",
        ),
        (["--ranks", "8", "--leaf-jitter", "exp:1ms"], "needs --ranks-per-leaf"),
        (["--ranks", "8", "--ring-steps", "5"], "go together"),
        ([], "give a SPEC, or --ranks"),
        (["--ranks", "8", "--steps", "30000000", "--runs", "2"], "would not fit in memory"),
        (["--ranks", "8", "--jitter", "empirical:/no/such/file"], "cannot read empirical samples"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, args, message):
    code, out, err = cli("simulate", *args)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama3-70b-1k.yaml"


@pytest.mark.skipif(not EXAMPLE.exists(), reason="example spec not shipped")
def test_spec_mode_simulates_the_recommended_candidate(cli):
    import math

    import yaml

    raw = yaml.safe_load(EXAMPLE.read_text())
    code, out, err = cli("simulate", str(EXAMPLE), "--steps", "2000", "--runs", "2", "--seed", "3", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["mode"] == "spec" and doc["candidate"]
    assert doc["ranks"] == raw["cluster"]["nodes"] * raw["cluster"].get("gpus_per_node", 8)
    assert doc["train_steps"] == math.ceil(
        float(raw["workload"]["total_tokens"]) / raw["workload"]["global_batch_tokens"]
    )
    assert doc["step_time_ms"]["p99"] > doc["mean_value_step_ms"] > 0
    assert doc["throughput_tokens_per_s"] > 0
    chosen = doc["candidate"]
    again = json.loads(
        cli(
            "simulate",
            str(EXAMPLE),
            "--candidate",
            chosen,
            "--steps",
            "2000",
            "--runs",
            "2",
            "--seed",
            "3",
            "--format",
            "json",
        )[1]
    )
    assert again["step_time_ms"] == doc["step_time_ms"]


@pytest.mark.skipif(not EXAMPLE.exists(), reason="example spec not shipped")
def test_spec_mode_bad_input(cli):
    code, _, err = cli("simulate", str(EXAMPLE), "--candidate", "no/such/design", "--steps", "10")
    assert code == 2 and "unknown candidate 'no/such/design'" in err
    code, _, err = cli("simulate", str(EXAMPLE), "--ranks", "8")
    assert code == 2 and "not both" in err


def test_failures_faster_than_checkpoints_exit_2(cli):
    code, _, err = cli("simulate", "--ranks", "1000", "--steps", "1000", "--node-mttf-h", "0.001")
    assert code == 2 and "practically never finish" in err


@pytest.mark.skipif(not EXAMPLE.exists(), reason="example spec not shipped")
def test_spec_mode_text_shows_the_planner_next_to_the_engine(cli):
    code, out, _ = cli("simulate", str(EXAMPLE), "--steps", "500")
    assert code == 0
    assert "candidate " in out and "planner (closed form): mean" in out


@pytest.mark.skipif(not EXAMPLE.exists(), reason="example spec not shipped")
def test_spec_mode_takes_compute_cv_and_hiccups_from_the_candidate(cli):
    # A TCP candidate: 200 ms hiccups on ~10% of steps dominate its CV. The engine, fed
    # from the breakdown alone, lands on the planner's numbers; overrides move it away.
    cand = "tcp-100g/rail-optimized/1:1/nvmeof-rdma"
    args = ("simulate", str(EXAMPLE), "--candidate", cand, "--steps", "20000", "--seed", "1", "--format", "json")
    doc = json.loads(cli(*args)[1])
    plan = doc["planner"]
    assert doc["step_time_ms"]["cv"] == pytest.approx(plan["step_time_cv"], rel=0.1)
    assert doc["step_time_ms"]["mean"] * 1e-3 == pytest.approx(plan["step_time_s"], rel=5e-3)
    no_hiccup = json.loads(cli(*args, "--hiccup", "0:0ms")[1])
    assert no_hiccup["step_time_ms"]["cv"] < 0.5 * plan["step_time_cv"]
    calm = json.loads(cli(*args, "--compute-cv", "0")[1])
    assert calm["step_time_ms"]["mean"] < doc["step_time_ms"]["mean"]
    code, _, err = cli(*args, "--compute-cv", "-1")
    assert code == 2 and "--compute-cv" in err


def _no_fit_spec(tmp_path: Path) -> Path:
    # The 405B example squeezed onto 2 nodes: no layout fits in 80 GiB, so the plan
    # recommends nothing.
    text = (Path(__file__).parents[2] / "examples" / "llama3-405b-16k.yaml").read_text()
    text = text.replace("nodes: 2048", "nodes: 2").replace(
        "gpus: 16384, tp: 8, pp: 16, dp: 128, virtual_stages: 4", "gpus: 16, tp: 8, pp: 2, dp: 1"
    )
    path = tmp_path / "nofit.yaml"
    path.write_text(text)
    return path


def test_no_recommended_design_is_a_clear_message_and_candidate_still_works(cli, tmp_path):
    spec = _no_fit_spec(tmp_path)
    code, out, err = cli("simulate", str(spec), "--steps", "50")
    assert code == 1 and not out
    assert "None" not in err and "Traceback" not in err
    assert "recommends no design" in err and "no layout fits in GPU memory" in err
    assert "--candidate" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli(
        "simulate", str(spec), "--steps", "50", "--candidate", "ib-ndr/rail-optimized/1:1/pfs", "--format", "json"
    )
    assert code == 0, err
    assert json.loads(out)["candidate"] == "ib-ndr/rail-optimized/1:1/pfs"


def _knobs_not_read_in(mode: str) -> list[tuple[str, list[str]]]:
    import dataclasses

    from gpufabric.app.requests import SimulateRequest

    out = []
    for f in dataclasses.fields(SimulateRequest):
        flag = f.metadata["flag"]
        if flag and mode not in f.metadata["modes"] and f.name not in ("ranks", "candidate"):  # own messages
            out.append((flag, [flag] if isinstance(f.default, bool) else [flag, "1"]))
    return out


@pytest.mark.parametrize(("flag", "args"), _knobs_not_read_in("inference"))
def test_every_option_an_inference_spec_does_not_read_is_refused(cli, flag, args):
    # The request's field metadata (modes) is the one list: a knob added for training only is
    # refused here without another edit.
    code, out, err = cli("simulate", str(Path(__file__).parents[2] / "examples/serving/llama3-70b-serving.yaml"), *args)
    assert code == 2 and not out
    assert f"{flag} has no effect with an inference spec" in err


@pytest.mark.parametrize(("flag", "args"), _knobs_not_read_in("synthetic"))
def test_every_option_a_synthetic_job_does_not_read_is_refused(cli, flag, args):
    code, out, err = cli("simulate", "--ranks", "8", "--steps", "10", *args)
    assert code == 2 and not out and f"{flag} has no effect without a SPEC" in err
