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
