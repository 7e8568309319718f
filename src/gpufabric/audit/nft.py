"""Parse an nftables ruleset (``nft -j list ruleset`` JSON, schema v1) for the proof.

The evaluator lives in :mod:`gpufabric.audit.nfteval`; this module holds the parsed form
(tables, chains in hook order, sets and maps with their annotated elements), the port
breakpoints of the rules and the interface names they mention.

nft 1.0.6 prints table flags wrongly in JSON and omits the device of ingress chains
(reference/security-config.md; seen on this machine): :func:`augment` fills both from
the text listing (``nft list ruleset``). A table whose flags cannot be read is kept with
``flags_readable=False`` and the evaluator treats its chains as undecided.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpufabric.errors import ParseError

Spans = tuple[tuple[int, int], ...]
#: Families whose base chains see an IPv4 packet arriving on an interface.
FAMILIES_V4 = ("inet", "ip", "netdev")
#: Hooks an incoming packet addressed to this host passes, in order (netfilter).
HOOK_ORDER = ("ingress", "prerouting", "input")


@dataclass(slots=True)
class Chain:
    family: str
    table: str
    name: str
    hook: str | None = None
    prio: int = 0
    policy: str = "accept"
    kind: str = "filter"  # filter | nat | route
    devices: tuple[str, ...] | None = None  # ingress chains: None when unknown
    rules: list[list[dict[str, Any]]] = field(default_factory=list)
    handles: list[int | None] = field(default_factory=list)


@dataclass(slots=True)
class Ruleset:
    chains: dict[tuple[str, str, str], Chain]
    sets: dict[tuple[str, str, str], list[Any]]
    set_flags: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)
    tables: dict[tuple[str, str], set[str] | None] = field(default_factory=dict)  # flags; None: unreadable
    unsupported: set[str] = field(default_factory=set)  # undecided constructs met while evaluating
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
        found = [c for c in self.chains.values() if c.hook == hook and c.family in FAMILIES_V4 and self.active(c)]
        return sorted(found, key=lambda c: c.prio)

    def pipeline(self) -> list[Chain]:
        """Every base chain an incoming IPv4 packet for this host can pass, in kernel order."""
        out: list[Chain] = []
        for hook in HOOK_ORDER:
            out.extend(self.base_chains(hook))
        return out

    def active(self, chain: Chain) -> bool:
        """False for chains of a dormant table (the kernel does not run them)."""
        flags = self.tables.get((chain.family, chain.table), set())
        return flags is None or "dormant" not in flags

    def table_readable(self, chain: Chain) -> bool:
        return self.tables.get((chain.family, chain.table), set()) is not None

    def lookup(self, chain: Chain, name: str) -> list[Any] | None:
        return self.sets.get((chain.family, chain.table, name))

    def interfaces(self) -> set[str]:
        """Interface names the ruleset matches on (iifname/iif rules, sets and map keys)."""
        names: set[str] = set()
        for chain in self.chains.values():
            for rule in chain.rules:
                for expr in rule:
                    left = right = None
                    if "match" in expr:
                        left, right = expr["match"].get("left"), expr["match"].get("right")
                    elif "vmap" in expr:
                        left, right = expr["vmap"].get("key"), expr["vmap"].get("data")
                    if meta_key(left) not in ("iifname", "iif"):
                        continue
                    values = self.lookup(chain, right[1:]) if isinstance(right, str) and right.startswith("@") else None
                    for value in values if values is not None else flat(right):
                        value = elem_val(value[0] if isinstance(value, list) else value)
                        if isinstance(value, str):
                            names.add(value)
        return names


def meta_key(left: Any) -> str | None:
    if isinstance(left, dict) and "meta" in left:
        return left["meta"].get("key")
    return None


def flat(right: Any) -> list[Any]:
    if isinstance(right, dict) and "set" in right:
        return list(right["set"]) if isinstance(right["set"], list) else [right["set"]]
    if isinstance(right, list):
        return right
    return [right]


def elem_val(value: Any) -> Any:
    """The value of a set element, without its annotations (comment, counter, timeout)."""
    while isinstance(value, dict) and "elem" in value:
        value = value["elem"].get("val")
    return value


def _flags(raw: Any) -> set[str] | None:
    if raw is None:
        return set()
    if isinstance(raw, str):
        return {raw}
    if isinstance(raw, list) and all(isinstance(f, str) for f in raw):
        return set(raw)
    return None  # nft 1.0.6 prints garbage here; augment() repairs it from the text listing


def parse(doc: Any, source: str = "nft -j") -> Ruleset:
    """Parse ``nft -j list ruleset`` output."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nftables"), list):
        raise ParseError("not nft JSON (no top-level 'nftables' list)", source=source, excerpt=str(doc)[:200])
    chains: dict[tuple[str, str, str], Chain] = {}
    sets: dict[tuple[str, str, str], list[Any]] = {}
    set_flags: dict[tuple[str, str, str], set[str]] = {}
    tables: dict[tuple[str, str], set[str] | None] = {}
    rules: list[dict[str, Any]] = []
    try:
        for item in doc["nftables"]:
            if not isinstance(item, dict):
                continue
            if "table" in item:
                t = item["table"]
                tables[(t["family"], t["name"])] = _flags(t.get("flags"))
            elif "chain" in item:
                c = item["chain"]
                prio = c.get("prio", 0)
                dev = c.get("dev", c.get("devices"))
                devices = (dev,) if isinstance(dev, str) else tuple(dev) if isinstance(dev, list) else None
                chains[(c["family"], c["table"], c["name"])] = Chain(
                    family=c["family"],
                    table=c["table"],
                    name=c["name"],
                    hook=c.get("hook"),
                    prio=prio if isinstance(prio, int) else 0,
                    policy=c.get("policy", "accept"),
                    kind=c.get("type", "filter"),
                    devices=devices,
                )
            elif "set" in item or "map" in item:
                s = item.get("set") or item.get("map") or {}
                key = (s["family"], s["table"], s["name"])
                sets[key] = list(s.get("elem", []))
                flags = _flags(s.get("flags")) or set()
                if s.get("stmt") is not None and any("limit" in st or "quota" in st for st in s.get("stmt", [])):
                    flags.add("stateful")
                set_flags[key] = flags
            elif "rule" in item:
                rules.append(item["rule"])
            elif "element" in item:
                e = item["element"]
                sets.setdefault((e["family"], e["table"], e["name"]), []).extend(e.get("elem", []))
        for r in rules:
            key = (r["family"], r["table"], r["chain"])
            if key in chains:
                exprs = r.get("expr", [])
                _check_rule(exprs, source, key)
                chains[key].rules.append(list(exprs))
                chains[key].handles.append(r.get("handle"))
    except (KeyError, TypeError) as exc:
        raise ParseError(f"nft JSON item without {exc}", source=source, excerpt=str(doc)[:200]) from exc
    _mark_dynamic(chains, set_flags)
    canonical = json.dumps(
        [[list(k), c.hook, c.prio, c.policy, c.kind, c.devices, c.rules] for k, c in sorted(chains.items())]
        + [[list(k), v] for k, v in sorted(sets.items())]
        + [[list(k), sorted(v) if v is not None else None] for k, v in sorted(tables.items())],
        sort_keys=True,
        default=str,
    )
    return Ruleset(
        chains=chains,
        sets=sets,
        set_flags=set_flags,
        tables=tables,
        fingerprint=hashlib.sha256(canonical.encode()).hexdigest(),
    )


#: The statement keys whose body the evaluator and the port scan read, with the body's type.
_BODY = {"match": dict, "vmap": dict, "mangle": dict, "jump": dict, "goto": dict, "set": dict, "map": dict}


def _check_rule(exprs: Any, source: str, chain: tuple[str, str, str]) -> None:
    """The shapes nft -j prints: a list of one-key objects; a match or verdict map with
    its parts. A hand-edited JSON ruleset (``/etc/gpufabric/nftables.json``) that breaks
    them is a ParseError naming the rule, not a traceback of the evaluator."""
    problem = None
    if not isinstance(exprs, list):
        problem = "expr is not a list"
    else:
        for expr in exprs:
            if not isinstance(expr, dict) or len(expr) != 1:
                problem = f"expression {str(expr)[:80]!r} is not an object with one key"
                break
            ((key, body),) = expr.items()
            want = _BODY.get(key)
            if want is not None and not isinstance(body, want):
                problem = f"{key} holds {type(body).__name__}, not an object"
            elif key in ("match", "vmap") and not (
                isinstance(body.get("op", "=="), str) and ("left" in body or "key" in body)
            ):
                problem = f"{key} without its left side or with a non-text op"
            elif key in ("jump", "goto") and not isinstance(body.get("target"), str):
                problem = f"{key} without a target chain name"
            if problem:
                break
    if problem:
        raise ParseError(
            f"nft JSON rule in chain {' '.join(chain)}: {problem}", source=source, excerpt=str(exprs)[:200]
        )


def _mark_dynamic(chains: dict[tuple[str, str, str], Chain], set_flags: dict[tuple[str, str, str], set[str]]) -> None:
    """Sets that rules add to or update hold more than their listed elements at run time."""
    for chain in chains.values():
        for rule in chain.rules:
            for expr in rule:
                for key in ("set", "map", "meter"):
                    stmt = expr.get(key) if isinstance(expr, dict) else None
                    if isinstance(stmt, dict) and isinstance(stmt.get("set") or stmt.get("name"), str):
                        name = str(stmt.get("set") or stmt.get("name")).lstrip("@")
                        set_flags.setdefault((chain.family, chain.table, name), set()).add("dynamic")


_TABLE = re.compile(r"^table (\S+) (\S+) \{$")
_CHAIN = re.compile(r"^\tchain (\S+) \{$")
_HOOK = re.compile(r'hook (\S+)(?: device "?([^"\s;]+)"?| devices = \{([^}]*)\})? priority')


def augment(doc: dict[str, Any], text: str) -> dict[str, Any]:
    """Fill table flags and ingress devices from ``nft list ruleset`` text (nft 1.0.6 JSON
    loses both). Returns ``doc`` changed in place."""
    flags: dict[tuple[str, str], list[str]] = {}
    devices: dict[tuple[str, str, str], list[str]] = {}
    table = chain = None
    for line in text.splitlines():
        if m := _TABLE.match(line):
            table, chain = (m.group(1), m.group(2)), None
            flags[table] = []
        elif table and line.startswith("\tflags ") and chain is None:
            flags[table] = [f.strip() for f in line[7:].split(",")]
        elif table and (m := _CHAIN.match(line)):
            chain = m.group(1)
        elif table and chain and (m := _HOOK.search(line)) and (m.group(2) or m.group(3)):
            names = [m.group(2)] if m.group(2) else [d.strip().strip('"') for d in m.group(3).split(",")]
            devices[(*table, chain)] = names
    for item in doc.get("nftables", []):
        if "table" in item and (key := (item["table"].get("family"), item["table"].get("name"))) in flags:
            item["table"]["flags"] = flags[key]
        elif "chain" in item:
            c = item["chain"]
            if (key3 := (c.get("family"), c.get("table"), c.get("name"))) in devices:
                c["dev"] = devices[key3]
    return doc


def _port_values(op: str, values: list[Any], points: set[int]) -> None:
    """Add the boundaries of port values: a port p cuts at p and p+1, a range at lo and
    hi+1, a comparison at the first port on each side."""
    for value in values:
        value = elem_val(value)
        if isinstance(value, dict) and "concat" in value:
            continue
        if isinstance(value, int):
            cut = {"<": (value,), "<=": (value + 1,), ">": (value + 1,), ">=": (value,)}.get(op, (value, value + 1))
            points.update(cut)
        elif isinstance(value, dict) and "range" in value:
            lo, hi = value["range"]
            if isinstance(lo, int) and isinstance(hi, int):
                points.update((lo, hi + 1))


def _is_dport(expr: Any) -> bool:
    return isinstance(expr, dict) and isinstance(expr.get("payload"), dict) and expr["payload"].get("field") == "dport"


def port_breakpoints(rs: Ruleset) -> set[int]:
    """Every port boundary the ruleset mentions (matches, comparisons, sets, map keys and
    concatenations): each elementary interval between them is treated identically by
    every rule, so one representative port per interval covers all 65,535 ports exactly."""
    points: set[int] = set()
    for chain in rs.chains.values():
        for rule in chain.rules:
            _rule_points(rs, chain, rule, points)
    return points


def _rule_points(rs: Ruleset, chain: Chain, rule: list[dict[str, Any]], points: set[int]) -> None:
    for expr in rule:
        left = right = None
        op = "=="
        if "match" in expr:
            left, right, op = expr["match"].get("left"), expr["match"].get("right"), expr["match"].get("op", "==")
        elif "vmap" in expr:
            left, right = expr["vmap"].get("key"), expr["vmap"].get("data")
        elif "redirect" in expr or "dnat" in expr:
            continue
        if left is None:
            continue
        values = rs.lookup(chain, right[1:]) if isinstance(right, str) and right.startswith("@") else None
        values = values if values is not None else flat(right)
        if "vmap" in expr or (isinstance(values, list) and values and isinstance(values[0], list)):
            values = [v[0] if isinstance(v, list) else v for v in values]
        if _is_dport(left):
            _port_values(op, values, points)
        elif isinstance(left, dict) and "concat" in left:
            for i, part in enumerate(left["concat"]):
                if _is_dport(part):
                    for value in values:
                        value = elem_val(value)
                        if isinstance(value, dict) and "concat" in value and i < len(value["concat"]):
                            _port_values("==", [value["concat"][i]], points)


def _excludes(rs: Ruleset, chain: Chain, expr: dict[str, Any], iif: str, proto: str) -> bool:
    """True when a match certainly fails for every packet on ``iif``/``proto`` (a plain
    interface or protocol test); anything less certain keeps the rule."""
    m = expr.get("match")
    if not isinstance(m, dict) or m.get("op", "==") != "==":
        return False
    left, right = m.get("left"), m.get("right")
    if meta_key(left) in ("iifname", "iif"):
        values = rs.lookup(chain, right[1:]) if isinstance(right, str) and right.startswith("@") else flat(right)
        names = [elem_val(v) for v in values or []]
        if not names or not all(isinstance(n, str) for n in names):
            return False
        return not any(iface_hit(iif, n) for n in names)
    if isinstance(left, dict) and isinstance(left.get("payload"), dict):
        return left["payload"].get("protocol") in ("tcp", "udp") and left["payload"]["protocol"] != proto
    return False


def iface_hit(iif: str, pattern: str) -> bool:
    """nft interface names: a trailing unescaped ``*`` is a prefix wildcard; everything
    else, ``?`` and ``\\*`` included, is literal."""
    if pattern.endswith("*") and not pattern.endswith("\\*"):
        return iif.startswith(pattern[:-1].replace("\\*", "*"))
    return iif == pattern.replace("\\*", "*")


def _targets(rs: Ruleset, chain: Chain, expr: dict[str, Any], iif: str) -> list[str]:
    verdicts: list[Any] = []
    if "jump" in expr or "goto" in expr:
        verdicts.append(expr)
    elif "vmap" in expr:
        data = expr["vmap"].get("data")
        items = rs.lookup(chain, data[1:]) if isinstance(data, str) and data.startswith("@") else flat(data)
        for item in items or []:
            if isinstance(item, list) and len(item) == 2:
                key = elem_val(item[0])
                if (
                    meta_key(expr["vmap"].get("key")) in ("iifname", "iif")
                    and isinstance(key, str)
                    and not iface_hit(iif, key)
                ):
                    continue
                verdicts.append(item[1])
    out = []
    for v in verdicts:
        if isinstance(v, dict) and ("jump" in v or "goto" in v):
            target = (v.get("jump") or v.get("goto") or {}).get("target")
            if isinstance(target, str):
                out.append(target)
    return out


def _reachable_points(rs: Ruleset, iif: str, proto: str) -> set[int]:
    """Port breakpoints of the rules reachable for packets on ``iif`` with ``proto``:
    rules whose interface or protocol match excludes the packet are skipped, and only
    the verdict-map entries for ``iif`` are followed. Anything not understood is kept."""
    points: set[int] = set()
    seen: set[tuple[str, str, str]] = set()
    todo = [c for c in rs.pipeline()]
    while todo:
        chain = todo.pop()
        key = (chain.family, chain.table, chain.name)
        if key in seen:
            continue
        seen.add(key)
        for rule in chain.rules:
            if any(_excludes(rs, chain, expr, iif, proto) for expr in rule):
                continue
            _rule_points(rs, chain, rule, points)
            for expr in rule:
                for target in _targets(rs, chain, expr, iif):
                    sub = rs.chains.get((chain.family, chain.table, target))
                    if sub is not None:
                        todo.append(sub)
    return points


__all__ = [
    "Chain",
    "Ruleset",
    "augment",
    "parse",
    "port_breakpoints",
]
