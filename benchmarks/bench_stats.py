"""Benchmark: summarising 10 million latency samples (issue 4 bar: < 1 s), and the store's commit cost.

Run: .venv/bin/python benchmarks/bench_stats.py [--samples 10000000] [--repeats 5]

Prints medians of repeats and ratios against baselines run in the same process:
* full sort: ``np.sort`` then index the percentiles, plus ``np.histogram`` on log bins
  (what a straightforward implementation does);
* ``np.percentile`` of the five percentiles alone (numpy selects, it does not sort);
* the selection design: ``np.partition`` at the percentile ranks plus a ``log`` per
  sample for the sketch buckets (what summarize() did before the sort measured faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gpufabric.results.records import Metric, Status, TestResult
from gpufabric.results.stats import summarize
from gpufabric.results.store import Store

QS = [50, 90, 99, 99.9, 99.99]


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up: page faults of the first touch, imports
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def full_sort_baseline(x: np.ndarray) -> None:
    s = np.sort(x)
    n = s.size
    [s[min(n - 1, int(q / 100 * (n - 1)))] for q in QS]
    x.mean(), x.std(ddof=1)
    np.histogram(x, bins=np.geomspace(s[0], s[-1], 41))


def selection_variant(x: np.ndarray) -> None:
    """The design summarize() started from: np.partition at the needed ranks + a log() per sample for the sketch."""
    n = x.size
    ranks = {int(q / 100 * (n - 1)) for q in QS} | {min(n - 1, int(q / 100 * (n - 1)) + 1) for q in QS} | {0, n - 1}
    np.partition(x, sorted(ranks))
    x.mean(), np.dot(x - x.mean(), x - x.mean())
    np.bincount(np.ceil(np.log(x) / np.log(1.0202)).astype(np.int64) + 2000)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    x = np.random.default_rng(42).lognormal(np.log(12.0), 0.6, args.samples)  # latency-like, us

    ours = _median_time(lambda: summarize(x, unit="us"), args.repeats)
    sort = _median_time(lambda: full_sort_baseline(x), args.repeats)
    pct = _median_time(lambda: np.percentile(x, QS), args.repeats)
    select = _median_time(lambda: selection_variant(x), args.repeats)
    half = args.samples // 2
    a, b = summarize(x[:half], unit="us"), summarize(x[half:], unit="us")
    merge = _median_time(lambda: a.merge(b), args.repeats)

    print(
        f"summarize({args.samples:,} samples): median {ours * 1e3:.0f} ms of {args.repeats} "
        f"({'PASS' if ours < 1.0 else 'FAIL'} < 1 s bar)"
    )
    print(
        f"  full-sort baseline (np.sort + log np.histogram): {sort * 1e3:.0f} ms (ours / baseline = {ours / sort:.2f})"
    )
    print(f"  np.percentile of the 5 percentiles alone: {pct * 1e3:.0f} ms (ours also does moments, histogram, sketch)")
    print(
        f"  selection variant (np.partition + per-sample log buckets): {select * 1e3:.0f} ms (ours / variant = {ours / select:.2f})"
    )
    print(f"  merge of two {half:,}-sample summaries: {merge * 1e3:.1f} ms")

    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "r.db") as store:
        run_id = store.begin_run(kind="bench", argv=["bench_stats"], fingerprint={})
        result = TestResult(
            name="t",
            tool="sockperf",
            host="h",
            status=Status.ok,
            raw_output="x" * 10_000,
            metrics=(Metric(name="lat_us", value=1.0, unit="us", samples=tuple(x[:1000].tolist())),),
        )
        commit = _median_time(lambda: store.add_result(run_id, result), 50)
    print(f"store.add_result (1,000 samples, 10 kB output, WAL + synchronous=FULL): median {commit * 1e3:.2f} ms")
    return 0 if ours < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
