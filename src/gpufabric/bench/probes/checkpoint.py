"""Checkpoint probe worker: ``python -m gpufabric.bench.probes.checkpoint CONFIG.json``.

Each rank builds its shard of a state dict shaped like the spec's (deterministic
contents), then for each format (torch.save, safetensors, torch.distributed.checkpoint):
writes it with fsync enforced, drops the written pages from the page cache
(posix_fadvise DONTNEED after fsync, so the read comes from the device), reads it back
and verifies every tensor bit for bit. Ranks start each phase together behind a
barrier; the parent takes duration = max over ranks and throughput = min over ranks
(MLPerf Storage convention).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any


def shard(torch: Any, cfg: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    """This rank's tensors: the checkpoint split evenly across ranks and layers (fp32).

    Keys carry the rank: dcp treats equal keys on different ranks as one replicated
    tensor and writes it once, which would both shrink the write and fail verification.
    """
    per_rank = cfg["total_bytes"] // world
    n_tensors = cfg["layers"] * cfg["tensors_per_layer"]
    elems = max(cfg["hidden"], per_rank // 4 // n_tensors)
    rows = max(1, elems // cfg["hidden"])
    gen = torch.Generator().manual_seed(1234 + rank)
    names = ("weight", "master", "exp_avg", "exp_avg_sq")
    return {f"rank{rank}.layers.{i}.{names[j % 4]}{j // 4 or ''}": torch.randn(rows, cfg["hidden"], generator=gen)
            for i in range(cfg["layers"]) for j in range(cfg["tensors_per_layer"])}


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_cache(path: Path) -> None:
    """fsync then POSIX_FADV_DONTNEED every file under path: the next read misses the page cache."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _write(fmt: str, state: dict[str, Any], target: Path) -> None:
    import torch

    if fmt == "torch":
        with open(target, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
    elif fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(state, str(target))
        _fsync_path(target)
    else:
        import torch.distributed.checkpoint as dcp

        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(target), sync_files=True))


def _read(fmt: str, target: Path, like: dict[str, Any]) -> dict[str, Any]:
    import torch

    if fmt == "torch":
        return torch.load(target, weights_only=True)
    if fmt == "safetensors":
        from safetensors.torch import load_file

        return load_file(str(target))
    import torch.distributed.checkpoint as dcp

    out = {k: torch.empty_like(v) for k, v in like.items()}
    dcp.load(out, storage_reader=dcp.FileSystemReader(str(target)))
    return out


def run(w: Any) -> None:
    import torch

    cfg = w.config
    # Import every writer before timing: importing dcp alone costs seconds on a small host.
    import safetensors.torch  # noqa: F401
    import torch.distributed.checkpoint  # noqa: F401

    dist = w.init_dist(cfg["backend"])
    w.record("ready", device="cpu", backend=cfg["backend"])
    state = shard(torch, cfg, w.rank, w.world)
    state_bytes = sum(t.numel() * t.element_size() for t in state.values())
    base = Path(cfg["directory"])
    timeout = float(cfg["op_timeout_s"])
    for fmt in cfg["formats"]:
        # dcp writes one directory for all ranks (each rank its own file); the others one file per rank.
        target = base / fmt / ("ckpt" if fmt == "dcp" else f"rank{w.rank}.{'pt' if fmt == 'torch' else 'safetensors'}")
        target.parent.mkdir(parents=True, exist_ok=True)
        w.arm(f"checkpoint write {fmt}", timeout)
        dist.barrier()
        t0 = time.perf_counter()
        _write(fmt, state, target)
        write_s = time.perf_counter() - t0
        on_disk = (sum(p.stat().st_size for p in target.rglob("*") if p.is_file()) if target.is_dir()
                   else target.stat().st_size)
        w.arm(f"checkpoint read {fmt}", timeout)
        dist.barrier()
        if w.rank == 0 or fmt != "dcp":
            drop_cache(target)
        dist.barrier()
        t0 = time.perf_counter()
        loaded = _read(fmt, target, state)
        read_s = time.perf_counter() - t0
        wrong = sum(1 for k, v in state.items() if k not in loaded or not torch.equal(loaded[k], v))
        w.disarm()
        w.record("checkpoint", format=fmt, bytes=state_bytes,
                 file_bytes=on_disk if fmt != "dcp" else on_disk // w.world,
                 write_s=write_s, read_s=read_s, wrong_tensors=wrong, tensors=len(state))
        dist.barrier()
        if w.rank == 0 and not cfg.get("keep", False):
            shutil.rmtree(base / fmt, ignore_errors=True)
    dist.barrier()


if __name__ == "__main__":
    import sys

    from gpufabric.bench.probes.worker import main

    sys.exit(main(run))
