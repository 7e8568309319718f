"""Benchmark: ingest of a 100 MB nccl-tests log (issue 13 bar: < 5 s).

Run: PYTHONPATH=src .venv/bin/python benchmarks/bench_ingest.py [--mb 100] [--repeats 3]

The log is built from real tables of the corpus (tests/data/nccl-tests): each copy of
the 2-node nccl-tests#309 table under ``srun -l`` prefixes, with NCCL INFO lines of
other ranks interleaved, until the file reaches the size. It is parsed the way
``gpufabric ingest`` does (read, prefix stripping, every run, validation, metrics), and
the whole CLI path is timed too, with --dry-run (no database write).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "data" / "nccl-tests" / "public_h100_ndr_2node_issue309.txt"


def build(path: Path, megabytes: float) -> int:
    lines = TABLE.read_text().splitlines()
    chunk = []
    for i, line in enumerate(lines):
        chunk.append(f" 0: {line}")
        if i % 3 == 0:
            chunk.append(
                f" {1 + i % 15}: bm-h100-02:26634:26701 [{1 + i % 7}] NCCL INFO Channel 0{i % 8}/0 : 9[1] -> 1[1] via NET/IB/1"
            )
    block = "\n".join(chunk) + "\n"
    copies = max(1, int(megabytes * 1e6 / len(block)))
    path.write_text(block * copies)
    return copies


def main_() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "all_reduce_perf.log"
        copies = build(log, args.mb)
        size_mb = log.stat().st_size / 1e6
        parse_s: list[float] = []
        parse_cpu: list[float] = []
        cli_s: dict[str, list[float]] = {}
        cli_cpu: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            start, cpu = time.perf_counter(), time.process_time()
            runs = parse_nccl_tests(log.read_text(), source=str(log))
            parse_s.append(time.perf_counter() - start)
            parse_cpu.append(time.process_time() - cpu)
            assert len(runs) == copies
            for mode, extra in (
                ("dry-run", ["--dry-run"]),
                ("stored", ["--db", str(Path(tmp) / f"r{len(parse_s)}.db")]),
            ):
                start = time.perf_counter()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "gpufabric", "ingest", "--tool", "nccl-tests", str(log)]
                    + extra
                    + ["--format", "json"],
                    stdout=subprocess.DEVNULL,
                    stdin=subprocess.DEVNULL,
                )
                _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU time
                cli_s.setdefault(mode, []).append(time.perf_counter() - start)
                cli_cpu.setdefault(mode, []).append(usage.ru_utime + usage.ru_stime)
                assert os.waitstatus_to_exitcode(status) == 0, mode
    start = time.perf_counter()
    x = 0.0
    for _ in range(1_000_000):
        x += float("1.5")
    print(f"machine: 1M float() calls in {time.perf_counter() - start:.2f} s (about 0.08 s on an idle modern core)")
    print(f"log: {size_mb:.1f} MB, {copies} runs of 32 sizes")
    print(
        f"parse_nccl_tests: median {statistics.median(parse_cpu):.2f} s CPU, {statistics.median(parse_s):.2f} s wall"
        f" ({args.repeats} repeats)"
    )
    for mode in cli_cpu:
        print(
            f"gpufabric ingest ({mode}, --format json, whole process): median {statistics.median(cli_cpu[mode]):.2f} s"
            f" CPU, {statistics.median(cli_s[mode]):.2f} s wall (bar: < 5 s)"
        )


if __name__ == "__main__":
    main_()
