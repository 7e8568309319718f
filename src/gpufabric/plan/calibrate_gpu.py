"""Calibrate a GPU's compute and memory figures from a ``bench gpu`` run: catalog overrides.

What the probe measured becomes three catalog fields of the GPU it ran on:

- ``gemm_efficiency``: the compute model's e_max in bf16 (model/efficiency.py: the large-GEMM
  fraction of ``peak_bf16_tflops`` before the tail wave), the median over the layer's measured
  GEMMs of the e_max that reproduces each (``implied_gemm_efficiency``); the training planner
  uses it in place of the generation's published figure;
- ``hbm_efficiency``: read-only HBM bandwidth over ``hbm_gbps`` (decode streams the weights
  and the KV cache once per step: a read, not a copy); the serving planner uses it where the
  spec sets no ``hbm_efficiency``;
- ``host_copy_gbps``: pinned device-to-host copy bandwidth (the async checkpoint snapshot).

Before/after: the serving model's decode step with the efficiency it assumed when the run
was made, and with the measured one, against the measured step, per batch.

A run measured on a CPU (the CI path) has no catalog GPU: it is refused, never written as
some GPU's figures.
"""

from __future__ import annotations

import datetime
import statistics
from dataclasses import dataclass
from typing import Any

import yaml

from gpufabric.errors import InputError
from gpufabric.model.decode import predicted_decode_s
from gpufabric.model.efficiency import generation_of, implied_gemm_efficiency


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuCalibration:
    run_id: int
    gpu: str
    device: str  # the CUDA device name the run measured
    override: dict[str, Any]  # catalog override document
    comparison: tuple[dict[str, Any], ...]  # per decode batch: measured, predicted before/after (ms)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "gpu": self.gpu,
            "device": self.device,
            "override": self.override,
            "points": list(self.comparison),
            "notes": list(self.notes),
        }


def is_gpu_run(run: Any) -> bool:
    return run.kind == "bench.gpu"


def _ok(run: Any, what: str) -> list[Any]:
    return [r for r in run.results if r.params.get("what") == what and r.status.value == "ok"]


def calibrate_gpu(run: Any, *, catalog: Any) -> GpuCalibration:
    """The override for the GPU ``run`` measured (see the module docstring).

    Raises:
        InputError: the run measured a CPU or an unknown GPU, or has none of the figures.
    """
    device = run.meta.get("device", {}) if isinstance(run.meta, dict) else {}
    gpu_ids = {r.params["gpu"] for r in run.results if "gpu" in r.params}
    name = str(device.get("name", "?"))
    if device.get("device") != "cuda" or len(gpu_ids) != 1:
        raise InputError(
            f"run {run.id} measured {device.get('device', '?')} ({name}), not a catalog GPU:"
            " GPU figures come from a `bench gpu` run on CUDA (the CPU path only checks the orchestration)"
        )
    gpu_id = gpu_ids.pop()
    gpu = catalog.gpu(gpu_id)
    fields: dict[str, float] = {}
    gemms = [r for r in _ok(run, "gemm") if r.params.get("dtype") == "bf16"]
    if gemms:
        generation = generation_of(gpu_id, gpu.generation)
        fields["gemm_efficiency"] = statistics.median(
            implied_gemm_efficiency(
                m=int(r.params["m"]),
                n=int(r.params["n"]),
                k=int(r.params["k"]),
                seconds=r.require("time_us").value * 1e-6,
                peak_tflops=gpu.peak_bf16_tflops,
                generation=generation,
            )
            for r in gemms
        )
    read = [r for r in _ok(run, "hbm") if r.params.get("label") == "hbm read"]
    if read:
        fields["hbm_efficiency"] = min(1.0, read[0].require("bw_gbps").value / gpu.hbm_gbps)
    d2h = [r for r in _ok(run, "copy") if r.params.get("label") == "copy d2h pinned"]
    if d2h:
        fields["host_copy_gbps"] = d2h[0].require("bw_gbps").value
    if not fields:
        raise InputError(f"run {run.id} has no finished GEMM, HBM or copy measurement to calibrate from")
    today = datetime.date.today().isoformat()
    entry: dict[str, Any] = {
        key: {
            "value": round(value, 4),
            "source": f"measured, gpufabric bench gpu run {run.id} ({name})",
            "as_of": today,
            "tag": "user",
        }
        for key, value in fields.items()
    }
    rows = []
    after_hbm = fields.get("hbm_efficiency")
    for r in _ok(run, "decode"):
        p = r.params
        if "predicted_time_ms" not in p or after_hbm is None:
            continue
        layer = {k: int(p[f"layer_{k}"]) for k in ("hidden", "heads", "kv_heads", "ffn", "layers")}
        mfu = float(p["mfu_prefill"])
        after = predicted_decode_s(
            gpu, batch=int(p["batch"]), context=int(p["context"]), layer=layer, mfu=mfu, hbm_efficiency=after_hbm
        )
        rows.append(
            {
                "test": r.name,
                "batch": int(p["batch"]),
                "measured_ms": r.require("time_ms").value,
                "predicted_before_ms": float(p["predicted_time_ms"]),
                "predicted_after_ms": after * 1e3,
                "hbm_efficiency_before": float(p["hbm_efficiency"]),
                "hbm_efficiency_after": after_hbm,
            }
        )
    notes = []
    if rows:
        before = statistics.median(abs(x["predicted_before_ms"] / x["measured_ms"] - 1) for x in rows)
        after_err = statistics.median(abs(x["predicted_after_ms"] / x["measured_ms"] - 1) for x in rows)
        notes.append(f"decode step: median error {before:.0%} -> {after_err:.0%} over {len(rows)} batch size(s)")
    return GpuCalibration(
        run_id=run.id,
        gpu=gpu_id,
        device=name,
        override={"gpus": {gpu_id: entry}},
        comparison=tuple(rows),
        notes=tuple(notes),
    )


def render_yaml(cal: GpuCalibration) -> str:
    header = (
        f"# Catalog override written by `gpufabric calibrate` from bench gpu run {cal.run_id} ({cal.device}).\n"
        "# Use it with: gpufabric plan SPEC --catalog THIS_FILE\n"
    )
    return header + yaml.safe_dump(cal.override, sort_keys=False)
