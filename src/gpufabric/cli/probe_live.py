"""Live progress of ``bench train`` and ``bench checkpoint``: one stderr line per step or format.

A training probe of ten steps or a checkpoint of three formats runs for tens of seconds;
silent, it looks hung (``bench collectives`` prints each size as it finishes, cli/
bench_probes.py). These callbacks get rank 0's records as they are written
(``bench.probes.live.Tail``, from a thread) and print rank 0's own timings; the table after
the run combines all ranks. Nothing is printed with ``--format json`` (stdout stays one
document) or when rank 0's records are not visible from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpufabric.cli.output import Format, stderr_console


def _printer() -> Callable[[str], None]:
    err = stderr_console()
    return lambda line: err.print(line, markup=False, highlight=False)


def train_steps(fmt: Format, *, steps: int, warmup: int) -> Callable[[dict[str, Any]], None] | None:
    """``step 3/12 (warmup): 41.2 ms, loss 6.9312`` per step of rank 0."""
    if fmt is Format.json:
        return None
    say = _printer()
    total = steps + warmup

    def line(record: dict[str, Any]) -> None:
        if record.get("type") == "ready":
            say(f"# live, rank 0 ({record.get('host', '?')}, {record.get('device', '?')}): one line per step")
        elif record.get("type") == "step":
            tag = " (warmup)" if record.get("warmup") else ""
            say(
                f"  step {int(record['step']) + 1}/{total}{tag}: {float(record['step_s']) * 1e3:.1f} ms,"
                f" loss {float(record['loss']):.4f}"
            )

    return line


def checkpoint_formats(fmt: Format) -> Callable[[dict[str, Any]], None] | None:
    """``torch: 64.0 MB of rank 0 written in 0.412 s, read in 0.101 s, 0 wrong`` per format (rank 0's share)."""
    if fmt is Format.json:
        return None
    say = _printer()

    def line(record: dict[str, Any]) -> None:
        if record.get("type") == "ready":
            say(f"# live, rank 0 ({record.get('host', '?')}): one line per format as it is written and read back")
        elif record.get("type") == "checkpoint":
            size_mb = float(record["bytes"]) / 1e6
            say(
                f"  {record['format']}: {size_mb:.1f} MB of rank 0 written in {float(record['write_s']):.3f} s,"
                f" read in {float(record['read_s']):.3f} s, {int(record['wrong_tensors'])} wrong"
            )

    return line
