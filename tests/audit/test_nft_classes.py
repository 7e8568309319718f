"""One test per construct class of issue 12: rulesets as administrators write them, compiled
by the real nft (text path, with the planes' interfaces present) and evaluated three-valued.
Each of these gave a wrong (or silently optimistic) verdict before the evaluator handled it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpufabric.audit import intervals as iv
from gpufabric.audit import nft, nfteval
from gpufabric.audit.collect import nft_text_to_json
from gpufabric.audit.nfteval import Packet

pytestmark = pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None or shutil.which("ip") is None,
    reason="nft/unshare/ip not installed",
)

IFACES = ("mgmt0", "data0")
A = "10.0.0.5"  # a source address used throughout


def load(tmp_path: Path, text: str) -> nft.Ruleset:
    path = tmp_path / "rules.nft"
    path.write_text(text)
    doc, error = nft_text_to_json(path, IFACES)
    assert doc is not None, error
    return nft.parse(doc)


def verdict(
    rs: nft.Ruleset,
    port: int = 22,
    proto: str = "tcp",
    iif: str = "mgmt0",
    src: str = A,
    ct: str = "new",
    daddr: str | None = None,
) -> str:
    got = nfteval.evaluate(
        rs,
        Packet(iif=iif, proto=proto, dport=port, ct=ct, daddr=iv.ip_spans([daddr]) if daddr else None),
        iv.ip_spans([src]),
    )
    return "accept" if got.accept else "drop" if got.drop else "unknown"


def server(rules: str, extra: str = "") -> str:
    return f"""table inet f {{
  {extra}
  chain input {{ type filter hook input priority 0; policy drop;
{rules}
  }}
}}
"""


def test_relational_port_operators(tmp_path):
    rs = load(tmp_path, server("tcp dport < 1024 accept\n udp dport >= 5000 udp dport <= 5010 accept"))
    assert verdict(rs, 22) == "accept" and verdict(rs, 1023) == "accept" and verdict(rs, 1024) == "drop"
    assert verdict(rs, 5000, "udp") == "accept" and verdict(rs, 5011, "udp") == "drop"
    assert {1024, 5000, 5011} <= nft.port_breakpoints(rs)


def test_named_verdict_map_with_annotated_elements(tmp_path):
    rs = load(
        tmp_path,
        server(
            "iifname vmap @planes",
            extra="map planes { type ifname : verdict; "
            'elements = { "mgmt0" comment "admin" : accept, "data0" : drop } }',
        ),
    )
    assert verdict(rs, iif="mgmt0") == "accept" and verdict(rs, iif="data0") == "drop"


def test_verdict_maps_on_protocol_ct_state_and_port(tmp_path):
    rs = load(
        tmp_path,
        server(
            "ct state vmap { established : accept, related : accept, invalid : drop }\n"
            " meta l4proto vmap { udp : drop, tcp : jump t }",
            extra="chain t { tcp dport vmap { 22 : accept, 80-90 : accept }; }",
        ),
    )
    assert verdict(rs, 22) == "accept" and verdict(rs, 85) == "accept" and verdict(rs, 91) == "drop"
    assert verdict(rs, 22, "udp") == "drop"
    assert verdict(rs, 9999, ct="established") == "accept"  # replies are their own packet class


def test_annotated_set_elements_match(tmp_path):
    rs = load(
        tmp_path,
        server(
            "iifname @admin accept\n meta l4proto @protos udp dport 53 accept",
            extra=(
                'set admin { type ifname; counter; elements = { "mgmt0" comment "oob" } }\n'
                ' set protos { type inet_proto; flags timeout; elements = { udp timeout 1h comment "dns" } }'
            ),
        ),
    )
    assert verdict(rs, 8080, iif="mgmt0") == "accept"
    assert verdict(rs, 53, "udp", iif="data0") == "accept"


def test_meta_pkttype_host_matches_unicast(tmp_path):
    rs = load(tmp_path, server("meta pkttype host tcp dport 22 accept"))
    assert verdict(rs, 22) == "accept"


def test_dormant_table_is_not_evaluated(tmp_path):
    text = server("tcp dport 22 accept") + (
        "table inet off {\n flags dormant\n chain input { type filter hook input priority -10; policy drop; }\n}\n"
    )
    rs = load(tmp_path, text)
    assert verdict(rs, 22) == "accept"


def test_prerouting_drop_is_not_bypassed_by_input_accept(tmp_path):
    text = server("accept") + (
        "table ip raw {\n chain pre { type filter hook prerouting priority raw; policy accept;\n"
        " ip saddr 10.0.0.0/24 drop\n }\n}\n"
    )
    rs = load(tmp_path, text)
    assert verdict(rs, 22, src="10.0.0.9") == "drop" and verdict(rs, 22, src="10.0.1.9") == "accept"


def test_accept_in_one_base_chain_does_not_bypass_another(tmp_path):
    text = server("tcp dport { 22, 24 } accept") + (
        "table inet early {\n chain pre { type filter hook prerouting priority mangle; policy drop;\n"
        " tcp dport { 22, 23 } accept\n }\n}\n"
    )
    rs = load(tmp_path, text)
    assert verdict(rs, 22) == "accept"  # accepted by both base chains
    assert verdict(rs, 23) == "drop"  # prerouting's accept does not bypass input's policy
    assert verdict(rs, 24) == "drop"  # nor input's accept prerouting's policy


def test_fib_reverse_path_is_unknown_and_fib_local_is_decided(tmp_path):
    text = server("fib daddr type local tcp dport 22 accept") + (
        "table inet rp {\n chain pre { type filter hook prerouting priority raw; policy accept;\n"
        " fib saddr . iif oif missing drop\n }\n}\n"
    )
    rs = load(tmp_path, text)
    got = nfteval.evaluate(rs, Packet(iif="mgmt0", proto="tcp", dport=22), iv.ip_spans([A]))
    assert got.accept == () and got.drop == () and "fib" in got.unknown[0][0]
    # without the rp filter the local-destination test is decided
    rs2 = load(tmp_path, server("fib daddr type local tcp dport 22 accept"))
    assert verdict(rs2, 22) == "accept" and verdict(rs2, 23) == "drop"


def test_notrack_makes_the_packet_untracked(tmp_path):
    text = server("ct state new tcp dport 22 accept\n ct state untracked tcp dport 2049 accept") + (
        "table inet raw {\n chain pre { type filter hook prerouting priority raw; policy accept;\n"
        " tcp dport 22 notrack\n }\n}\n"
    )
    rs = load(tmp_path, text)
    assert verdict(rs, 22) == "drop"  # untracked: ct state new does not match
    assert verdict(rs, 2049) == "drop"  # tracked, so not untracked


def test_nat_redirect_changes_the_port_the_input_hook_sees(tmp_path):
    text = server("tcp dport 8080 accept") + (
        "table ip nat {\n chain pre { type nat hook prerouting priority dstnat; policy accept;\n"
        " tcp dport 80 redirect to :8080\n }\n}\n"
    )
    rs = load(tmp_path, text)
    assert verdict(rs, 80) == "accept" and verdict(rs, 8080) == "accept" and verdict(rs, 81) == "drop"


def test_redirect_sets_ct_status_dnat_only_when_the_port_changes(tmp_path):
    # found by the differential test (seed 5208): a redirect to the same port changes no
    # tuple, so the kernel does not mark the connection DNATed
    text = server("ct status dnat accept") + (
        "table ip nat {\n chain pre { type nat hook prerouting priority dstnat; policy accept;\n"
        " tcp dport 8080 redirect to :8080\n tcp dport 80 redirect to :8081\n }\n}\n"
    )
    rs = load(tmp_path, text)
    assert verdict(rs, 8080) == "drop" and verdict(rs, 80) == "accept"


def test_netdev_ingress_drop_applies_to_its_device_only(tmp_path):
    text = server("accept") + (
        'table netdev edge {\n chain ing { type filter hook ingress device "data0" priority 0; '
        "policy accept;\n ip saddr 10.0.0.0/24 drop\n }\n}\n"
    )
    rs = load(tmp_path, text)
    assert verdict(rs, iif="data0") == "drop" and verdict(rs, iif="mgmt0") == "accept"


def test_oifname_is_empty_and_oif_zero_before_routing(tmp_path):
    # kernel 6.x (nft_meta_store_ifname/ifindex): no output device yet reads as "" and 0,
    # so a negated test matches on input; oiftype/oifgroup still break the rule
    rs = load(tmp_path, server('oifname "mgmt0" accept\n oifname != "lo" tcp dport 22 accept'))
    assert verdict(rs, 22) == "accept" and verdict(rs, 23) == "drop"
    rs = load(tmp_path, server('oif "lo" accept\n oif != "lo" tcp dport 22 accept'))
    assert verdict(rs, 22) == "accept" and verdict(rs, 23) == "drop"
    rs = load(tmp_path, server('oifname != { "lo", "mgmt0" } tcp dport 22 accept\n meta oifgroup != 5 accept'))
    assert verdict(rs, 22) == "accept" and verdict(rs, 23) == "drop"


def test_set_statement_with_a_limit_is_undecided(tmp_path):
    sets = "set flood { type ipv4_addr; flags dynamic; size 1024; }"
    for stmt in (
        "update @flood { ip saddr limit rate over 10/second } drop",
        "add @flood { ip saddr limit rate over 10/second } drop",
        "add @flood { ip saddr ct count over 3 } reject",
        "update @flood { ip saddr quota over 10 mbytes } drop",
    ):
        rs = load(tmp_path, server(f"{stmt}\n accept", extra=sets))
        assert verdict(rs) == "unknown", stmt
        assert any("depends on traffic" in u for u in rs.unsupported)


def test_set_statement_that_cannot_change_the_verdict_is_decided(tmp_path):
    sets = "set seen { type ipv4_addr; flags dynamic; }"
    # a counter never breaks the rule; a limit in a rule without verdict changes nothing
    rs = load(tmp_path, server("update @seen { ip saddr counter } tcp dport 22 accept", extra=sets))
    assert verdict(rs, 22) == "accept" and verdict(rs, 23) == "drop"
    rs = load(tmp_path, server("add @seen { ip saddr limit rate over 1/second }\n tcp dport 22 accept", extra=sets))
    assert verdict(rs, 22) == "accept" and verdict(rs, 23) == "drop"


def test_iifname_is_literal_except_a_trailing_star(tmp_path):
    rs = load(tmp_path, server('iifname "data?" accept\n iifname "mgm*" tcp dport 22 accept'))
    assert verdict(rs, 23, iif="data0") == "drop"
    assert verdict(rs, 22, iif="mgmt0") == "accept"


def test_ct_status_dnat_does_not_open_plain_new_connections(tmp_path):
    # the firewalld input layout: accept what a DNAT rule forwarded, then the zone dispatch
    rs = load(tmp_path, server("ct state established,related accept\n ct status dnat accept\n tcp dport 22 accept"))
    assert verdict(rs, 22) == "accept" and verdict(rs, 3306) == "drop"


def test_concatenations(tmp_path):
    rs = load(tmp_path, server("ip saddr . tcp dport { 10.0.0.5 . 22, 10.0.1.0/24 . 443 } accept", extra=""))
    assert verdict(rs, 22) == "accept" and verdict(rs, 443) == "drop"
    assert verdict(rs, 443, src="10.0.1.7") == "accept" and verdict(rs, 22, src="10.0.1.7") == "drop"


def test_tcp_flags_match_tcp_only(tmp_path):
    rs = load(tmp_path, server("tcp flags syn accept\n tcp flags & (fin|syn|rst|ack) == ack accept"))
    assert verdict(rs, 5000) == "accept"  # a new connection's SYN
    assert verdict(rs, 5000, "udp") == "drop"  # tcp flags never match UDP


def test_limit_and_ct_count_are_unknown_with_their_rule(tmp_path):
    rs = load(
        tmp_path,
        server("tcp dport 22 limit rate 10/second accept\n tcp dport 23 ct count over 4 drop\n tcp dport 23 accept"),
    )
    for port in (22, 23):
        got = nfteval.evaluate(rs, Packet(iif="mgmt0", proto="tcp", dport=port), iv.ip_spans([A]))
        assert got.accept == () and got.drop == ()
        assert ("limit" if port == 22 else "ct count") in got.unknown[0][0]
        assert "rule handle" in got.unknown[0][0]
    assert verdict(rs, 24) == "drop"  # undecided rules elsewhere do not spoil other ports


def test_undecided_rule_with_the_same_outcome_either_way_is_decided(tmp_path):
    rs = load(tmp_path, server("tcp dport 22 limit rate 10/second drop"))
    assert verdict(rs, 22) == "drop"  # dropped by the rule or by the policy


def test_ip_daddr_and_meta_mark(tmp_path):
    rs = load(
        tmp_path,
        server(
            "ip daddr 10.1.0.1 tcp dport 22 accept\n meta mark 0 tcp dport 23 accept\n meta mark 7 tcp dport 24 accept"
        ),
    )
    assert verdict(rs, 22, daddr="10.1.0.1") == "accept" and verdict(rs, 22, daddr="10.1.0.2") == "drop"
    assert verdict(rs, 22) == "unknown"  # destination address not known
    assert verdict(rs, 23) == "accept" and verdict(rs, 24) == "drop"  # packets arrive unmarked


def test_text_path_creates_plane_interfaces(tmp_path):
    rs = load(tmp_path, server('iif "mgmt0" tcp dport 22 accept'))
    assert verdict(rs, 22) == "accept" and verdict(rs, 22, iif="data0") == "drop"


def test_define_variables_resolve(tmp_path):
    rs = load(
        tmp_path, "define ADMIN = { 10.0.0.0/24 }\ndefine SSH = 22\n" + server("ip saddr $ADMIN tcp dport $SSH accept")
    )
    assert verdict(rs, 22) == "accept" and verdict(rs, 22, src="10.9.0.1") == "drop"
