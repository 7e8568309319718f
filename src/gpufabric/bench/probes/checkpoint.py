"""Checkpoint probe worker: ``python -m gpufabric.bench.probes.checkpoint CONFIG.json``.

Each rank builds its shard of a state dict shaped like the spec's (deterministic
contents), then for each format (torch.save, safetensors, torch.distributed.checkpoint)
commits it the way a crash-safe trainer does and the storage model prices a commit
(model/storage.py: create + fsync + rename per shard), timing each phase:

1. ``write``: serialise into a temporary name (``<name>.tmp``); the bytes may still sit
   in the page cache;
2. ``fsync``: the file's data and metadata reach the device;
3. ``rename``: the temporary name becomes the real one (atomic on POSIX);
4. ``dir_fsync``: fsync of the directory, so the rename itself survives a crash
   (rename(2) is atomic but not durable until the directory is synced).

dcp writes a directory of per-rank files and fsyncs them itself (``sync_files=True``),
so its write and fsync phases are one; rank 0 renames the directory once every rank has
written (a barrier) and fsyncs the parent. Then every file is dropped from the page cache
(posix_fadvise DONTNEED after fsync, so the read comes from the device), read back and
verified bit for bit. Ranks start each phase together behind a barrier; the parent
(summaries.checkpoint_results) derives the throughputs.
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
    return {
        f"rank{rank}.layers.{i}.{names[j % 4]}{j // 4 or ''}": torch.randn(rows, cfg["hidden"], generator=gen)
        for i in range(cfg["layers"])
        for j in range(cfg["tensors_per_layer"])
    }


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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _commit(fmt: str, state: dict[str, Any], target: Path, *, rank: int, barrier: Any) -> dict[str, float]:
    """Write, fsync, rename and fsync the directory; seconds per phase."""
    import torch

    tmp = target.with_name(target.name + ".tmp")
    t0 = time.perf_counter()
    if fmt == "torch":
        with open(tmp, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            t1 = time.perf_counter()
            os.fsync(fh.fileno())
    elif fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(state, str(tmp))
        t1 = time.perf_counter()
        _fsync_path(tmp)
    else:
        import torch.distributed.checkpoint as dcp

        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(tmp), sync_files=True))
        t1 = time.perf_counter()
        barrier()  # the directory is complete only when every rank has written its files
    t2 = time.perf_counter()
    if fmt != "dcp" or rank == 0:
        os.rename(tmp, target)
    t3 = time.perf_counter()
    if fmt != "dcp" or rank == 0:
        _fsync_dir(target.parent)
    t4 = time.perf_counter()
    return {"write_data_s": t1 - t0, "fsync_s": t2 - t1, "rename_s": t3 - t2, "dir_fsync_s": t4 - t3}


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
    import safetensors.torch  # noqa: F401  (imported for its import cost only)
    import torch.distributed.checkpoint

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
        if fmt == "dcp" and w.rank == 0 and target.exists():
            shutil.rmtree(target)  # a kept checkpoint of an earlier run: rename(2) cannot replace a full directory
        w.arm(f"checkpoint write {fmt}", timeout)
        dist.barrier()
        t0 = time.perf_counter()
        phases = _commit(fmt, state, target, rank=w.rank, barrier=dist.barrier)
        write_s = time.perf_counter() - t0
        if fmt == "dcp":
            dist.barrier()  # rank 0 renames the directory after the others stopped their clocks
        on_disk = (
            sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
            if target.is_dir()
            else target.stat().st_size
        )
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
        w.record(
            "checkpoint",
            format=fmt,
            bytes=state_bytes,
            file_bytes=on_disk if fmt != "dcp" else on_disk // w.world,
            write_s=write_s,
            read_s=read_s,
            wrong_tensors=wrong,
            tensors=len(state),
            **phases,
        )
        dist.barrier()
        if w.rank == 0 and not cfg.get("keep", False):
            shutil.rmtree(base / fmt, ignore_errors=True)
    dist.barrier()


if __name__ == "__main__":
    import sys

    from gpufabric.bench.probes.worker import main

    sys.exit(main(run))
