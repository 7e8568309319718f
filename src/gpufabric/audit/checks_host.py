"""Host tuning (HOST-*), firewall (FW-*) and proof (VER-01) checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from gpufabric.audit import intervals as iv
from gpufabric.audit.collect import Facts, _run
from gpufabric.audit.exposure import admitted, firewalled_views, planes_of
from gpufabric.audit.findings import Finding, NotAvailable, Severity, check, finding
from gpufabric.spec.security import NVME_DISCOVERY, SSH


def _live(facts: Facts):
    views = [v for v in facts.hosts if v.live and v.sysfs is not None]
    if not views:
        raise NotAvailable("needs --live")
    return views[0]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


@check("HOST-01", "CPU governor is not performance", Severity.low, "use the gpufabric tuned profile (governor=performance)")
def host01(facts: Facts) -> Iterator[Finding]:
    view = _live(facts)
    governors = {_read(p) for p in (view.sysfs or Path("/sys")).glob("devices/system/cpu/cpu*/cpufreq/scaling_governor")}
    governors.discard(None)
    if not governors:
        raise NotAvailable("no cpufreq in sysfs (VM or no driver)")
    if governors != {"performance"}:
        yield finding("HOST-01", view.name, f"scaling_governor = {', '.join(sorted(g for g in governors if g))}")


@check("HOST-02", "No low-latency tuned profile", Severity.low,
       "install /etc/tuned/gpufabric-<role>/tuned.conf and run tuned-adm profile gpufabric-<role>")
def host02(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        if view.role is None and not view.live:
            continue
        seen = True
        profiles = [p for p in view.files if re.match(r"^/etc/tuned/[^/]+/tuned\.conf$", p)]
        active = (view.read("/etc/tuned/active_profile") or "").strip()
        if not profiles and active not in ("network-latency", "latency-performance") and not active.startswith("gpufabric"):
            yield finding("HOST-02", view.name, f"no tuned profile (active: {active or 'none'})")
    if not seen:
        raise NotAvailable("no host views")


@check("HOST-03", "THP or NUMA balancing differs from policy", Severity.low,
       "transparent_hugepage=never and kernel.numa_balancing=0 (the gpufabric tuned profile)")
def host03(facts: Facts) -> Iterator[Finding]:
    view = _live(facts)
    thp = _read(Path("/sys/kernel/mm/transparent_hugepage/enabled"))
    numa = _read(Path("/proc/sys/kernel/numa_balancing"))
    if thp is None and numa is None:
        raise NotAvailable("no THP/numa_balancing in sysfs/procfs")
    if thp is not None and "[never]" not in thp:
        yield finding("HOST-03", view.name, f"transparent_hugepage: {thp}")
    if numa not in (None, "0"):
        yield finding("HOST-03", view.name, f"kernel.numa_balancing = {numa}")


@check("FW-01", "No default-drop input policy", Severity.high,
       "load the gpufabric nftables ruleset: input chain with policy drop")
def fw01(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        if not (view.live or view.has("/etc/nftables.conf") or view.has("/etc/gpufabric/nftables.json")):
            continue
        rs = view.ruleset()
        if rs is None:
            if view.ruleset_error and "rejected" in view.ruleset_error:
                seen = True
                yield finding("FW-01", view.name, view.ruleset_error)
            continue
        seen = True
        chains = rs.base_chains("input")
        if not chains:
            yield finding("FW-01", view.name, "no base chain on the input hook: every port on every plane is open")
        for chain in chains:
            if chain.policy != "drop":
                yield finding("FW-01", view.name, f"chain {chain.family} {chain.table} {chain.name}: hook input policy {chain.policy}")
    if not seen:
        raise NotAvailable("no nftables ruleset (/etc/nftables.conf or nft -j list ruleset)")


@check("FW-02", "Listener on a plane the policy gives no flow for", Severity.high,
       "bind the service to its plane's address, or stop it")
def fw02(facts: Facts) -> Iterator[Finding]:
    views = [v for v in facts.hosts if v.live and v.listeners is not None]
    if not views or facts.policy is None:
        raise NotAvailable("needs --live (ss -tulpnH) and /etc/gpufabric/policy.json")
    view = views[0]
    if view.role is None:
        raise NotAvailable(f"host {view.name} is not in the policy")
    addresses = facts.policy.addresses()
    plane_of = {addresses[(view.name, p)]: p for p in facts.policy.role_planes(view.role) if (view.name, p) in addresses}
    for lst in view.listeners or []:
        plane = plane_of.get(lst["local_addr"])
        if plane is None:
            continue
        ok = any(f.dst == view.role and f.plane == plane and f.proto == lst["proto"] and
                 any(lo <= lst["port"] <= hi for lo, hi in f.port_ranges()) for f in facts.policy.flows)
        if not ok:
            yield finding("FW-02", f"{view.name}: {lst['local_addr']}:{lst['port']}/{lst['proto']}",
                          f"{lst['process'] or 'a process'} listens on plane {plane} with no flow for it")


@check("FW-03", "Mixed iptables-legacy and nftables", Severity.medium, "keep one loader: remove iptables-legacy rules")
def fw03(facts: Facts) -> Iterator[Finding]:
    view = _live(facts)
    result = _run(["iptables-legacy-save"])
    if result is None or result[0] != 0:
        raise NotAvailable("iptables-legacy-save not available")
    rules = [line for line in result[1].splitlines() if line.startswith("-A ")]
    if rules:
        yield finding("FW-03", view.name, f"{len(rules)} iptables-legacy rules alongside nftables")


@check("FW-04", "Rules name interfaces that no plane uses", Severity.medium,
       "fix the interface names (nft accepts any iifname, so a typo silently never matches)")
def fw04(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json with the plane interfaces")
    known = {p.interface for p in facts.policy.planes} | {"lo"}
    for view, rs in firewalled_views(facts):
        for name in sorted(rs.interfaces() - known):
            yield finding("FW-04", view.name, f"iifname {name!r} is not a plane interface ({', '.join(sorted(k for k in known if k))})")
        if view.live and view.addrs is not None:
            present = {link.get("ifname") for link in view.addrs}
            for name in sorted((rs.interfaces() & known) - present - {"lo"}):
                yield finding("FW-04", view.name, f"iifname {name!r} does not exist on this host (ip -j addr)")
        if rs.unsupported:
            yield finding("FW-04", view.name, f"expressions the proof cannot model: {', '.join(sorted(rs.unsupported))}",
                          severity=Severity.info)


@check("FW-05", "RDMA isolation rests on the host firewall", Severity.high,
       "isolate RDMA with IB PKeys + part_enforce, or RoCE VLANs/VRFs and switch ACLs")
def fw05(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None or facts.fabric_kind not in ("ib", "roce"):
        raise NotAvailable("no RDMA design in policy.json")
    for plane in facts.policy.planes:
        if plane.kind != "compute-data" and not (plane.kind == "storage" and facts.storage == "nvmeof-rdma"):
            continue
        if facts.fabric_kind == "ib":
            if plane.pkey is None:
                yield finding("FW-05", f"plane {plane.name}", "IB plane without a PKey: host nftables cannot isolate RDMA")
                continue
            sm = [v for v in facts.hosts if v.has("/etc/opensm/partitions.conf")]
            if sm and not any(re.search(rf"=\s*0x0*{plane.pkey:x}\b", v.read("/etc/opensm/partitions.conf") or "", re.IGNORECASE)
                              for v in sm):
                yield finding("FW-05", f"plane {plane.name}", f"PKey 0x{plane.pkey:04x} is not in partitions.conf")
        elif plane.vlan is None:
            yield finding("FW-05", f"plane {plane.name}", "RoCE plane without a VLAN: host nftables cannot isolate RDMA")


@check("FW-06", "srun ports not constrained", Severity.medium, "set SrunPortRange (e.g. 60001-63000) in slurm.conf")
def fw06(facts: Facts) -> Iterator[Finding]:
    views = [v for v in facts.hosts if v.has("/etc/slurm/slurm.conf")]
    if not views:
        raise NotAvailable("no /etc/slurm/slurm.conf")
    for view in views:
        if not re.search(r"^\s*SrunPortRange\s*=", view.read("/etc/slurm/slurm.conf") or "", re.MULTILINE | re.IGNORECASE):
            yield finding("FW-06", view.name, "SrunPortRange missing while a firewall is in place")


@check("FW-07", "SSH open on a data or storage plane", Severity.medium, "accept 22/tcp on the management plane only")
def fw07(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json with plane kinds")
    for view, rs in firewalled_views(facts):
        for plane, kind, iface in planes_of(facts, view):
            if kind in ("compute-data", "storage") and (src := admitted(rs, iface, "tcp", SSH)):
                yield finding("FW-07", f"{view.name}: {iface} ({plane})", f"tcp/22 admitted from {iv.fmt_ip_spans(src)}")


@check("NVMF-09", "NVMe discovery exposed beyond the storage plane", Severity.medium,
       "admit 8009/tcp only on the storage plane from compute nodes")
def nvmf09(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json with plane kinds")
    for view, rs in firewalled_views(facts):
        for plane, kind, iface in planes_of(facts, view):
            if kind != "storage" and (src := admitted(rs, iface, "tcp", NVME_DISCOVERY)):
                yield finding("NVMF-09", f"{view.name}: {iface} ({plane})", f"tcp/8009 admitted from {iv.fmt_ip_spans(src)}")
