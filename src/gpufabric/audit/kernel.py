"""Kernel cross-check of the static proof (``audit --config B --kernel``, root).

For each role the real ``nft -f`` loads the role's ruleset into a fresh network
namespace whose interfaces are the planes' interfaces, each a veth whose peer sits in a
second, sender namespace. The sender fires one real packet per probe (a TCP SYN or a
UDP datagram, :mod:`gpufabric.audit.probe_agent`) from a representative address of every
source role, and from addresses of no role, to every cell of the proof (both ends and the
middle of each port range). An observer table appended at the very last input priority
records every packet that all the ruleset's base chains accepted (a set keyed on source
address, protocol, source port and original destination port), so what is measured is exactly the
proof's question, "does the input path accept this new connection", independent of
listeners and of the output path. Static and kernel verdicts are compared per probe.

Names: namespaces ``<prefix><pid>-d`` / ``-s`` (prefix ``gfk`` unless
``GPUFABRIC_KERNEL_PREFIX`` says otherwise); they are always deleted.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpufabric.audit import intervals as iv
from gpufabric.audit import nft, probe_agent
from gpufabric.audit.collect import IFNAME
from gpufabric.audit.nfteval import Packet, evaluate
from gpufabric.audit.reachability import OTHER, Proof
from gpufabric.errors import CommandFailed, InputError
from gpufabric.exec.process import run
from gpufabric.spec.security import SecurityPolicy

_PREFIX = re.compile(r"[a-z][a-z0-9]{0,5}")
_CMD_TIMEOUT_S = 20.0
#: Addresses of no role, outside every plane (TEST-NET-2, RFC 5737): one per plane.
OUTSIDE = ipaddress.IPv4Network("198.51.100.0/24")
#: Probes fired at once per sender run (each holds one socket).
BATCH = 400
#: How long the sender keeps its sockets (so source ports stay unique) while the observer is read.
LINGER_S = 0.3
#: Keyed on the original destination port too (conntrack's, before any redirect), so a
#: probe is identified by its whole tuple, not by a source port alone.
OBSERVER = """
table ip gfobserve {
  set seen { type ipv4_addr . inet_proto . inet_service . inet_service; flags dynamic; size 65535; }
  chain in { type filter hook input priority 2147483647; policy accept;
    ct state untracked meta l4proto { tcp, udp } add @seen { ip saddr . meta l4proto . th sport . th dport }
    ct state != untracked meta l4proto { tcp, udp } add @seen { ip saddr . meta l4proto . th sport . ct original proto-dst }
  }
}
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    src: str  # source role or OTHER
    src_addr: str
    dst: str
    plane: str
    proto: str
    port: int
    static: str  # accept | drop | unknown (for this one source address and port)
    kernel: str = ""  # accept | drop
    reason: str = ""

    @property
    def agrees(self) -> bool:
        return self.static == "unknown" or self.static == self.kernel


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelCheck:
    role: str
    probes: tuple[Probe, ...]
    seconds: float

    def disagreements(self) -> list[Probe]:
        return [p for p in self.probes if not p.agrees]


def prefix() -> str:
    value = os.environ.get("GPUFABRIC_KERNEL_PREFIX", "gfk")
    if not _PREFIX.fullmatch(value):
        raise InputError(
            f"GPUFABRIC_KERNEL_PREFIX={value!r}: use 1-6 lowercase letters or digits, starting with a letter"
        )
    return value


def _ip(*args: str) -> str:
    return run(["ip", *args], timeout_s=_CMD_TIMEOUT_S, check=True).stdout


def _nft(ns: str, *args: str) -> str:
    return run(["ip", "netns", "exec", ns, "nft", *args], timeout_s=_CMD_TIMEOUT_S, check=True).stdout


@contextmanager
def namespaces(tag: str) -> Iterator[tuple[str, str]]:
    """A destination and a sender namespace, deleted on every exit path."""
    base = f"{prefix()}{os.getpid() % 100000}{tag}"
    dst, src = f"{base}-d", f"{base}-s"
    made = []
    try:
        for ns in (dst, src):
            run(["ip", "netns", "del", ns], timeout_s=_CMD_TIMEOUT_S)  # a stale one from a killed run
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        yield dst, src
    finally:
        for ns in made:
            run(["ip", "netns", "del", ns], timeout_s=_CMD_TIMEOUT_S)


def _sources(policy: SecurityPolicy, dst_host: str, plane: str) -> list[tuple[str, str]]:
    """(source role, address): one host of every role on the plane (not the destination
    itself), an unused address of the plane and one outside every plane (OTHER)."""
    addresses = policy.addresses()
    used = {addresses[(h, plane)] for h, _r in policy.hosts() if (h, plane) in addresses}
    out = []
    for role in policy.roles:
        host = next((h for h in role.host_names if h != dst_host and (h, plane) in addresses), None)
        if host is not None:
            out.append((role.name, addresses[(host, plane)]))
    network = policy.plane(plane).network
    spare = next((str(a) for a in reversed(list(network.hosts())[-64:]) if str(a) not in used), None)
    if spare is not None:
        out.append((OTHER, spare))
    index = [p.name for p in policy.planes].index(plane)
    out.append((OTHER, str(OUTSIDE.network_address + 10 + index)))
    return out


def _cell_ports(lo: int, hi: int) -> list[int]:
    return sorted({lo, hi, (lo + hi) // 2})


def check_role(policy: SecurityPolicy, proof: Proof, role: str, ruleset_file: Path, tag: str = "") -> KernelCheck:
    """Load ``role``'s ruleset into a namespace and probe every cell of ``proof`` whose
    destination is ``role`` with real packets."""
    start = time.monotonic()
    dst_host = next(r.host_names[0] for r in policy.roles if r.name == role)
    addresses = policy.addresses()
    planes = policy.role_planes(role)
    with namespaces(tag) as (dst, src):
        # rp_filter would drop sources with no route back before the input hook
        for ns in (dst, src):
            run(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    "net.ipv4.conf.all.rp_filter=0",
                    "net.ipv4.conf.default.rp_filter=0",
                ],
                timeout_s=_CMD_TIMEOUT_S,
                check=True,
            )
        per_plane: dict[str, list[tuple[str, str]]] = {}
        for i, plane_name in enumerate(planes):
            plane = policy.plane(plane_name)
            iface, peer = plane.interface or f"plane{i}", f"gfpeer{i}"
            if not IFNAME.fullmatch(iface):
                raise InputError(
                    f"policy plane {plane_name}: interface {iface!r} is not a Linux interface name "
                    "(1-15 letters, digits, _ . @ + -); fix planes[].interface"
                )
            _ip("-n", dst, "link", "add", iface, "type", "veth", "peer", "name", peer, "netns", src)
            _ip(
                "-n", dst, "addr", "add", f"{addresses[(dst_host, plane_name)]}/{plane.network.prefixlen}", "dev", iface
            )
            _ip("-n", dst, "link", "set", iface, "up")
            _ip("-n", src, "link", "set", peer, "up")
            _ip("-n", src, "route", "add", str(plane.network), "dev", peer)
            # a permanent neighbour entry: the sender never needs the destination's ARP
            # reply, which a netdev egress chain of the ruleset may drop (the output path,
            # not the proof's question)
            mac = json.loads(_ip("-n", dst, "-j", "link", "show", iface))[0]["address"]
            own = addresses[(dst_host, plane_name)]
            _ip("-n", src, "neigh", "replace", own, "lladdr", mac, "dev", peer, "nud", "permanent")
            per_plane[plane_name] = _sources(policy, dst_host, plane_name)
            for _role, addr in per_plane[plane_name]:
                _ip("-n", src, "addr", "add", f"{addr}/32", "dev", peer)
                if ipaddress.IPv4Address(addr) not in plane.network:
                    _ip("-n", dst, "route", "add", f"{addr}/32", "dev", iface)
        try:
            run(["ip", "netns", "exec", dst, "nft", "-f", str(ruleset_file)], timeout_s=_CMD_TIMEOUT_S, check=True)
        except CommandFailed as exc:
            raise InputError(f"nft rejected {ruleset_file} in the kernel check: {str(exc)[:2000]}") from None
        listing = json.loads(_nft(dst, "-j", "list", "ruleset"))
        rs = nft.parse(nft.augment(listing, _nft(dst, "list", "ruleset")), f"{ruleset_file} (kernel)")
        with tempfile.NamedTemporaryFile("w", suffix=".nft", delete=False) as fh:
            fh.write(OBSERVER)
        try:
            _nft(dst, "-f", fh.name)
        finally:
            os.unlink(fh.name)
        probes = _plan(policy, proof, rs, role, dst_host, per_plane)
        observed = _fire(src, dst, probes, {p: addresses[(dst_host, p)] for p in planes})
    done = tuple(Probe(**{**_fields(p), "kernel": "accept" if observed[i] else "drop"}) for i, p in enumerate(probes))
    return KernelCheck(role=role, probes=done, seconds=time.monotonic() - start)


def _fields(p: Probe) -> dict:
    return {k: getattr(p, k) for k in Probe.__slots__}


def _plan(
    policy: SecurityPolicy,
    proof: Proof,
    rs: nft.Ruleset,
    role: str,
    dst_host: str,
    per_plane: dict[str, list[tuple[str, str]]],
) -> list[Probe]:
    """One probe per (cell, representative port, source address), with the static verdict
    of exactly that source address and port (evaluated on the kernel's own listing)."""
    addresses = policy.addresses()
    probes = []
    seen = set()
    for cell in proof.cells:
        if cell.dst != role or cell.plane not in per_plane:
            continue
        iif = policy.plane(cell.plane).interface or ""
        daddr = iv.ip_spans([addresses[(dst_host, cell.plane)]])
        for src_role, addr in per_plane[cell.plane]:
            if src_role != cell.src:
                continue
            for port in _cell_ports(cell.port_lo, cell.port_hi):
                key = (addr, cell.plane, cell.proto, port)
                if key in seen:
                    continue
                seen.add(key)
                got = evaluate(rs, Packet(iif=iif, proto=cell.proto, dport=port, daddr=daddr), iv.ip_spans([addr]))
                static, reason = (
                    ("accept", "")
                    if got.accept
                    else ("drop", "")
                    if got.drop
                    else ("unknown", got.unknown[0][0] if got.unknown else "")
                )
                probes.append(
                    Probe(
                        src=src_role,
                        src_addr=addr,
                        dst=role,
                        plane=cell.plane,
                        proto=cell.proto,
                        port=port,
                        static=static,
                        reason=reason,
                    )
                )
    return probes


def _fire(src: str, dst: str, probes: list[Probe], dst_addr: dict[str, str]) -> list[bool]:
    """Send every probe from the sender namespace; True where the observer saw it."""
    accepted = [False] * len(probes)
    for first in range(0, len(probes), BATCH):
        batch = probes[first : first + BATCH]
        spec = [[str(first + i), p.proto, p.src_addr, dst_addr[p.plane], p.port] for i, p in enumerate(batch)]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(spec, fh)
        try:
            _nft(dst, "flush", "set", "ip", "gfobserve", "seen")
            out = run(
                ["ip", "netns", "exec", src, sys.executable, probe_agent.__file__, "send", fh.name, str(LINGER_S)],
                timeout_s=_CMD_TIMEOUT_S * 3,
                check=True,
            ).stdout
            seen = _observed(dst)
        finally:
            os.unlink(fh.name)
        sports = json.loads(out)
        for i, p in enumerate(batch):
            number = 6 if p.proto == "tcp" else 17
            accepted[first + i] = (p.src_addr, number, sports[str(first + i)], p.port) in seen
    return accepted


def _observed(dst: str) -> set[tuple[str, int, int, int]]:
    doc = json.loads(_nft(dst, "-j", "list", "set", "ip", "gfobserve", "seen"))
    out = set()
    for item in doc.get("nftables", []):
        for elem in item.get("set", {}).get("elem", []):
            value = nft.elem_val(elem)
            if isinstance(value, dict) and len(value.get("concat", [])) == 4:
                addr, proto, sport, dport = value["concat"]
                out.add((addr, {"tcp": 6, "udp": 17}.get(proto, proto), sport, dport))
    return out
