"""Evaluate an nftables ruleset (``nft -j list ruleset`` JSON, schema v1) symbolically.

For a new connection arriving on interface ``iif`` to ``proto``/``dport`` (and
optionally a destination address) the evaluator returns the exact set of IPv4 source
addresses that the input hook accepts: it walks base chains in priority order, follows
jumps, gotos, returns and verdict maps, and splits the source-address space at every
``ip saddr`` match instead of trying addresses one by one (the Batfish searchFilters
idea, reference/security-config.md 1.2). Expressions it does not model are treated as
"may match" and reported in :attr:`Ruleset.unsupported`, so the result is never
silently optimistic about a rule it did not understand.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from gpufabric.audit import intervals as iv
from gpufabric.errors import ParseError

Spans = tuple[tuple[int, int], ...]
_FAMILIES_V4 = ("inet", "ip")


@dataclass(slots=True)
class Chain:
    family: str
    table: str
    name: str
    hook: str | None = None
    prio: int = 0
    policy: str = "accept"
    rules: list[list[dict[str, Any]]] = field(default_factory=list)


@dataclass(slots=True)
class Ruleset:
    chains: dict[tuple[str, str, str], Chain]
    sets: dict[tuple[str, str, str], list[Any]]
    unsupported: set[str] = field(default_factory=set)
    fingerprint: str = ""  # content hash without handles: equal rulesets are evaluated once
    span_cache: dict[Any, Any] = field(default_factory=dict)

    def port_points(self, iif: str, proto: str) -> list[int]:
        """Sorted port breakpoints of the rules a packet on ``iif``/``proto`` can reach:
        between two of them every such packet is treated alike."""
        key = ("points", iif, proto)
        points = self.span_cache.get(key)
        if points is None:
            points = self.span_cache[key] = sorted(_reachable_points(self, iif, proto))
        return points

    def base_chains(self, hook: str) -> list[Chain]:
        found = [c for c in self.chains.values() if c.hook == hook and c.family in _FAMILIES_V4]
        return sorted(found, key=lambda c: c.prio)

    def interfaces(self) -> set[str]:
        """Interface names the ruleset matches on (iifname rules and vmap keys)."""
        names: set[str] = set()
        for chain in self.chains.values():
            for rule in chain.rules:
                for expr in rule:
                    if "match" in expr and _meta_key(expr["match"]["left"]) in ("iifname", "iif"):
                        names.update(v for v in _flat(expr["match"]["right"]) if isinstance(v, str))
                    if "vmap" in expr and _meta_key(expr["vmap"]["key"]) in ("iifname", "iif"):
                        names.update(k for k, _ in _vmap_items(expr["vmap"]))
        return names


def parse(doc: Any, source: str = "nft -j") -> Ruleset:
    """Parse ``nft -j list ruleset`` output."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nftables"), list):
        raise ParseError("not nft JSON (no top-level 'nftables' list)", source=source, excerpt=str(doc)[:200])
    chains: dict[tuple[str, str, str], Chain] = {}
    sets: dict[tuple[str, str, str], list[Any]] = {}
    rules: list[dict[str, Any]] = []
    for item in doc["nftables"]:
        if "chain" in item:
            c = item["chain"]
            prio = c.get("prio", 0)
            chains[(c["family"], c["table"], c["name"])] = Chain(
                family=c["family"], table=c["table"], name=c["name"], hook=c.get("hook"),
                prio=prio if isinstance(prio, int) else 0, policy=c.get("policy", "accept"),
            )
        elif "set" in item or "map" in item:
            s = item.get("set") or item.get("map")
            sets[(s["family"], s["table"], s["name"])] = list(s.get("elem", []))
        elif "rule" in item:
            rules.append(item["rule"])
        elif "element" in item:
            e = item["element"]
            sets.setdefault((e["family"], e["table"], e["name"]), []).extend(e.get("elem", []))
    for r in rules:
        key = (r["family"], r["table"], r["chain"])
        if key in chains:
            chains[key].rules.append(list(r.get("expr", [])))
    canonical = json.dumps(
        [[list(k), c.hook, c.prio, c.policy, c.rules] for k, c in sorted(chains.items())]
        + [[list(k), v] for k, v in sorted(sets.items())], sort_keys=True, default=str,
    )
    return Ruleset(chains=chains, sets=sets, fingerprint=hashlib.sha256(canonical.encode()).hexdigest())


@dataclass(frozen=True, slots=True)
class Packet:
    """A new connection: everything concrete except the source address."""

    iif: str
    proto: str
    dport: int
    daddr: int | None = None


def accepted_sources(rs: Ruleset, pkt: Packet, space: Spans = iv.IPV4_ALL) -> Spans:
    """Source addresses (within ``space``) whose packet the input hook accepts."""
    alive = space
    for chain in rs.base_chains("input"):
        acc, _drop, fall = _run(rs, chain, pkt, alive, depth=0)
        alive = iv.union(acc, fall) if chain.policy == "accept" else acc
        if not alive:
            break
    return alive


def _run(rs: Ruleset, chain: Chain, pkt: Packet, space: Spans, depth: int) -> tuple[Spans, Spans, Spans]:
    """(accepted, dropped, fell through) parts of ``space`` in ``chain``."""
    if depth > 16:
        rs.unsupported.add("jump depth > 16")
        return (), (), space
    remaining = space
    acc: Spans = ()
    drop: Spans = ()
    ret: Spans = ()
    for rule in chain.rules:
        if not remaining:
            break
        matched = remaining
        verdict: Any = None
        for expr in rule:
            if "match" in expr:
                matched = _match(rs, chain, expr["match"], pkt, matched)
                if not matched:
                    break
            elif "vmap" in expr:
                verdict = _vmap_verdict(expr["vmap"], pkt, rs)
                if verdict is None:
                    matched = ()
                break
            elif any(k in expr for k in ("accept", "drop", "reject", "jump", "goto", "return")):
                verdict = expr
                break
            elif any(k in expr for k in ("counter", "log", "comment", "meta_set", "mangle", "notrack")):
                continue
            else:
                rs.unsupported.add(next(iter(expr)))
        if not matched or verdict is None:
            continue
        if "accept" in verdict:
            acc = iv.union(acc, matched)
        elif "drop" in verdict or "reject" in verdict:
            drop = iv.union(drop, matched)
        elif "return" in verdict:
            ret = iv.union(ret, matched)
        elif "jump" in verdict or "goto" in verdict:
            target = _jump_target(verdict)
            sub = rs.chains.get((chain.family, chain.table, target))
            if sub is None:
                rs.unsupported.add(f"jump to missing chain {target}")
                continue
            a, d, f = _run(rs, sub, pkt, matched, depth + 1)
            acc, drop = iv.union(acc, a), iv.union(drop, d)
            if "jump" in verdict:
                remaining = iv.union(iv.subtract(remaining, matched), f)
                continue
            ret = iv.union(ret, f)
        remaining = iv.subtract(remaining, matched)
    return acc, drop, iv.union(remaining, ret)


def _meta_key(left: Any) -> str | None:
    if isinstance(left, dict) and "meta" in left:
        return left["meta"].get("key")
    return None


def _flat(right: Any) -> list[Any]:
    if isinstance(right, dict) and "set" in right:
        return list(right["set"])
    if isinstance(right, list):
        return right
    return [right]


def _vmap_items(vmap: dict[str, Any]) -> list[tuple[Any, Any]]:
    data = vmap.get("data", {})
    items = data.get("set", []) if isinstance(data, dict) else []
    return [(k, v) for k, v in items]


def _iface_hit(iif: str, pattern: Any) -> bool:
    """``iif`` matches an iifname value (nft ``*`` wildcard; JSON escapes it as ``\\*``)."""
    return isinstance(pattern, str) and fnmatch.fnmatchcase(iif, pattern.replace("\\*", "*"))


def _jump_target(verdict: Any) -> str | None:
    """The chain a jump/goto verdict names, None for any other verdict."""
    if isinstance(verdict, dict) and ("jump" in verdict or "goto" in verdict):
        return (verdict.get("jump") or verdict.get("goto"))["target"]
    return None


def _vmap_verdict(vmap: dict[str, Any], pkt: Packet, rs: Ruleset) -> Any:
    key = _meta_key(vmap.get("key"))
    if key not in ("iifname", "iif"):
        rs.unsupported.add(f"vmap on {key}")
        return None
    for k, verdict in _vmap_items(vmap):
        if _iface_hit(pkt.iif, k):
            return verdict
    return None


def _set_values(rs: Ruleset, chain: Chain, right: Any) -> list[Any]:
    if isinstance(right, str) and right.startswith("@"):
        return rs.sets.get((chain.family, chain.table, right[1:]), [])
    return _flat(right)


def _elem(value: Any) -> Any:
    return value["elem"]["val"] if isinstance(value, dict) and "elem" in value else value


def _addr_spans(values: list[Any]) -> Spans:
    spans = []
    for value in values:
        value = _elem(value)
        if isinstance(value, str):
            if "/" in value:
                spans.append(iv.cidr_span(value))
            else:
                spans.append((iv.ip(value), iv.ip(value)))
        elif isinstance(value, dict) and "prefix" in value:
            spans.append(iv.cidr_span(f"{value['prefix']['addr']}/{value['prefix']['len']}"))
        elif isinstance(value, dict) and "range" in value:
            lo, hi = value["range"]
            spans.append((iv.ip(lo), iv.ip(hi)))
    return iv.normalize(spans)


def _cached_spans(rs: Ruleset, chain: Chain, right: Any) -> Spans:
    """Address spans of a match's right-hand side, parsed once per ruleset (IP parsing
    dominated the proof's run time before this cache)."""
    key = (chain.family, chain.table, right) if isinstance(right, str) else id(right)
    spans = rs.span_cache.get(key)
    if spans is None:
        spans = rs.span_cache[key] = _addr_spans(_set_values(rs, chain, right))
    return spans


def _port_hit(values: list[Any], port: int) -> bool:
    for value in values:
        value = _elem(value)
        if isinstance(value, int) and value == port:
            return True
        if isinstance(value, dict) and "range" in value and value["range"][0] <= port <= value["range"][1]:
            return True
    return False


_PROTO_NUM = {"tcp": 6, "udp": 17}


def _match(rs: Ruleset, chain: Chain, m: dict[str, Any], pkt: Packet, space: Spans) -> Spans:
    op = m.get("op", "==")
    left, right = m.get("left"), m.get("right")
    negate = op == "!="
    if isinstance(left, dict) and "payload" in left:
        proto, fieldname = left["payload"].get("protocol"), left["payload"].get("field")
        if proto == "ip" and fieldname == "saddr":
            spans = _cached_spans(rs, chain, right)
            return iv.subtract(space, spans) if negate else iv.intersect(space, spans)
        if proto == "ip" and fieldname == "daddr":
            if pkt.daddr is None:
                rs.unsupported.add("ip daddr without a destination address")
                return space
            hit = any(lo <= pkt.daddr <= hi for lo, hi in _cached_spans(rs, chain, right))
            return space if hit != negate else ()
        if proto == "ip" and fieldname == "protocol":
            hit = any(v in (pkt.proto, _PROTO_NUM.get(pkt.proto)) for v in _set_values(rs, chain, right))
            return space if hit != negate else ()
        if proto in ("tcp", "udp", "th") and fieldname == "dport":
            if proto != "th" and proto != pkt.proto:
                return ()
            hit = _port_hit(_set_values(rs, chain, right), pkt.dport)
            return space if hit != negate else ()
        if proto in ("ip6", "icmp", "icmpv6"):
            return ()  # an IPv4 TCP/UDP packet never matches these
        if proto in ("tcp", "udp", "th") and fieldname == "sport":
            rs.unsupported.add(f"{proto} sport")
            return space
        rs.unsupported.add(f"payload {proto} {fieldname}")
        return space
    if isinstance(left, dict) and "meta" in left:
        key = left["meta"].get("key")
        values = _set_values(rs, chain, right)
        if key in ("iifname", "iif"):
            hit = any(_iface_hit(pkt.iif, v) for v in values)
        elif key == "l4proto":
            hit = any(v in (pkt.proto, _PROTO_NUM.get(pkt.proto)) for v in values)
        elif key == "nfproto":
            hit = "ipv4" in values
        elif key in ("oifname", "oif"):
            return ()  # no output interface on the input hook
        elif key == "pkttype":
            hit = "unicast" in values
        else:
            rs.unsupported.add(f"meta {key}")
            return space
        return space if hit != negate else ()
    if isinstance(left, dict) and "ct" in left:
        key = left["ct"].get("key")
        if key == "state":
            hit = "new" in _flat(right)
            return space if hit != negate else ()
        rs.unsupported.add(f"ct {key}")
        return space
    rs.unsupported.add(f"match on {next(iter(left)) if isinstance(left, dict) else left!r}")
    return space


def _add_points(points: set[int], values: list[Any]) -> None:
    """Add the boundaries of port values (a port p cuts at p and p+1, a range at lo and hi+1)."""
    for value in values:
        value = _elem(value)
        if isinstance(value, int):
            points.update((value, value + 1))
        elif isinstance(value, dict) and "range" in value:
            points.update((value["range"][0], value["range"][1] + 1))


def port_breakpoints(rs: Ruleset) -> set[int]:
    """Every port boundary the ruleset mentions: each elementary interval between them
    is treated identically by every rule, so one representative port per interval
    covers all 65,535 ports exactly."""
    points: set[int] = set()
    for chain in rs.chains.values():
        for rule in chain.rules:
            for expr in rule:
                m = expr.get("match")
                if m and isinstance(m.get("left"), dict) and m["left"].get("payload", {}).get("field") == "dport":
                    _add_points(points, _set_values(rs, chain, m.get("right")))
    return points


def _reachable_points(rs: Ruleset, iif: str, proto: str) -> set[int]:
    """Port breakpoints of the rules reachable for packets on ``iif`` with ``proto``:
    rules whose interface or protocol match excludes the packet are skipped, and only
    the verdict-map entry for ``iif`` is followed. Anything not understood is kept."""
    points: set[int] = set()
    seen: set[tuple[str, str, str]] = set()

    def visit(chain: Chain) -> None:
        key = (chain.family, chain.table, chain.name)
        if key in seen:
            return
        seen.add(key)
        for rule in chain.rules:
            ports: list[Any] = []
            targets: list[str | None] = []
            excluded = False
            for expr in rule:
                m = expr.get("match")
                if m is not None:
                    left, right, negate = m.get("left"), m.get("right"), m.get("op") == "!="
                    if _meta_key(left) in ("iifname", "iif"):
                        hit = any(_iface_hit(iif, v) for v in _set_values(rs, chain, right))
                        excluded |= hit == negate
                    elif isinstance(left, dict) and left.get("payload", {}).get("field") == "dport":
                        excluded |= left["payload"].get("protocol") not in (proto, "th")
                        ports.extend(_set_values(rs, chain, right))
                elif "jump" in expr or "goto" in expr:
                    targets.append(_jump_target(expr))
                elif "vmap" in expr:
                    items = _vmap_items(expr["vmap"])
                    if _meta_key(expr["vmap"].get("key")) in ("iifname", "iif"):
                        items = [next(((k, v) for k, v in items if _iface_hit(iif, k)), (None, None))]
                    targets.extend(_jump_target(verdict) for _k, verdict in items)
                if excluded:
                    break
            if excluded:
                continue
            _add_points(points, ports)
            for target in targets:
                sub = rs.chains.get((chain.family, chain.table, target)) if target else None
                if sub is not None:
                    visit(sub)

    for base in rs.base_chains("input"):
        visit(base)
    return points
