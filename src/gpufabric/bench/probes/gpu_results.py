"""Parent side of ``bench gpu``: the worker's records -> TestResults, with the models' predictions.

Each measurement becomes one result named by what it measured (``gpu.gemm.qkv.tp8.bf16``,
``gpu.hbm.read``, ``gpu.decode.b32``, ``gpu.prefill.t2048``, ``gpu.copy.h2d.pinned``), so
thresholds, ``compare`` and ``calibrate`` address it by name. Times of the decode and prefill
model are for the layers built; they are scaled to the spec's layer count (every layer does
the same work) before they are set beside the serving model's prediction.

Efficiencies are against the catalog peak of the GPU the run measured (identified from the
CUDA device name, ``catalog.names``); on a CPU there is no catalog peak and none is given.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from gpufabric.catalog.names import gpu_id
from gpufabric.model.decode import predicted_decode_s
from gpufabric.results.records import Direction, Metric, Status, TestResult

#: Catalog peak field per GEMM dtype.
PEAK_FIELDS = {
    "bf16": "peak_bf16_tflops",
    "fp16": "peak_bf16_tflops",
    "fp8": "peak_fp8_tflops",
    "fp32": "peak_fp32_tflops",
}


def _name(rec: dict[str, Any]) -> str:
    kind = rec["what"]
    if kind == "gemm":
        return f"gpu.gemm.{rec['name']}.tp{rec['tp']}.{rec['dtype']}"
    if kind == "decode":
        return f"gpu.decode.b{rec['batch']}"
    if kind == "prefill":
        return f"gpu.prefill.t{rec['tokens']}"
    return "gpu." + rec["label"].replace(" ", ".")


def _time_metric(samples: Sequence[float], scale: float, unit: str, factor: float) -> Metric:
    """Median time (the figure) with every repeat kept as a sample, in ``unit``."""
    values = tuple(s * scale * factor for s in samples)
    return Metric(
        name=f"time_{unit}", value=statistics.median(values), unit=unit, direction=Direction.lower, samples=values
    )


def gpu_results(
    records: Sequence[dict[str, Any]],
    *,
    host: str,
    info: dict[str, Any],
    catalog: Any,
    spec: Any,
    argv: tuple[str, ...],
) -> list[TestResult]:
    """One TestResult per measurement record (a failed one with its error as reason)."""
    measured_id = gpu_id(str(info.get("name", ""))) if info.get("device") == "cuda" else None
    gpu = catalog.gpu(measured_id) if measured_id else None
    out = []
    for rec in records:
        params: dict[str, str] = {
            k: str(rec[k])
            for k in (
                "what",
                "label",
                "tp",
                "m",
                "n",
                "k",
                "dtype",
                "batch",
                "context",
                "tokens",
                "bytes",
                "layers_built",
            )
            if k in rec
        }
        if measured_id:
            params["gpu"] = measured_id
        name = _name(rec)
        if rec.get("error"):
            out.append(
                TestResult(
                    name=name,
                    tool="torch",
                    host=host,
                    status=Status.failed,
                    reason=rec["error"],
                    argv=argv,
                    params=params,
                )
            )
            continue
        samples = rec["samples_s"]
        median_s = statistics.median(samples)
        metrics = list(_metrics(rec, median_s, samples, gpu=gpu, spec=spec, params=params))
        out.append(
            TestResult(
                name=name,
                tool="torch",
                host=host,
                status=Status.ok,
                metrics=tuple(metrics),
                argv=argv,
                started_at=float(rec.get("t", 0.0)),
                duration_s=sum(samples),
                params=params,
            )
        )
    return out


def _metrics(
    rec: dict[str, Any], median_s: float, samples: Sequence[float], *, gpu: Any, spec: Any, params: dict[str, str]
) -> list[Metric]:
    kind = rec["what"]
    if kind == "gemm":
        tflops = rec["flops"] / median_s / 1e12
        metrics = [_time_metric(samples, 1.0, "us", 1e6), Metric(name="tflops", value=tflops, unit="TFLOP/s")]
        if gpu is not None:
            metrics.append(Metric(name="efficiency", value=tflops / getattr(gpu, PEAK_FIELDS[rec["dtype"]]), unit=""))
        return metrics
    if kind in ("hbm", "copy"):
        gbps = rec["bytes"] / median_s / 1e9
        metrics = [_time_metric(samples, 1.0, "us", 1e6), Metric(name="bw_gbps", value=gbps, unit="GB/s")]
        if kind == "hbm" and gpu is not None:
            metrics.append(Metric(name="efficiency", value=gbps / gpu.hbm_gbps, unit=""))
        return metrics
    # decode / prefill: scale the built layers to the spec's model
    scale = rec["layers_spec"] / rec["layers_built"]
    metrics = [_time_metric(samples, scale, "ms", 1e3)]
    step_s = median_s * scale
    if kind == "decode":
        metrics.append(Metric(name="tokens_per_s", value=rec["batch"] / step_s, unit="tok/s"))
        layer = _layer(rec)
        params.update({f"layer_{k}": str(v) for k, v in layer.items()})
        if gpu is not None:
            mfu, hbm = spec_efficiencies(spec)
            predicted = predicted_decode_s(
                gpu, batch=rec["batch"], context=rec["context"], layer=layer, mfu=mfu, hbm_efficiency=hbm
            )
            params["predicted_time_ms"] = f"{predicted * 1e3:.6g}"
            params["mfu_prefill"], params["hbm_efficiency"] = str(mfu), str(hbm)
            params["error_pct"] = f"{(predicted / step_s - 1) * 100:+.1f}"
    else:
        metrics.append(Metric(name="tokens_per_s", value=rec["tokens"] / step_s, unit="tok/s"))
    return metrics


def _layer(rec: dict[str, Any]) -> dict[str, Any]:
    """The layer a decode/prefill record timed, with the spec's layer count."""
    return {k: rec[k] for k in ("hidden", "heads", "kv_heads", "ffn")} | {"layers": rec["layers_spec"]}


#: The serving model's defaults (spec/inference.py InferenceWorkload) for training specs.
DEFAULT_MFU_PREFILL = 0.5
DEFAULT_HBM_EFFICIENCY = 0.8


def spec_efficiencies(spec: Any) -> tuple[float, float]:
    """(prefill MFU, HBM efficiency) the serving model uses for ``spec``."""
    wl = spec.workload
    return float(getattr(wl, "mfu_prefill", DEFAULT_MFU_PREFILL)), float(
        getattr(wl, "hbm_efficiency", DEFAULT_HBM_EFFICIENCY)
    )
