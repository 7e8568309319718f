"""`gpufabric bench inference`: real torch send/recv (gloo) of the plan's KV blocks and a safetensors load."""

from __future__ import annotations

import json

import pytest

from gpufabric.bench.probes.inference import KV_SLO_FACTOR, KvProbeSize, kv_probe_sizes, kv_verdicts
from gpufabric.bench.probes.outcomes import CollectiveRow
from gpufabric.catalog import load_catalog
from gpufabric.results.records import Status
from gpufabric.results.store import Store
from gpufabric.spec.inference import load_inference_spec, read_located
from tests.bench.test_loadgen import serve_engine
from tests.conftest import EXAMPLES

SERVING = EXAMPLES / "serving" / "llama3-70b-serving.yaml"
torch = pytest.importorskip("torch")


def test_kv_sizes_follow_the_model():
    cat = load_catalog([])
    spec = load_inference_spec(read_located(SERVING))
    sizes = kv_probe_sizes(spec, cat, fabric="roce-400g", tp=8)
    # 2,048 tokens x 327,680 B / (8 ranks x 80 layers) = 1 MiB per message; longest = 8 x mean.
    assert [s.size_bytes for s in sizes] == [1_048_576, 8_388_608]
    slow = kv_probe_sizes(spec, cat, fabric="tcp-100g", tp=8)
    assert all(t.model_time_us > r.model_time_us for t, r in zip(slow, sizes, strict=True))


def _row(size_bytes: int, p99_us: float) -> CollectiveRow:
    nan = float("nan")
    return CollectiveRow(
        op="send_recv",
        dtype="bfloat16",
        size_bytes=size_bytes,
        num_ranks=2,
        time_p50_us=nan,
        time_p99_us=p99_us,
        time_cv=nan,
        algbw_gbps=nan,
        busbw_gbps=nan,
        wrong_elements=0.0,
        status=Status.ok,
        reason="",
    )


def test_kv_verdicts_judge_p99_against_the_model():
    probe = KvProbeSize(label="mean prompt", prompt_tokens=2048, size_bytes=1000, model_time_us=100.0)
    ok = kv_verdicts([probe], [_row(1000, 100 * KV_SLO_FACTOR)], fabric="x")[0]
    bad = kv_verdicts([probe], [_row(998, 100 * KV_SLO_FACTOR + 1)], fabric="x")[0]
    none = kv_verdicts([probe], [], fabric="x")[0]
    assert ok.outcome.value == "passed" and bad.outcome.value == "failed" and none.outcome.value == "failed"
    assert bad.measured == 100 * KV_SLO_FACTOR + 1 and bad.expected == pytest.approx(150.0)


def test_bench_inference_runs_and_stores(cli, tmp_path):
    db = tmp_path / "runs.db"
    code, out, err = cli(
        "bench",
        "inference",
        SERVING,
        "--dir",
        tmp_path / "w",
        "--db",
        db,
        "--iters",
        "3",
        "--warmup",
        "1",
        "--scale",
        "20000",
        "--fabric",
        "roce-400g",
        "--format",
        "json",
    )
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["kind"] == "inference" and doc["fabric"] == "roce-400g"
    measured = {r["size_bytes"] for r in doc["kv_run"]["results"]}
    assert measured == {1_048_576, 8_388_608}
    assert all(r["wrong_elements"] == 0 for r in doc["kv_run"]["results"])  # exact bytes received
    assert len(doc["kv_verdicts"]) == 2 and all(v["measured"] > 0 for v in doc["kv_verdicts"])
    # This VM has no RDMA device: the roce-400g design's KV SLOs are not_planned_hardware, the run fails.
    assert all(v["outcome"] == "not_planned_hardware" for v in doc["kv_verdicts"])
    assert code == 1 and doc["status"] == doc["kv_run"]["status"] == "failed"
    load = doc["weight_load_run"]["results"]
    assert load and load[0]["format"] == "safetensors" and load[0]["read_gbps"] > 0
    # One run holds both parts (issue 23: the weight load was a second run), and it agrees.
    code, out, _ = cli("runs", "--db", db, "--format", "json")
    runs = json.loads(out)["runs"]
    assert code == 0 and len(runs) == 1 and runs[0]["status"] == "failed"
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.kind == "bench.inference" and {r.name for r in run.results} == {
        "torch.send_recv",
        "torch.checkpoint.safetensors",
    }
    assert run.hosts and run.duration_s is not None and run.duration_s > 0
    code, junit, _ = cli("report", "latest", "--db", db, "--format", "junit")
    assert code == 0 and 'failures="0"' not in junit


def test_bench_inference_judges_the_plans_recommended_design(cli, tmp_path):
    """Without --fabric the KV SLO is the model's time on the design `plan` recommends, not the spec's first fabric."""
    code, out, err = cli("plan", SERVING, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    recommended = next(c for c in doc["candidates"] if c["id"] == doc["recommended"])
    spec = load_inference_spec(read_located(SERVING))
    assert recommended["fabric"] != spec.options.fabrics[0]  # the case issue 23 found
    code, out, err = cli("bench", "inference", SERVING, "--dry-run", "--format", "json")
    assert code == 0, err
    sizes = kv_probe_sizes(spec, load_catalog([]), fabric=recommended["fabric"], tp=recommended["tp"])
    dry = json.loads(out)
    assert dry["config"]["sizes"] == [s.size_bytes for s in sizes]
    # Each KV SLO with its provenance: the recommended design, its fabric model, the factor.
    assert [s["maximum"] for s in dry["slos"]] == pytest.approx([KV_SLO_FACTOR * s.model_time_us for s in sizes])
    assert all(s["source"].startswith(f"plan recommendation {doc['recommended']}") for s in dry["slos"])


def test_bench_inference_dry_run_and_bad_input(cli, tmp_path):
    code, out, _ = cli("bench", "inference", SERVING, "--dry-run")
    assert code == 0 and "gpufabric.bench.probes.collectives" in out
    code, _, err = cli("bench", "inference", SERVING, "--fabric", "roce-40g")
    assert code == 2 and "roce-400g" in err
    # Its launch knobs are LaunchRequest's, refused where they do nothing as in the other probes.
    code, _, err = cli("bench", "inference", SERVING, "--dry-run", "--plane", "storage")
    assert code == 2 and "--plane has no effect without --lab" in err
    code, _, err = cli("bench", "inference", SERVING, "--dry-run", "--nproc", "3", "--timeout", "5min")
    assert code == 0 and "is deprecated; use --gpus-per-node" in err


@pytest.fixture()
def server():
    with serve_engine() as url:
        yield url


def _small_spec(tmp_path, slo: str) -> str:
    """The serving example with a short stream and the given SLOs (the stand-in engine is slow per token)."""
    text = SERVING.read_text()
    text = text.replace("output_tokens: {mean: 256, cv: 0.5}", "output_tokens: {mean: 8}")
    text = text.replace("slo: {ttft_p99_s: 1.0, tpot_p99_s: 0.015}", f"slo: {slo}")
    path = tmp_path / "small.yaml"
    path.write_text(text)
    return str(path)


def test_bench_inference_drives_a_serving_endpoint_closed_loop_and_stores_it(cli, tmp_path, server):
    """--url: N clients in a closed loop, AIPerf's figures stored in the one run and judged on the spec's SLOs."""
    from tests.bench.test_loadgen import FIRST_S, _Engine

    spec = _small_spec(tmp_path, "{ttft_p99_s: 5.0, tpot_p99_s: 0.0001}")  # the TPOT SLO cannot be met
    db = tmp_path / "runs.db"
    code, out, err = cli(
        "bench", "inference", spec, "--no-kv", "--url", server, "--concurrency", "3", "--requests", "9",
        "--db", db, "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    load = doc["load"]
    assert (load["concurrency"], load["requests"], load["output_tokens"]) == (3, 9, 8) and _Engine.most == 3
    s = load["summary"]
    assert s["requests"] == 9 and s["failed"] == 0 and s["ttft_p50_s"] == pytest.approx(FIRST_S, abs=0.015)
    assert s["itl_p99_s"] >= s["itl_p50_s"] > 0 and s["output_tokens_per_s"] > 0
    verdicts = {v["test"] + ":" + v["reason"].split(" ")[0]: v["outcome"] for v in doc["load_verdicts"]}
    outcomes = sorted(v["outcome"] for v in doc["load_verdicts"])
    assert outcomes == ["failed", "passed"], verdicts  # TTFT within 5 s, TPOT not within 0.1 ms
    assert code == 1 and doc["status"] == "failed" and doc["kv_run"] is None
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.kind == "bench.inference" and [r.name for r in run.results] == ["serving.load"]
    metrics = {m.name: m.value for m in run.results[0].metrics}
    assert metrics["ttft_p99_s"] == pytest.approx(s["ttft_p99_s"]) and "tpot_p50_s" in metrics


def test_bench_inference_serving_load_passes_its_slos_as_text(cli, tmp_path, server):
    spec = _small_spec(tmp_path, "{ttft_p99_s: 5.0, tpot_p99_s: 1.0}")
    code, out, err = cli(
        "bench", "inference", spec, "--no-kv", "--url", server, "--requests", "4", "--db", tmp_path / "r.db"
    )
    # The spec's traffic is a Poisson rate (10/s): --requests keeps it open loop.
    assert code == 0, out + err
    assert "load: Poisson 10 requests/s, 4 requests of 2048 in / 8 out: TTFT p50/p99" in out
    assert "PASS serving.load ttft_p99_s: measured" in out and "PASS serving.load tpot_p99_s: measured" in out


def test_bench_inference_load_dry_run_and_bad_input(cli, tmp_path):
    code, out, err = cli(
        "bench", "inference", SERVING, "--no-kv", "--url", "http://h:8000", "--concurrency", "8", "--dry-run"
    )
    assert code == 0, err
    assert (
        "# serving load: closed loop of 8 clients, 160 requests of 2048 in / 256 out to http://h:8000/v1/completions"
        in out
    )
    assert "serving.load ttft_p99_s" in out  # the spec's SLOs the load would be judged by
    code, out, _ = cli("bench", "inference", SERVING, "--url", "http://h:8000", "--dry-run", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["load"]["rate_rps"] == 10 and doc["config"]["ops"] == ["send_recv"]  # both parts
    code, _, err = cli("bench", "inference", SERVING, "--no-kv")
    assert code == 2 and "nothing would run" in err
    code, _, err = cli("bench", "inference", SERVING, "--concurrency", "4")
    assert code == 2 and "--url" in err
    code, _, err = cli("bench", "inference", SERVING, "--no-kv", "--url", "ftp://x")
    assert code == 2 and "http" in err
