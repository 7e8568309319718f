"""Benchmark: `gpufabric predict collective` CPU time (issue 13 bar: < 0.5 s CPU).

Run: PYTHONPATH=src .venv/bin/python benchmarks/bench_predict.py [--repeats 5]

Two figures: the CPU time of one prediction in a warm process (the model: catalog
lookups, algorithm x protocol candidates), and the CPU time (user + sys) of the whole
command as a user runs it, interpreter start and imports included, measured on a child
process with os.wait4.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
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


def whole_command(repeats: int) -> float:
    cpu = []
    for _ in range(repeats):
        # Popen + wait4: the child's own rusage (its CPU), not the benchmark's.
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpufabric", *ARGV], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        cpu.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(cpu)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"one prediction, warm process: median {in_process(args.repeats * 20) * 1e3:.2f} ms CPU")
    print(
        f"gpufabric predict collective (whole process): median {whole_command(args.repeats):.2f} s CPU (bar: < 0.5 s)"
    )
