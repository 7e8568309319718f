"""perftest default text output (see :mod:`.perftest` for the layout and its sources)."""

from __future__ import annotations

import math
import re

from gpufabric.bench.parsers.common import Parsed, higher, lower, strip_ansi
from gpufabric.errors import ParseError
from gpufabric.results.records import Metric

#: perftest's MiB (its bandwidth columns are MiB/s unless --report_gbits).
MIB = 1024 * 1024


def _binary(title: str) -> str:
    """'RDMA_Write Latency Test' -> 'ib_write_lat' (the binary that prints that title)."""
    lowered = title.lower()
    verb = next((v for v in ("write", "read", "send", "atomic") if v in lowered), "")
    kind = "lat" if "latency" in lowered else ("bw" if "bw" in lowered or "bandwidth" in lowered else "")
    return f"ib_{verb}_{kind}" if verb and kind else ""


_TITLE = re.compile(
    r"^\s*((?:RDMA_Write|RDMA_Read|Send|Atomic|Atomic FETCH_AND_ADD|Atomic CMP_AND_SWAP)\b.*?"
    r"(?:BW|Latency) Test)\s*$"
)
_SETTING = re.compile(r"([A-Za-z][A-Za-z .*/_-]*?)\s*:\s*([^\t:]+?)\s*(?=\t|$)")
_ROW = re.compile(r"^\s*\d+\s+\d+\s+[-+0-9.eE]+(?:\s+[-+0-9.eE]+|\s*\\)*\s*$")
_LAT_COLS = ("lat_min_us", "lat_max_us", "lat_p50_us", "lat_avg_us", "lat_stddev_us", "lat_p99_us", "lat_p99_9_us")
_KEEP = {
    "Device": "Device",
    "Connection type": "Connection_type",
    "Link type": "Link_type",
    "Mtu": "Mtu",
    "Number of qps": "Number_of_qps",
    "Transport type": "Transport_type",
}


def _sections(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Split a transcript at each test title: (title, the section's lines from the title on);
    text before the first title is dropped."""
    sections: list[tuple[str, list[str]]] = []
    for line in lines:
        title = _TITLE.match(line)
        if title:
            sections.append((title.group(1), [line]))
        elif sections:
            sections[-1][1].append(line)
    return sections


def _parse_section(title: str, lines: list[str], source: str) -> Parsed | None:
    info: dict[str, str] = {}
    header = ""
    rows: list[list[float]] = []
    warnings: list[str] = []
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("#bytes") or stripped.startswith("#threads"):
            header = stripped
            continue
        if not header:
            for key, value in _SETTING.findall(line):
                if key.strip() in _KEEP:
                    info[_KEEP[key.strip()]] = value.strip().removesuffix("[B]")
            continue
        if _ROW.match(line):
            rows.append([float(t) for t in stripped.replace("\\\\", " ").split()])
        elif stripped and not stripped.startswith("---") and "$" not in stripped and stripped not in warnings:
            warnings.append(stripped)
    if not header or not rows:
        return None
    metrics: list[Metric] = []
    invalid = [f"{v} in row {int(r[0])} B" for r in rows for v in r if not math.isfinite(v) or v < 0]
    binary = _binary(title)
    if "t_min" in header:
        rows.sort(key=lambda r: r[0])
        for index, row in enumerate(rows):
            suffix = "" if index == 0 else f"@{int(row[0])}B"
            for name, value in zip(_LAT_COLS, row[2:], strict=False):
                metrics.append(lower(name + suffix, value, "us"))
        info["latency"] = "half round trip for send/write, full round trip for read/atomic (perftest rtt_factor)"
        case = "latency"
    else:
        gbits = "Gb/sec" in header
        scale = 1 / 8 if gbits else MIB / 1e9
        info["bw_unit_in_file"] = "Gb/s" if gbits else "MiB/s"
        rows.sort(key=lambda r: r[0], reverse=True)
        for index, row in enumerate(rows):
            suffix = "" if index == 0 else f"@{int(row[0])}B"
            if len(row) < 4:
                raise ParseError("perftest bandwidth row has fewer than 4 columns", source=source, excerpt=str(row))
            metrics.append(higher("bw_avg_gbps" + suffix, row[3] * scale, "GB/s"))
            # Servers of UD/send tests print 0.00 as peak (they do not time posts): absent, not zero.
            if row[2] > 0:
                metrics.append(higher("bw_peak_gbps" + suffix, row[2] * scale, "GB/s"))
            if len(row) > 4:
                metrics.append(higher("msg_rate_mpps" + suffix, row[4], "Mpps"))
        case = "bandwidth"
    info["msg_size_bytes"] = str(int(rows[0][0]))
    info["test"] = title
    return Parsed(
        tool="perftest",
        case=binary or case,
        metrics=tuple(metrics),
        warnings=tuple(warnings),
        invalid="; ".join(invalid[:5]),
        info=info,
    )


def parse_perftest_text(text: str, *, source: str = "") -> list[Parsed]:
    """Every test in a perftest text transcript (one or several ``ib_*`` runs)."""
    lines = strip_ansi(text).splitlines()
    parsed = [p for title, section in _sections(lines) if (p := _parse_section(title, section, source)) is not None]
    if not parsed:
        raise ParseError(
            "perftest text output has no results table (no '#bytes' header with rows under a test title)",
            source=source,
            excerpt=text[:160],
        )
    return parsed
