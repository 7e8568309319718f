"""Host tuning (HOST-*), firewall (FW-*) and proof (VER-01) checks.

HOST-04..07 read the host's sysfs/procfs and tool outputs through HostView.sys_read /
sys_glob / output: live on this host, or from a directory holding copies of them
(collect.COMMANDS, docs/security.md); artefact bundles carry neither, so there they are
"not available".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpufabric.audit import intervals as iv
from gpufabric.audit.collect import Facts, HostView, run_tool
from gpufabric.audit.envfiles import nccl_settings
from gpufabric.audit.exposure import admitted, firewalled_views, planes_of
from gpufabric.audit.findings import Finding, NotAvailable, Severity, check, finding
from gpufabric.audit.nfteval import explore
from gpufabric.audit.sysinfo import (
    TOPO_ORDER,
    parse_cpulist,
    parse_lspci_acs,
    parse_modules,
    parse_topo,
)
from gpufabric.errors import ParseError
from gpufabric.spec.security import NVME_DISCOVERY, SSH


def _live(facts: Facts) -> HostView:
    views = [v for v in facts.hosts if v.live]
    if not views:
        raise NotAvailable("needs --live")
    return views[0]


@check(
    "HOST-01", "CPU governor is not performance", Severity.low, "use the gpufabric tuned profile (governor=performance)"
)
def host01(facts: Facts) -> Iterator[Finding]:
    view = _live(facts)
    paths = view.sys_glob("/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
    governors = {g for g in map(view.sys_read, paths) if g is not None}
    if not governors:
        raise NotAvailable("no cpufreq in sysfs (VM or no driver)")
    if governors != {"performance"}:
        yield finding("HOST-01", view.name, f"scaling_governor = {', '.join(sorted(g for g in governors if g))}")


@check(
    "HOST-02",
    "No low-latency tuned profile",
    Severity.low,
    "install /etc/tuned/gpufabric-<role>/tuned.conf and run tuned-adm profile gpufabric-<role>",
)
def host02(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        if view.role is None and not view.live:
            continue
        seen = True
        profiles = [p for p in view.files if re.match(r"^/etc/tuned/[^/]+/tuned\.conf$", p)]
        active = (view.read("/etc/tuned/active_profile") or "").strip()
        if (
            not profiles
            and active not in ("network-latency", "latency-performance")
            and not active.startswith("gpufabric")
        ):
            yield finding("HOST-02", view.name, f"no tuned profile (active: {active or 'none'})")
    if not seen:
        raise NotAvailable("no host views")


@check(
    "HOST-03",
    "THP or NUMA balancing differs from policy",
    Severity.low,
    "transparent_hugepage=never and kernel.numa_balancing=0 (the gpufabric tuned profile)",
)
def host03(facts: Facts) -> Iterator[Finding]:
    view = _live(facts)
    thp = view.sys_read("/sys/kernel/mm/transparent_hugepage/enabled")
    numa = view.sys_read("/proc/sys/kernel/numa_balancing")
    if thp is None and numa is None:
        raise NotAvailable("no THP/numa_balancing in sysfs/procfs")
    if thp is not None and "[never]" not in thp:
        yield finding("HOST-03", view.name, f"transparent_hugepage: {thp}")
    if numa not in (None, "0"):
        yield finding("HOST-03", view.name, f"kernel.numa_balancing = {numa}")


@check(
    "FW-01",
    "No default-drop input policy",
    Severity.high,
    "load the gpufabric nftables ruleset: input chain with policy drop",
)
def fw01(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        if not view.has_firewall_source():
            continue
        rs = view.ruleset()
        if rs is None:
            continue  # a ruleset nft refuses is FW-08's finding, not a missing policy
        seen = True
        chains = rs.base_chains("input")
        if not chains:
            yield finding("FW-01", view.name, "no base chain on the input hook: every port on every plane is open")
        for chain in chains:
            if chain.policy != "drop":
                yield finding(
                    "FW-01",
                    view.name,
                    f"chain {chain.family} {chain.table} {chain.name}: hook input policy {chain.policy}",
                )
    if not seen:
        raise NotAvailable("no nftables ruleset (/etc/nftables.conf or nft -j list ruleset)")


@check(
    "FW-02",
    "Listener on a plane the policy gives no flow for",
    Severity.high,
    "bind the service to its plane's address, or stop it",
)
def fw02(facts: Facts) -> Iterator[Finding]:
    views = [v for v in facts.hosts if v.live and v.listeners is not None]
    if not views or facts.policy is None:
        raise NotAvailable("needs --live (ss -tulpnH) and /etc/gpufabric/policy.json")
    view = views[0]
    if view.role is None:
        raise NotAvailable(f"host {view.name} is not in the policy")
    addresses = facts.policy.addresses()
    plane_of = {
        addresses[(view.name, p)]: p for p in facts.policy.role_planes(view.role) if (view.name, p) in addresses
    }
    for lst in view.listeners or []:
        plane = plane_of.get(lst["local_addr"])
        if plane is None:
            continue
        ok = any(
            f.dst == view.role
            and f.plane == plane
            and f.proto == lst["proto"]
            and any(lo <= lst["port"] <= hi for lo, hi in f.port_ranges())
            for f in facts.policy.flows
        )
        if not ok:
            yield finding(
                "FW-02",
                f"{view.name}: {lst['local_addr']}:{lst['port']}/{lst['proto']}",
                f"{lst['process'] or 'a process'} listens on plane {plane} with no flow for it",
            )


@check("FW-03", "Mixed iptables-legacy and nftables", Severity.medium, "keep one loader: remove iptables-legacy rules")
def fw03(facts: Facts) -> Iterator[Finding]:
    view = _live(facts)
    result = run_tool(["iptables-legacy-save"])
    if result is None or result.returncode != 0:
        raise NotAvailable("iptables-legacy-save not available")
    rules = [line for line in result.stdout.splitlines() if line.startswith("-A ")]
    if rules:
        yield finding("FW-03", view.name, f"{len(rules)} iptables-legacy rules alongside nftables")


@check(
    "FW-04",
    "Rules name interfaces that no plane uses",
    Severity.medium,
    "fix the interface names (nft accepts any iifname, so a typo silently never matches)",
)
def fw04(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json with the plane interfaces")
    known = {p.interface for p in facts.policy.planes} | {"lo"}
    for view, rs in firewalled_views(facts):
        for name in sorted(rs.interfaces() - known):
            yield finding(
                "FW-04",
                view.name,
                f"iifname {name!r} is not a plane interface ({', '.join(sorted(k for k in known if k))})",
            )
        if view.live and view.addrs is not None:
            present = {link.get("ifname") for link in view.addrs}
            for name in sorted((rs.interfaces() & known) - present - {"lo"}):
                yield finding("FW-04", view.name, f"iifname {name!r} does not exist on this host (ip -j addr)")
        # after the proof (runner.audit evaluates first) and after exploring every packet
        # class of this host's planes: every construct the evaluator could not decide
        for construct in sorted(explore(rs, [iface for _p, _k, iface in planes_of(facts, view) if iface])):
            yield finding(
                "FW-04", view.name, f"undecided (cells it guards are 'not proven'): {construct}", severity=Severity.info
            )


@check(
    "FW-08",
    "Ruleset does not load",
    Severity.high,
    "fix the ruleset until `nft -c -f` accepts it (nft's message names the line)",
)
def fw08(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        if not view.has_firewall_source() or view.live:
            continue
        seen = True
        if view.ruleset() is None and view.ruleset_rejected:
            yield finding("FW-08", view.name, view.ruleset_error or "nft rejected the ruleset")
    if not seen:
        raise NotAvailable("no nftables ruleset file to load")


@check(
    "FW-05",
    "RDMA isolation rests on the host firewall",
    Severity.high,
    "isolate RDMA with IB PKeys + part_enforce, or RoCE VLANs/VRFs and switch ACLs",
)
def fw05(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None or facts.fabric_kind not in ("ib", "roce"):
        raise NotAvailable("no RDMA design in policy.json")
    for plane in facts.policy.planes:
        if plane.kind != "compute-data" and not (plane.kind == "storage" and facts.storage == "nvmeof-rdma"):
            continue
        if facts.fabric_kind == "ib":
            if plane.pkey is None:
                yield finding(
                    "FW-05", f"plane {plane.name}", "IB plane without a PKey: host nftables cannot isolate RDMA"
                )
                continue
            sm = [v for v in facts.hosts if v.has("/etc/opensm/partitions.conf")]
            if sm and not any(
                re.search(rf"=\s*0x0*{plane.pkey:x}\b", v.read("/etc/opensm/partitions.conf") or "", re.IGNORECASE)
                for v in sm
            ):
                yield finding("FW-05", f"plane {plane.name}", f"PKey 0x{plane.pkey:04x} is not in partitions.conf")
        elif plane.vlan is None:
            yield finding(
                "FW-05", f"plane {plane.name}", "RoCE plane without a VLAN: host nftables cannot isolate RDMA"
            )


@check("FW-06", "srun ports not constrained", Severity.medium, "set SrunPortRange (e.g. 60001-63000) in slurm.conf")
def fw06(facts: Facts) -> Iterator[Finding]:
    views = [v for v in facts.hosts if v.has("/etc/slurm/slurm.conf")]
    if not views:
        raise NotAvailable("no /etc/slurm/slurm.conf")
    for view in views:
        if not re.search(
            r"^\s*SrunPortRange\s*=", view.read("/etc/slurm/slurm.conf") or "", re.MULTILINE | re.IGNORECASE
        ):
            yield finding("FW-06", view.name, "SrunPortRange missing while a firewall is in place")


@check("FW-07", "SSH open on a data or storage plane", Severity.medium, "accept 22/tcp on the management plane only")
def fw07(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json with plane kinds")
    for view, rs in firewalled_views(facts):
        for plane, kind, iface in planes_of(facts, view):
            if kind in ("compute-data", "storage") and (src := admitted(rs, iface, "tcp", SSH)):
                yield finding(
                    "FW-07", f"{view.name}: {iface} ({plane})", f"tcp/22 admitted from {iv.fmt_ip_spans(src)}"
                )


@check(
    "NVMF-09",
    "NVMe discovery exposed beyond the storage plane",
    Severity.medium,
    "admit 8009/tcp only on the storage plane from compute nodes",
)
def nvmf09(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json with plane kinds")
    for view, rs in firewalled_views(facts):
        for plane, kind, iface in planes_of(facts, view):
            if kind != "storage" and (src := admitted(rs, iface, "tcp", NVME_DISCOVERY)):
                yield finding(
                    "NVMF-09", f"{view.name}: {iface} ({plane})", f"tcp/8009 admitted from {iv.fmt_ip_spans(src)}"
                )


def _root_views(facts: Facts) -> list[HostView]:
    return [v for v in facts.hosts if v.root is not None]


def _nic_ifaces(facts: Facts, view: HostView) -> list[str]:
    """The RDMA/storage netdevs whose locality matters: the policy's compute-data and storage
    plane interfaces, or every netdev with a PCI device when there is no policy."""
    if facts.policy is not None:
        return [str(p.interface) for p in facts.policy.planes if p.kind in ("compute-data", "storage")]
    return [p.split("/")[4] for p in view.sys_glob("/sys/class/net/*/device/numa_node")]


@check(
    "HOST-04",
    "NIC interrupts are served off the NIC's NUMA node",
    Severity.medium,
    "pin the NIC IRQs to its node (set_irq_affinity_bynode.sh <node> <if>) and ban them from irqbalance",
)
def host04(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in _root_views(facts):
        for iface in _nic_ifaces(facts, view):
            base = f"/sys/class/net/{iface}/device"
            node = view.sys_read(f"{base}/numa_node")
            irqs = [p.rsplit("/", 1)[1] for p in view.sys_glob(f"{base}/msi_irqs/*")]
            if node is None or node == "-1" or not irqs:
                continue  # no NUMA (one node) or no MSI interrupts: nothing to place
            cpulist = view.sys_read(f"/sys/devices/system/node/node{node}/cpulist")
            if cpulist is None:
                continue
            seen = True
            off = []
            try:
                local = parse_cpulist(cpulist)
                for irq in sorted(irqs, key=int):
                    affinity = view.sys_read(f"/proc/irq/{irq}/smp_affinity_list")
                    if affinity is not None and not parse_cpulist(affinity) <= local:
                        off.append(f"IRQ {irq} -> {affinity}")
            except (ParseError, ValueError):
                continue  # a truncated copy; the other interfaces still count
            if off:
                yield finding(
                    "HOST-04",
                    f"{view.name}: {iface}",
                    f"{len(off)} of {len(irqs)} IRQs reach CPUs outside NUMA node {node} ({cpulist}): "
                    + ", ".join(off[:4])
                    + (" ..." if len(off) > 4 else ""),
                    location=f"/proc/irq/{off[0].split()[1]}/smp_affinity_list",
                )
    if not seen:
        raise NotAvailable(
            "no NIC with numa_node and msi_irqs in sysfs (/sys/class/net/<if>/device; VM or not collected)"
        )


def _rdma_devices(facts: Facts, view: HostView) -> set[str] | None:
    """The compute HCAs (device names) a GPU should sit next to; None: any NIC."""
    settings = nccl_settings(view)
    spec = settings[0].get("NCCL_IB_HCA", "") if settings else ""
    if spec.startswith("="):
        return {item.partition(":")[0] for item in spec[1:].split(",")}
    if facts.policy is not None:
        hcas = {h.partition(":")[0] for p in facts.policy.planes if p.kind == "compute-data" for h in p.hcas}
        return hcas or None
    return None


@check(
    "HOST-05",
    "GPU to NIC distance loses GPUDirect RDMA",
    Severity.medium,
    "put each GPU's NIC under the same PCIe switch (PIX/PXB), or list the near NICs in NCCL_IB_HCA",
)
def host05(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        if facts.role_kind(view.role) not in (None, "compute"):
            continue
        text = view.output("nvidia-smi-topo")
        if text is None:
            continue
        try:
            matrix = parse_topo(text)
        except ParseError:
            continue
        wanted = _rdma_devices(facts, view)
        for gpu, row in matrix.items():
            nics = {nic: conn for nic, conn in row.items() if conn in TOPO_ORDER and (wanted is None or nic in wanted)}
            if not nics:
                continue
            seen = True
            nic, conn = min(nics.items(), key=lambda item: TOPO_ORDER.index(item[1]))
            # NCCL uses GDR only up to PXB/P2C by default (reference 4.4, 5.5)
            if TOPO_ORDER.index(conn) >= TOPO_ORDER.index("PHB"):
                yield finding(
                    "HOST-05",
                    f"{view.name}: {gpu}",
                    f"nearest NIC {nic} is {conn} (nvidia-smi topo -m)",
                    location=view.output_source("nvidia-smi-topo"),
                )
    if not seen:
        raise NotAvailable("no nvidia-smi topo -m output with GPU and NIC columns (no GPU, or not captured)")


def _iommu_mode(cmdline: str) -> str | None:
    args = set(cmdline.split())
    if args & {"iommu=off", "intel_iommu=off", "amd_iommu=off"}:
        return "off"
    if "iommu=pt" in args:
        return "pt"
    if "intel_iommu=on" in args:
        return "translated"
    return None


@check(
    "HOST-06",
    "ACS/IOMMU state differs from policy",
    Severity.medium,
    "disable ACS redirect only on the GPU-NIC path bridges and boot with iommu=pt; on shared nodes keep ACS on",
)
def host06(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in _root_views(facts):
        text = view.output("lspci")
        cmdline = view.sys_read("/proc/cmdline")
        if text is None and cmdline is None:
            continue
        seen = True
        bridges = parse_lspci_acs(text or "")
        mode = _iommu_mode(cmdline or "")
        redirecting = [b.bdf for b in bridges if b.redirects]
        open_ = [b.bdf for b in bridges if not b.redirects]
        if mode == "translated" and open_:
            # Williamson (pcie_acs_override): P2P below the IOMMU bypasses its isolation (reference 5.8)
            yield finding(
                "HOST-06",
                f"{view.name}: {', '.join(open_[:4])}",
                f"IOMMU translating (intel_iommu=on) but ACS redirect off on {len(open_)} bridge(s): "
                "peer-to-peer DMA bypasses IOMMU isolation",
                severity=Severity.high,
                location=view.output_source("lspci"),
            )
        elif mode == "translated":
            yield finding(
                "HOST-06",
                view.name,
                "intel_iommu=on without iommu=pt: GPUDirect RDMA goes through IOMMU "
                "translation (NVIDIA recommends iommu=pt)",
                location="/proc/cmdline",
            )
        if redirecting and facts.role_kind(view.role) in (None, "compute"):
            yield finding(
                "HOST-06",
                f"{view.name}: {', '.join(redirecting[:4])}",
                f"ACSCtl ReqRedir+/CmpltRedir+ on {len(redirecting)} bridge(s): GPU-NIC peer-to-peer is "
                "redirected to the root complex (GDR fails or slows)",
                location=view.output_source("lspci"),
            )
    if not seen:
        raise NotAvailable("no lspci -vvv output and no /proc/cmdline")


@check(
    "HOST-07",
    "RDMA prerequisites missing",
    Severity.low,
    "set memlock unlimited (limits.conf / systemd LimitMEMLOCK=infinity) and load nvidia_peermem (or use dma-buf)",
)
def host07(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in _root_views(facts):
        modules_text = view.output("lsmod")
        modules = parse_modules(modules_text) if modules_text is not None else set()
        rdma = bool(view.sys_glob("/sys/class/infiniband/*")) or "ib_core" in modules
        if not rdma:
            continue  # memlock and peer memory only matter where RDMA registers memory
        memlock = view.output("ulimit-l")
        if memlock is None and modules_text is None:
            continue
        seen = True
        if memlock is not None and memlock.strip() != "unlimited":
            yield finding(
                "HOST-07",
                view.name,
                f"ulimit -l = {memlock.strip()} KiB (memory registration can fail)",
                location=view.output_source("ulimit-l"),
            )
        if "nvidia" in modules and not modules & {"nvidia_peermem", "nv_peer_mem"}:
            yield finding(
                "HOST-07",
                view.name,
                "nvidia is loaded without nvidia_peermem: no GPUDirect RDMA through "
                "peer memory (unless the stack uses dma-buf)",
                location=view.output_source("lsmod"),
            )
    if not seen:
        raise NotAvailable("no RDMA device (/sys/class/infiniband, ib_core) on the audited host")
