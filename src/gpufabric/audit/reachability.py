"""Proof of segmentation: the allow matrix of every (source role, destination role,
plane, protocol, port) cell, computed from the hosts' nftables rulesets and compared
with the policy's intent (reference/security-config.md VER-01, VER-02).

Ports are covered exactly, not sampled: the port axis is cut at every boundary that
any rule or flow mentions, and each elementary interval is evaluated once (every rule
treats all ports of an interval alike). Sources are covered exactly too: the evaluator
returns the accepted source-address set, which is intersected with each role's
addresses on the plane; addresses that belong to no role are the pseudo-role
``(other)``, which no flow ever allows.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpufabric.audit import intervals as iv
from gpufabric.audit.nft import Packet, Ruleset, accepted_sources, port_breakpoints
from gpufabric.spec.security import SecurityPolicy

OTHER = "(other)"
PROTOS = ("tcp", "udp")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    src: str
    dst: str
    plane: str
    proto: str
    port_lo: int
    port_hi: int
    allowed: str  # "all" | "none" | "partial" (some source or destination hosts only)
    intended: bool

    @property
    def ports(self) -> str:
        return str(self.port_lo) if self.port_lo == self.port_hi else f"{self.port_lo}-{self.port_hi}"

    @property
    def verdict(self) -> str:
        if self.intended and self.allowed != "all":
            return "blocked"
        if not self.intended and self.allowed != "none":
            return "beyond-intent"
        return "ok"


@dataclass(slots=True, kw_only=True)
class Proof:
    cells: list[Cell]
    hosts_evaluated: int
    rulesets_evaluated: int
    evaluations: int
    cells_evaluated: int
    missing_hosts: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def allowed(self) -> list[Cell]:
        return [c for c in self.cells if c.allowed != "none" or c.intended]

    def violations(self) -> list[Cell]:
        return [c for c in self.cells if c.verdict != "ok"]


def intent(policy: SecurityPolicy) -> dict[tuple[str, str, str, str], tuple[tuple[int, int], ...]]:
    spans: dict[tuple[str, str, str, str], tuple[tuple[int, int], ...]] = defaultdict(tuple)
    for f in policy.flows:
        key = (f.src, f.dst, f.plane, f.proto)
        spans[key] = iv.union(spans[key], iv.normalize(f.port_ranges()))
    return spans


def breakpoints(policy: SecurityPolicy, rulesets: Mapping[str, Ruleset]) -> set[int]:
    points = {1, 65536}
    for f in policy.flows:
        for lo, hi in f.port_ranges():
            points.update((lo, hi + 1))
    for rs in {id(r): r for r in rulesets.values()}.values():
        points |= port_breakpoints(rs)
    return points


def prove(
    policy: SecurityPolicy, rulesets: Mapping[str, Ruleset], *, extra_points: Sequence[int] = ()
) -> Proof:
    """Evaluate every cell; ``rulesets`` maps host name -> its parsed ruleset (hosts that
    share a ruleset object are evaluated once)."""
    start = time.perf_counter()
    addresses = policy.addresses()
    points = sorted(p for p in breakpoints(policy, rulesets) | set(extra_points) if 1 <= p <= 65536)
    grid = [(points[i], points[i + 1] - 1) for i in range(len(points) - 1)]
    wanted = intent(policy)
    sources: dict[str, dict[str, tuple[tuple[int, int], ...]]] = {}
    for plane in policy.planes:
        per_role = {}
        for role in policy.roles:
            if plane.name in policy.role_planes(role.name):
                per_role[role.name] = iv.ip_spans(addresses[(h, plane.name)] for h in role.host_names)
        everyone: tuple[tuple[int, int], ...] = ()
        for spans in per_role.values():
            everyone = iv.union(everyone, spans)
        per_role[OTHER] = iv.subtract(iv.IPV4_ALL, everyone)
        sources[plane.name] = per_role
    cells: list[Cell] = []
    missing: list[str] = []
    cache: dict[tuple[int, str, str, int], tuple[tuple[int, int], ...]] = {}
    hosts_done = 0
    for role in policy.roles:
        groups: dict[int, tuple[Ruleset, int]] = {}
        for host in role.host_names:
            rs = rulesets.get(host)
            if rs is None:
                missing.append(host)
                continue
            hosts_done += 1
            ruleset, count = groups.get(id(rs), (rs, 0))
            groups[id(rs)] = (ruleset, count + 1)
        if not groups:
            continue
        for plane_name in policy.role_planes(role.name):
            iif = policy.plane(plane_name).interface or ""
            for proto in PROTOS:
                for lo, hi in grid:
                    statuses: dict[str, set[str]] = defaultdict(set)
                    for rs, _count in groups.values():
                        key = (id(rs), iif, proto, lo)
                        acc = cache.get(key)
                        if acc is None:
                            acc = cache[key] = accepted_sources(rs, Packet(iif=iif, proto=proto, dport=lo))
                        for src, spans in sources[plane_name].items():
                            got = iv.size(iv.intersect(acc, spans))
                            statuses[src].add("none" if got == 0 else "all" if got == iv.size(spans) else "partial")
                    for src, seen in statuses.items():
                        allowed = seen.pop() if len(seen) == 1 else "partial"
                        span = wanted.get((src, role.name, plane_name, proto), ())
                        intended = bool(iv.intersect(span, ((lo, hi),)))
                        cells.append(Cell(src=src, dst=role.name, plane=plane_name, proto=proto, port_lo=lo,
                                          port_hi=hi, allowed=allowed, intended=intended))
    unsupported = sorted({u for rs in {id(r): r for r in rulesets.values()}.values() for u in rs.unsupported})
    return Proof(
        cells=cells, hosts_evaluated=hosts_done, rulesets_evaluated=len({id(r) for r in rulesets.values()}),
        evaluations=len(cache), cells_evaluated=len(cells), missing_hosts=missing, unsupported=unsupported,
        seconds=time.perf_counter() - start,
    )


def merged(cells: Sequence[Cell]) -> list[Cell]:
    """Adjacent port intervals with the same outcome joined, for display."""
    out: list[Cell] = []
    for cell in cells:
        last = out[-1] if out else None
        if (
            last is not None and (last.src, last.dst, last.plane, last.proto, last.allowed, last.intended)
            == (cell.src, cell.dst, cell.plane, cell.proto, cell.allowed, cell.intended)
            and last.port_hi + 1 == cell.port_lo
        ):
            out[-1] = Cell(src=last.src, dst=last.dst, plane=last.plane, proto=last.proto, port_lo=last.port_lo,
                           port_hi=cell.port_hi, allowed=last.allowed, intended=last.intended)
        else:
            out.append(cell)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    src: str
    dst: str
    plane: str
    proto: str
    port_lo: int
    port_hi: int
    old: str
    new: str

    @property
    def ports(self) -> str:
        return str(self.port_lo) if self.port_lo == self.port_hi else f"{self.port_lo}-{self.port_hi}"

    @property
    def direction(self) -> str:
        rank = {"none": 0, "partial": 1, "all": 2}
        return "opens" if rank[self.new] > rank[self.old] else "closes"


def diff(old: Proof, new: Proof) -> list[Change]:
    """Cells whose outcome differs (both proofs must share breakpoints: use extra_points)."""
    def index(proof: Proof) -> dict[tuple[str, str, str, str, int], Cell]:
        return {(c.src, c.dst, c.plane, c.proto, c.port_lo): c for c in proof.cells}

    a, b = index(old), index(new)
    changes: list[Change] = []
    for key in sorted(set(a) | set(b), key=lambda k: (k[2], k[0], k[1], k[3], k[4])):
        before = a[key].allowed if key in a else "none"
        after = b[key].allowed if key in b else "none"
        if before != after:
            cell = a.get(key) or b[key]
            changes.append(Change(src=cell.src, dst=cell.dst, plane=cell.plane, proto=cell.proto, port_lo=cell.port_lo,
                                  port_hi=cell.port_hi, old=before, new=after))
    out: list[Change] = []
    for ch in changes:
        last = out[-1] if out else None
        if last and (last.src, last.dst, last.plane, last.proto, last.old, last.new) == (
            ch.src, ch.dst, ch.plane, ch.proto, ch.old, ch.new) and last.port_hi + 1 == ch.port_lo:
            out[-1] = Change(src=ch.src, dst=ch.dst, plane=ch.plane, proto=ch.proto, port_lo=last.port_lo,
                             port_hi=ch.port_hi, old=ch.old, new=ch.new)
        else:
            out.append(ch)
    return out
