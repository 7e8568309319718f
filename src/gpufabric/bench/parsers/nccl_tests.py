"""nccl-tests parser: the ``-J`` JSON file and the classic text table.

Formats (reference/bench-tools.md section 1, NVIDIA/nccl-tests@a0b82b2 src/util.cu and
src/common.cu): each size row carries ``size count type redop root`` then, for
out-of-place and in-place, ``time algbw busbw #wrong`` (older builds have no ``root``
column). GB/s is 1e9 bytes/s. The footer prints ``# Out of bounds values : N OK|FAILED``
and ``# Avg bus bandwidth : X`` (the mean over every size and both placements, so small
sizes pull it down; we report it but headline the largest size). JSON (version 3):
``results[]`` with ``size``, ``out_of_place``/``in_place`` ``{time, alg_bw, bus_bw,
nwrong}``, ``out_of_bounds{count, okay}``, ``average_bus_bandwidth{bandwidth}``,
``devices[]``.

A non-zero ``#wrong`` or out-of-bounds FAILED is data corruption: ``Parsed.error``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpufabric.bench.parsers import Parsed, finite, higher, load_json, lower, strip_ansi
from gpufabric.errors import ParseError
from gpufabric.results.records import Metric

_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)", re.M)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|-nan|inf)", re.M)
_DEVICE = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)", re.M)
_BINARY = re.compile(r"(all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv|gather|scatter|alltoallv|hypercube)_perf")


@dataclass(frozen=True, slots=True)
class _Row:
    size: int
    oop_time_us: float
    oop_algbw: float
    oop_busbw: float
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    wrong: int


def _wrong(token: Any) -> int:
    """#wrong is a count, 'N/A' when not checked; the pre-2.0 'error' column is a float."""
    if token is None or str(token).upper() == "N/A":
        return 0
    value = float(token)
    return int(value) if value >= 1 else (1 if value > 0 else 0)


def _float(token: str, *, what: str, source: str, line: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise ParseError(f"nccl-tests row has a non-numeric {what}", source=source, excerpt=line) from None


def _text_rows(text: str, source: str) -> list[_Row]:
    rows: list[_Row] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or not stripped[0].isdigit():
            continue
        fields = stripped.split()
        if len(fields) not in (12, 13):
            raise ParseError(f"nccl-tests size row has {len(fields)} columns, expected 12 or 13", source=source, excerpt=line)
        tail = fields[-8:]
        rows.append(
            _Row(
                size=int(_float(fields[0], what="size", source=source, line=line)),
                oop_time_us=_float(tail[0], what="time", source=source, line=line),
                oop_algbw=_float(tail[1], what="algbw", source=source, line=line),
                oop_busbw=_float(tail[2], what="busbw", source=source, line=line),
                ip_time_us=_float(tail[4], what="time", source=source, line=line),
                ip_algbw=_float(tail[5], what="algbw", source=source, line=line),
                ip_busbw=_float(tail[6], what="busbw", source=source, line=line),
                wrong=_wrong(tail[3]) + _wrong(tail[7]),
            )
        )
    return rows


def _json_rows(doc: dict[str, Any], source: str) -> list[_Row]:
    rows: list[_Row] = []
    for entry in doc.get("results") or []:
        oop, ip = entry.get("out_of_place") or {}, entry.get("in_place") or {}
        try:
            rows.append(
                _Row(
                    size=int(entry["size"]),
                    oop_time_us=finite(oop.get("time", oop.get("cpu_time")), what="time", source=source),
                    oop_algbw=finite(oop["alg_bw"], what="alg_bw", source=source),
                    oop_busbw=finite(oop["bus_bw"], what="bus_bw", source=source),
                    ip_time_us=finite(ip.get("time", ip.get("cpu_time", 0)), what="time", source=source),
                    ip_algbw=finite(ip.get("alg_bw", 0), what="alg_bw", source=source),
                    ip_busbw=finite(ip.get("bus_bw", 0), what="bus_bw", source=source),
                    wrong=_wrong(oop.get("nwrong")) + _wrong(ip.get("nwrong")),
                )
            )
        except KeyError as exc:
            raise ParseError(f"nccl-tests JSON result lacks {exc}", source=source, excerpt=str(entry)[:200]) from None
    return rows


def _metrics(rows: list[_Row], avg_busbw: float | None) -> list[Metric]:
    rows = sorted(rows, key=lambda r: r.size)
    top = rows[-1]
    metrics = [
        higher("busbw_gbps", top.oop_busbw, "GB/s"),
        higher("algbw_gbps", top.oop_algbw, "GB/s"),
        lower("time_us", top.oop_time_us, "us"),
        higher("busbw_peak_gbps", max(max(r.oop_busbw, r.ip_busbw) for r in rows), "GB/s"),
        lower("wrong_total", float(sum(r.wrong for r in rows)), "count"),
    ]
    if avg_busbw is not None:
        metrics.append(higher("avg_busbw_gbps", avg_busbw, "GB/s"))
    for r in rows[:-1]:
        metrics.append(higher(f"busbw_gbps@{r.size}B", r.oop_busbw, "GB/s"))
        metrics.append(lower(f"time_us@{r.size}B", r.oop_time_us, "us"))
    return metrics


def _info(rank_hosts: list[str]) -> dict[str, str]:
    """One host name per rank -> the rank count and the distinct hosts."""
    return {"ranks": str(len(rank_hosts)), "hosts": ",".join(sorted(set(rank_hosts)))}


def _wrong_errors(rows: list[_Row]) -> list[str]:
    wrong = sum(r.wrong for r in rows)
    return [f"{wrong} wrong elements (#wrong) - data corruption"] if wrong else []


def _op(*texts: str) -> str:
    for text in texts:
        match = _BINARY.search(text or "")
        if match:
            return match.group(1)
    return "collective"


def parse_nccl_tests(text: str, *, source: str = "") -> list[Parsed]:
    """Parse nccl-tests output: a ``-J`` JSON file or the text a ``*_perf`` binary prints."""
    if text.lstrip().startswith("{"):
        return [_parse_json(text, source)]
    clean = strip_ansi(text)
    rows = _text_rows(clean, source)
    if not rows:
        if "nThread" not in clean and "Avg bus bandwidth" not in clean:
            raise ParseError("not nccl-tests output (no '# nThread' header and no size rows)", source=source, excerpt=clean[:120])
        raise ParseError("nccl-tests output has no size rows (the run stopped before measuring?)", source=source, excerpt=clean[-200:])
    oob = _OOB.search(clean)
    avg = _AVG.search(clean)
    avg_busbw = float(avg.group(1)) if avg and avg.group(1).lstrip("-") not in ("nan", "inf") else None
    devices = _DEVICE.findall(clean)
    info = _info([host for _, host, _ in devices])
    errors = _wrong_errors(rows)
    if oob and oob.group(2) == "FAILED":
        errors.append(f"out of bounds values: {oob.group(1)} FAILED")
    if not oob:
        errors.append("no 'Out of bounds values' footer (run cut short?)")
    return [
        Parsed(
            tool="nccl-tests",
            case=_op(clean[:2000], source),
            metrics=tuple(_metrics(rows, avg_busbw)),
            error="; ".join(errors),
            info=info,
        )
    ]


def _parse_json(text: str, source: str) -> Parsed:
    doc = load_json(text, source=source, tool="nccl-tests")
    if not isinstance(doc, dict) or "results" not in doc or "out_of_bounds" not in doc:
        keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
        raise ParseError("not nccl-tests -J output: no 'results' and 'out_of_bounds' keys", source=source, excerpt=keys)
    rows = _json_rows(doc, source)
    if not rows:
        raise ParseError("nccl-tests JSON has no results", source=source, excerpt=text[:120])
    avg = (doc.get("average_bus_bandwidth") or {}).get("bandwidth")
    info = _info([str(d.get("hostname", "")) for d in doc.get("devices") or []])
    errors = _wrong_errors(rows)
    oob = doc.get("out_of_bounds") or {}
    if oob.get("okay") is False or int(oob.get("count") or 0):
        errors.append(f"out of bounds values: {oob.get('count')} FAILED")
    if doc.get("errors"):
        errors.append(f"errors: {doc['errors']}")
    config = doc.get("config") or {}
    return Parsed(
        tool="nccl-tests",
        case=_op(" ".join(str(v) for v in config.values()), source),
        metrics=tuple(_metrics(rows, finite(avg, what="average bus bandwidth", source=source) if avg is not None else None)),
        error="; ".join(errors),
        info=info,
    )
