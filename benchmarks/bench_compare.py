"""Benchmark: ``compare`` of two runs with 100 metrics and 1e6 raw samples each (issue 16 bar: < 2 s).

Run: .venv/bin/python benchmarks/bench_compare.py [--metrics 100] [--samples 1000000] [--repeats 5]

Worst case for the statistics: every metric carries raw samples (1e6 per run, split evenly
across the metrics) and every metric has a single repeat, so each is judged by the batch
medians of its samples (lag-1 autocorrelation, one median per batch) rather than by the
cheap per-repeat path. A second figure times the common case (``--repeats`` repeats, the
samples riding along unused). Prints medians of repeats; the records are built before the
clock starts (loading them is the store's cost, timed in bench_stats.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from gpufabric.results.compare import compare_runs
from gpufabric.results.records import Direction, Metric, RunRecord, Status, TestResult


def _run(run_id: int, rng: np.random.Generator, *, metrics: int, samples: int, repeats: int) -> RunRecord:
    per = samples // (metrics * repeats)
    results = []
    for r in range(repeats):
        ms = []
        for k in range(metrics):
            x = rng.lognormal(np.log(10.0 + k), 0.15, per)
            ms.append(
                Metric(
                    name=f"lat{k}_p50_us",
                    value=float(np.median(x)),
                    unit="us",
                    direction=Direction.lower,
                    samples=tuple(x.tolist()),
                )
            )
        results.append(
            TestResult(
                name="sockperf.data",
                tool="sockperf",
                host="node1",
                status=Status.ok,
                metrics=tuple(ms),
                params={"repeat": str(r)},
            )
        )
    return RunRecord(
        id=run_id,
        kind="bench",
        status="passed",
        started_at=0.0,
        finished_at=1.0,
        argv=(),
        fingerprint={},
        results=tuple(results),
    )


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", type=int, default=100)
    ap.add_argument("--samples", type=int, default=1_000_000, help="raw samples per run")
    ap.add_argument("--repeats", type=int, default=5, help="repeats per metric in the common case")
    ap.add_argument("--times", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(42)
    a1, b1 = (_run(i, rng, metrics=args.metrics, samples=args.samples, repeats=1) for i in (1, 2))
    worst = _median_time(lambda: compare_runs(a1, b1), args.times)
    aR, bR = (_run(i, rng, metrics=args.metrics, samples=args.samples, repeats=args.repeats) for i in (3, 4))
    common = _median_time(lambda: compare_runs(aR, bR), args.times)
    ok = worst < 2.0
    print(
        f"compare_runs, {args.metrics} metrics x {args.samples:,} samples per run, 1 repeat (batch medians): "
        f"median {worst * 1e3:.0f} ms of {args.times} ({'PASS' if ok else 'FAIL'} < 2 s bar)"
    )
    print(
        f"compare_runs, same samples over {args.repeats} repeats (per-repeat summaries): median {common * 1e3:.0f} ms"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
