"""Planner throughput: evaluate >= 10,000 candidate designs in one vectorised pass.

Synthetic sweep: every fabric (11) x storage backend (6) x oversubscription (1, 1.5, 2,
3) x topology (2) = 528 designs, for 20 workload variants (70B with TP 8 / PP 4 and 8B
pure DP, each at 10 cluster sizes from 16 to 4,096 nodes): 10,560 candidates. Prints
the median of several repeats of table building and of evaluation, candidates per
second, and the end-to-end wall time of `gpufabric plan` on each example.

Run: .venv/bin/python benchmarks/bench_plan.py   (pinned to one core with taskset -c 0)
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 7


def workload_variants(base, catalog):
    from gpufabric.plan.table import Design

    fabrics = sorted(catalog.fabrics)
    stores = sorted(catalog.storage)
    designs = [Design(fabric=f, topology=t, oversubscription=r, storage=s)
               for f in fabrics for t in ("rail-optimized", "fat-tree") for r in (1.0, 1.5, 2.0, 3.0) for s in stores]
    specs = []
    for nodes in (16, 32, 64, 128, 256, 512, 1024, 2048, 3072, 4096):
        for tp, pp in ((8, 4), (1, 1)):
            dp = nodes * 8 // (tp * pp)
            par = base.workload.parallelism.model_copy(update={"tp": tp, "pp": pp, "dp": dp})
            model = base.workload.model.model_copy(update={"params": 70e9 if tp == 8 else 8e9})
            wl = base.workload.model_copy(update={"parallelism": par, "model": model})
            specs.append(base.model_copy(update={"cluster": base.cluster.model_copy(update={"nodes": nodes}), "workload": wl}))
    return specs, designs


def median_time(fn, repeats=REPEATS):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if all_cpus:
        os.sched_setaffinity(0, {sorted(all_cpus)[0]})  # the sweep runs on one core
    from gpufabric.exec.process import run
    from gpufabric.catalog import load_catalog
    from gpufabric.plan.evaluate import evaluate_table
    from gpufabric.plan.table import build_table, concat_tables
    from gpufabric.spec import load_spec

    catalog = load_catalog()
    base = load_spec(ROOT / "examples" / "llama3-70b-1k.yaml").spec
    specs, designs = workload_variants(base, catalog)

    def build():
        return concat_tables([build_table(s, catalog, designs) for s in specs])

    table = build()
    n = len(table["nodes"])
    evaluate_table(table)  # warm caches (max-of-normal moments per N)
    t_build = median_time(build)
    t_eval = median_time(lambda: evaluate_table(table))
    print(f"machine: {platform.node()} {platform.machine()} {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs (pinned to 1); date {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"candidates: {n:,}")
    print(f"build table: median {t_build * 1e3:.1f} ms over {REPEATS} runs")
    print(f"evaluate:    median {t_eval * 1e3:.1f} ms over {REPEATS} runs -> {n / t_eval:,.0f} candidates/s")
    print(f"build+eval:  {(t_build + t_eval) * 1e3:.1f} ms -> {n / (t_build + t_eval):,.0f} candidates/s")

    if all_cpus:
        os.sched_setaffinity(0, all_cpus)  # end-to-end runs as a user would run them
    exe = Path(sys.executable).with_name("gpufabric")
    print(f"load average before the end-to-end runs: {os.getloadavg()[0]:.1f} (shared machine: wall time inflates with it)")
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        walls, cpus = [], []
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            run([str(exe), "plan", str(example)], timeout_s=60, check=True)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        print(f"plan {example.name:22s} end to end: median wall {statistics.median(walls):.2f} s,"
              f" CPU {statistics.median(cpus):.2f} s (3 runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
