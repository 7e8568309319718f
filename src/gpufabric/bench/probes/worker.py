"""Worker-side plumbing shared by the probes (runs inside torchrun / mpirun / srun ranks).

Each rank appends JSON lines to ``<out_dir>/rank<N>.jsonl`` and flushes after every
record, so sizes that finished before a crash survive it; the parent merges the files.
A watchdog thread bounds rendezvous and every operation separately: when a deadline
passes it writes an ``error`` record naming the phase and exits the rank, so no rank
waits forever on a peer that died.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

#: Exit code of a rank killed by its own watchdog (distinct from Python's 1).
WATCHDOG_EXIT = 3


def machine_id() -> str:
    """This kernel's boot id: the same in every network namespace of one machine, so lab
    "hosts" that share its CPUs are known to (results.oversubscribed); '' where unreadable."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def rank_env() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun, Open MPI or Slurm variables."""
    for rank_key, size_key, local_key in (
        ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ):
        if rank_key in os.environ and size_key in os.environ:
            return int(os.environ[rank_key]), int(os.environ[size_key]), int(os.environ.get(local_key, "0"))
    return 0, 1, 0


def host_name() -> str:
    """The host a rank runs on; GPUFABRIC_HOST names lab hosts that share one kernel hostname.

    Under Slurm (a generated train.sbatch starts ranks through torchrun, which sets no
    GPUFABRIC_HOST) the node name slurmd gives every task is the next best label.
    """
    return os.environ.get("GPUFABRIC_HOST") or os.environ.get("SLURMD_NODENAME") or socket.gethostname()


class Worker:
    """One rank: its record file, its watchdog and its process group."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.rank, self.world, self.local_rank = rank_env()
        self.host = host_name()
        out_dir = Path(config["out_dir"])
        out_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(out_dir / f"rank{self.rank}.jsonl", "a", encoding="utf-8")  # noqa: SIM115  (open for the worker's life; close() ends it)
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self._phase = ""
        threading.Thread(target=self._watch, daemon=True).start()

    def record(self, kind: str, **fields: Any) -> None:
        with self._lock:
            self._file.write(
                json.dumps({"type": kind, "rank": self.rank, "host": self.host, "t": round(time.time(), 4), **fields})
                + "\n"
            )
            self._file.flush()
            os.fsync(self._file.fileno())

    def arm(self, phase: str, timeout_s: float) -> None:
        self._phase, self._deadline = phase, time.monotonic() + timeout_s

    def disarm(self) -> None:
        self._deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.05)
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                self.record(
                    "error",
                    message=f"{self._phase} timed out on rank {self.rank} ({self.host})",
                    phase=self._phase,
                    timeout=True,
                )
                os._exit(WATCHDOG_EXIT)

    def init_dist(self, backend: str) -> Any:
        """init_process_group under the rendezvous timeout; ops then get the op timeout."""
        import datetime

        import torch.distributed as dist

        self.arm("rendezvous/init", float(self.config["init_timeout_s"]))
        dist.init_process_group(
            backend=backend,
            rank=self.rank,
            world_size=self.world,
            timeout=datetime.timedelta(seconds=float(self.config["op_timeout_s"])),
        )
        self.disarm()
        return dist

    def device(self) -> Any:
        import torch

        if self.config.get("backend") == "nccl":
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


def main(body: Any) -> int:
    """Run ``body(worker)`` for the config file named on the command line; record any error."""
    config = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    worker = Worker(config)
    worker.record(
        "start",
        world=worker.world,
        local_rank=worker.local_rank,
        pid=os.getpid(),
        cpus=os.cpu_count(),
        machine=machine_id(),
    )
    try:
        body(worker)
    except BaseException as exc:
        worker.record(
            "error",
            message=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
            phase=worker._phase,
            trace=traceback.format_exc()[-2000:],
        )
        sys.stderr.write(f"rank {worker.rank} ({worker.host}): {exc}\n")
        sys.stderr.flush()
        os._exit(1)  # skip atexit/destructors that can block on dead peers
    worker.record("done")
    # Skip destroy_process_group and interpreter teardown (about a second on a small host):
    # every record is already fsync'd, and peers only wait for the final barrier, not for us.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
