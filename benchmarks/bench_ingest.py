"""Benchmark: ingest of a 100 MB nccl-tests log (issue 13 bar: < 5 s).

Run: PYTHONPATH=src .venv/bin/python benchmarks/bench_ingest.py [--mb 100] [--repeats 3]

Two log shapes, both under ``srun -l`` prefixes:

* ``tables`` (the worst case): copies of the real 2-node nccl-tests#309 table of the
  corpus (tests/data/nccl-tests), with NCCL INFO lines of other ranks interleaved, until
  the file reaches the size: 10,617 runs, 340,000 size rows and 680,000 metrics per
  100 MB.
* ``info`` (what a large job's log looks like): one 1,000-rank job (125 nodes x 8 GPUs)
  with NCCL_DEBUG=INFO, running four binaries; each prints the nccl-tests header with its
  1,000 device lines, then every rank's NCCL INFO lines (bootstrap, network, channels,
  trees, rings: the message shapes of the corpus's EFA capture), some of them between
  the size rows, then the footer. Almost all of the 100 MB is INFO lines.

Each log is parsed the way ``gpufabric ingest`` does (read, prefix stripping, every run,
validation, metrics), and the whole CLI is timed as a user runs it: with --dry-run (no
database) and storing the run in a fresh database. CPU is the child's own (os.wait4).
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
CORPUS = ROOT / "tests" / "data" / "nccl-tests"
TABLE = CORPUS / "public_h100_ndr_2node_issue309.txt"
#: A real table with its header; the ``info`` shape replaces the device lines with 1,000.
BIG_TABLE = CORPUS / "public_h100_8node_issue309.txt"
RANKS, GPUS_PER_NODE = 1000, 8
BINARIES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")


def build_tables(path: Path, megabytes: float) -> int:
    """The worst case: the file is all tables. Returns the number of runs."""
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


def _info_lines(rank: int, step: int) -> list[str]:
    """One rank's NCCL INFO lines of one communicator set-up (message shapes of the corpus's
    public_efa_t4_2node_tag_output.txt, at 1,000 ranks over InfiniBand)."""
    node, dev = divmod(rank, GPUS_PER_NODE)
    who = f"gpu-{node:03d}:{41000 + rank}:{41100 + rank} [{dev}] NCCL INFO"
    peer_next, peer_prev = (rank + 1) % RANKS, (rank - 1) % RANKS
    lines = [
        f"{who} Bootstrap : Using ib0:10.{node // 250}.{node % 250}.{dev + 10}<0>",
        f"{who} NET/IB : Using [0]mlx5_{dev}:1/IB [RO]; OOB ib0:10.{node // 250}.{node % 250}.{dev + 10}<0>",
        f"{who} Using network IB",
        f"{who} comm 0x7f{rank:04x}c000f60 rank {rank} nranks {RANKS} cudaDev {dev} busId {dev + 1:x}9000 - Init START",
        f"{who} Setting affinity for GPU {dev} to ffffff00,0000ffff,ff000000",
        f"{who} Trees [0] {peer_next}/-1/-1->{rank}->{peer_prev} [1] {peer_prev}/-1/-1->{rank}->{peer_next}",
        f"{who} 16 coll channels, 16 p2p channels, 2 p2p channels per peer",
    ]
    for channel in range(16):
        via = "P2P/IPC/read" if peer_next // GPUS_PER_NODE == node else f"NET/IB/{dev}/GDRDMA"
        lines.append(f"{who} Channel {channel:02d}/0 : {rank}[{dev}] -> {peer_next}[{peer_next % 8}] via {via}")
    lines += [
        f"{who} Connected all rings",
        f"{who} Connected all trees",
        f"{who} threadThresholds 8/8/64 | 8000/8/64 | 512 | 512",
        f"{who} comm 0x7f{rank:04x}c000f60 rank {rank} nranks {RANKS} cudaDev {dev} busId {dev + 1:x}9000 - Init COMPLETE",
        f"{who} [Service thread] Connection closed by localRank {step % 8}",
    ]
    return lines


def build_info(path: Path, megabytes: float) -> int:
    """A 1,000-rank job's log: four binaries' tables lost in INFO lines. Returns the runs."""
    text = BIG_TABLE.read_text().splitlines()
    first_device = next(i for i, line in enumerate(text) if line.startswith("#  Rank"))
    last_device = max(i for i, line in enumerate(text) if line.startswith("#  Rank"))
    head = text[:first_device]
    rest = text[last_device + 1 :]
    first_row = next(i for i, line in enumerate(rest) if line.strip()[:1].isdigit())
    body_head, rows = rest[:first_row], [line for line in rest[first_row:] if line.strip()[:1].isdigit()]
    foot = [line for line in rest[first_row:] if line.startswith("#")]
    width = len(str(RANKS - 1))

    def label(rank: int, line: str) -> str:
        return f"{rank:>{width}}: {line}"  # srun -l: the task id right-aligned to the widest

    per_binary = megabytes * 1e6 / len(BINARIES)
    out: list[str] = []
    for index, binary in enumerate(BINARIES):
        out.append(label(0, f"# Collective test starting: {binary}_perf"))
        out += [label(0, line) for line in head]
        for rank in range(RANKS):
            node, dev = divmod(rank, GPUS_PER_NODE)
            out.append(
                label(
                    0,
                    f"#  Rank {rank:3d} Group  0 Pid {50000 + rank:6d} on    gpu-{node:03d} device  {dev}"
                    f" [0000:{0x19 + 16 * dev:02x}:00] NVIDIA H100 80GB HBM3",
                )
            )
        out += [label(0, line) for line in body_head]
        budget = per_binary * (index + 1) - sum(len(line) + 1 for line in out)  # INFO bytes for this binary
        step = 0
        info: list[str] = []
        while budget > 0:  # every rank's set-up, again and again (new communicators, retries)
            for rank in range(RANKS):
                for line in _info_lines(rank, step):
                    info.append(label(rank, line))
                    budget -= len(info[-1]) + 1
            step += 1
        # Most INFO lines come before the first row; some arrive between the rows.
        between = len(info) // 50
        out += info[: len(info) - between]
        gap = info[len(info) - between :]
        for k, row in enumerate(rows):
            out.append(label(0, row))
            out += gap[k * len(gap) // len(rows) : (k + 1) * len(gap) // len(rows)]
        out += [label(0, line) for line in foot]
    path.write_text("\n".join(out) + "\n")
    return len(BINARIES)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}"


def main_() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shape", choices=("tables", "info", "both"), default="both")
    args = ap.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shapes = {"tables": build_tables, "info": build_info}
    with tempfile.TemporaryDirectory() as tmp:
        for shape, build in shapes.items():
            if args.shape not in (shape, "both"):
                continue
            log = Path(tmp) / f"{shape}_all_reduce_perf.log"
            runs_expected = build(log, args.mb)
            size_mb = log.stat().st_size / 1e6
            parse_s: list[float] = []
            parse_cpu: list[float] = []
            cli_s: dict[str, list[float]] = {}
            cli_cpu: dict[str, list[float]] = {}
            for repeat in range(args.repeats):
                start, cpu = time.perf_counter(), time.process_time()
                runs = parse_nccl_tests(log.read_text(), source=str(log))
                parse_s.append(time.perf_counter() - start)
                parse_cpu.append(time.process_time() - cpu)
                assert len(runs) == runs_expected, (shape, len(runs))
                if shape == "info":
                    assert {p.info["ranks"] for p in runs} == {str(RANKS)}, shape
                del runs
                for mode, extra in (
                    ("dry-run", ["--dry-run"]),
                    ("stored", ["--db", str(Path(tmp) / f"{shape}{repeat}.db")]),
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
            print(f"[{shape}] log: {size_mb:.1f} MB, {runs_expected} runs")
            print(
                f"[{shape}] parse_nccl_tests (library call): median {_median(parse_cpu)} s CPU,"
                f" {_median(parse_s)} s wall ({args.repeats} repeats)"
            )
            for mode in cli_cpu:
                print(
                    f"[{shape}] gpufabric ingest ({mode}, --format json, whole process): median {_median(cli_cpu[mode])}"
                    f" s CPU, {_median(cli_s[mode])} s wall (bar: < 5 s); all CPU: "
                    + ", ".join(f"{x:.2f}" for x in cli_cpu[mode])
                )
    start = time.perf_counter()
    x = 0.0
    for _ in range(1_000_000):
        x += float("1.5")
    print(f"machine: 1M float() calls in {time.perf_counter() - start:.2f} s (about 0.08 s on an idle modern core)")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main_()
