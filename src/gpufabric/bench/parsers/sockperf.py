"""sockperf ``ping-pong`` parser (text output; sockperf has no JSON).

The text carries ANSI colour codes, stripped first. sockperf reports one-way latency
(RTT/2) unless ``--full-rtt`` is given, in which case it prints ``avg-rtt`` and we name
the metrics ``rtt_*`` instead of ``lat_*``. Percentiles are ``sorted[(int)(0.5+p*N)-1]``
(src/client.cpp). ``--full-log FILE`` writes the same statistics followed by a CSV of
every packet (``packet, txTime(sec), rxTime(sec), latency(usec)`` or ``rtt(usec)``);
given that file, the per-packet values become the raw samples of the p50 metric.
"""

from __future__ import annotations

import re

from gpufabric.bench.parsers.common import Parsed, higher, lower, strip_ansi
from gpufabric.errors import ParseError
from gpufabric.results.records import Metric
from gpufabric.results.samples import sockperf_full_log_samples

_AVG = re.compile(r"====> avg-(latency|rtt)=([0-9.]+) \(std-dev=([0-9.]+)")
_OBS = re.compile(r"Total (\d+) observations")
_PCT = re.compile(r"---> percentile +([0-9.]+) = +([0-9.]+)")
_MAXMIN = re.compile(r"---> <(MAX|MIN)> observation = +([0-9.]+)")
_DROPPED = re.compile(r"# dropped messages = (\d+); # duplicated messages = (\d+); # out-of-order messages = (\d+)")
_VERSION = re.compile(r"== version #([^ ]+) ==")
_PROTOCOL = re.compile(r"PORT = +\d+ # (UDP|TCP)")


def _label(percentile: str) -> str:
    """'99.990' -> 'p99_99', '50.000' -> 'p50'."""
    return "p" + percentile.rstrip("0").rstrip(".").replace(".", "_")


def parse_sockperf(text: str, *, source: str = "", full_log: str | None = None) -> list[Parsed]:
    """Parse sockperf ping-pong output, and optionally its ``--full-log`` CSV.

    ``text`` may itself be a full-log file (it starts with the same statistics).
    """
    clean = strip_ansi(text)
    version = _VERSION.search(clean)
    info = {"version": version.group(1) if version else ""}
    if "No messages were received from the server" in clean:
        return [
            Parsed(
                tool="sockperf",
                case="ping-pong",
                metrics=(),
                error="sockperf: no messages were received from the server",
                info=info,
            )
        ]
    avg = _AVG.search(clean)
    observations = _OBS.search(clean)
    percentiles = _PCT.findall(clean)
    if not avg or not observations or not percentiles:
        if not clean.strip().startswith(("sockperf", "---")) and "sockperf" not in clean[:500]:
            raise ParseError("not sockperf output (no 'sockperf:' lines)", source=source, excerpt=clean[:120])
        raise ParseError(
            "sockperf output has no latency summary (avg, observations, percentiles)",
            source=source,
            excerpt=clean[-200:],
        )
    protocol = _PROTOCOL.search(clean)
    case = protocol.group(1).lower() if protocol else "ping-pong"
    kind = "lat" if avg.group(1) == "latency" else "rtt"
    info["measure"] = "one-way (RTT/2)" if kind == "lat" else "round trip"
    samples: tuple[float, ...] = ()
    for blob in (strip_ansi(full_log) if full_log is not None else None, clean):
        found = sockperf_full_log_samples(blob, source=source) if blob is not None else None
        if found is not None:
            samples = found
            break
    metrics: list[Metric] = [
        lower(f"{kind}_avg_us", float(avg.group(2)), "us"),
        lower(f"{kind}_stddev_us", float(avg.group(3)), "us"),
        higher("observations", float(observations.group(1)), "count"),
    ]
    for percentile, value in percentiles:
        label = _label(percentile)
        metrics.append(lower(f"{kind}_{label}_us", float(value), "us", samples if label == "p50" else ()))
    for which, value in _MAXMIN.findall(clean):
        metrics.append(lower(f"{kind}_{which.lower()}_us", float(value), "us"))
    dropped = _DROPPED.search(clean)
    warnings: list[str] = []
    if dropped:
        metrics.append(lower("dropped_messages", float(dropped.group(1)), "count"))
        if int(dropped.group(1)):
            warnings.append(f"{dropped.group(1)} messages dropped; latency percentiles exclude them")
    if int(observations.group(1)) < 1000:
        warnings.append(f"only {observations.group(1)} observations: p99.9 and beyond are single samples")
    return [Parsed(tool="sockperf", case=case, metrics=tuple(metrics), warnings=tuple(warnings), info=info)]
