"""Raw per-packet samples from files that tools write, for every consumer.

sockperf ``--full-log FILE`` writes its statistics followed by a CSV of every packet
(``packet, txTime(sec), rxTime(sec), latency(usec)`` or ``rtt(usec)``; sockperf
src/client.cpp). The bench parser stores those values as raw samples and the simulator
draws from them; both read them here, so the simulator never depends on a tool parser.
"""

from __future__ import annotations

import re

from gpufabric.errors import ParseError

_CSV_HEADER = re.compile(r"^packet, txTime\(sec\), rxTime\(sec\), (latency|rtt)\(usec\)\s*$", re.M)


def sockperf_full_log_samples(text: str, *, source: str = "") -> tuple[float, ...] | None:
    """Per-packet latency (or RTT) in microseconds, or None when ``text`` has no full-log CSV."""
    header = _CSV_HEADER.search(text)
    if header is None:
        return None
    samples: list[float] = []
    for number, raw in enumerate(text[header.end() :].splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("-"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            raise ParseError(
                f"sockperf full-log row {number} has {len(parts)} fields, expected 4", source=source, excerpt=line
            )
        try:
            samples.append(float(parts[3]))
        except ValueError:
            raise ParseError(
                f"sockperf full-log row {number} has a non-numeric latency", source=source, excerpt=line
            ) from None
    return tuple(samples)
