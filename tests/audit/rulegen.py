"""A seeded generator of nftables rulesets written the way administrators write them, for
the differential test of the static proof against the kernel (issue 12).

Styles: firewalld's layout (zone dispatch, ct status dnat, reject), the nftables wiki's
simple server, Debian's /etc/nftables.conf with ``define``, iptables-translate output,
hardened named sets (annotated elements, concatenations, interval sets), and hand-written
dispatch chains (verdict maps, jump/goto/return). Each ruleset adds a random handful of
other hooks and constructs: prerouting anti-spoofing, raw notrack, NAT redirect, netdev
ingress, a dormant table, relational ports, tcp flags, pkttype, oifname, literal and
wildcard interface names, fib, rate limits; and (issue 24) set statements with and
without stateful expressions, negated meta on input (``oifname != "lo"``), jump/goto
chains up to 12 deep, several input base chains by priority, netdev egress chains, and
includes (a glob with a dotfile and a non-matching name, a named and a nested include).
"""

from __future__ import annotations

import ipaddress
import random

from gpufabric.spec.security import Flow, Plane, Role, SecurityPolicy

PORTS = [22, 53, 80, 111, 443, 2049, 4420, 6817, 6818, 8080, 9100, 29500]


def policy() -> SecurityPolicy:
    planes = [
        Plane(name="mgmt", kind="management", cidr="10.10.0.0/24", interface="mgmt0"),
        Plane(name="data", kind="compute-data", cidr="10.30.0.0/24", interface="data0"),
    ]
    roles = [
        Role(name="srv", kind="storage", count=1, planes=["mgmt", "data"]),
        Role(name="adm", kind="login", count=2, planes=["mgmt", "data"]),
        Role(name="peer", kind="compute", count=3, planes=["mgmt", "data"]),
    ]
    flows = [Flow(src="adm", dst="srv", plane="mgmt", proto="tcp", ports=[22], purpose="ssh")]
    return SecurityPolicy(planes=planes, roles=roles, flows=flows)


class Gen:
    def __init__(self, seed: int, pol: SecurityPolicy) -> None:
        self.rng = random.Random(seed)
        self.addrs = [a for (h, _p), a in sorted(pol.addresses().items()) if not h.startswith("srv")]

    def port(self) -> int:
        return self.rng.choice(PORTS)

    def ports(self) -> str:
        r = self.rng.random()
        if r < 0.4:
            return str(self.port())
        if r < 0.7:
            picked = sorted(set(self.rng.sample(PORTS, self.rng.randint(2, 4))))
            return "{ " + ", ".join(map(str, picked)) + " }"
        if r < 0.85:
            lo = self.port()
            return f"{lo}-{lo + self.rng.randint(1, 3000)}"
        return f"{self.rng.choice(['<', '>', '<=', '>='])} {self.port()}"

    def saddr(self) -> str:
        r = self.rng.random()
        a = ipaddress.IPv4Address(self.rng.choice(self.addrs))
        if r < 0.4:
            return str(a)
        if r < 0.7:
            return str(ipaddress.IPv4Network(f"{a}/{self.rng.choice([24, 28, 30, 31])}", strict=False))
        if r < 0.85:
            return f"{a}-{a + self.rng.randint(1, 4)}"
        return "{ " + ", ".join(sorted({self.rng.choice(self.addrs) for _ in range(3)})) + " }"

    def iface(self) -> str:
        return self.rng.choice(['"mgmt0"', '"data0"', '"mgmt*"', '"data?"', '"dat*"', '{ "mgmt0", "data0" }'])

    def proto(self) -> str:
        return self.rng.choice(["tcp", "udp"])

    def verdict(self) -> str:
        return self.rng.choice(["accept", "accept", "drop", "reject", "counter accept"])

    def simple_rule(self) -> str:
        parts = []
        proto = self.proto()
        if self.rng.random() < 0.03:
            return f"tcp flags syn {self.verdict()}"  # no port: every TCP SYN (never UDP)
        if self.rng.random() < 0.4:
            parts.append(f"iifname {self.iface()}")
        if self.rng.random() < 0.6:
            parts.append(f"ip saddr {self.saddr()}")
        if self.rng.random() < 0.2:
            extras = [
                "ct state new",
                "ct state { new, untracked }",
                "meta pkttype host",
                "fib daddr type local",
                'oifname "mgmt0"',
                "meta l4proto { tcp, udp }",
                "meta mark 0",
                "ct status dnat",
                "ct state established",
                # negated meta on input: no output device yet ("" and index 0), marks start at 0
                'oifname != "lo"',
                'oif != "lo"',
                'iifname != "mgmt0"',
                "meta mark != 1",
                "meta oifgroup != 5",
            ]
            if proto == "tcp":
                extras += ["tcp flags syn", "tcp flags & (syn|ack) == syn", "ip protocol tcp"]
            parts.append(self.rng.choice(extras))
        # after meta l4proto { tcp, udp } only the transport-neutral th dport is allowed
        parts.append(f"{'th' if parts and parts[-1].startswith('meta l4proto') else proto} dport {self.ports()}")
        if self.rng.random() < 0.05:
            parts.append("limit rate 100/second")
        return " ".join(parts) + " " + self.verdict()

    # ---- styles -------------------------------------------------------------------------

    def wiki_server(self) -> str:
        rules = "\n    ".join(self.simple_rule() for _ in range(self.rng.randint(2, 6)))
        return f"""flush ruleset
table inet filter {{
  chain input {{
    type filter hook input priority 0; policy drop;
    ct state invalid counter drop comment "early drop of invalid packets"
    ct state {{ established, related }} counter accept comment "accept all connections related to connections made by us"
    iif lo accept comment "accept loopback"
    ip protocol icmp counter accept comment "accept all ICMP types"
    {rules}
    counter comment "count dropped packets"
  }}
  chain forward {{ type filter hook forward priority 0; policy drop; }}
  chain output {{ type filter hook output priority 0; policy accept; }}
}}
"""

    def debian_define(self) -> str:
        lan = self.saddr()
        while lan.startswith("{"):
            lan = self.saddr()
        rules = "\n\t\t".join(self.simple_rule() for _ in range(self.rng.randint(1, 4)))
        return f"""#!/usr/sbin/nft -f
flush ruleset
define LAN = {lan}
define MGMT_IF = "mgmt0"
define SSH_PORT = {self.port()}
table inet filter {{
\tchain input {{
\t\ttype filter hook input priority filter; policy drop;
\t\tct state established,related accept
\t\tiifname "lo" accept
\t\tiifname $MGMT_IF ip saddr $LAN tcp dport $SSH_PORT accept
\t\t{rules}
\t}}
}}
"""

    def iptables_translate(self) -> str:
        rules = []
        for _ in range(self.rng.randint(2, 6)):
            iface = self.rng.choice(['iifname "mgmt0" ', 'iifname "data0" ', 'iifname "data*" ', ""])
            proto = self.proto()
            rules.append(
                f"{iface}ip saddr {self.saddr()} meta l4proto {proto} {proto} dport {self.ports()} "
                f"counter packets 0 bytes 0 {self.rng.choice(['accept', 'drop', 'jump LOGDROP'])}"
            )
        policy = self.rng.choice(["drop", "accept"])
        tail = "" if policy == "drop" else "counter packets 0 bytes 0 drop"
        body = "\n\t\t".join(rules)
        return f"""table ip filter {{
\tchain INPUT {{
\t\ttype filter hook input priority filter; policy {policy};
\t\tiifname "lo" counter packets 0 bytes 0 accept
\t\tct state related,established counter packets 0 bytes 0 accept
\t\t{body}
\t\t{tail}
\t}}
\tchain LOGDROP {{
\t\tcounter packets 0 bytes 0 log prefix "drop: "
\t\tcounter packets 0 bytes 0 drop
\t}}
}}
"""

    def hardened_sets(self) -> str:
        admins = ", ".join(f'{a} comment "host {i}"' for i, a in enumerate(self.rng.sample(self.addrs, 2)))
        pairs = ", ".join(f"{self.rng.choice(self.addrs)} . {self.port()}" for _ in range(3))
        svc = ", ".join(str(p) for p in sorted(set(self.rng.sample(PORTS, 3))))
        return f"""table inet hardened {{
  set admins {{ type ipv4_addr; counter; elements = {{ {admins} }} }}
  set nets {{ type ipv4_addr; flags interval; elements = {{ {self.saddr().strip("{} ")} }} }}
  set pairs {{ type ipv4_addr . inet_service; elements = {{ {pairs} }} }}
  set planes {{ type ifname; elements = {{ "mgmt0" comment "oob", "data0" }} }}
  set services {{ type inet_service; flags timeout; elements = {{ {svc} timeout 1d }} }}
  chain input {{
    type filter hook input priority 0; policy drop;
    ct state vmap {{ invalid : drop, established : accept, related : accept }}
    iifname != @planes drop
    ip saddr @admins tcp dport 22 accept
    ip saddr . tcp dport @pairs accept
    ip saddr @nets {self.proto()} dport @services accept
    {self.simple_rule()}
  }}
}}
"""

    def dispatch(self) -> str:
        chains = []
        for name in ("in_mgmt", "in_data"):
            rules = [self.simple_rule() for _ in range(self.rng.randint(1, 4))]
            if self.rng.random() < 0.5:
                rules.insert(self.rng.randint(0, len(rules)), f"ip saddr {self.saddr()} return")
            chains.append(f"  chain {name} {{\n    " + "\n    ".join(rules) + "\n  }")
        verb = self.rng.choice(["jump", "goto"])
        key = self.rng.random()
        if key < 0.5:
            dispatch = f'iifname vmap {{ "mgmt0" : {verb} in_mgmt, "data0" : {verb} in_data }}'
        elif key < 0.75:
            dispatch = "iifname vmap @dispatch"
        else:
            dispatch = f"meta l4proto vmap {{ tcp : {verb} in_mgmt, udp : {verb} in_data }}"
        body = "\n".join(chains)
        return f"""table inet gf {{
  map dispatch {{ type ifname : verdict; elements = {{ "mgmt0" comment "m" : {verb} in_mgmt, "data0" : {verb} in_data }} }}
{body}
  chain input {{
    type filter hook input priority filter; policy {self.rng.choice(["drop", "drop", "accept"])};
    ct state established,related accept
    {dispatch}
    {self.simple_rule()}
  }}
}}
"""

    def firewalld(self) -> str:
        allow_public = "\n\t\t".join(
            f"{self.proto()} dport {self.port()} ct state {{ new, untracked }} accept"
            for _ in range(self.rng.randint(1, 3))
        )
        allow_internal = "\n\t\t".join(
            f"ip saddr {self.saddr()} {self.proto()} dport {self.ports()} ct state {{ new, untracked }} accept"
            for _ in range(self.rng.randint(1, 3))
        )
        return f"""table inet firewalld {{
\tchain filter_PREROUTING {{
\t\ttype filter hook prerouting priority filter + 10; policy accept;
\t\ticmpv6 type {{ nd-router-advert, nd-neighbor-solicit }} accept
\t\tmeta nfproto ipv6 fib saddr . mark . iif oif missing drop
\t}}
\tchain filter_INPUT {{
\t\ttype filter hook input priority filter + 10; policy accept;
\t\tct state {{ established, related }} accept
\t\tct status dnat accept
\t\tiifname "lo" accept
\t\tct state invalid drop
\t\tjump filter_INPUT_ZONES
\t\treject with icmpx admin-prohibited
\t}}
\tchain filter_INPUT_ZONES {{
\t\tiifname "data0" goto filter_IN_internal
\t\tgoto filter_IN_public
\t}}
\tchain filter_IN_public {{
\t\tjump filter_IN_public_pre
\t\tjump filter_IN_public_log
\t\tjump filter_IN_public_deny
\t\tjump filter_IN_public_allow
\t\tjump filter_IN_public_post
\t\tmeta l4proto {{ icmp, ipv6-icmp }} accept
\t}}
\tchain filter_IN_public_pre {{ }}
\tchain filter_IN_public_log {{ }}
\tchain filter_IN_public_deny {{ }}
\tchain filter_IN_public_allow {{
\t\t{allow_public}
\t}}
\tchain filter_IN_public_post {{ }}
\tchain filter_IN_internal {{
\t\tjump filter_IN_internal_allow
\t\tmeta l4proto {{ icmp, ipv6-icmp }} accept
\t}}
\tchain filter_IN_internal_allow {{
\t\t{allow_internal}
\t}}
}}
"""

    # ---- extras on other hooks ------------------------------------------------------------

    def extras(self) -> str:
        out = []
        if self.rng.random() < 0.3:
            out.append(f"""table ip antispoof {{
  chain pre {{ type filter hook prerouting priority -150; policy accept;
    iifname "data0" ip saddr {self.saddr()} drop
    meta pkttype host accept
  }}
}}""")
        if self.rng.random() < 0.2:
            out.append(f"""table inet raw {{
  chain pre {{ type filter hook prerouting priority raw; policy accept;
    {self.proto()} dport {self.port()} notrack
  }}
}}""")
        if self.rng.random() < 0.2:
            out.append(f"""table ip nat {{
  chain pre {{ type nat hook prerouting priority dstnat; policy accept;
    tcp dport {self.port()} redirect to :{self.port()}
  }}
}}""")
        if self.rng.random() < 0.2:
            out.append(f"""table netdev edge {{
  chain ing {{ type filter hook ingress device "{self.rng.choice(["mgmt0", "data0"])}" priority 0; policy accept;
    ip saddr {self.saddr()} {self.proto()} dport {self.ports()} drop
  }}
}}""")
        if self.rng.random() < 0.15:
            out.append("""table inet parked {
  flags dormant
  chain input { type filter hook input priority -5; policy drop; }
}""")
        if self.rng.random() < 0.15:
            out.append(f"""table inet extra {{
  chain input {{ type filter hook input priority 20; policy accept;
    {self.simple_rule().rsplit(" ", 1)[0]} drop
  }}
}}""")
        if self.rng.random() < 0.05:
            out.append("""table inet rp {
  chain pre { type filter hook prerouting priority raw; policy accept;
    fib saddr . iif oif missing drop
  }
}""")
        out.extend(self.round3())
        return "\n".join(out) + "\n"

    # ---- issue 24: set statements, depth, several chains per hook, egress, includes --------

    def round3(self) -> list[str]:
        out = []
        if self.rng.random() < 0.3:
            stmt = self.rng.choice(
                [
                    "update @flood { ip saddr limit rate over 10/second } drop",
                    "add @flood { ip saddr limit rate over 1/second burst 1 packets } drop",
                    "add @flood { ip saddr ct count over 2 } reject",
                    "update @flood { ip saddr counter }",
                    "add @flood { ip saddr limit rate over 1/second }",
                    f"update @flood {{ ip saddr limit rate over 10/second }} {self.proto()} dport {self.ports()} drop",
                ]
            )
            out.append(f"""table inet ratelim {{
  set flood {{ type ipv4_addr; flags dynamic; size 1024; }}
  chain input {{ type filter hook input priority {self.rng.choice([-10, 10])}; policy accept;
    {stmt}
  }}
}}""")
        if self.rng.random() < 0.25:
            depth = self.rng.randint(2, 12)
            chains = []
            for i in range(1, depth + 1):
                body = self.simple_rule() if i == depth else f"{self.rng.choice(['jump', 'goto'])} c{i + 1}"
                if i < depth and self.rng.random() < 0.3:
                    body = f"ip saddr {self.saddr()} return\n    {body}"
                chains.append(f"  chain c{i} {{\n    {body}\n  }}")
            out.append(
                "table inet deepjmp {\n"
                + "\n".join(chains)
                + "\n  chain input { type filter hook input priority 5; policy accept;\n    jump c1\n  }\n}"
            )
        if self.rng.random() < 0.25:
            prios = sorted(self.rng.sample([-300, -150, -5, 5, 15, 300], 2))
            chains = []
            for n, prio in enumerate(prios):
                policy = self.rng.choice(["accept", "drop"])
                rules = [self.simple_rule() for _ in range(self.rng.randint(1, 2))]
                if policy == "drop" and self.rng.random() < 0.7:
                    rules.append(f"ip saddr {self.saddr()} accept")
                body = "\n    ".join(rules)
                chains.append(
                    f"  chain in{n} {{ type filter hook input priority {prio}; policy {policy};\n    {body}\n  }}"
                )
            out.append("table ip multiprio {\n" + "\n".join(chains) + "\n}")
        if self.rng.random() < 0.15:
            # negated meta before routing on another hook: prerouting has no output device either
            neg = self.rng.choice(['oifname != "lo"', 'oif != "lo"', 'oifname "data0"', "meta oifgroup != 1"])
            out.append(f"""table inet preneg {{
  chain pre {{ type filter hook prerouting priority -120; policy accept;
    {neg} {self.proto()} dport {self.ports()} drop
  }}
}}""")
        if self.rng.random() < 0.2:
            dev = self.rng.choice(["mgmt0", "data0"])
            rule = self.rng.choice(["tcp sport 22 drop", f"{self.proto()} dport {self.ports()} drop", "drop"])
            out.append(f"""table netdev egr {{
  chain eg {{
    type filter hook egress device "{dev}" priority 0; policy accept;
    {rule}
  }}
}}""")
        return out

    def includes(self) -> dict[str, str]:
        """Files under the include directory (``@INCDIR@`` in the ruleset): a glob's
        matches in sorted order, a dotfile and a non-matching name glob(3) skips, a
        named include and a nested one."""
        rule = self.simple_rule()
        files = {
            "10-first.nft": f"""table inet inca {{
  chain input {{ type filter hook input priority 8; policy accept;
    {rule.rsplit(" ", 1)[0]} drop
  }}
}}
include "@INCDIR@/sub/nested.conf"
""",
            "20-second.nft": f"""table inet incb {{
  chain input {{ type filter hook input priority 9; policy accept;
    ip saddr {self.saddr()} {self.proto()} dport {self.ports()} drop
  }}
}}
""",
            ".hidden.nft": "table inet skipped {\n  chain input { type filter hook input priority -20; policy drop; }\n}\n",
            "notes.txt": "table inet skipped2 {\n  chain input { type filter hook input priority -21; policy drop; }\n}\n",
            "sub/nested.conf": f"""table inet incc {{
  chain input {{ type filter hook input priority 11; policy accept;
    ip saddr {self.saddr()} tcp dport 22 drop
  }}
}}
""",
            "named.conf": "table inet incd {\n  chain input { type filter hook input priority 12; policy accept; }\n}\n",
        }
        return files

    def ruleset(self) -> tuple[str, str, dict[str, str]]:
        """(style, text, included files): the text may ``include "@INCDIR@/..."``; the
        test puts the files in a directory and replaces the placeholder."""
        style = self.rng.choice(
            ["firewalld", "wiki_server", "debian_define", "iptables_translate", "hardened_sets", "dispatch"]
        )
        text = getattr(self, style)() + self.extras()
        files: dict[str, str] = {}
        if self.rng.random() < 0.25:
            files = self.includes()
            text += 'include "@INCDIR@/*.nft"\ninclude "@INCDIR@/named.conf"\n'
        return style, text, files
