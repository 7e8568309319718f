"""GPU probe worker: ``python -m gpufabric.bench.probes.gpu CONFIG.json`` (one rank, one device).

Runs the measurements of a :class:`~gpufabric.bench.probes.gpu_plan.GpuPlan` in order and
writes one ``gpu`` record per measurement (seconds per repeat), so what finished before a
crash or a kill is kept. A measurement that fails (fp8 unsupported, out of memory) writes
a ``gpu`` record with ``error`` and the next one runs.

Timing: on CUDA each repeat is bracketed by CUDA events (``torch.cuda.Event(enable_timing=
True)``; elapsed_time is in ms with ~0.5 us resolution, CUDA runtime API "Event Management"),
after warm-up repeats that absorb cuBLAS heuristics, lazy module loading and clock ramp-up;
on the CPU ``time.perf_counter`` around a synchronous call.
"""

from __future__ import annotations

import importlib
import math
import platform
import time
from collections.abc import Callable
from functools import partial
from typing import Any

#: torch dtypes by the plan's names.
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn"}


def device_info(torch: Any, device: str) -> dict[str, Any]:
    """What the figures were measured on (stored in the run's fingerprint)."""
    info: dict[str, Any] = {"torch": torch.__version__, "device": device, "machine": platform.machine()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            memory_bytes=props.total_memory,
            cuda=torch.version.cuda,
        )
        try:  # pynvml ships with torch's CUDA wheels (nvidia-ml-py); clocks and driver need it
            pynvml = importlib.import_module("pynvml")  # untyped, optional
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
            info["driver"] = pynvml.nvmlSystemGetDriverVersion()
            info["sm_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
            info["sm_clock_max_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
            info["mem_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)
            info["power_limit_w"] = pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0
        except Exception as exc:  # optional: a missing NVML leaves the clocks unknown, not the run failed
            info["nvml"] = f"unavailable: {type(exc).__name__}"
    else:
        info.update(name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return info


class Timer:
    """Seconds per call of ``fn`` after warm-up, by CUDA events or perf_counter."""

    def __init__(self, torch: Any, device: str, *, warmup: int, repeats: int) -> None:
        self.torch, self.cuda, self.warmup, self.repeats = torch, device == "cuda", warmup, repeats

    def __call__(self, fn: Callable[[], Any]) -> list[float]:
        for _ in range(self.warmup):
            fn()
        if not self.cuda:
            out = []
            for _ in range(self.repeats):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            return out
        cuda = self.torch.cuda
        cuda.synchronize()
        events = [(cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)) for _ in range(self.repeats)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        cuda.synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in events]


def _gemm(torch: Any, dev: Any, g: dict[str, Any]) -> Callable[[], Any]:
    gen = torch.Generator(device=dev).manual_seed(0)
    if g["dtype"] == "fp8":
        # torch._scaled_mm: A row-major, B column-major, per-tensor scales, bf16 out (the
        # Transformer Engine fp8 GEMM path on Hopper/Blackwell; cuBLASLt needs sm_89+).
        a = torch.randn(g["m"], g["k"], device=dev, generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(g["n"], g["k"], device=dev, generator=gen).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = getattr(torch, _DTYPES[g["dtype"]])
    a = torch.randn(g["m"], g["k"], device=dev, dtype=dtype, generator=gen)
    b = torch.randn(g["k"], g["n"], device=dev, dtype=dtype, generator=gen)
    return lambda: torch.mm(a, b)


class Layer:
    """One Llama-style layer with random weights and a KV cache (norms left out: they are
    elementwise and a few us of a multi-ms step)."""

    def __init__(self, torch: Any, dev: Any, lay: dict[str, Any], *, batch: int, context: int) -> None:
        self.t = torch
        dtype = getattr(torch, _DTYPES[lay["dtype"]])
        h, heads, kvh, f = lay["hidden"], lay["heads"], lay["kv_heads"], lay["ffn"]
        self.heads, self.kvh, self.hd = heads, kvh, h // heads
        gen = torch.Generator(device=dev).manual_seed(1)

        def w(*shape: int) -> Any:
            return torch.randn(*shape, device=dev, dtype=dtype, generator=gen) * (1.0 / math.sqrt(shape[0]))

        self.wqkv, self.wo = w(h, (heads + 2 * kvh) * self.hd), w(heads * self.hd, h)
        self.wup, self.wdown = w(h, 2 * f), w(f, h)
        self.k = torch.randn(batch, kvh, context, self.hd, device=dev, dtype=dtype, generator=gen)
        self.v = torch.randn(batch, kvh, context, self.hd, device=dev, dtype=dtype, generator=gen)

    def __call__(self, x: Any, *, causal: bool) -> Any:
        F = self.t.nn.functional
        b, s, _ = x.shape
        qkv = x @ self.wqkv
        q, k, v = qkv.split([self.heads * self.hd, self.kvh * self.hd, self.kvh * self.hd], dim=-1)
        q = q.view(b, s, self.heads, self.hd).transpose(1, 2)
        if causal:  # prefill: attention over the prompt itself
            k = k.view(b, s, self.kvh, self.hd).transpose(1, 2)
            v = v.view(b, s, self.kvh, self.hd).transpose(1, 2)
        else:  # decode: one new token against the cache (its own K/V written into the last slot)
            self.k[:, :, -1:] = k.view(b, s, self.kvh, self.hd).transpose(1, 2)
            self.v[:, :, -1:] = v.view(b, s, self.kvh, self.hd).transpose(1, 2)
            k, v = self.k, self.v
        att = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=self.kvh != self.heads)
        x = x + att.transpose(1, 2).reshape(b, s, -1) @ self.wo
        gate, up = (x @ self.wup).chunk(2, dim=-1)
        return x + (F.silu(gate) * up) @ self.wdown


def _model(torch: Any, dev: Any, lay: dict[str, Any], *, batch: int, context: int, tokens: int) -> Callable[[], Any]:
    layers = [Layer(torch, dev, lay, batch=batch, context=context) for _ in range(lay["layers_built"])]
    dtype = getattr(torch, _DTYPES[lay["dtype"]])
    x = torch.randn(batch, tokens, lay["hidden"], device=dev, dtype=dtype)
    causal = tokens > 1

    @torch.inference_mode()
    def step() -> Any:
        y = x
        for layer in layers:
            y = layer(y, causal=causal)
        return y

    return step


def measurements(torch: Any, dev: Any, cfg: dict[str, Any]) -> list[tuple[dict[str, Any], Callable[[], Callable]]]:
    """(record fields, builder of the timed callable) for every measurement, in plan order."""
    out: list[tuple[dict[str, Any], Callable[[], Callable]]] = []
    for g in cfg["gemms"]:
        out.append(
            (
                {"what": "gemm", "label": g["label"], "flops": 2.0 * g["m"] * g["n"] * g["k"], **g},
                partial(_gemm, torch, dev, g),
            )
        )
    n = cfg["hbm_bytes"] // 4

    def copy() -> Callable[[], Any]:
        src, dst = torch.ones(n, device=dev), torch.empty(n, device=dev)
        return lambda: dst.copy_(src)

    def read() -> Callable[[], Any]:
        src = torch.ones(n, device=dev)
        return lambda: src.sum()

    # copy moves every byte twice (read + write), as STREAM counts its Copy kernel.
    out.append(({"what": "hbm", "label": "hbm copy", "bytes": 2 * cfg["hbm_bytes"]}, copy))
    out.append(({"what": "hbm", "label": "hbm read", "bytes": cfg["hbm_bytes"]}, read))
    lay, ctx = cfg["layer"], cfg["decode_context_tokens"]
    for b in cfg["decode_batches"]:
        out.append(
            (
                {"what": "decode", "label": f"decode batch {b}", "batch": b, "context": ctx, **_layers(lay)},
                partial(_model, torch, dev, lay, batch=b, context=ctx, tokens=1),
            )
        )
    for t in cfg["prefill_tokens"]:
        out.append(
            (
                {"what": "prefill", "label": f"prefill {t}", "tokens": t, **_layers(lay)},
                partial(_model, torch, dev, lay, batch=1, context=1, tokens=t),
            )
        )
    for kind in ("pinned", "pageable") if cfg["device"] == "cuda" else ("pageable",):
        for way in ("h2d", "d2h"):
            out.append(
                (
                    {"what": "copy", "label": f"copy {way} {kind}", "bytes": cfg["copy_bytes"]},
                    partial(_copy, torch, dev, cfg, kind, way),
                )
            )
    return out


def _layers(lay: dict[str, Any]) -> dict[str, Any]:
    """The built layer's shape, carried by each decode/prefill record (what the time is of)."""
    return {k: lay[k] for k in ("hidden", "heads", "kv_heads", "ffn", "layers_built", "layers_spec")}


def _copy(torch: Any, dev: Any, cfg: dict[str, Any], kind: str, way: str) -> Callable[[], Any]:
    n = cfg["copy_bytes"]
    host = torch.empty(n, dtype=torch.uint8, pin_memory=kind == "pinned")
    device = torch.empty(n, dtype=torch.uint8, device=dev)
    # non_blocking only helps from pinned memory; from pageable memory the driver stages
    # through its own pinned buffer and the call is synchronous (CUDA C guide, 3.2.6.1).
    blocking = kind != "pinned"
    if way == "h2d":
        return lambda: device.copy_(host, non_blocking=not blocking)
    return lambda: host.copy_(device, non_blocking=not blocking)


def run(w: Any) -> None:
    import torch

    cfg = w.config
    device = cfg["device"]
    dev = torch.device("cuda", w.local_rank) if device == "cuda" else torch.device("cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"--device cuda: no CUDA device here (torch {torch.__version__}, built for CUDA {torch.version.cuda})"
            )
        torch.cuda.set_device(dev)
    w.record("ready", device=str(dev), info=device_info(torch, device))
    timer = Timer(torch, device, warmup=int(cfg["warmup"]), repeats=int(cfg["repeats"]))
    timeout = float(cfg["op_timeout_s"])
    for fields, build in measurements(torch, dev, cfg):
        w.arm(f"gpu {fields['label']}", timeout)
        try:
            samples = timer(build())
            w.record("gpu", samples_s=samples, **fields)
        except Exception as exc:  # one unsupported or oversized measurement must not lose the others
            w.record(
                "gpu", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}", **fields
            )
        finally:
            w.disarm()
            if device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    import sys

    from gpufabric.bench.probes.worker import main

    sys.exit(main(run))
