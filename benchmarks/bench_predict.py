"""Benchmark: `gpufabric predict collective` CPU time (issue 13 bar: < 0.5 s CPU).

Run: PYTHONPATH=src .venv/bin/python benchmarks/bench_predict.py [--repeats 5]

Figures: the CPU time of one prediction in a warm process (the model: catalog lookups,
algorithm x protocol candidates), and the CPU time (user + sys) of the whole command as a
user runs it, interpreter start and imports included, measured on a child process with
os.wait4, twice: as this environment runs it (with PYTHONDONTWRITEBYTECODE=1, as on the
development VM, every gpufabric module is compiled from source at every start), and with
a warm bytecode cache, as an installed package runs (pip writes the .pyc files at install;
here a temporary PYTHONPYCACHEPREFIX, filled by one unmeasured run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from gpufabric.catalog import load_catalog
from gpufabric.model.collectives import predict_collective

ARGV = [
    "predict",
    "collective",
    "--op",
    "all_reduce",
    "--bytes",
    "1G",
    "--nodes",
    "2",
    "--gpu",
    "h100-sxm",
    "--fabric",
    "ib-ndr",
    "--format",
    "json",
]


def in_process(repeats: int) -> float:
    catalog = load_catalog()
    predict_collective(
        op="all_reduce", size_bytes=2**30, nodes=2, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", catalog=catalog
    )
    times = []
    for _ in range(repeats):
        start = time.process_time()
        predict_collective(
            op="all_reduce",
            size_bytes=2**30,
            nodes=2,
            gpus_per_node=8,
            gpu="h100-sxm",
            fabric="ib-ndr",
            catalog=catalog,
        )
        times.append(time.process_time() - start)
    return statistics.median(times)


def whole_command(repeats: int, env: dict[str, str] | None = None) -> list[float]:
    cpu = []
    for _ in range(repeats):
        # Popen + wait4: the child's own rusage (its CPU), not the benchmark's.
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpufabric", *ARGV], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        cpu.append(usage.ru_utime + usage.ru_stime)
    return cpu


def _line(label: str, cpu: list[float]) -> str:
    runs = ", ".join(f"{x:.2f}" for x in cpu)
    return f"gpufabric predict collective ({label}): median {statistics.median(cpu):.2f} s CPU [{runs}] (bar: < 0.5 s)"


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"one prediction, warm process: median {in_process(args.repeats * 20) * 1e3:.2f} ms CPU")
    as_is = "PYTHONDONTWRITEBYTECODE=1" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "bytecode cache as configured"
    print(_line(f"whole process, {as_is}", whole_command(args.repeats)))
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": cache}
        whole_command(1, env)  # fills the cache
        print(_line("whole process, warm bytecode cache (an installed package)", whole_command(args.repeats, env)))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
