"""``gpufabric --help`` start-up cost: issue 10 bar < 0.3 s CPU.

Runs ``python -m gpufabric --help`` (and ``bench collectives --help``, the largest
subcommand) in a fresh process per round, as a user would, and reports the child's CPU
time (user + sys from getrusage) and wall time. The machine is shared, so wall time
includes waiting for a CPU; CPU time is what start-up itself costs (every command module
is imported, so the bar keeps their top-level imports lazy).

    .venv/bin/python benchmarks/bench_cli_help.py [--rounds 10]

Exit status 1 when the median CPU time of ``gpufabric --help`` exceeds 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_CPU_S = 0.3


def one_round(args: list[str]) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpufabric", *args], env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    opts = parser.parse_args()
    one_round(["--help"])  # warm the .pyc cache so compile time is not counted
    worst = 0.0
    for args in (["--help"], ["bench", "collectives", "--help"]):
        cpu, wall = zip(*(one_round(args) for _ in range(opts.rounds)), strict=True)
        label = "gpufabric " + " ".join(args)
        print(
            f"{label:<36} CPU median {statistics.median(cpu):.3f} s (min {min(cpu):.3f}, max {max(cpu):.3f});"
            f" wall median {statistics.median(wall):.3f} s; {opts.rounds} rounds"
        )
        if args == ["--help"]:
            worst = statistics.median(cpu)
    print(f"bar: gpufabric --help < {LIMIT_CPU_S} s CPU: {'met' if worst < LIMIT_CPU_S else 'NOT met'}")
    return 0 if worst < LIMIT_CPU_S else 1


if __name__ == "__main__":
    sys.exit(main())
