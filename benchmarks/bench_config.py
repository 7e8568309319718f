"""``gpufabric config`` on the 16,384-GPU example (2,048 hosts): issue 11 bar < 10 s.

Runs the CLI in a fresh process per round, exactly as a user would (planner, render,
contained atomic write of every file, bash -n / nft -c checks), into a temporary --out,
and reports wall time and the process's CPU time (user + sys of the child). Wall time on
a shared machine includes waiting for the CPU; CPU time is what the command itself costs.

    .venv/bin/python benchmarks/bench_config.py [--rounds 3] [--spec examples/llama3-405b-16k.yaml]

Exit status 1 when the median wall time exceeds 10 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 10.0


def one_round(spec: Path) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory(prefix="bench-config-") as tmp:
        out = Path(tmp) / "bundle"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "gpufabric", "config", str(spec), "--out", str(out), "--seed", "bench"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            check=False,
        )
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"config failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        files = sum(len(f) for _, _, f in os.walk(out))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "llama3-405b-16k.yaml")
    args = parser.parse_args()
    walls, cpus = [], []
    for i in range(args.rounds):
        wall, cpu, files = one_round(args.spec)
        walls.append(wall)
        cpus.append(cpu)
        print(f"round {i + 1}: wall {wall:.2f} s, cpu {cpu:.2f} s, {files} files")
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(
        f"median: wall {wall:.2f} s, cpu {cpu:.2f} s (bar: wall < {LIMIT_S:g} s); load average {os.getloadavg()[0]:.1f}"
    )
    return 0 if wall < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
