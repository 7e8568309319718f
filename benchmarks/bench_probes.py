"""Harness overhead of the torch probes (the bars and measured figures are in docs/performance.md).

1. Collectives: in the same two gloo ranks, alternate the probe's timing path
   (``collectives.time_iterations``: barrier, then the op alone on the clock, per
   iteration) with a bare loop (barrier once, ``iters`` ops back to back, total / iters).
   busbw from the mean time of each (the same statistic on both sides; the probe itself
   reports the median), averaged over ranks as nccl-tests does;
   the bar is harness busbw within 5% of the bare loop's.
2. Checkpoint: ``bench checkpoint --formats torch,safetensors`` (one rank, write + fsync) against
   fio sequential write of the same size with one fsync at the end (psync, 1 MiB blocks,
   buffered, ``--end_fsync=1``) on the same directory, alternated; the bar is probe write
   throughput within 10% of fio's.

    .venv/bin/python benchmarks/bench_probes.py [--rounds 5] [--size 16M] [--ckpt-size 256M] [--dir DIR]

Prints each round and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _worker(config_path: str) -> None:
    """One rank: alternate harness and bare timing; write the rows to out_dir/bench<N>.json."""
    import torch

    from gpufabric.bench.probes.collectives import Op, time_iterations
    from gpufabric.bench.probes.stats import element_count
    from gpufabric.bench.probes.worker import Worker

    cfg = json.loads(Path(config_path).read_text())
    w = Worker(cfg)
    dist = w.init_dist("gloo")
    rows = []
    for op_name in cfg["ops"]:
        count = element_count(op_name, cfg["size"], 4, w.world)
        op = Op(torch, dist, op_name, count, torch.float32, torch.device("cpu"), w.rank, w.world)
        op.fill()
        for _ in range(cfg["rounds"]):
            harness = time_iterations(torch, dist, op, iters=cfg["iters"], warmup=2, gpu=False)
            dist.barrier()
            t0 = time.perf_counter_ns()
            for _ in range(cfg["iters"]):
                op.run()
            bare_us = (time.perf_counter_ns() - t0) / 1e3 / cfg["iters"]
            rows.append({"op": op_name, "size": count * 4, "harness_us": statistics.mean(harness), "bare_us": bare_us})
    Path(cfg["out_dir"], f"bench{w.rank}.json").write_text(json.dumps(rows))
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def collectives(rounds: int, size: int) -> list[dict]:
    from gpufabric.exec import launch
    from gpufabric.model.collectives import busbw_gbps

    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "out_dir": tmp,
            "ops": ["all_reduce", "all_gather"],
            "size": size,
            "iters": 10,
            "rounds": rounds,
            "init_timeout_s": 60,
            "op_timeout_s": 120,
        }
        cfg_path = Path(tmp) / "cfg.json"
        cfg_path.write_text(json.dumps(cfg))
        cmds = []
        for rank in range(2):
            env = {
                "RANK": str(rank),
                "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29590",
                "OMP_NUM_THREADS": "1",
            }
            cmds.append(launch.Command(argv=(sys.executable, __file__, "--worker", str(cfg_path)), env=env))
        plan = launch.LaunchPlan(launcher="local", commands=tuple(cmds), num_ranks=2, hosts=())
        out = launch.execute(plan, timeout_s=600, log_dir=Path(tmp))
        if out.returncodes != (0, 0):
            raise SystemExit(f"benchmark ranks failed: {out.returncodes} {out.logs}")
        per_rank = [json.loads((Path(tmp) / f"bench{r}.json").read_text()) for r in range(2)]
    rows = []
    for a, b in zip(*per_rank, strict=True):
        harness_s = (a["harness_us"] + b["harness_us"]) / 2e6
        bare_s = (a["bare_us"] + b["bare_us"]) / 2e6
        rows.append(
            {
                "op": a["op"],
                "size": a["size"],
                "harness_busbw_gbps": busbw_gbps(a["op"], a["size"], harness_s, 2),
                "bare_busbw_gbps": busbw_gbps(a["op"], a["size"], bare_s, 2),
            }
        )
    return rows


def checkpoint(rounds: int, size: int, directory: Path) -> list[dict]:
    from gpufabric.bench.probes import run as probe_run
    from gpufabric.bench.probes import service
    from gpufabric.exec.process import run

    rows = []
    db = directory / "bench.db"
    for i in range(rounds):
        opts = probe_run.LaunchOptions(nproc=1, master_port=29591 + i % 5)
        cfg = {
            "total_bytes": size,
            "layers": 8,
            "tensors_per_layer": 4,
            "hidden": 256,
            "directory": str(directory / "ckpt"),
            "keep": False,
            "formats": ["torch", "safetensors"],
        }
        report = service.run_checkpoint(cfg, opts, db=str(db), argv=["bench_probes"])
        probe = {r.format: r.write_gbps for r in report.rows}
        target = directory / "fio.dat"
        done = run(
            [
                "fio",
                "--name=seqw",
                f"--filename={target}",
                "--rw=write",
                "--bs=1M",
                f"--size={size}",
                "--ioengine=psync",
                "--direct=0",
                "--end_fsync=1",
                "--output-format=json",
            ],
            timeout_s=300,
            check=True,
        )
        job = json.loads(done.stdout)["jobs"][0]
        # fio's bw excludes the final fsync; use io bytes over job runtime incl. end_fsync (job_runtime, ms).
        fio = job["write"]["io_bytes"] / (job["job_runtime"] / 1e3) / 1e9
        target.unlink(missing_ok=True)
        rows.append(
            {
                "round": i,
                "torch_write_gbps": probe["torch"],
                "safetensors_write_gbps": probe["safetensors"],
                "fio_write_gbps": fio,
            }
        )
    db.unlink(missing_ok=True)
    return rows


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        _worker(sys.argv[2])
        return
    from gpufabric.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", default="16M")
    ap.add_argument("--ckpt-size", default="256M")
    ap.add_argument("--dir", default="")
    args = ap.parse_args()
    rows = collectives(args.rounds, parse_size(args.size))
    for op in ("all_reduce", "all_gather"):
        mine = [r for r in rows if r["op"] == op]
        for r in mine:
            print(
                f"{op} {r['size']} B: harness busbw {r['harness_busbw_gbps']:.3f} GB/s,"
                f" bare loop {r['bare_busbw_gbps']:.3f} GB/s"
            )
        ratio = statistics.median(r["harness_busbw_gbps"] / r["bare_busbw_gbps"] for r in mine)
        print(f"{op}: median harness/bare busbw ratio {ratio:.3f}")
    with tempfile.TemporaryDirectory(dir=args.dir or None) as tmp:
        ck = checkpoint(args.rounds, parse_size(args.ckpt_size), Path(tmp))
    for r in ck:
        print(
            f"checkpoint round {r['round']}: probe torch.save+fsync {r['torch_write_gbps']:.3f} GB/s,"
            f" safetensors+fsync {r['safetensors_write_gbps']:.3f} GB/s,"
            f" fio seq write+end_fsync {r['fio_write_gbps']:.3f} GB/s"
        )
    for fmt in ("torch", "safetensors"):
        ratio = statistics.median(r[f"{fmt}_write_gbps"] / r["fio_write_gbps"] for r in ck)
        print(f"checkpoint {fmt}: median probe/fio write throughput ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
