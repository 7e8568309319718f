"""The symbolic nftables evaluator on hand-written rulesets (nft -j schema v1 shapes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpufabric.audit import intervals as iv
from gpufabric.audit import nft, nfteval
from gpufabric.audit.nfteval import Packet, accepted_sources


def ruleset(
    chains: dict, sets: dict | None = None, policy: str = "drop", extra_base: list | None = None
) -> nft.Ruleset:
    items = [{"table": {"family": "inet", "name": "t"}}]
    for name, elems in (sets or {}).items():
        items.append({"set": {"family": "inet", "table": "t", "name": name, "type": "ipv4_addr", "elem": elems}})
    items.append(
        {"chain": {"family": "inet", "table": "t", "name": "input", "hook": "input", "prio": 0, "policy": policy}}
    )
    for name in chains:
        if name != "input":
            items.append({"chain": {"family": "inet", "table": "t", "name": name}})
    for base in extra_base or []:
        items.append({"chain": base})
    for name, rules in chains.items():
        for expr in rules:
            items.append({"rule": {"family": "inet", "table": "t", "chain": name, "expr": expr}})
    return nft.parse({"nftables": items})


def m(left, right, op="=="):
    return {"match": {"op": op, "left": left, "right": right}}


SADDR = {"payload": {"protocol": "ip", "field": "saddr"}}
TCP_DPORT = {"payload": {"protocol": "tcp", "field": "dport"}}
IIF = {"meta": {"key": "iifname"}}
ACCEPT, DROP, RETURN = {"accept": None}, {"drop": None}, {"return": None}


def spans(*cidrs: str):
    return iv.normalize(iv.cidr_span(c) for c in cidrs)


def test_saddr_set_with_prefix_and_range():
    rs = ruleset(
        {"input": [[m(SADDR, "@peers"), m(TCP_DPORT, 22), ACCEPT]]},
        {"peers": [{"prefix": {"addr": "10.0.0.0", "len": 24}}, {"range": ["10.0.1.5", "10.0.1.9"]}, "10.0.2.1"]},
    )
    got = accepted_sources(rs, Packet(iif="eth0", proto="tcp", dport=22))
    assert got == iv.normalize(
        [iv.cidr_span("10.0.0.0/24"), (iv.ip("10.0.1.5"), iv.ip("10.0.1.9")), (iv.ip("10.0.2.1"), iv.ip("10.0.2.1"))]
    )
    assert accepted_sources(rs, Packet(iif="eth0", proto="tcp", dport=23)) == ()
    assert accepted_sources(rs, Packet(iif="eth0", proto="udp", dport=22)) == ()


def test_first_match_wins_drop_before_accept():
    rs = ruleset({"input": [[m(SADDR, "10.0.0.0/25"), DROP], [m(SADDR, "10.0.0.0/24"), ACCEPT]]})
    assert accepted_sources(rs, Packet(iif="x", proto="tcp", dport=1)) == spans("10.0.0.128/25")


def test_vmap_jump_return_and_goto():
    rs = ruleset(
        {
            "input": [
                [
                    {
                        "vmap": {
                            "key": IIF,
                            "data": {
                                "set": [["a0", {"jump": {"target": "in_a"}}], ["b0", {"goto": {"target": "in_b"}}]]
                            },
                        }
                    }
                ],
                [m(SADDR, "10.9.0.0/16"), ACCEPT],
            ],
            "in_a": [[m(SADDR, "10.1.0.0/16"), RETURN], [m(SADDR, "10.0.0.0/8"), ACCEPT]],
            "in_b": [[m(SADDR, "10.2.0.0/16"), ACCEPT]],
        }
    )
    # a0: 10.1/16 returns to input (then only 10.9/16 accepted there), rest of 10/8 accepted
    got = accepted_sources(rs, Packet(iif="a0", proto="tcp", dport=1))
    assert got == iv.subtract(spans("10.0.0.0/8"), spans("10.1.0.0/16"))
    # b0: goto never comes back to input, so input's later 10.9/16 accept does not apply
    assert accepted_sources(rs, Packet(iif="b0", proto="tcp", dport=1)) == spans("10.2.0.0/16")
    # other interfaces skip the vmap
    assert accepted_sources(rs, Packet(iif="c0", proto="tcp", dport=1)) == spans("10.9.0.0/16")


def test_ct_state_negation_ports_and_policy_accept():
    rs = ruleset(
        {
            "input": [
                [m({"ct": {"key": "state"}}, ["established", "related"], "in"), ACCEPT],
                [m(TCP_DPORT, {"set": [22, {"range": [8000, 8010]}]}, "!="), DROP],
            ]
        },
        policy="accept",
    )
    assert accepted_sources(rs, Packet(iif="x", proto="tcp", dport=8005)) == iv.IPV4_ALL
    assert accepted_sources(rs, Packet(iif="x", proto="tcp", dport=8011)) == ()
    assert accepted_sources(rs, Packet(iif="x", proto="udp", dport=53)) == iv.IPV4_ALL  # tcp match fails for udp


def test_every_input_base_chain_must_accept():
    rs = ruleset(
        {"input": [[ACCEPT]]},
        extra_base=[{"family": "ip", "table": "t", "name": "late", "hook": "input", "prio": 10, "policy": "drop"}],
    )
    rs.chains[("ip", "t", "late")].rules.append([m(SADDR, "192.168.0.0/16"), ACCEPT])
    assert accepted_sources(rs, Packet(iif="x", proto="tcp", dport=1)) == spans("192.168.0.0/16")


def test_unknown_expression_is_unknown_and_reported():
    """An expression the evaluator cannot decide (fib without its lookup flags) makes the
    sources it could admit unknown, never accepted or dropped (behaviour changed by issue 12:
    it used to count as 'may match', which reported them as accepted)."""
    rs = ruleset({"input": [[m({"fib": {"result": "type"}}, "local"), ACCEPT]]})
    got = nfteval.evaluate(rs, Packet(iif="x", proto="tcp", dport=1))
    assert got.accept == () and got.drop == () and got.unknown_spans() == iv.IPV4_ALL
    assert any("fib" in u for u in rs.unsupported)


def test_breakpoints_cover_ranges():
    rs = ruleset({"input": [[m(TCP_DPORT, {"range": [100, 200]}), ACCEPT], [m(TCP_DPORT, 22), ACCEPT]]})
    assert nft.port_breakpoints(rs) == {22, 23, 100, 201}


span_lists = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 50)).map(lambda t: (t[0], t[0] + t[1])), max_size=6)


@given(span_lists, span_lists)
def test_interval_algebra_matches_python_sets(a, b):
    sa, sb = iv.normalize(a), iv.normalize(b)

    def as_set(s):
        return {x for lo, hi in s for x in range(lo, hi + 1)}

    assert as_set(iv.union(sa, sb)) == as_set(sa) | as_set(sb)
    assert as_set(iv.intersect(sa, sb)) == as_set(sa) & as_set(sb)
    assert as_set(iv.subtract(sa, sb)) == as_set(sa) - as_set(sb)
    assert iv.size(sa) == len(as_set(sa))


def test_proof_cells_equal_brute_force_per_port(clean_bundle):
    """Every port of several windows, evaluated one by one, lands in a cell with the same outcome."""
    import json

    from gpufabric.audit.reachability import cell_at, prove
    from gpufabric.spec.security import SecurityPolicy

    doc = json.loads((clean_bundle / "policy.json").read_text())
    policy = SecurityPolicy.model_validate(doc["policy"])
    rulesets = {
        r.name: nft.parse(json.loads((clean_bundle / "roles" / r.name / "etc/gpufabric/nftables.json").read_text()))
        for r in policy.roles
    }
    proof = prove(policy, {h: rulesets[r] for h, r in policy.hosts()})
    addresses = policy.addresses()
    windows = [
        *range(1, 40),
        *range(4410, 4430),
        *range(6810, 6825),
        *range(8000, 8020),
        *range(29390, 29510),
        *range(32760, 32775),
        *range(60990, 61010),
        *range(62990, 63010),
        65535,
    ]
    checked = 0
    for dst_role in ("compute", "storage"):
        rs = rulesets[dst_role]
        for plane in policy.role_planes(dst_role):
            iif = policy.plane(plane).interface
            src = "compute" if plane != "mgmt" else "login"
            src_ip = iv.ip(addresses[(f"{src}-1", plane)])
            for proto in ("tcp", "udp"):
                for port in windows:
                    acc = accepted_sources(rs, Packet(iif=iif, proto=proto, dport=port))
                    brute = any(lo <= src_ip <= hi for lo, hi in acc)
                    cell = cell_at(proof, src, dst_role, plane, proto, port)
                    assert cell is not None and (cell.allowed == "all") == brute, (dst_role, plane, proto, port)
                    checked += 1
    assert checked > 1000


def test_proof_cells_tile_the_port_axis_fully_merged(clean_bundle):
    """Per (src, dst, plane, proto) the cells cover 1-65535 in order, and neighbours always
    differ in outcome: prove() merges completely, so reports list its cells as they are."""
    import json
    from itertools import groupby, pairwise

    from gpufabric.audit.reachability import prove
    from gpufabric.spec.security import SecurityPolicy

    doc = json.loads((clean_bundle / "policy.json").read_text())
    policy = SecurityPolicy.model_validate(doc["policy"])
    rulesets = {
        r.name: nft.parse(json.loads((clean_bundle / "roles" / r.name / "etc/gpufabric/nftables.json").read_text()))
        for r in policy.roles
    }
    proof = prove(policy, {h: rulesets[r] for h, r in policy.hosts()})
    keys = 0
    for _key, group in groupby(proof.cells, key=lambda c: (c.src, c.dst, c.plane, c.proto)):
        cells = list(group)
        keys += 1
        assert cells[0].port_lo == 1 and cells[-1].port_hi == 65535
        for a, b in pairwise(cells):
            assert a.port_hi + 1 == b.port_lo
            assert (a.allowed, a.intended) != (b.allowed, b.intended)
    assert keys > 20 and len(proof.cells) > keys


def test_unreadable_table_flags_make_its_drops_unknown():
    """nft 1.0.6 prints a table's flags as garbage in JSON; without the text listing
    (augment) the table might be dormant, so what it would drop is unknown."""
    items = [
        {"table": {"family": "inet", "name": "t", "flags": [{"match": {}}]}},
        {"chain": {"family": "inet", "table": "t", "name": "input", "hook": "input", "prio": 0, "policy": "drop"}},
        {"rule": {"family": "inet", "table": "t", "chain": "input", "expr": [m(TCP_DPORT, 22), ACCEPT]}},
    ]
    rs = nft.parse({"nftables": items})
    assert nfteval.evaluate(rs, Packet(iif="x", proto="tcp", dport=22)).accept == iv.IPV4_ALL
    got = nfteval.evaluate(rs, Packet(iif="x", proto="tcp", dport=23))
    assert got.accept == () and got.unknown_spans() == iv.IPV4_ALL
    text = (
        "table inet t {\n\tflags dormant\n\n\tchain input {\n\t\ttype filter hook input priority filter; policy drop;\n"
    )
    rs = nft.parse(nft.augment({"nftables": items}, text))
    assert nfteval.evaluate(rs, Packet(iif="x", proto="tcp", dport=23)).accept == iv.IPV4_ALL  # dormant: not run
