"""``bench gpu``: the dry-run list, the CPU path end to end (stored, reported, judged), and the
GPU calibration from a CUDA-shaped run."""

from __future__ import annotations

import json
import statistics

import pytest

from gpufabric.bench.probes.gpu_results import gpu_results
from gpufabric.catalog import load_catalog
from gpufabric.model.decode import predicted_decode_s
from gpufabric.results.records import RunStatus
from gpufabric.results.store import Store
from gpufabric.spec.inference import load_inference_spec, read_located
from tests.conftest import EXAMPLES

SERVING = EXAMPLES / "serving" / "llama3-70b-serving.yaml"
TRAINING = EXAMPLES / "llama3-70b-1k.yaml"


def test_dry_run_lists_gemm_hbm_and_decode_for_a_spec(cli):
    code, out, err = cli("bench", "gpu", "--spec", SERVING, "--device", "cuda", "--dry-run")
    assert code == 0, err
    assert "gemm qkv tp=" in out and "hbm read 1073741824 B" in out and "decode batch 32" in out
    code, out, _ = cli("bench", "gpu", "--spec", TRAINING, "--device", "cpu", "--dry-run", "--format", "json")
    doc = json.loads(out)
    assert doc["device"] == "cpu" and any(m.startswith("gemm mlp_up") for m in doc["measurements"])


def test_cpu_run_is_stored_reported_and_refused_by_gpu_calibration(cli, tmp_path):
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench", "gpu", "--spec", TRAINING, "--device", "cpu", "--repeats", "1", "--db", db, "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    names = {r["name"] for r in doc["results"]}
    assert {"gpu.hbm.read", "gpu.decode.b1", "gpu.copy.h2d.pageable"} <= names
    assert all(r["status"] == "ok" and r.get("time_us", r.get("time_ms", 0)) > 0 for r in doc["results"])
    code, out, _ = cli("report", "latest", "--db", db, "--format", "json")
    assert code == 0 and '"gpu.gemm.qkv.tp8.fp32"' in out
    code, _, err = cli("calibrate", "latest", "--db", db, "--out", tmp_path / "c.yaml")
    assert code == 2 and "not a catalog GPU" in err
    assert not (tmp_path / "c.yaml").exists()


def test_impossible_threshold_fails_the_run_everywhere(cli, tmp_path):
    db = tmp_path / "r.db"
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("tests:\n  gpu.hbm.read:\n    bw_gbps: {min: 1.0e9}\n", encoding="utf-8")
    code, out, err = cli(
        "bench", "gpu", "--spec", TRAINING, "--device", "cpu", "--repeats", "1", "--db", db, "--thresholds", thresholds
    )
    assert code == 1, out + err
    assert "FAIL" in out
    with Store.open(str(db)) as store:
        run = store.get_run("latest")
    assert run.status is RunStatus.failed


def _cuda_records(catalog, *, hbm_eff: float) -> list[dict]:
    """Records shaped as the CUDA worker writes them (gpu.py), with times an H200 at ``hbm_eff``
    of its HBM would take: a decode step as the model prices it at that efficiency."""
    gpu = catalog.gpu("h200")
    layer = {"hidden": 8192, "heads": 64, "kv_heads": 8, "ffn": 28672}
    recs = [
        {
            "what": "gemm",
            "label": "mlp_up tp=8 4096x7168x8192 bf16",
            "name": "mlp_up",
            "tp": 8,
            "m": 4096,
            "n": 7168,
            "k": 8192,
            "dtype": "bf16",
            "flops": 2.0 * 4096 * 7168 * 8192,
            "samples_s": [2.0 * 4096 * 7168 * 8192 / (0.7 * gpu.peak_bf16_tflops * 1e12)] * 3,
        },
        {
            "what": "hbm",
            "label": "hbm read",
            "bytes": 1 << 30,
            "samples_s": [(1 << 30) / (hbm_eff * gpu.hbm_gbps * 1e9)] * 3,
        },
    ]
    for b in (1, 32):
        full = predicted_decode_s(
            gpu, batch=b, context=4096, layer={**layer, "layers": 80}, mfu=0.5, hbm_efficiency=hbm_eff
        )
        recs.append(
            {
                "what": "decode",
                "label": f"decode batch {b}",
                "batch": b,
                "context": 4096,
                **layer,
                "layers_built": 2,
                "layers_spec": 80,
                "samples_s": [full * 2 / 80] * 3,
            }
        )
    return recs


def test_calibrate_gpu_run_writes_efficiencies_the_catalog_accepts(cli, tmp_path):
    catalog = load_catalog()
    spec = load_inference_spec(read_located(SERVING))
    results = gpu_results(
        _cuda_records(catalog, hbm_eff=0.6),
        host="gpu-node",
        info={"device": "cuda", "name": "NVIDIA H200"},
        catalog=catalog,
        spec=spec,
        argv=("test",),
    )
    db = tmp_path / "r.db"
    with (
        Store.open(str(db)) as store,
        store.recording("bench.gpu", ["test"], {}, meta={"device": {"device": "cuda", "name": "NVIDIA H200"}}) as rec,
    ):
        for r in results:
            rec.result(r)
    out_file = tmp_path / "h200.yaml"
    code, out, err = cli("calibrate", "latest", "--db", db, "--out", out_file, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    fields = doc["override"]["gpus"]["h200"]
    assert fields["hbm_efficiency"]["value"] == pytest.approx(0.6, rel=1e-3)
    # The calibrated e_max reproduces the measured GEMM through the compute model's roofline.
    from gpufabric.model import efficiency as eff

    gpu = catalog.gpu("h200")
    model_s = (
        eff._gemm_time(
            4096,
            7168,
            8192,
            peak=gpu.peak_bf16_tflops * 1e12,
            e_max=fields["gemm_efficiency"]["value"],
            hbm=gpu.hbm_gbps * 1e9,
            fp8=False,
            sms=eff.SMS["hopper"],
        )
        / 3
    )  # forward + backward = 3 GEMMs; the probe timed one
    measured_s = 2.0 * 4096 * 7168 * 8192 / (0.7 * gpu.peak_bf16_tflops * 1e12)
    assert float(model_s) == pytest.approx(measured_s, rel=2e-3)
    before = statistics.median(abs(p["predicted_before_ms"] / p["measured_ms"] - 1) for p in doc["points"])
    after = statistics.median(abs(p["predicted_after_ms"] / p["measured_ms"] - 1) for p in doc["points"])
    assert after < 0.01 < before  # the spec's 0.8 was wrong for this GPU; the measured 0.6 reproduces it
    assert load_catalog([out_file]).gpu("h200").hbm_efficiency == pytest.approx(0.6, rel=1e-3)


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")
def test_bench_gpu_on_cuda(cli, tmp_path):
    code, out, err = cli(
        "bench", "gpu", "--spec", SERVING, "--device", "cuda", "--db", tmp_path / "r.db", "--format", "json"
    )
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["device"]["device"] == "cuda"
    assert all(r["status"] == "ok" for r in doc["results"]), doc["results"]


def _override(tmp_path, gpu: str, **fields: float):
    path = tmp_path / f"{gpu}.yaml"
    lines = "".join(
        f"    {k}: {{value: {v}, source: test measurement, as_of: '2026-12-02', tag: user}}\n"
        for k, v in fields.items()
    )
    path.write_text(f"gpus:\n  {gpu}:\n{lines}", encoding="utf-8")
    return path


def test_plan_uses_a_measured_gemm_efficiency(cli, tmp_path):
    """A spec without a throughput figure is predicted by the compute model: a GPU measured at a
    lower GEMM efficiency than its generation's published one plans slower steps."""
    import yaml

    spec = yaml.safe_load((EXAMPLES / "lab-2node.yaml").read_text(encoding="utf-8"))
    spec["workload"].pop("mfu", None)
    spec["workload"].pop("throughput", None)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    gpu = spec["cluster"]["gpu"]
    code, base, err = cli("plan", path, "--format", "json")
    assert code in (0, 1), err
    code, slow, err = cli("plan", path, "--format", "json", "--catalog", _override(tmp_path, gpu, gemm_efficiency=0.4))
    assert code in (0, 1), err
    step = {c["id"]: c["step_time_s"] for c in json.loads(base)["candidates"]}
    slower = {c["id"]: c["step_time_s"] for c in json.loads(slow)["candidates"]}
    assert all(slower[k] > step[k] * 1.2 for k in step)


def test_serving_plan_uses_a_measured_hbm_efficiency_unless_the_spec_sets_one(tmp_path):
    from gpufabric.plan.serving_search import hbm_efficiency

    spec = load_inference_spec(read_located(SERVING))
    measured = load_catalog([_override(tmp_path, spec.cluster.gpu, hbm_efficiency=0.55)])
    expected = 0.55 if "hbm_efficiency" not in spec.workload.model_fields_set else spec.workload.hbm_efficiency
    assert hbm_efficiency(spec, measured) == expected
    assert hbm_efficiency(spec, load_catalog()) == spec.workload.hbm_efficiency
    pinned = spec.model_copy(update={"workload": spec.workload.model_copy(update={"hbm_efficiency": 0.7})})
    pinned.workload.model_fields_set.add("hbm_efficiency")
    assert hbm_efficiency(pinned, measured) == 0.7
