"""Serving-simulator benchmark: 1,000,000 requests of Llama 3 70B on H100 (tp 8) on one
core, colocated (4 replicas, round-robin, one engine simulated with its share) and
disaggregated (2 prefill + 2 decode replicas, KV over RoCE 400G); then the CPU time of
``plan`` (make_serving_plan) on every examples/serving spec.

Targets: < 5 s per 1e6 requests on one core (issue 18); <= 0.6 s CPU per serving
example plan (issue 28).

    .venv/bin/python benchmarks/bench_serving.py [--repeats 3] [--requests 1000000] [--json]
"""

from __future__ import annotations

import os

# One core: pin the math libraries before numpy loads.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402

from gpufabric.catalog import load_catalog  # noqa: E402
from gpufabric.model import inference as m  # noqa: E402
from gpufabric.sim import serving  # noqa: E402
from gpufabric.sim.serving import ServingConfig, Tokens, simulate_serving  # noqa: E402


def _configs(requests: int) -> dict[str, ServingConfig]:
    cat = load_catalog([])
    shape = m.ModelShape(
        params=70.6e9, layers=80, hidden=8192, heads=64, kv_heads=8, weight_bytes_per_param=2, kv_bytes_per_element=2
    )
    links = m.serving_links(cat, "h100-sxm", "roce-400g", 8)
    perf = m.replica_perf(
        shape=shape,
        gpu=cat.gpu("h100-sxm"),
        links=links,
        tp=8,
        pp=1,
        precision="bf16",
        mfu=0.5,
        hbm_efficiency=0.8,
        max_batch=256,
        jitter_cv=0.05,
    )
    kv = m.kv_transfer(shape=shape, tp=8, links=links, fabric=cat.fabric("roce-400g"))
    base = ServingConfig(
        perf=perf,
        prefill_replicas=4,
        max_batch=128,
        kv_capacity_tokens=m.kv_capacity_tokens(shape=shape, gpu=cat.gpu("h100-sxm"), tp=8, pp=1, memory_fraction=0.9),
        rate_rps=10.0,
        prompt=Tokens(mean=2048, cv=0.5),
        output=Tokens(mean=256, cv=0.5),
        requests=requests,
        jitter_cv=0.05,
        ttft_slo_s=1.0,
        tpot_slo_s=0.015,
        seed=1,
    )
    return {"colocated": base, "disaggregated": replace(base, prefill_replicas=2, decode_replicas=2, kv=kv)}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    configs = _configs(args.requests)
    simulate_serving(replace(configs["colocated"], requests=1000))  # warm imports
    result: dict[str, object] = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{_cpu_model()}, {os.cpu_count()} vCPU, Python {platform.python_version()}, numpy {np.__version__}",
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "requests": args.requests,
    }
    ok = True
    for name, cfg in configs.items():
        times, summary = [], {}
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            summary = simulate_serving(cfg).summary()
            times.append(time.perf_counter() - t0)
        result[name] = {
            "median_s": statistics.median(times),
            "all_s": times,
            "ttft_p99_s": summary["ttft_p99_s"],
            "tpot_p99_s": summary["tpot_p99_s"],
        }
        ok &= statistics.median(times) < 5.0 * args.requests / 1e6
    from pathlib import Path

    from gpufabric.plan.inference import make_serving_plan
    from gpufabric.spec.inference import load_inference_spec, read_located

    cat = load_catalog([])
    plans: dict[str, float] = {}
    for path in sorted((Path(__file__).resolve().parents[1] / "examples" / "serving").glob("*.yaml")):
        spec = load_inference_spec(read_located(path))
        cpu = []
        for _ in range(args.repeats):
            serving._PREFILL_MEMO.clear()  # each repeat a fresh plan, as one command is
            c0 = time.process_time()
            make_serving_plan(spec, cat, simulate=simulate_serving)
            cpu.append(time.process_time() - c0)
        plans[path.name] = statistics.median(cpu)
        ok &= plans[path.name] <= 0.6
    result["plan_cpu_s"] = plans
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"serving simulator benchmark, {result['date']}, {result['machine']}, load {result['load_average']}")
        for name in configs:
            r = result[name]
            assert isinstance(r, dict)
            print(
                f"  {name:14s} {args.requests} requests: median {r['median_s']:.2f} s over {args.repeats}"
                f" (target < 5 s per 1e6); p99 TTFT {r['ttft_p99_s']:.3f} s, p99 TPOT {r['tpot_p99_s'] * 1e3:.1f} ms"
            )
        for name, cpu_s in plans.items():
            print(f"  plan {name}: median {cpu_s:.3f} s CPU over {args.repeats} (target <= 0.6 s)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
