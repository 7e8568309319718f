"""iperf3 ``-J`` parser.

iperf3 can exit 0 with a JSON document whose ``error`` key says the test never ran
(esnet/iperf#1405; reproduced here with 3.12 and no server: rc 0, ``"error": "unable to
connect to server: Connection refused"``). That is reported as ``Parsed.error``.

Units: ``bits_per_second`` is bit/s, reported as Gbit/s (1e9 bit/s) in
``throughput_gbit_s``; TCP ``*_rtt`` come from TCP_INFO in microseconds on Linux.
"""

from __future__ import annotations

from typing import Any

from gpufabric.bench.parsers.common import (
    ANY,
    COUNT,
    Items,
    Number,
    Obj,
    Parsed,
    Scalar,
    check_json,
    finite,
    higher,
    load_json,
    lower,
)
from gpufabric.errors import ParseError
from gpufabric.results.records import Metric

#: The fields the parser reads, with their JSON types (iperf3 iperf_api.c JSON output).
_SUM = Obj(
    {
        "bits_per_second": Number(),
        "jitter_ms": Number(),
        "lost_percent": Number(),
        "retransmits": Number(),
        "omitted": ANY,
    },
    nullable=True,
    required=("bits_per_second",),
)
_SENDER = Obj(
    {"sender": ANY, "mean_rtt": Number(), "max_rtt": Number(), "min_rtt": Number(), "bytes": COUNT}, nullable=True
)
SHAPE = Obj(
    {
        "start": Obj(
            {
                "test_start": Obj({"protocol": Scalar(), "num_streams": Scalar(), "reverse": Scalar()}, nullable=True),
                "version": Scalar(),
                "system_info": Scalar(),
            }
        ),
        "end": Obj(
            {
                "sum": _SUM,
                "sum_received": _SUM,
                "sum_sent": _SUM,
                "streams": Items(Obj({"sender": _SENDER}), nullable=True),
                "cpu_utilization_percent": Obj({"host_total": Number()}, nullable=True),
            },
            nullable=True,
        ),
        "intervals": Items(Obj({"sum": _SUM}), nullable=True),
        "error": ANY,
    }
)


def parse_iperf3(text: str, *, source: str = "") -> list[Parsed]:
    """Parse one iperf3 ``-J`` document (TCP or UDP, any number of streams)."""
    doc = load_json(text, source=source, tool="iperf3")
    if not isinstance(doc, dict) or "start" not in doc or "end" not in doc:
        keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
        raise ParseError("not iperf3 -J output: no 'start' and 'end' keys", source=source, excerpt=keys)
    check_json(doc, SHAPE, tool="iperf3", source=source)
    start: dict[str, Any] = doc["start"]
    test = start.get("test_start") or {}
    protocol = str(test.get("protocol", "TCP")).lower()
    info = {
        "version": str(start.get("version", "")),
        "protocol": protocol,
        "streams": str(test.get("num_streams", "")),
        "reverse": str(test.get("reverse", 0)),
    }
    system = str(start.get("system_info", "")).split()
    if len(system) > 1:  # uname -a: "Linux <hostname> <release> ..."
        info["host"] = system[1]
    if doc.get("error"):
        return [Parsed(tool="iperf3", case=protocol, metrics=(), error=f"iperf3: {doc['error']}", info=info)]
    end: dict[str, Any] = doc["end"]
    if not end:
        raise ParseError(
            "iperf3 output has an empty 'end' section (run cut short?)", source=source, excerpt=text[-200:]
        )
    # Throughput samples: one per reporting interval (the sum over streams); they give the
    # verdicts a CV to judge noise by.
    interval_gbit = tuple(
        finite(iv["sum"]["bits_per_second"], what="interval throughput", source=source) / 1e9
        for iv in doc.get("intervals") or []
        if iv.get("sum") and not iv["sum"].get("omitted")
    )
    metrics: list[Metric] = []
    if protocol == "udp":
        total = end.get("sum") or end.get("sum_received") or {}
        if not total:
            raise ParseError("iperf3 UDP output has no end.sum", source=source, excerpt=str(end)[:200])
        metrics += [
            higher(
                "throughput_gbit_s",
                finite(total["bits_per_second"], what="throughput", source=source) / 1e9,
                "Gbit/s",
                interval_gbit,
            ),
            lower("jitter_ms", finite(total.get("jitter_ms", 0), what="jitter", source=source), "ms"),
            lower("lost_percent", finite(total.get("lost_percent", 0), what="loss", source=source), "%"),
        ]
    else:
        received = end.get("sum_received")
        sent = end.get("sum_sent")
        if not received or not sent:
            raise ParseError(
                "iperf3 TCP output has no end.sum_sent/sum_received", source=source, excerpt=str(end)[:200]
            )
        metrics += [
            higher(
                "throughput_gbit_s",
                finite(received["bits_per_second"], what="throughput", source=source) / 1e9,
                "Gbit/s",
                interval_gbit,
            ),
            higher(
                "sent_gbit_s", finite(sent["bits_per_second"], what="sent throughput", source=source) / 1e9, "Gbit/s"
            ),
            lower("retransmits", float(sent.get("retransmits", 0)), "count"),
        ]
        # RTT comes from TCP_INFO of the *local* sending socket; with -R the sender is the
        # server, its entries say "sender": false and carry zeros, so there is no RTT.
        senders = [
            s["sender"]
            for s in end.get("streams") or []
            if s.get("sender")
            and s["sender"].get("sender", True)
            and all(k in s["sender"] for k in ("mean_rtt", "max_rtt", "min_rtt", "bytes"))
        ]
        if senders:
            # Weight each stream's mean RTT by the bytes it moved, so a stalled stream counts less.
            weight = sum(s["bytes"] for s in senders) or len(senders)
            mean = sum(s["mean_rtt"] * (s["bytes"] or 1) for s in senders) / weight
            metrics += [
                lower("rtt_mean_us", mean, "us"),
                lower("rtt_max_us", float(max(s["max_rtt"] for s in senders)), "us"),
                lower("rtt_min_us", float(min(s["min_rtt"] for s in senders)), "us"),
            ]
    cpu = end.get("cpu_utilization_percent") or {}
    if "host_total" in cpu:
        metrics.append(lower("cpu_host_percent", finite(cpu["host_total"], what="cpu", source=source), "%"))
    return [Parsed(tool="iperf3", case=protocol, metrics=tuple(metrics), info=info)]
