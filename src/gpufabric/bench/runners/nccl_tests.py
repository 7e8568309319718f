"""nccl-tests runner: a ``*_perf`` binary on this node's GPUs (multi-node runs come in by
``gpufabric ingest --tool nccl-tests`` from Slurm/mpirun jobs).

Skipped with "skipped: nccl-tests not installed" when the binary is not on PATH (or in
$NCCL_TESTS_DIR), and "skipped: no GPU" when no /dev/nvidiaN exists.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from gpufabric.bench.runners import PlannedTest


def find_binary(binary: str) -> str | None:
    directory = os.environ.get("NCCL_TESTS_DIR")
    if directory and (Path(directory) / binary).is_file():
        return str(Path(directory) / binary)
    return shutil.which(binary)


def gpu_count() -> int:
    return sum(1 for p in Path("/dev").glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name))


def plan(binary: str, *, scratch: Path, timeout_s: float, max_bytes: str = "128M", repeat: int = 1) -> PlannedTest:
    path = find_binary(binary)
    gpus = gpu_count()
    skip = "skipped: nccl-tests not installed" if path is None else ("skipped: no GPU" if gpus == 0 else "")
    argv = (path or binary, "-b", "8", "-e", max_bytes, "-f", "2", "-g", str(max(gpus, 1)), "-c", "1")
    op = binary.removesuffix("_perf")
    return PlannedTest(
        name=f"nccl.{op}",
        tool="nccl-tests",
        argv=argv,
        timeout_s=timeout_s,
        cwd=str(scratch),
        skip_reason=skip,
        params={"gpus": str(gpus), "max_bytes": max_bytes},
        repeat=repeat,
    )
