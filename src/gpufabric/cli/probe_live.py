"""Live progress of the probes: one stderr line per size, step or format as rank 0 finishes it.

A sweep, a training probe of ten steps or a checkpoint of three formats runs for tens of
seconds; silent, it looks hung. These callbacks get rank 0's records as they are written
(``bench.probes.live.Tail``, from a thread) and print rank 0's own timings; the table after
the run combines all ranks. Nothing is printed with ``--format json`` (stdout stays one
document; ``bench collectives --stream`` writes JSON lines instead) or when rank 0's
records are not visible from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpufabric.cli.output import Format, stderr_console
from gpufabric.units import format_size


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


def print_json_line(payload: dict[str, Any]) -> None:
    """One compact JSON document per line on stdout, flushed (JSON lines for streaming consumers)."""
    import sys

    from gpufabric.results.document import dumps_line

    sys.stdout.write(dumps_line(payload))
    sys.stdout.flush()


def report_line(document: dict[str, Any]) -> None:
    """The last JSON line of ``--stream``: the report."""
    print_json_line({"event": "report", **document})


def sizes(fmt: Format, *, quiet: bool, stream: bool) -> Callable[[dict[str, Any]], None] | None:
    """nccl-tests-style lines on stderr as sizes finish (text), JSON lines on stdout (``--format json
    --stream``), or nothing (``--quiet``, plain JSON)."""
    if fmt is Format.json:
        return print_json_line if stream else None
    if quiet:
        return None
    say = _printer()
    header = [False]

    def line(row: dict[str, Any]) -> None:
        if not header[0]:
            say("# live, rank 0's timings as each size finishes (the table after the run combines all ranks)")
            say(f"  {'op':<15}{'dtype':<10}{'size':>10}{'p50 us':>11}{'algbw GB/s':>12}{'busbw GB/s':>12}{'#wrong':>8}")
            header[0] = True
        say(
            f"  {row['op']:<15}{row['dtype']:<10}{format_size(row['size_bytes']):>10}{row['time_p50_us']:>11.1f}"
            f"{row['algbw_gbps']:>12.4f}{row['busbw_gbps']:>12.4f}{row['wrong']:>8d}"
        )

    return line
