"""Simulator benchmark: 16,384 ranks x 100,000 steps with normal jitter, stragglers and a
hiccup process, on one core; and the speed-up over the brute-force path measured in the
same process (brute force on fewer steps, scaled per step).

Targets (issue 3): < 2 s for the order-statistics path; >= 100x faster than brute force.

    .venv/bin/python benchmarks/bench_sim.py [--repeats 5] [--brute-steps 200]
"""

from __future__ import annotations

import os

# One core: pin the math libraries before numpy loads (the engine is ufunc-bound and
# single-threaded anyway; this keeps BLAS pools from skewing a shared machine).
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

from gpufabric.sim import Hiccup, Normal, SimConfig, Stragglers, simulate  # noqa: E402

CONFIG = SimConfig(
    num_ranks=16_384,
    ranks_per_node=8,
    compute=Normal(mu_s=0.100, sigma_s=0.002),
    stragglers=Stragglers(fraction=0.01, factor=1.5),
    hiccup=Hiccup(prob=0.001, delay_s=0.005),
    steps=100_000,
    seed=1,
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _time(fn, repeats: int) -> tuple[list[float], object]:
    """Wall times of ``repeats`` calls of ``fn``, and what the last call returned."""
    out, last = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        last = fn()
        out.append(time.perf_counter() - t0)
    return out, last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--brute-steps", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    simulate(replace(CONFIG, steps=1000))  # warm imports and caches
    fast_cfg = replace(CONFIG, attribution=False)
    fast, fast_result = _time(lambda: simulate(fast_cfg), args.repeats)
    full, _ = _time(lambda: simulate(CONFIG), args.repeats)
    brute_cfg = replace(fast_cfg, steps=args.brute_steps)
    brute, _ = _time(lambda: simulate(brute_cfg, brute_force=True), max(1, args.repeats // 2 + 1))
    brute_per_step = statistics.median(brute) / args.brute_steps
    fast_per_step = statistics.median(fast) / CONFIG.steps
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{_cpu_model()}, {os.cpu_count()} vCPU, Python {platform.python_version()}, numpy {np.__version__}",
        "ranks": CONFIG.num_ranks,
        "steps": CONFIG.steps,
        "order_statistics_s_median": statistics.median(fast),
        "order_statistics_s_all": fast,
        "with_attribution_s_median": statistics.median(full),
        "brute_force_steps": args.brute_steps,
        "brute_force_per_step_ms_median": brute_per_step * 1e3,
        "brute_force_scaled_s": brute_per_step * CONFIG.steps,
        "speedup": brute_per_step / fast_per_step,
        "p99_ms": fast_result.step_time_ms.p99,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"simulator benchmark, {result['date']}, {result['machine']}")
        print(
            f"  {CONFIG.num_ranks} ranks x {CONFIG.steps} steps, normal jitter + 1% stragglers x1.5 + hiccup 0.001:5ms"
        )
        print(
            f"  order statistics   median {result['order_statistics_s_median']:.3f} s over {args.repeats} (target < 2 s)"
        )
        print(f"  with attribution   median {result['with_attribution_s_median']:.3f} s (adds a straggler-free rerun)")
        print(
            f"  brute force        {result['brute_force_per_step_ms_median']:.3f} ms/step over {args.brute_steps} steps"
            f" -> {result['brute_force_scaled_s']:.0f} s for {CONFIG.steps} steps"
        )
        print(f"  speed-up           {result['speedup']:.0f}x (target >= 100x)")
    ok = result["order_statistics_s_median"] < 2.0 and result["speedup"] >= 100
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
