"""Which sources a host's firewall admits to one port on one plane (for FW-/TORCH-/NVMF- checks)."""

from __future__ import annotations

from collections.abc import Iterator

from gpufabric.audit import intervals as iv
from gpufabric.audit.collect import Facts, HostView
from gpufabric.audit.findings import NotAvailable
from gpufabric.audit.nft import Ruleset
from gpufabric.audit.nfteval import Packet, accepted_sources

Spans = tuple[tuple[int, int], ...]


def has_default_drop(rs: Ruleset) -> bool:
    chains = rs.base_chains("input")
    return bool(chains) and all(c.policy == "drop" for c in chains)


def firewalled_views(facts: Facts) -> Iterator[tuple[HostView, Ruleset]]:
    """Hosts with a parsed ruleset that drops by default (FW-01 reports the others, whose
    every port is open: reporting each port again would bury the root cause)."""
    seen = False
    for view in facts.hosts:
        if not view.has_firewall_source():
            continue
        rs = view.ruleset()
        if rs is None:
            continue
        seen = True
        if has_default_drop(rs):
            yield view, rs
    if not seen:
        raise NotAvailable("no nftables ruleset to evaluate")


def planes_of(facts: Facts, view: HostView) -> list[tuple[str, str, str]]:
    """(plane name, kind, interface) for the host's planes; every policy plane when the role is unknown."""
    if facts.policy is None:
        return []
    names = facts.policy.role_planes(view.role) if view.role else [p.name for p in facts.policy.planes]
    return [(p.name, p.kind, p.interface or "") for p in facts.policy.planes if p.name in names]


def admitted(rs: Ruleset, iif: str, proto: str, port: int) -> Spans:
    # hosts of a role share one parsed ruleset: evaluate each question once
    key = ("admitted", iif, proto, port)
    spans = rs.span_cache.get(key)
    if spans is None:
        spans = rs.span_cache[key] = accepted_sources(rs, Packet(iif=iif, proto=proto, dport=port))
    return spans


def admitted_ports(rs: Ruleset, iif: str, proto: str, lo: int, hi: int) -> list[tuple[int, int, Spans]]:
    """(low, high, sources) for the ports lo-hi: the ruleset's port breakpoints cut the range
    into pieces every rule treats alike, so one port per piece answers for all of it."""
    points = rs.port_points(iif, proto)
    cuts = [lo, *(p for p in points if lo < p <= hi)]
    return [
        (start, (cuts[i + 1] - 1) if i + 1 < len(cuts) else hi, admitted(rs, iif, proto, start))
        for i, start in enumerate(cuts)
    ]


def role_spans(facts: Facts, role_kind: str, plane: str) -> Spans:
    if facts.policy is None:
        return ()
    addresses = facts.policy.addresses()
    hosts = [h for r in facts.policy.roles if r.kind == role_kind for h in r.host_names]
    return iv.ip_spans(addresses[(h, plane)] for h in hosts if (h, plane) in addresses)
