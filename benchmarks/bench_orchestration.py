"""Orchestration overhead of ``gpufabric bench --suite quick`` (issue 4 bar: < 5 % of wall time).

Runs the real quick suite on this machine (fio on a temp scratch dir, iperf3 and sockperf
on loopback) through the same path as the CLI: plan, fingerprint, open the store, run each
test through LocalExecutor, store each result as it arrives, judge SLOs, finish. Time
inside tool processes (servers included) is summed from each result's ``duration_s``;
everything else -- planning, fingerprinting, spawning bookkeeping, parsing, SQLite
commits, verdicts, scratch cleanup -- is orchestration.

    .venv/bin/python benchmarks/bench_orchestration.py [--rounds 3] [--repeats N]

Prints one line per round and the median overhead. Round 1 runs in a cold process (what
one ``gpufabric bench`` invocation pays: first imports of lazily loaded modules land in
it); later rounds show the steady state. Exit status 1 when the median exceeds 5 %.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def one_round(repeats: int | None) -> tuple[float, float, int, dict[str, float]]:
    from gpufabric.bench import scratch as scratch_mod
    from gpufabric.bench.fingerprint import collect
    from gpufabric.bench.runners import LocalExecutor
    from gpufabric.bench.suite import plan_suite, run_suite
    from gpufabric.results.records import Direction, Slo
    from gpufabric.results.store import Store

    slos = [
        Slo(test="iperf3.tcp", metric="throughput_gbit_s", direction=Direction.higher, minimum=0.1),
        Slo(test="sockperf.udp", metric="lat_p99_us", direction=Direction.lower, maximum=10_000),
    ]
    parts: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        scratch = scratch_mod.prepare(None)
        try:
            mark = time.monotonic()
            tests = plan_suite("quick", scratch=scratch.path, repeats=repeats)
            parts["plan"] = time.monotonic() - mark
            with Store.open(Path(tmp) / "bench.db") as store:
                mark = time.monotonic()
                fingerprint = collect()
                parts["fingerprint"] = time.monotonic() - mark
                with store.recording("bench", ["bench", "--suite", "quick"], fingerprint) as rec:
                    outcome = run_suite(tests, executor=LocalExecutor(), recorder=rec, slos=slos)
                parts["suite loop"] = outcome.wall_s - outcome.tool_s
        finally:
            mark = time.monotonic()
            scratch.cleanup()
            parts["cleanup"] = time.monotonic() - mark
        wall = time.monotonic() - start
    return wall, outcome.tool_s, len(outcome.results), parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=None, help="repeats per test (default: the quick suite's)")
    args = parser.parse_args(argv)
    overheads = []
    for i in range(args.rounds):
        wall, tool, count, parts = one_round(args.repeats)
        overhead = (wall - tool) / wall
        overheads.append(overhead)
        detail = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
        print(
            f"round {i + 1}: {count} tests, wall {wall:.2f} s, in tools {tool:.2f} s, "
            f"orchestration {wall - tool:.2f} s = {overhead:.1%} ({detail})"
        )
    median = statistics.median(overheads)
    print(f"median orchestration overhead: {median:.1%} of suite wall time (bar: < 5 %)")
    return 0 if median < 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
