"""Sets of integers as sorted, disjoint, inclusive intervals (IPv4 addresses, ports)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Span = tuple[int, int]
IPV4_ALL: tuple[Span, ...] = ((0, 2**32 - 1),)


def normalize(spans: Iterable[Span]) -> tuple[Span, ...]:
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def union(a: tuple[Span, ...], b: tuple[Span, ...]) -> tuple[Span, ...]:
    if not a:
        return b
    if not b:
        return a
    return normalize(a + b)


def intersect(a: tuple[Span, ...], b: tuple[Span, ...]) -> tuple[Span, ...]:
    out: list[Span] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract(a: tuple[Span, ...], b: tuple[Span, ...]) -> tuple[Span, ...]:
    if not a or not b:
        return a
    out: list[Span] = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] < cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > cur:
                out.append((cur, b[k][0] - 1))
            cur = max(cur, b[k][1] + 1)
            k += 1
        if cur <= hi:
            out.append((cur, hi))
    return tuple(out)


def size(a: tuple[Span, ...]) -> int:
    return sum(hi - lo + 1 for lo, hi in a)


def ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def ip_spans(addresses: Iterable[str]) -> tuple[Span, ...]:
    return normalize((ip(a), ip(a)) for a in addresses)


def cidr_span(cidr: str) -> Span:
    net = ipaddress.IPv4Network(cidr, strict=False)
    return int(net.network_address), int(net.broadcast_address)


def fmt_ip_spans(a: tuple[Span, ...], limit: int = 4) -> str:
    parts = [
        str(ipaddress.IPv4Address(lo)) if lo == hi else f"{ipaddress.IPv4Address(lo)}-{ipaddress.IPv4Address(hi)}"
        for lo, hi in a[:limit]
    ]
    if len(a) > limit:
        parts.append(f"... ({len(a) - limit} more)")
    return ", ".join(parts) or "none"
