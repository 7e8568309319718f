"""Host firewall per role: an nftables ruleset (text for ``nft -f``, JSON as ``nft -j`` lists it).

Shape (reference/security-config.md 6.1): one ``inet`` table, input policy drop,
``ct state established,related accept``, loopback accepted, an ``iifname vmap`` that
jumps to one chain per plane, and named interval sets of peer addresses per (plane,
source role). Each flow of the policy whose destination is the role becomes one accept
rule in the destination plane's chain.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpufabric.configure.quoting import nft_comment
from gpufabric.spec.security import SecurityPolicy

TABLE = "gpufabric"


@dataclass(frozen=True, slots=True, kw_only=True)
class NftSet:
    name: str
    ranges: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class NftRule:
    saddr_set: str
    proto: str
    dports: tuple[tuple[int, int], ...]
    comment: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NftChain:
    name: str
    plane: str
    interface: str
    rules: tuple[NftRule, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleRuleset:
    role: str
    sets: tuple[NftSet, ...]
    chains: tuple[NftChain, ...]


def address_ranges(addresses: list[str]) -> tuple[tuple[str, str], ...]:
    """Collapse IPv4 addresses into sorted inclusive ranges of consecutive addresses."""
    values = sorted({int(ipaddress.IPv4Address(a)) for a in addresses})
    out: list[tuple[int, int]] = []
    for value in values:
        if out and value == out[-1][1] + 1:
            out[-1] = (out[-1][0], value)
        else:
            out.append((value, value))
    return tuple((str(ipaddress.IPv4Address(lo)), str(ipaddress.IPv4Address(hi))) for lo, hi in out)


def role_ruleset(policy: SecurityPolicy, role: str) -> RoleRuleset:
    """The ruleset for every host of ``role``."""
    addresses = policy.addresses()
    attached = policy.role_planes(role)
    rules: dict[str, list[NftRule]] = defaultdict(list)
    sets: dict[str, NftSet] = {}
    for flow in policy.flows:
        if flow.dst != role or flow.plane not in attached:
            continue
        set_name = f"{flow.plane}_{flow.src}"
        if set_name not in sets:
            peers = [addresses[(h, flow.plane)] for h in policy.role(flow.src).host_names]
            sets[set_name] = NftSet(name=set_name, ranges=address_ranges(peers))
        dports = tuple(sorted(set(flow.port_ranges())))
        # One neutralised comment for both forms, so nftables.json matches what `nft -j` lists
        # after loading nftables.conf (the text form would otherwise turn ' into ?).
        comment = nft_comment(flow.purpose or f"{flow.src} -> {flow.dst}")
        rules[flow.plane].append(NftRule(saddr_set=set_name, proto=flow.proto, dports=dports, comment=comment))
    chains = tuple(
        NftChain(name=f"in_{p}", plane=p, interface=policy.plane(p).interface or "", rules=tuple(rules.get(p, ())))
        for p in attached
    )
    return RoleRuleset(role=role, sets=tuple(sets[k] for k in sorted(sets)), chains=chains)


def render_text(ruleset: RoleRuleset, *, env: Any, version: str, spec_name: str) -> str:
    return env.get_template("nftables.conf.j2").render(rs=ruleset, version=version, spec_name=spec_name) + "\n"


def render_json(ruleset: RoleRuleset) -> dict[str, Any]:
    """The ruleset in ``nft -j list ruleset`` form (schema v1), for drift diffs and the proof."""
    items: list[dict[str, Any]] = [
        {"metainfo": {"json_schema_version": 1}},
        {"table": {"family": "inet", "name": TABLE}},
    ]
    for s in ruleset.sets:
        elem: list[Any] = [lo if lo == hi else {"range": [lo, hi]} for lo, hi in s.ranges]
        items.append(
            {
                "set": {
                    "family": "inet",
                    "table": TABLE,
                    "name": s.name,
                    "type": "ipv4_addr",
                    "flags": ["interval"],
                    "elem": elem,
                }
            }
        )

    def chain(name: str, hook: str | None = None, policy: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"family": "inet", "table": TABLE, "name": name}
        if hook:
            body.update({"type": "filter", "hook": hook, "prio": 0, "policy": policy})
        return {"chain": body}

    def rule(chain_name: str, expr: list[dict[str, Any]], comment: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"family": "inet", "table": TABLE, "chain": chain_name, "expr": expr}
        if comment:
            body["comment"] = comment
        return {"rule": body}

    def match(left: dict[str, Any], right: Any, op: str = "==") -> dict[str, Any]:
        return {"match": {"op": op, "left": left, "right": right}}

    items.append(chain("input", "input", "drop"))
    for c in ruleset.chains:
        items.append(chain(c.name))
    items.append(chain("forward", "forward", "drop"))
    items.append(chain("output", "output", "accept"))
    ct_state = {"ct": {"key": "state"}}
    items.append(rule("input", [match(ct_state, ["established", "related"], "in"), {"accept": None}]))
    items.append(rule("input", [match(ct_state, "invalid", "in"), {"drop": None}]))
    items.append(rule("input", [match({"meta": {"key": "iif"}}, "lo"), {"accept": None}]))
    icmp = {"set": ["echo-request", "destination-unreachable", "time-exceeded", "parameter-problem"]}
    items.append(rule("input", [match({"payload": {"protocol": "icmp", "field": "type"}}, icmp), {"accept": None}]))
    if ruleset.chains:
        vmap = {
            "vmap": {
                "key": {"meta": {"key": "iifname"}},
                "data": {"set": [[c.interface, {"jump": {"target": c.name}}] for c in ruleset.chains]},
            }
        }
        items.append(rule("input", [vmap]))
    for c in ruleset.chains:
        for r in c.rules:
            ports: list[Any] = [lo if lo == hi else {"range": [lo, hi]} for lo, hi in r.dports]
            right = ports[0] if len(ports) == 1 else {"set": ports}
            expr = [
                match({"payload": {"protocol": "ip", "field": "saddr"}}, f"@{r.saddr_set}"),
                match({"payload": {"protocol": r.proto, "field": "dport"}}, right),
                {"accept": None},
            ]
            items.append(rule(c.name, expr, r.comment))
    return {"nftables": items}
