"""Planner throughput: >= 1,000,000 candidate (layout x design) evaluations on one core.

Layout search as ``parallelism: auto`` runs it: every layout the 405B and 70B examples
allow (``plan.layouts.enumerate_layouts``) x every catalog design (11 fabrics x 6 storage
backends x oversubscription 1, 1.5, 2, 3 x two topologies = 528), at several cluster
sizes, evaluated in chunks of 65,536 rows with the tabulated tail
(``evaluate_table(quantise_tail=True)``). Memory-infeasible layouts are evaluated too
(the plan drops them first; here they count as work). Prints the CPU time (process time,
robust to other processes on a shared machine) and the wall time of building the tables
and of evaluating them, and the end-to-end CPU and wall time of `gpufabric plan` on each
example (the 405B example searches its layout).

Run: .venv/bin/python benchmarks/bench_plan.py   (pinned to one core)
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_ROWS = int(os.environ.get("GPUFABRIC_BENCH_ROWS", 1_000_000))  # a smaller count for the CI smoke run
CHUNK = 65_536


def workloads(catalog):
    """(spec, layouts) pairs whose layouts x designs reach TARGET_ROWS."""
    from gpufabric.plan.layouts import enumerate_layouts
    from gpufabric.spec import load_spec

    big = load_spec(ROOT / "examples" / "llama3-405b-16k.yaml").spec
    mid = load_spec(ROOT / "examples" / "llama3-70b-1k.yaml").spec
    data = mid.model_dump()
    data["workload"].pop("notes", None)
    data["workload"]["parallelism"] = "auto"
    data["workload"]["throughput"] = {"compute_efficiency": 0.6}
    mid_auto = type(mid).model_validate(data)
    out = []
    for spec in (big, mid_auto):
        for nodes in (2048, 1024, 512, 256, 128):
            s = spec.model_copy(update={"cluster": spec.cluster.model_copy(update={"nodes": nodes})})
            out.append((s, enumerate_layouts(s)))
    return out


def main() -> int:
    all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if all_cpus:
        os.sched_setaffinity(0, {sorted(all_cpus)[0]})  # the sweep runs on one core
    import numpy as np

    from gpufabric.catalog import load_catalog
    from gpufabric.exec.process import run
    from gpufabric.plan.evaluate import evaluate_table
    from gpufabric.plan.table import Design, build_table

    catalog = load_catalog()
    built = sorted(k for k, f in catalog.fabrics.items() if not f.rented_only)  # providers' fabrics are not built
    designs = [
        Design(fabric=f, topology=t, oversubscription=r, storage=s)
        for f in built
        for t in ("rail-optimized", "fat-tree")
        for r in (1.0, 1.5, 2.0, 3.0)
        for s in sorted(catalog.storage)
    ]
    work = workloads(catalog)
    D = len(designs)
    build_cpu = eval_cpu = 0.0
    wall0 = time.perf_counter()
    rows = 0
    for spec, layouts in work:
        li = np.repeat(np.arange(len(layouts)), D)
        di = np.tile(np.arange(D), len(layouts))
        for lo in range(0, len(li), CHUNK):
            c0 = time.process_time()
            t = build_table(
                spec,
                catalog,
                designs,
                layouts,
                pairs=(li[lo : lo + CHUNK], di[lo : lo + CHUNK]),
                compute_efficiency=0.6,
            )
            c1 = time.process_time()
            evaluate_table(t, quantise_tail=True)
            c2 = time.process_time()
            build_cpu += c1 - c0
            eval_cpu += c2 - c1
            rows += len(t)
        if rows >= TARGET_ROWS:
            break
    wall = time.perf_counter() - wall0
    total_cpu = build_cpu + eval_cpu
    print(
        f"machine: {platform.node()} {platform.machine()} {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs (pinned to 1); date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC;"
        f" load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"candidates (layout x design): {rows:,} ({D} designs; {sum(len(lay) for _, lay in work):,} layouts in"
        f" {len(work)} workloads, as many as needed)"
    )
    print(
        f"build tables: {build_cpu:.2f} s CPU; evaluate: {eval_cpu:.2f} s CPU; total {total_cpu:.2f} s CPU,"
        f" {wall:.2f} s wall -> {rows / total_cpu:,.0f} candidates per CPU second"
    )

    if all_cpus:
        os.sched_setaffinity(0, all_cpus)  # end-to-end runs as a user would run them
    # This checkout's source, not whatever the venv has installed.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        walls, cpus = [], []
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            run([sys.executable, "-m", "gpufabric", "plan", str(example)], timeout_s=120, check=True, env=env)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        print(
            f"plan {example.name:22s} end to end: median CPU {statistics.median(cpus):.2f} s,"
            f" wall {statistics.median(walls):.2f} s (3 runs)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
