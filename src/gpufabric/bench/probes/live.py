"""Live records: follow rank 0's record file while a probe runs, so the CLI can print each
size as it finishes (nccl-tests prints a line per size; a silent sweep of a minute looks hung).

Rank 0's file is on the launching host for the local launcher and on the shared
``--work-dir`` otherwise; when it is not visible here the tail simply sees nothing and the
final table is the only output. Lines are handed over only when complete (a rank writes
and flushes one JSON line per record, worker.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpufabric.bench.probes import stats
from gpufabric.model.collectives import busbw_factor

#: How often the file is polled: a tenth of a second is instant for people and free for the CPU.
POLL_S = 0.1


class Tail:
    """Call ``on_record(record)`` for each complete JSON line appended to ``path``, in a thread."""

    def __init__(self, path: Path, on_record: Callable[[dict[str, Any]], None]) -> None:
        self._path, self._on_record = path, on_record
        self._offset = 0
        self._buffer = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe-tail", daemon=True)

    def __enter__(self) -> Tail:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()  # whatever arrived between the last poll and the end

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll()

    def poll(self) -> None:
        try:
            with open(self._path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(record, dict):
                self._on_record(record)


def size_row(record: dict[str, Any], world: int) -> dict[str, Any] | None:
    """A live line for a collective ``size`` record, from rank 0's own timings (the final
    table combines all ranks); None for other records."""
    if record.get("type") != "size" or not record.get("times_us"):
        return None
    times = np.asarray(record["times_us"], dtype=float)
    p50 = float(np.median(times))
    size = int(record["size_bytes"])
    algbw = stats.algbw_gbps(size, p50 * 1e-6)
    return {
        "event": "size",
        "op": record["op"],
        "dtype": record["dtype"],
        "size_bytes": size,
        "time_p50_us": p50,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * float(busbw_factor(record["op"], world)),
        "wrong": int(record.get("wrong", 0)),
        "rank": int(record.get("rank", 0)),
    }
