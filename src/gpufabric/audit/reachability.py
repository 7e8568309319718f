"""Proof of segmentation: the allow matrix of every (source role, destination role,
plane, protocol, port) cell, computed from the hosts' nftables rulesets and compared
with the policy's intent (reference/security-config.md VER-01, VER-02).

Ports are covered exactly, not sampled: for each destination, plane and protocol the
port axis is cut at every boundary that the rules a packet there can reach, or the
intent, mention; each elementary interval is evaluated once (every reachable rule
treats all ports of an interval alike). Sources are covered exactly too: the evaluator
returns the accepted source-address set, which is intersected with each role's
addresses on the plane; addresses that belong to no role are the pseudo-role
``(other)``, which no flow ever allows.

Cells are three-valued: the firewall admits a source role ``all``/``none``/``partial``,
or ``unknown`` when a rule the evaluator cannot decide (a rate limit, a routing lookup,
an unmodelled expression) stands between some of its sources and a verdict. An unknown
cell is neither isolated nor reachable: its verdict is ``not-proven`` and the audit fails
closed on it (docs/security.md, "Proof of segmentation").
"""

from __future__ import annotations

import itertools
import time
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufabric.audit import intervals as iv
from gpufabric.audit.nft import Ruleset
from gpufabric.audit.nfteval import Packet, Verdicts, evaluate
from gpufabric.spec.security import SecurityPolicy

OTHER = "(other)"
PROTOS = ("tcp", "udp")


def _port_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    src: str
    dst: str
    plane: str
    proto: str
    port_lo: int
    port_hi: int
    allowed: str  # "all" | "none" | "partial" (some source or destination hosts only) | "unknown"
    intended: bool
    reason: str = ""  # for "unknown": the rule that made it undecidable

    @property
    def ports(self) -> str:
        return _port_text(self.port_lo, self.port_hi)

    @property
    def verdict(self) -> str:
        if self.allowed == "unknown":
            return "not-proven"
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

    def not_proven(self) -> list[Cell]:
        """Cells the proof could not decide (never counted as isolated or reachable)."""
        return [c for c in self.cells if c.allowed == "unknown"]


def intent(policy: SecurityPolicy) -> dict[tuple[str, str, str, str], tuple[tuple[int, int], ...]]:
    spans: dict[tuple[str, str, str, str], tuple[tuple[int, int], ...]] = defaultdict(tuple)
    for f in policy.flows:
        key = (f.src, f.dst, f.plane, f.proto)
        spans[key] = iv.union(spans[key], iv.normalize(f.port_ranges()))
    return spans


def prove(policy: SecurityPolicy, rulesets: Mapping[str, Ruleset]) -> Proof:
    """Evaluate every cell; ``rulesets`` maps host name -> its parsed ruleset (hosts that
    share a ruleset object are evaluated once). Cells come back merged: adjacent port
    intervals with the same outcome form one cell, so the cells need no further merging."""
    start = time.perf_counter()
    addresses = policy.addresses()
    wanted = intent(policy)
    sources = _source_spans(policy, addresses)
    cells: list[Cell] = []
    missing: list[str] = []
    # A ruleset treats every port between two of its own breakpoints alike, so results
    # are cached per (ruleset, interface, proto, local interval), not per global interval.
    cache: dict[tuple[int, str, str, str, int], Verdicts] = {}
    hosts_done = 0
    cells_evaluated = 0
    # Hosts whose rulesets have the same content (a role's hosts, usually) share one evaluation.
    canonical: dict[str, Ruleset] = {}
    for rs in rulesets.values():
        canonical.setdefault(rs.fingerprint or str(id(rs)), rs)
    for role in policy.roles:
        groups: dict[int, Ruleset] = {}
        for host in role.host_names:
            found = rulesets.get(host)
            if found is None:
                missing.append(host)
                continue
            hosts_done += 1
            rs = canonical[found.fingerprint or str(id(found))]
            groups[id(rs)] = rs
        if not groups:
            continue
        for plane_name in policy.role_planes(role.name):
            iif = policy.plane(plane_name).interface or ""
            # ip daddr rules are decided only where every host of the role agrees
            daddr = iv.ip_spans(addresses[(h, plane_name)] for h in role.host_names if (h, plane_name) in addresses)
            srcs = list(sources[plane_name].items())
            sizes = [iv.size(spans) for _name, spans in srcs]
            for proto in PROTOS:
                intent_spans = [wanted.get((name, role.name, plane_name, proto), ()) for name, _spans in srcs]
                # This destination's own grid: the ports its reachable rules and its intent
                # mention. Other roles' ports cannot change its outcome.
                cut = {1, 65536}
                for rs in groups.values():
                    cut.update(rs.port_points(iif, proto))
                for spans in intent_spans:
                    for lo, hi in spans:
                        cut.update((lo, hi + 1))
                points = sorted(p for p in cut if 1 <= p <= 65536)
                grid = [(points[i], points[i + 1] - 1) for i in range(len(points) - 1)]
                runs: list[list] = []  # [lo, hi, statuses tuple, intended tuple]
                for lo, hi in grid:
                    accs = []
                    for rs in groups.values():
                        key = (id(rs), role.name, iif, proto, bisect_right(rs.port_points(iif, proto), lo))
                        acc = cache.get(key)
                        if acc is None:
                            acc = cache[key] = evaluate(rs, Packet(iif=iif, proto=proto, dport=lo, daddr=daddr or None))
                        accs.append(acc)
                    statuses = tuple(
                        _status(accs, spans, size) for (_name, spans), size in zip(srcs, sizes, strict=True)
                    )
                    intended = tuple(bool(span) and _covers(span, lo) for span in intent_spans)
                    if runs and runs[-1][2] == statuses and runs[-1][3] == intended and runs[-1][1] + 1 == lo:
                        runs[-1][1] = hi
                    else:
                        runs.append([lo, hi, statuses, intended])
                cells_evaluated += len(grid) * len(srcs)
                for i, (name, _spans) in enumerate(srcs):
                    _append_cells(cells, runs, i, src=name, dst=role.name, plane=plane_name, proto=proto)
    unsupported = sorted({u for rs in rulesets.values() for u in rs.unsupported})
    return Proof(
        cells=cells,
        hosts_evaluated=hosts_done,
        rulesets_evaluated=len(canonical),
        evaluations=len(cache),
        cells_evaluated=cells_evaluated,
        missing_hosts=missing,
        unsupported=unsupported,
        seconds=time.perf_counter() - start,
    )


def _source_spans(
    policy: SecurityPolicy, addresses: Mapping[tuple[str, str], str]
) -> dict[str, dict[str, tuple[tuple[int, int], ...]]]:
    """plane -> source role (and OTHER: every address no role holds) -> its address spans."""
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
    return sources


def _append_cells(cells: list[Cell], runs: list[list], i: int, *, src: str, dst: str, plane: str, proto: str) -> None:
    """The cells of source ``i`` over the merged port ``runs`` of one destination, plane and
    protocol: adjacent runs with the same outcome, reason and intent for this source are one cell."""
    last: Cell | None = None
    for lo, hi, statuses, intended in runs:
        allowed, reason = statuses[i]
        if last is not None and (last.allowed, last.reason, last.intended) == (allowed, reason, intended[i]):
            lo = last.port_lo
            cells.pop()
        last = Cell(
            src=src,
            dst=dst,
            plane=plane,
            proto=proto,
            port_lo=lo,
            port_hi=hi,
            allowed=allowed,
            intended=intended[i],
            reason=reason,
        )
        cells.append(last)


def _status(accs: list[Verdicts], spans: tuple[tuple[int, int], ...], size: int) -> tuple[str, str]:
    """(outcome, reason) of one source role: unknown wins over everything (fail closed)."""
    seen = set()
    for acc in {id(a): a for a in accs}.values():  # by identity: hashing span tuples costs more than it saves
        for reason, undecided in acc.unknown:
            if spans and iv.intersect(undecided, spans):
                return "unknown", reason
        if not acc.accept or not spans:
            seen.add("none")
            continue
        got = iv.size(iv.intersect(acc.accept, spans))
        seen.add("none" if got == 0 else "all" if got == size else "partial")
    return (seen.pop() if len(seen) == 1 else "partial"), ""


def _covers(spans: tuple[tuple[int, int], ...], port: int) -> bool:
    i = bisect_right(spans, (port, 65536)) - 1
    return i >= 0 and spans[i][0] <= port <= spans[i][1]


def cell_at(proof: Proof, src: str, dst: str, plane: str, proto: str, port: int) -> Cell | None:
    """The (merged) cell holding ``port``."""
    for cell in proof.cells:
        if (cell.src, cell.dst, cell.plane, cell.proto) == (
            src,
            dst,
            plane,
            proto,
        ) and cell.port_lo <= port <= cell.port_hi:
            return cell
    return None


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
        return _port_text(self.port_lo, self.port_hi)

    @property
    def direction(self) -> str:
        rank = {"none": 0, "partial": 1, "unknown": 1, "all": 2}
        return "opens" if rank[self.new] > rank[self.old] else "closes"


def diff(old: Proof, new: Proof) -> list[Change]:
    """Port ranges whose outcome differs between two proofs, per (src, dst, plane, proto)."""

    def index(proof: Proof) -> dict[tuple[str, str, str, str], list[Cell]]:
        out: dict[tuple[str, str, str, str], list[Cell]] = defaultdict(list)
        for c in proof.cells:
            out[(c.src, c.dst, c.plane, c.proto)].append(c)
        return out

    a, b = index(old), index(new)
    changes: list[Change] = []
    for key in sorted(set(a) | set(b), key=lambda k: (k[2], k[0], k[1], k[3])):
        cuts = sorted(
            {1, 65536}
            | {c.port_lo for c in a.get(key, [])}
            | {c.port_hi + 1 for c in a.get(key, [])}
            | {c.port_lo for c in b.get(key, [])}
            | {c.port_hi + 1 for c in b.get(key, [])}
        )
        for lo, nxt in itertools.pairwise(cuts):
            before = next((c.allowed for c in a.get(key, []) if c.port_lo <= lo <= c.port_hi), "none")
            after = next((c.allowed for c in b.get(key, []) if c.port_lo <= lo <= c.port_hi), "none")
            if before == after:
                continue
            last = changes[-1] if changes else None
            if (
                last
                and (last.src, last.dst, last.plane, last.proto, last.old, last.new) == (*key, before, after)
                and last.port_hi + 1 == lo
            ):
                changes[-1] = Change(
                    src=key[0],
                    dst=key[1],
                    plane=key[2],
                    proto=key[3],
                    port_lo=last.port_lo,
                    port_hi=nxt - 1,
                    old=before,
                    new=after,
                )
            else:
                changes.append(
                    Change(
                        src=key[0],
                        dst=key[1],
                        plane=key[2],
                        proto=key[3],
                        port_lo=lo,
                        port_hi=nxt - 1,
                        old=before,
                        new=after,
                    )
                )
    return changes
