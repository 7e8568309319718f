"""perftest (``ib_write_lat``, ``ib_write_bw``, ``ib_send_lat``, ``ib_read_lat``, ...)
parser: the ``--out_json`` file and the text every ``ib_*`` binary prints by default.

Text (linux-rdma/perftest src/perftest_parameters.c ``ctx_print_test_info`` and the
``RESULT_FMT*`` lines of src/perftest_resources.h): a title line (``RDMA_Write BW
Test``, ``Send Latency Test``, ...), ``key : value`` settings (two per line, tab
separated: Device, Connection type RC/UC/UD/DC, Link type, Mtu, Number of qps), then a
results header (``#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]``
-- MB means MiB, newer builds print MiB, ``--report_gbits`` prints Gb/sec -- or ``#bytes
#iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] t_stdev[usec] 99%
percentile[usec] 99.9% percentile[usec]``; older builds stop after t_typical) and one
row per size. Warnings (``Conflicting CPU frequency values detected``) land between
rows; they are kept as quality warnings. A transcript with several tests gives one
result per test.

Format (reference/bench-tools.md section 2, from linux-rdma/perftest@00b55b6): a
``test_info`` object (Device, Link_type, Mtu, Connection_type, ...) and ``results``:
latency tests carry ``MsgSize``, ``n_iterations``, ``t_min``, ``t_max``, ``t_typical``
(the median), ``t_avg``, ``t_stdev``, ``percentile_99``, ``percentile_99.9`` in usec;
bandwidth tests ``BW_peak``, ``BW_average`` (MiB/s, or Gb/s with ``--report_gbits``)
and ``MsgRate`` (Mpps). ``results`` may be one object or a list (one per size with
``-a``). Latency is half the round trip for send/write and the full one for read
(``rtt_factor``); we keep perftest's number and say so in ``info``.

Caveat: perftest may compute t_stdev in int (sub-microsecond deviations truncate;
bench-tools.md marks this UNVERIFIED); judge on percentiles, not on lat_stddev_us.
"""

from __future__ import annotations

from typing import Any

from gpufabric.bench.parsers.common import (
    ANY,
    Each,
    Items,
    Number,
    Obj,
    OneOf,
    Parsed,
    check_json,
    finite,
    higher,
    load_json,
    lower,
)
from gpufabric.bench.parsers.perftest_text import MIB, _binary, parse_perftest_text
from gpufabric.errors import ParseError
from gpufabric.results.records import Metric

_LAT_KEYS = {
    "t_min": "lat_min_us",
    "t_typical": "lat_p50_us",
    "t_avg": "lat_avg_us",
    "t_max": "lat_max_us",
    "t_stdev": "lat_stddev_us",
    "percentile_99": "lat_p99_us",
    "percentile_99.9": "lat_p99_9_us",
}

#: The fields the parser reads, with their JSON types (perftest perftest_parameters.c --out_json).
_ROW = Obj(
    {
        "MsgSize": Number(min=0),
        "BW_average": Number(),
        "BW_peak": Number(),
        "MsgRate": Number(),
        **{key: Number() for key in _LAT_KEYS},
    }
)
SHAPE = Obj({"test_info": Each(ANY, nullable=True), "results": OneOf((_ROW, Items(_ROW)))})


def _bw_scale(test_info: dict[str, Any]) -> tuple[float, str]:
    """Multiply a BW figure by this to get GB/s (1e9 B/s)."""
    for key, value in test_info.items():
        if "gbit" in key.lower() and str(value).lower() in ("1", "true", "on", "yes"):
            return 1 / 8, "Gb/s"  # Gbit/s -> GB/s
    return MIB / 1e9, "MiB/s"


def _rows(doc: dict[str, Any], source: str) -> list[dict[str, Any]]:
    results = doc.get("results")
    rows = [results] if isinstance(results, dict) else results
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ParseError("perftest JSON 'results' is missing or empty", source=source, excerpt=str(results)[:200])
    return rows


def parse_perftest(text: str, *, source: str = "") -> list[Parsed]:
    """Parse perftest output: one ``--out_json`` file, or the text of one or more tests."""
    if not text.lstrip().startswith("{") and "#bytes" in text:
        return parse_perftest_text(text, source=source)
    doc = load_json(text, source=source, tool="perftest")
    if not isinstance(doc, dict) or "results" not in doc or "test_info" not in doc:
        keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
        raise ParseError(
            "not perftest --out_json output: no 'test_info' and 'results' keys", source=source, excerpt=keys
        )
    check_json(doc, SHAPE, tool="perftest", source=source)
    test_info: dict[str, Any] = doc["test_info"] or {}
    rows = _rows(doc, source)
    info: dict[str, str] = {
        k: str(test_info[k])
        for k in ("Device", "Link_type", "Connection_type", "Mtu", "Number_of_qps")
        if k in test_info
    }
    metrics: list[Metric] = []
    latency = "t_avg" in rows[0] or "t_typical" in rows[0]
    if latency:
        # The headline is the smallest message, the one latency SLOs are written for.
        ordered = sorted(rows, key=lambda r: float(r.get("MsgSize", 0)))
        for index, row in enumerate(ordered):
            suffix = "" if index == 0 else f"@{int(row.get('MsgSize', 0))}B"
            for key, name in _LAT_KEYS.items():
                if key in row:
                    metrics.append(lower(name + suffix, finite(row[key], what=key, source=source), "us"))
        case = "latency"
        info["latency"] = "half round trip for send/write, full round trip for read/atomic (perftest rtt_factor)"
    elif "BW_average" in rows[0]:
        scale, unit = _bw_scale(test_info)
        info["bw_unit_in_file"] = unit
        # The headline is the largest message, where bandwidth plateaus.
        ordered = sorted(rows, key=lambda r: float(r.get("MsgSize", 0)), reverse=True)
        for index, row in enumerate(ordered):
            suffix = "" if index == 0 else f"@{int(row.get('MsgSize', 0))}B"
            metrics.append(
                higher(
                    "bw_avg_gbps" + suffix,
                    finite(row.get("BW_average"), what="BW_average", source=source) * scale,
                    "GB/s",
                )
            )
            if "BW_peak" in row:
                metrics.append(
                    higher(
                        "bw_peak_gbps" + suffix, finite(row["BW_peak"], what="BW_peak", source=source) * scale, "GB/s"
                    )
                )
            if "MsgRate" in row:
                metrics.append(
                    higher("msg_rate_mpps" + suffix, finite(row["MsgRate"], what="MsgRate", source=source), "Mpps")
                )
        case = "bandwidth"
    else:
        raise ParseError(
            "perftest results have neither latency (t_avg) nor bandwidth (BW_average) fields",
            source=source,
            excerpt=str(rows[0])[:200],
        )
    info["msg_size_bytes"] = str(int(float(ordered[0].get("MsgSize", 0))))
    return [
        Parsed(tool="perftest", case=_binary(str(test_info.get("test", ""))) or case, metrics=tuple(metrics), info=info)
    ]
