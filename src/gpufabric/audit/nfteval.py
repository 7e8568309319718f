"""Three-valued symbolic evaluation of a parsed nftables ruleset for one incoming packet.

For a packet arriving on ``iif`` for ``proto``/``dport`` (destination: this host) the
evaluator splits the IPv4 source-address space into the sources the kernel accepts, the
sources it drops and the sources whose fate depends on something the evaluator cannot
decide (a rate limit, a connection count, a routing lookup, an expression it does not
model), each unknown part with the rule that made it unknown. It walks every base chain
the packet passes, in kernel order (netdev/inet ingress, prerouting by priority, input
by priority): accept ends one base chain only, drop ends the packet, and statements that
change the packet (``notrack``, ``meta mark set``, NAT ``redirect``) carry into the later
chains. An undecided match is followed both ways: where both outcomes agree the result
is decided, elsewhere it is unknown. Nothing is ever assumed to match or not to match.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpufabric.audit import intervals as iv
from gpufabric.audit.nft import Chain, Ruleset, elem_val, flat, iface_hit, meta_key

Spans = tuple[tuple[int, int], ...]
#: Conntrack runs at prerouting priority -200 (NF_IP_PRI_CONNTRACK, linux/netfilter_ipv4.h).
CONNTRACK_PRIO = -200
_PROTO_NUM = {"tcp": 6, "udp": 17}
#: Statements inside a set statement that never end the rule (the others can: limit,
#: quota, ct count, connlimit return NFT_BREAK depending on traffic).
_NEVER_BREAKS = frozenset({"counter", "last"})
_MAX_DEPTH = 16  # nftables refuses deeper jump stacks (NFT_JUMP_STACK_SIZE 16)
_FORK_BUDGET = 256  # undecided rules followed both ways per packet; beyond it, unknown


@dataclass(frozen=True, slots=True)
class Packet:
    """One packet class; everything concrete except the source address.

    ``ct``: the connection-tracking class, "new" (first packet of a connection) or
    "established" (a later packet or reply). ``daddr``: the destination addresses the
    ruleset is evaluated for (all hosts sharing it); None when unknown.
    """

    iif: str
    proto: str
    dport: int
    daddr: Spans | None = None
    ct: str = "new"  # the packet class; never changed by rules
    mark: int | None = 0  # packets arrive unmarked; None once a rule sets it to something unknown
    dnat: bool = False  # a NAT rule rewrote the destination
    state: str = ""  # "" before conntrack, else the ct state the rules see


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdicts:
    accept: Spans
    drop: Spans
    unknown: tuple[tuple[str, Spans], ...]  # (reason, sources)

    def unknown_spans(self) -> Spans:
        out: Spans = ()
        for _reason, spans in self.unknown:
            out = iv.union(out, spans)
        return out


class _Out:
    """Outcome of a chain (or the rest of one) over a source space."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: dict[tuple[str, Any], Spans] = {}

    def add(self, kind: str, key: Any, spans: Spans) -> None:
        if spans:
            k = (kind, key)
            old = self.parts.get(k)
            self.parts[k] = iv.union(old, spans) if old else spans

    def merge(self, other: _Out) -> None:
        for (kind, key), spans in other.parts.items():
            self.add(kind, key, spans)


class _Ctx:
    __slots__ = ("budget", "rs")

    def __init__(self, rs: Ruleset) -> None:
        self.rs = rs
        self.budget = _FORK_BUDGET


def evaluate(rs: Ruleset, pkt: Packet, space: Spans = iv.IPV4_ALL) -> Verdicts:
    """Accepted, dropped and undecided sources (within ``space``) of ``pkt``."""
    ctx = _Ctx(rs)
    alive: dict[Packet, Spans] = {pkt: space}
    drop: Spans = ()
    unknown: dict[str, Spans] = {}
    pipeline = rs.span_cache.get("pipeline")
    if pipeline is None:
        pipeline = rs.span_cache["pipeline"] = rs.pipeline()
    for chain in pipeline:
        nxt: dict[Packet, Spans] = {}
        tracked = chain.hook == "input" or (chain.hook == "prerouting" and chain.prio > CONNTRACK_PRIO)
        for p, spans in alive.items():
            if tracked and not p.state:
                p = replace(p, state=p.ct)
            applies = _applies(rs, chain, p)
            if applies is False or (chain.kind == "nat" and (p.ct != "new" or p.state == "untracked")):
                nxt[p] = iv.union(nxt.get(p, ()), spans)  # NAT chains see a tracked connection's first packet only
                continue
            out = _run_chain(ctx, chain, p, spans, 0)
            for (kind, key), got in out.parts.items():
                dropped = kind == "drop" or (kind == "cont" and chain.policy == "drop")
                if applies is None and (dropped or kind == "unknown"):
                    why = f"{_where(chain, None)}: device of the ingress chain unknown, or table flags unreadable"
                    unknown[why] = iv.union(unknown.get(why, ()), got)
                    rs.unsupported.add(why)
                elif dropped:
                    drop = iv.union(drop, got)
                elif kind == "unknown":
                    unknown[key] = iv.union(unknown.get(key, ()), got)
                else:
                    after = key if applies is not None else p
                    nxt[after] = iv.union(nxt.get(after, ()), got)
        alive = nxt
        if not alive:
            break
    accept: Spans = ()
    for spans in alive.values():
        accept = iv.union(accept, spans)
    return Verdicts(accept=accept, drop=drop, unknown=tuple(sorted(unknown.items())))


def accepted_sources(rs: Ruleset, pkt: Packet, space: Spans = iv.IPV4_ALL) -> Spans:
    """Source addresses (within ``space``) whose packet is certainly accepted."""
    return evaluate(rs, pkt, space).accept


def _applies(rs: Ruleset, chain: Chain, pkt: Packet) -> bool | None:
    if not rs.table_readable(chain):
        return None
    if chain.hook != "ingress":
        return True
    if chain.devices is None:
        return None
    return pkt.iif in chain.devices


def _where(chain: Chain, handle: int | None) -> str:
    rule = f" rule handle {handle}" if handle is not None else ""
    return f"{chain.family} {chain.table} {chain.name}{rule}"


def _run_chain(ctx: _Ctx, chain: Chain, pkt: Packet, space: Spans, depth: int) -> _Out:
    if depth > _MAX_DEPTH:
        out = _Out()
        out.add("unknown", f"{_where(chain, None)}: jump depth > {_MAX_DEPTH}", space)
        return out
    return _run_from(ctx, chain, 0, pkt, space, depth)


def _run_from(ctx: _Ctx, chain: Chain, start: int, pkt: Packet, space: Spans, depth: int) -> _Out:
    """Outcome of rules ``start``.. of ``chain``; "cont" parts fell off the end or returned."""
    out = _Out()
    remaining = space
    for i in range(start, len(chain.rules)):
        if not remaining:
            break
        where = _where(chain, chain.handles[i] if i < len(chain.handles) else None)
        sure, maybe = _rule(ctx, chain, chain.rules[i], pkt, remaining, where)
        for spans, verdict, p2 in sure:
            if verdict is None and p2 is pkt:
                continue  # a statement-only rule that changed nothing
            out.merge(_outcome(ctx, chain, i, verdict, p2, spans, depth))
            remaining = iv.subtract(remaining, spans)
        for spans, verdict, p2, reason in maybe:
            spans = iv.intersect(spans, remaining)
            if not spans:
                continue
            remaining = iv.subtract(remaining, spans)
            ctx.budget -= 1
            if ctx.budget < 0 or verdict == "?":
                out.add("unknown", reason, spans)
                ctx.rs.unsupported.add(reason)
                continue
            taken = _settle(chain, depth, _outcome(ctx, chain, i, verdict, p2, spans, depth))
            skipped = _settle(chain, depth, _run_from(ctx, chain, i + 1, pkt, spans, depth))
            decided: Spans = ()
            for key, got in taken.parts.items():
                if key[0] == "unknown":
                    continue
                both = iv.intersect(got, skipped.parts.get(key, ()))
                out.add(key[0], key[1], both)
                decided = iv.union(decided, both)
            undecided = iv.subtract(spans, decided)
            if undecided:
                out.add("unknown", reason, undecided)
                ctx.rs.unsupported.add(reason)
    out.add("cont", pkt, remaining)
    return out


def _settle(chain: Chain, depth: int, out: _Out) -> _Out:
    """In a base chain, falling off the end is the chain's policy: compare outcomes as such."""
    if depth or chain.hook is None:
        return out
    settled = _Out()
    for (kind, key), spans in out.parts.items():
        if kind == "cont":
            kind, key = ("drop", None) if chain.policy == "drop" else ("accept", key)
        settled.add(kind, key, spans)
    return settled


def _outcome(ctx: _Ctx, chain: Chain, i: int, verdict: Any, pkt: Packet, spans: Spans, depth: int) -> _Out:
    """What happens to ``spans`` when rule ``i`` matches them with ``verdict``."""
    out = _Out()
    if verdict is None:  # no verdict: go on with the next rule, carrying the changed packet
        return _run_from(ctx, chain, i + 1, pkt, spans, depth)
    if isinstance(verdict, str):
        out.add("unknown", verdict, spans)
        return out
    if "accept" in verdict:
        out.add("accept", pkt, spans)
    elif "drop" in verdict or "reject" in verdict:
        out.add("drop", None, spans)
    elif "return" in verdict:
        out.add("cont", pkt, spans)
    elif "continue" in verdict:
        return _run_from(ctx, chain, i + 1, pkt, spans, depth)
    elif "jump" in verdict or "goto" in verdict:
        target = (verdict.get("jump") or verdict.get("goto") or {}).get("target")
        sub = ctx.rs.chains.get((chain.family, chain.table, str(target)))
        if sub is None:
            out.add("unknown", f"{_where(chain, None)}: jump to missing chain {target}", spans)
            return out
        result = _run_chain(ctx, sub, pkt, spans, depth + 1)
        for (kind, key), got in result.parts.items():
            if kind == "cont" and "jump" in verdict:
                out.merge(_run_from(ctx, chain, i + 1, key, got, depth))
            else:
                out.add(kind, key, got)
    else:
        out.add("unknown", f"{_where(chain, None)}: verdict {next(iter(verdict))}", spans)
    return out


Branch = tuple[Spans, Any, Packet]  # (sources, verdict or None, packet after the rule's statements)


def _rule(
    ctx: _Ctx, chain: Chain, rule: list[dict[str, Any]], pkt: Packet, space: Spans, where: str
) -> tuple[list[Branch], list[tuple[Spans, Any, Packet, str]]]:
    """Split ``space`` by one rule: sure matches (sources, verdict, packet) and undecided
    ones (sources, verdict if it matched, packet, reason); the rest does not match."""
    sure: Spans = space
    maybe: Spans = ()
    reason = ""
    p = pkt
    for expr in rule:
        if not sure and not maybe:
            return [], []
        if not isinstance(expr, dict) or not expr:
            continue
        key = next(iter(expr))
        if key == "match":
            m, u = _match(ctx, chain, expr["match"], p, sure, where)
            mm, mu = _match(ctx, chain, expr["match"], p, maybe, where) if maybe else ((), ())
            if u and not reason:
                reason = _reason(where, expr)
            sure, maybe = m, iv.union(iv.union(mm, mu), u)
        elif key == "vmap":
            return _vmap(ctx, chain, expr["vmap"], p, sure, maybe, reason, where)
        elif key in ("accept", "drop", "reject", "jump", "goto", "return", "continue"):
            return ([(sure, expr, p)] if sure else []), ([(maybe, expr, p, reason)] if maybe else [])
        elif key in ("set", "map"):
            # a set statement's own expressions (limit, quota, ct count) end the rule the
            # way the bare statement does (nft_dynset_eval runs them and keeps their
            # NFT_BREAK): the rest of the rule depends on traffic. A counter never breaks.
            stmts = expr[key].get("stmt") if isinstance(expr[key], dict) else None
            stateful = [next(iter(st)) for st in stmts or [] if isinstance(st, dict) and st]
            if any(name not in _NEVER_BREAKS for name in stateful) or not isinstance(stmts, (list, type(None))):
                why = f"{where}: {key} statement with {', '.join(stateful) or 'an unreadable statement'} (depends on traffic)"
                reason = reason or why
                maybe, sure = iv.union(maybe, sure), ()
        elif key in ("counter", "log", "comment", "last", "flow", "secmark", "synproxy_off"):
            continue  # no effect on the verdict (set/map updates are handled where sets are read)
        elif key == "notrack":
            p = replace(p, state="untracked")
        elif key == "mangle":
            target = expr["mangle"].get("key") if isinstance(expr["mangle"], dict) else None
            if meta_key(target) == "mark":
                value = expr["mangle"].get("value")
                p = replace(p, mark=value if isinstance(value, int) else None)
            elif isinstance(target, dict) and ("ct" in target or "meta" in target):
                continue  # ct mark, priority, nftrace...: not read by the matches we decide
            else:
                return [], _undecided(sure, maybe, f"{where}: packet rewrite ({_short(expr)})")
        elif key in ("redirect", "dnat"):
            stmt = expr[key] if isinstance(expr[key], dict) else {}
            if key == "dnat" and stmt.get("addr") is not None:
                return [], _undecided(sure, maybe, f"{where}: dnat to another address ({_short(expr)})")
            port = stmt.get("port", p.dport)
            if not isinstance(port, int):
                return [], _undecided(sure, maybe, f"{where}: {key} to a computed port")
            # the kernel marks a connection DNATed only when the tuple really changes
            # (nf_nat_setup_info): the proof's packets are addressed to the interface's own
            # address, which redirect keeps, so only a new port sets ct status dnat
            p = replace(p, dport=port, dnat=p.dnat or port != p.dport)
            return ([(sure, {"accept": None}, p)] if sure else []), (
                [(maybe, {"accept": None}, p, reason)] if maybe else []
            )
        elif key in ("limit", "quota", "ct count", "meter", "connlimit"):
            why = f"{where}: {key} (depends on traffic)"
            reason = reason or why
            maybe, sure = iv.union(maybe, sure), ()
        else:
            return [], _undecided(sure, maybe, f"{where}: {_short(expr)} not modelled")
    # no verdict: statements only; the packet goes on to the next rule
    return ([(sure, None, p)] if sure else []), ([(maybe, None, p, reason)] if maybe else [])


def _undecided(sure: Spans, maybe: Spans, reason: str) -> list[tuple[Spans, Any, Packet, str]]:
    spans = iv.union(sure, maybe)
    return [(spans, "?", Packet(iif="", proto="", dport=0), reason)] if spans else []


def _short(expr: Any) -> str:
    text = str(expr)
    return text if len(text) <= 120 else text[:117] + "..."


def _reason(where: str, expr: Any) -> str:
    return f"{where}: {_short(expr)}"


def _vmap(
    ctx: _Ctx, chain: Chain, vmap: dict[str, Any], pkt: Packet, sure: Spans, maybe: Spans, reason: str, where: str
) -> tuple[list[Branch], list[tuple[Spans, Any, Packet, str]]]:
    data = vmap.get("data")
    if isinstance(data, str) and data.startswith("@"):
        items = ctx.rs.lookup(chain, data[1:])
        if items is None or "dynamic" in ctx.rs.set_flags.get((chain.family, chain.table, data[1:]), set()):
            return [], _undecided(sure, maybe, f"{where}: verdict map {data} missing or updated at run time")
    else:
        items = flat(data)
    branches: list[Branch] = []
    undecided: list[tuple[Spans, Any, Packet, str]] = []
    for spans, is_sure in ((sure, True), (maybe, False)):
        left = spans
        for item in items:
            if not left:
                break
            if not (isinstance(item, list) and len(item) == 2):
                undecided.append((left, "?", pkt, f"{where}: verdict map entry {_short(item)}"))
                left = ()
                break
            k, verdict = item
            m, u = _compare(ctx, chain, vmap.get("key"), "==", [k], pkt, left, where)
            if m:
                if is_sure:
                    branches.append((m, verdict, pkt))
                else:
                    undecided.append((m, verdict, pkt, reason))
            if u:
                undecided.append((u, "?", pkt, f"{where}: verdict map key {_short(vmap.get('key'))}"))
            left = iv.subtract(iv.subtract(left, m), u)
    return branches, undecided


def _match(ctx: _Ctx, chain: Chain, m: dict[str, Any], pkt: Packet, space: Spans, where: str) -> tuple[Spans, Spans]:
    """(sources that match, sources where it is undecided); the rest does not match."""
    if not space:
        return (), ()
    op = m.get("op", "==")
    right = m.get("right")
    values: list[Any] | None
    vkey: Any = id(right)  # the rule's own object: stable while the ruleset lives
    if isinstance(right, str) and right.startswith("@"):
        vkey = (chain.family, chain.table, right)
        values = ctx.rs.lookup(chain, right[1:])
        flags = ctx.rs.set_flags.get((chain.family, chain.table, right[1:]), set())
        if values is None or "dynamic" in flags or "stateful" in flags:
            return (), space
        op = "==" if op in ("==", "in") else op
    elif op == "in" and not (isinstance(right, dict) and "set" in right):
        # flag test, (value & right) != 0; a JSON list is one combined flag value
        return _compare(
            ctx, chain, m.get("left"), "in", right if isinstance(right, list) else [right], pkt, space, where
        )
    else:
        values = [right] if isinstance(right, list) else flat(right)
    return _compare(ctx, chain, m.get("left"), op, values, pkt, space, where, vkey)


def _compare(
    ctx: _Ctx,
    chain: Chain,
    left: Any,
    op: str,
    values: list[Any],
    pkt: Packet,
    space: Spans,
    where: str,
    vkey: Any = None,
) -> tuple[Spans, Spans]:
    key = _value(left, pkt)
    if key is _NEVER:
        return (), ()  # the expression cannot apply to this packet: the rule never matches
    if key is _UNKNOWN:
        return (), space
    negate = op == "!="
    if key is _SADDR:
        spans = _addr_spans(ctx, values, vkey)
        if spans is None:
            return (), space
        if op not in ("==", "!=", "in"):
            return (), space
        return (iv.subtract(space, spans) if negate else iv.intersect(space, spans)), ()
    if isinstance(key, tuple) and key and key[0] == "concat":
        if negate:
            return (), space
        return _concat(ctx, chain, key[1], values, space)
    if isinstance(key, tuple) and key and key[0] == "daddr":
        spans = _addr_spans(ctx, values, vkey)
        if spans is None or key[1] is None:
            return (), space
        inside, outside = iv.intersect(key[1], spans), iv.subtract(key[1], spans)
        if inside and outside:
            return (), space  # hosts sharing this ruleset differ
        return (space if bool(inside) != negate else ()), ()
    if isinstance(key, tuple) and key and key[0] == "flags":
        return _flag_test(key[1], op, values, space)
    scalar = _scalar_hit(key, op, values)
    if scalar is None:
        return (), space
    return (space if scalar != negate else ()), ()


_SADDR = object()
_UNKNOWN = object()
_NEVER = object()
_LOCAL_FIB = "local"


def _value(left: Any, pkt: Packet) -> Any:
    """The packet's value for a match's left side; markers for source, unknown, never."""
    if not isinstance(left, dict) or not left:
        return _UNKNOWN
    kind = next(iter(left))
    body = left[kind]
    if kind == "payload" and isinstance(body, dict):
        proto, name = body.get("protocol"), body.get("field")
        if proto == "ip":
            if name == "saddr":
                return _SADDR
            if name == "daddr":
                return ("daddr", pkt.daddr)
            if name == "protocol":
                return ("l4", pkt.proto)
            return _UNKNOWN
        if proto in ("tcp", "udp", "th", "udplite", "sctp", "dccp"):
            if proto in ("udplite", "sctp", "dccp") or (proto != "th" and proto != pkt.proto):
                return _NEVER
            if name == "dport":
                return pkt.dport
            if name == "flags" and proto == "tcp":
                return ("flags", _tcp_flags(pkt))
            return _UNKNOWN
        if proto in ("ip6", "icmp", "icmpv6", "arp", "ah", "esp", "comp", "igmp"):
            return _NEVER  # an IPv4 TCP/UDP packet never carries these headers
        return _UNKNOWN
    if kind == "meta" and isinstance(body, dict):
        key = body.get("key")
        if key in ("iifname", "iif"):
            return ("iface", pkt.iif)
        if key == "oifname":
            return ("iface", "")  # no output device yet: the kernel stores an empty name
        if key == "oif":
            return ("ifindex", 0)  # ... and interface index 0
        if key in ("oiftype", "oifgroup", "oifkind"):
            return _NEVER  # these break the rule when there is no output device
        if key == "l4proto":
            return ("l4", pkt.proto)
        if key == "nfproto":
            return "ipv4"
        if key == "protocol":
            return "ip"
        if key == "pkttype":
            return ("pkttype", "host")
        if key == "mark":
            return pkt.mark if pkt.mark is not None else _UNKNOWN
        return _UNKNOWN
    if kind == "ct" and isinstance(body, dict) and body.get("dir") is None:
        key = body.get("key")
        if not pkt.state:
            return _UNKNOWN  # before conntrack (raw priority) there is no ct entry yet
        if pkt.state == "untracked" and key != "state":
            return _NEVER  # no conntrack entry: ct keys other than state break the rule
        if key == "state":
            return ("flags", frozenset({pkt.state}))
        if key == "status":
            if pkt.state == "new":
                return ("flags", frozenset({"dnat"} if pkt.dnat else set()))
            return _UNKNOWN
        if key == "direction":
            return "original" if pkt.state == "new" else _UNKNOWN
        return _UNKNOWN
    if kind == "fib" and isinstance(body, dict):
        flags = body.get("flags") or []
        flags = [flags] if isinstance(flags, str) else flags
        if body.get("result") == "type" and "daddr" in flags and "saddr" not in flags:
            return _LOCAL_FIB  # the proof's packets are addressed to this host's unicast address
        return _UNKNOWN
    if kind == "&" and isinstance(body, list) and len(body) == 2:
        inner = _value(body[0], pkt)
        if isinstance(inner, tuple) and inner and inner[0] == "flags" and isinstance(body[1], (list, str)):
            mask = frozenset([body[1]] if isinstance(body[1], str) else body[1])
            return ("flags", inner[1] & mask)
        return _NEVER if inner is _NEVER else _UNKNOWN
    if kind == "concat" and isinstance(body, list):
        parts = [_value(part, pkt) for part in body]
        if any(p is _NEVER for p in parts):
            return _NEVER
        if any(p is _UNKNOWN or (isinstance(p, tuple) and p and p[0] in ("daddr", "flags")) for p in parts):
            return _UNKNOWN
        return ("concat", parts)
    return _UNKNOWN


def _tcp_flags(pkt: Packet) -> frozenset[str]:
    if pkt.ct == "new":  # the kernel-mode probe and a connection's first packet: a bare SYN
        return frozenset({"syn"})
    return frozenset({"ack"})


def _flag_test(have: frozenset[str], op: str, values: list[Any], space: Spans) -> tuple[Spans, Spans]:
    """``in``: any of the bits; ``==``/``!=``: exact value (a set: any of its values)."""
    names: list[frozenset[str]] = []
    for value in values:
        value = elem_val(value)
        if isinstance(value, str):
            names.append(frozenset({value}))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            names.append(frozenset(value))
        else:
            return (), space
    if op == "in":
        wanted = frozenset().union(*names) if names else frozenset()
        return (space if have & wanted else ()), ()
    hit = any(have == n for n in names)
    if op not in ("==", "!="):
        return (), space
    return (space if hit != (op == "!=") else ()), ()


def _scalar_hit(key: Any, op: str, values: list[Any]) -> bool | None:
    """Whether the packet's value matches; None when undecidable here."""
    kind, val = key if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str) else (None, key)
    if op in ("<", ">", "<=", ">="):
        if not isinstance(val, int) or kind is not None or len(values) != 1 or not isinstance(elem_val(values[0]), int):
            return None
        bound = elem_val(values[0])
        return {"<": val < bound, ">": val > bound, "<=": val <= bound, ">=": val >= bound}[op]
    if op not in ("==", "!=", "in"):
        return None
    for value in values:
        value = elem_val(value)
        if isinstance(value, dict):
            if "range" in value and isinstance(val, int) and kind is None:
                lo, hi = value["range"]
                if isinstance(lo, int) and isinstance(hi, int):
                    if lo <= val <= hi:
                        return True
                    continue
            return None
        if kind == "iface":
            if isinstance(value, str) and iface_hit(val, value):
                return True
        elif kind == "ifindex":
            # nft resolves a name to its index (always >= 1) when it loads the rule and
            # lists it back by name; a digit string may be index or name: undecided
            if value == val:
                return True
            if not isinstance(value, (str, int)) or (isinstance(value, str) and value.isdigit()):
                return None
        elif kind == "l4":
            if value in (val, _PROTO_NUM.get(val)):
                return True
        elif kind == "pkttype":
            if value in ("host", "unicast"):
                return True
        elif kind is None and value == val:
            return True
    return False


def _addr_spans(ctx: _Ctx, values: list[Any], vkey: Any = None) -> Spans | None:
    """Address spans of a set of values (parsed once per ruleset when ``vkey`` names
    them: IP parsing dominated the proof's run time before this cache); None if not addresses."""
    key = ("addr", vkey)
    cached = ctx.rs.span_cache.get(key) if vkey is not None else None
    if cached is not None:
        return cached
    spans: list[tuple[int, int]] = []
    result: Spans | None
    try:
        for value in values:
            value = elem_val(value)
            if isinstance(value, str):
                spans.append(iv.cidr_span(value) if "/" in value else (iv.ip(value), iv.ip(value)))
            elif isinstance(value, dict) and "prefix" in value:
                spans.append(iv.cidr_span(f"{value['prefix']['addr']}/{value['prefix']['len']}"))
            elif isinstance(value, dict) and "range" in value:
                lo, hi = value["range"]
                spans.append((iv.ip(lo), iv.ip(hi)))
            else:
                raise ValueError(value)
        result = iv.normalize(spans)
    except (ValueError, TypeError, KeyError):
        result = None
    if vkey is not None:
        ctx.rs.span_cache[key] = result
    return result


def _concat(ctx: _Ctx, chain: Chain, parts: list[Any], values: list[Any], space: Spans) -> tuple[Spans, Spans]:
    """Elements of a concatenated set whose every non-source component matches the
    packet; their source components give the matching sources."""
    matched: Spans = ()
    for value in values:
        value = elem_val(value)
        if not (
            isinstance(value, dict) and isinstance(value.get("concat"), list) and len(value["concat"]) == len(parts)
        ):
            return (), space
        srcs: Spans | None = space
        for part, component in zip(parts, value["concat"], strict=True):  # lengths checked above
            if part is _SADDR:
                spans = _addr_spans(ctx, [component])
                if spans is None:
                    return (), space
                srcs = iv.intersect(srcs or (), spans)
            else:
                hit = _scalar_hit(part, "==", [component])
                if hit is None:
                    return (), space
                if not hit:
                    srcs = None
                    break
        if srcs:
            matched = iv.union(matched, srcs)
    return matched, ()


def explore(rs: Ruleset, interfaces: list[str] | tuple[str, ...]) -> set[str]:
    """Evaluate every packet class the proof can ask about (each interface, protocol and
    port interval) so that ``rs.unsupported`` lists every construct the evaluator could
    not decide for them; returns that set. Done once per ruleset and interface set."""
    key = ("explored", tuple(sorted(interfaces)))
    if key not in rs.span_cache:
        for iif in interfaces:
            for proto in ("tcp", "udp"):
                points = rs.port_points(iif, proto)
                for port in sorted({1, *(p for p in points if 1 <= p <= 65535)}):
                    evaluate(rs, Packet(iif=iif, proto=proto, dport=port))
        rs.span_cache[key] = True
    return set(rs.unsupported)
