"""InfiniBand (IB-*) and RoCEv2 (ROCE-*) checks, reference/security-config.md 3 and "Audit checks"."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from gpufabric.audit.collect import Facts, HostView
from gpufabric.audit.envfiles import nccl_settings
from gpufabric.audit.findings import Finding, NotAvailable, Severity, check, finding
from gpufabric.audit.sysinfo import IbPort, parse_ibv_devinfo
from gpufabric.configure.fabric import pfc_vector
from gpufabric.errors import ParseError

PARTITIONS = "/etc/opensm/partitions.conf"
OPENSM = "/etc/opensm/opensm.conf"
QOS_SCRIPT = "/usr/local/sbin/gpufabric-roce-qos"


def _sm_views(facts: Facts) -> list[HostView]:
    views = [v for v in facts.hosts if v.has(PARTITIONS) or v.has(OPENSM)]
    if not views:
        raise NotAvailable("no OpenSM configuration (/etc/opensm) in the audited tree")
    return views


@check(
    "IB-01",
    "partitions.conf missing or unreadable",
    Severity.high,
    "install /etc/opensm/partitions.conf with an explicit Default rule and one PKey per plane",
)
def ib01(facts: Facts) -> Iterator[Finding]:
    for view in _sm_views(facts):
        if view.read(PARTITIONS) is None:
            yield finding("IB-01", view.name, "OpenSM falls back to Default=0x7fff : ALL=full ;")


def _rules(text: str) -> list[str]:
    body = re.sub(r"#[^\n]*", "", text)
    return [r.strip() for r in body.split(";") if r.strip()]


_DEFAULT_PARTITION = re.compile(r"^\s*Default\b|^[^=]*=\s*0x7fff\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRule:
    """One ``head : members ;`` rule of a subnet manager's partitions.conf."""

    view: HostView
    rule: str
    head: str
    members: str

    @property
    def is_default(self) -> bool:
        """The Default partition (by name or by PKey 0x7fff)."""
        return _DEFAULT_PARTITION.match(self.head) is not None


def partition_rules(facts: Facts) -> Iterator[PartitionRule]:
    """Every partition rule of every subnet-manager host that has a partitions.conf."""
    for view in _sm_views(facts):
        text = view.read(PARTITIONS)
        if text is None:
            continue
        for rule in _rules(text):
            head, _, members = rule.partition(":")
            yield PartitionRule(view=view, rule=rule, head=head, members=members)


@check(
    "IB-02",
    "Default partition grants everyone full membership",
    Severity.high,
    "write the Default rule as: Default=0x7fff : ALL=limited, SELF=full ;",
)
def ib02(facts: Facts) -> Iterator[Finding]:
    for p in partition_rules(facts):
        if not p.is_default:
            continue
        explicit = re.search(r"\bALL(_CAS)?\s*=\s*full\b", p.members, re.IGNORECASE)
        # a member without "=type" takes the partition's defmember (limited by default)
        implied = re.search(r"defmember\s*=\s*full", p.head, re.IGNORECASE) and re.search(
            r"\bALL(_CAS)?\b(?!\s*=)", p.members
        )
        if explicit or implied:
            yield finding("IB-02", p.view.name, f"rule {p.rule.strip()!r}", location=p.view.where(PARTITIONS))


def _opensm_options(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


@check("IB-03", "Partition enforcement is disabled", Severity.high, "set part_enforce both in opensm.conf")
def ib03(facts: Facts) -> Iterator[Finding]:
    for view in _sm_views(facts):
        text = view.read(OPENSM)
        if text is None:
            continue
        opts = _opensm_options(text)
        if opts.get("part_enforce", "both").lower() == "off":
            yield finding("IB-03", view.name, "part_enforce off", location=view.where(OPENSM))
        elif opts.get("no_partition_enforcement", "FALSE").upper() == "TRUE":
            yield finding("IB-03", view.name, "no_partition_enforcement TRUE", location=view.where(OPENSM))


@check(
    "IB-04",
    "Fabric management keys left at defaults",
    Severity.medium,
    "set random m_key, sm_key, sa_key and m_key_protection_level 2 in opensm.conf (keep it 0600)",
)
def ib04(facts: Facts) -> Iterator[Finding]:
    for view in _sm_views(facts):
        text = view.read(OPENSM)
        if text is None:
            continue
        opts = _opensm_options(text)

        def value(key: str, default: int, opts: dict[str, str] = opts) -> int:
            try:
                return int(opts.get(key, str(default)), 0)
            except ValueError:
                return default

        problems = []
        if value("m_key", 0) == 0:
            problems.append("m_key 0")
        if value("m_key_protection_level", 0) == 0:
            problems.append("m_key_protection_level 0")
        for key in ("sm_key", "sa_key"):
            if value(key, 1) == 1:
                problems.append(f"{key} 1 (default)")
        if problems:
            yield finding("IB-04", view.name, ", ".join(problems), location=view.where(OPENSM))


def _roce_views(facts: Facts) -> list[HostView]:
    if facts.fabric_kind != "roce":
        raise NotAvailable("not a RoCE design (policy.json design.fabric_kind)")
    views = [v for v in facts.hosts if v.has(QOS_SCRIPT)]
    if not views:
        raise NotAvailable(f"no RoCE QoS script ({QOS_SCRIPT})")
    return views


def _script_vars(text: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE))


@check("ROCE-01", "Trust mode is not DSCP", Severity.high, "run mlnx_qos --trust dscp on every RoCE netdev")
def roce01(facts: Facts) -> Iterator[Finding]:
    for view in _roce_views(facts):
        text = view.read(QOS_SCRIPT) or ""
        if "--trust dscp" not in text:
            yield finding("ROCE-01", view.name, "the QoS script never sets trust dscp", location=view.where(QOS_SCRIPT))


@check(
    "ROCE-02",
    "PFC is not enabled on exactly the RoCE priority",
    Severity.high,
    "set mlnx_qos --pfc with a single 1 at the RoCE priority (and the same on the switch)",
)
def roce02(facts: Facts) -> Iterator[Finding]:
    prio = facts.policy.roce_priority if facts.policy else 3
    expected = pfc_vector(prio)
    for view in _roce_views(facts):
        got = _script_vars(view.read(QOS_SCRIPT) or "").get("PFC")
        if got != expected:
            yield finding(
                "ROCE-02", view.name, f"PFC vector {got!r}, expected {expected!r}", location=view.where(QOS_SCRIPT)
            )


@check(
    "ROCE-03",
    "ECN NP/RP disabled on the RoCE priority",
    Severity.medium,
    "enable /sys/class/net/<if>/ecn/roce_{np,rp}/enable/<prio>",
)
def roce03(facts: Facts) -> Iterator[Finding]:
    for view in _roce_views(facts):
        text = view.read(QOS_SCRIPT) or ""
        for side in ("roce_np", "roce_rp"):
            if f"ecn/{side}/enable/$PRIO" not in text:
                yield finding("ROCE-03", view.name, f"{side} is never enabled", location=view.where(QOS_SCRIPT))


@check(
    "ROCE-04",
    "DSCP/TC marking is inconsistent end to end",
    Severity.medium,
    "make NCCL_IB_TC, rdma_cm default_roce_tos and the switch DSCP map agree (TOS = DSCP << 2)",
)
def roce04(facts: Facts) -> Iterator[Finding]:
    for view in _roce_views(facts):
        tos = _script_vars(view.read(QOS_SCRIPT) or "").get("TOS")
        nccl = nccl_settings(view)
        if nccl is None or facts.role_kind(view.role) != "compute":
            continue
        tc = nccl[0].get("NCCL_IB_TC")
        if tc != tos:
            yield finding("ROCE-04", view.name, f"NCCL_IB_TC={tc} but rdma_cm default_roce_tos={tos}")


# ROCE-05 ("GID index not pinned") is gone: a pinned NCCL_IB_GID_INDEX is the defect
# (issue 11); audit/checks_bundle.py BND-02 reports it.


PKEYS = "/sys/class/infiniband/*/ports/*/pkeys/*"
FULL_MEMBER = 0x8000  # MSB of the P_Key: 1 = full, 0 = limited (reference 3.4)


def _pkey(text: str | None) -> int | None:
    try:
        return int(text or "", 16)
    except ValueError:
        return None


def _pkey_views(facts: Facts) -> list[HostView]:
    if facts.policy is None or not any(p.pkey is not None for p in facts.policy.planes):
        raise NotAvailable("no policy.json with plane PKeys (the intended plane map)")
    views = [v for v in facts.hosts if v.sys_glob(PKEYS)]
    if not views:
        raise NotAvailable("no /sys/class/infiniband/*/ports/*/pkeys table (no InfiniBand HCA, or sysfs not collected)")
    return views


@check(
    "IB-05",
    "A host has an unexpected full-membership PKey",
    Severity.high,
    "give the host's ports full membership only in its planes' partitions (partitions.conf member lists)",
)
def ib05(facts: Facts) -> Iterator[Finding]:
    views = _pkey_views(facts)
    assert facts.policy is not None
    for view in views:
        planes = set(facts.policy.role_planes(view.role)) if view.role else {p.name for p in facts.policy.planes}
        intended = {p.pkey for p in facts.policy.planes if p.name in planes and p.pkey is not None}
        for path in view.sys_glob(PKEYS):
            value = _pkey(view.sys_read(path))
            if value is None or not value & FULL_MEMBER or (value & 0x7FFF) in intended:
                continue
            yield finding(
                "IB-05",
                f"{view.name}: {path.split('/')[4]} port {path.split('/')[6]}",
                f"{path} = 0x{value:04x} (full member of 0x{value & 0x7FFF:04x}); intended: "
                f"{', '.join(f'0x{k:04x}' for k in sorted(intended)) or 'none'}",
                location=path,
            )


def _hca_ports(spec: str | None) -> list[tuple[str, str]] | None:
    """NCCL_IB_HCA "=mlx5_0:1,mlx5_1:1" -> [(dev, port)]; None when not an exact list."""
    if not spec or not spec.startswith("="):
        return None
    out = []
    for item in spec.lstrip("=").split(","):
        dev, _, port = item.partition(":")
        out.append((dev, port or "1"))
    return out


@check(
    "IB-06",
    "NCCL_IB_PKEY index points at the wrong partition",
    Severity.medium,
    "set NCCL_IB_PKEY to the index of the compute-data PKey in the port's pkeys table (indx0 makes it 0)",
)
def ib06(facts: Facts) -> Iterator[Finding]:
    views = _pkey_views(facts)
    assert facts.policy is not None
    data = next((p for p in facts.policy.planes if p.kind == "compute-data" and p.pkey is not None), None)
    if data is None or data.pkey is None:  # the pkey test repeated so that the type checker sees it
        raise NotAvailable("the policy's compute-data plane has no PKey")
    views = [v for v in views if facts.role_kind(v.role) in (None, "compute")]
    if not views:
        raise NotAvailable("no compute host with a pkeys table")
    examined = 0
    for view in views:
        settings = nccl_settings(view)
        env = settings[0] if settings else {}
        index = env.get("NCCL_IB_PKEY", "0")  # NCCL's default is table index 0 (reference 3.4)
        ports = _hca_ports(env.get("NCCL_IB_HCA")) or sorted(
            {(p.split("/")[4], p.split("/")[6]) for p in view.sys_glob(PKEYS)}
        )
        for dev, port in ports:
            path = f"/sys/class/infiniband/{dev}/ports/{port}/pkeys/{index}"
            value = _pkey(view.sys_read(path))
            if value is None:
                continue  # an HCA this host lacks: NCCL skips it
            examined += 1
            if (value & 0x7FFF) != data.pkey or not value & FULL_MEMBER:
                yield finding(
                    "IB-06",
                    f"{view.name}: {dev}:{port}",
                    f"NCCL_IB_PKEY={index} -> {path} = 0x{value:04x}; compute-data plane {data.name} is "
                    f"0x{data.pkey | FULL_MEMBER:04x} (full)",
                    location=path,
                )
    if not examined:
        raise NotAvailable("no pkeys table entry at NCCL_IB_PKEY for the NCCL_IB_HCA devices")


def _devinfo(view: HostView) -> list[IbPort] | None:
    text = view.output("ibv_devinfo")
    try:
        return parse_ibv_devinfo(text) if text is not None else None
    except ParseError:
        return None  # unreadable output counts as absent, never as a crash


#: IBTA MTU encoding in partitions.conf: 5 = 4096 (reference 3.1).
IB_MTU_4096 = 5


@check(
    "IB-07",
    "IB MTU below 4096",
    Severity.medium,
    "set mtu=5 (4096) on the plane partitions and check the HCA/switch port MTU",
)
def ib07(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        text = view.read(PARTITIONS)
        if text is not None:
            seen = True
            for rule in _rules(text):
                mtu = re.search(r",\s*mtu\s*=\s*(\d+)", rule.partition(":")[0])
                if mtu and int(mtu.group(1)) < IB_MTU_4096:
                    yield finding(
                        "IB-07",
                        f"{view.name}: partition {rule.split('=')[0].strip()}",
                        f"mtu={mtu.group(1)} ({128 << int(mtu.group(1))} bytes) in {rule!r}",
                        location=view.where(PARTITIONS),
                    )
        ports = [p for p in _devinfo(view) or [] if p.link_layer == "InfiniBand"]
        seen = seen or bool(ports)
        for port in ports:
            if port.state == "PORT_ACTIVE" and port.active_mtu_bytes < 4096:
                yield finding(
                    "IB-07",
                    f"{view.name}: {port.hca} port {port.port}",
                    f"ibv_devinfo active_mtu {port.active_mtu_bytes}",
                    location=view.output_source("ibv_devinfo"),
                )
    if not seen:
        raise NotAvailable("no partitions.conf and no InfiniBand port in ibv_devinfo")


#: RoCE carries a 4096-byte IB MTU only when the netdev MTU leaves room for the
#: Ethernet/IP/UDP/BTH headers (reference "Audit checks" ROCE-06, derived).
ROCE_NETDEV_MTU_MIN = 4200


@check(
    "ROCE-06",
    "RoCE MTU too small or inconsistent",
    Severity.medium,
    "set MTU 9000 (or at least 4200) on the RDMA netdevs of every host and the switch ports",
)
def roce06(facts: Facts) -> Iterator[Finding]:
    if facts.fabric_kind == "ib":
        raise NotAvailable("InfiniBand design (IB-07 checks the MTU)")
    planes = []
    if facts.policy is not None:
        planes = [
            p
            for p in facts.policy.planes
            if p.kind == "compute-data" or (p.kind == "storage" and facts.storage == "nvmeof-rdma")
        ]
    seen = False
    mtus: dict[str, dict[int, list[str]]] = {}
    for view in facts.hosts:
        for port in _devinfo(view) or []:
            if port.link_layer != "Ethernet":
                continue
            seen = True
            if port.state == "PORT_ACTIVE" and port.active_mtu_bytes < 4096:
                yield finding(
                    "ROCE-06",
                    f"{view.name}: {port.hca} port {port.port}",
                    f"ibv_devinfo active_mtu {port.active_mtu_bytes}",
                    location=view.output_source("ibv_devinfo"),
                )
        text = view.output("ip-link")
        if text is None or not planes:
            continue
        try:
            links = {link.get("ifname"): link.get("mtu") for link in json.loads(text)}
        except (json.JSONDecodeError, AttributeError):
            continue
        for plane in planes:
            mtu = links.get(plane.interface)
            if not isinstance(mtu, int):
                continue
            seen = True
            mtus.setdefault(str(plane.interface), {}).setdefault(mtu, []).append(view.name)
            if mtu < ROCE_NETDEV_MTU_MIN:
                yield finding(
                    "ROCE-06",
                    f"{view.name}: {plane.interface} ({plane.name})",
                    f"netdev mtu {mtu} < {ROCE_NETDEV_MTU_MIN}: RoCE falls below 4096",
                    location=view.output_source("ip-link"),
                )
    if not seen:
        raise NotAvailable("no RoCE port in ibv_devinfo and no RDMA-plane netdev in ip -j link")
    for iface, by_mtu in mtus.items():
        if len(by_mtu) > 1:
            yield finding(
                "ROCE-06",
                iface,
                "MTU differs between hosts: "
                + "; ".join(f"{mtu}: {', '.join(hosts)}" for mtu, hosts in sorted(by_mtu.items())),
            )


RDMA_CM = "/sys/kernel/config/rdma_cm/*/ports/*/"


@check(
    "ROCE-07",
    "rdma_cm default RoCE mode is not v2",
    Severity.low,
    'echo "RoCE v2" > /sys/kernel/config/rdma_cm/<dev>/ports/<p>/default_roce_mode (gpufabric-roce-qos does)',
)
def roce07(facts: Facts) -> Iterator[Finding]:
    if facts.fabric_kind == "ib":
        raise NotAvailable("InfiniBand design: no RoCE mode")
    seen = False
    for view in facts.hosts:
        for path in view.sys_glob(RDMA_CM + "default_roce_mode"):
            seen = True
            mode = view.sys_read(path)
            if mode != "RoCE v2":
                yield finding(
                    "ROCE-07",
                    f"{view.name}: {path.split('/')[5]} port {path.split('/')[7]}",
                    f"{path} = {mode!r}",
                    location=path,
                )
    if not seen:
        raise NotAvailable(
            "no rdma_cm configfs (/sys/kernel/config/rdma_cm/<dev>: created by mkdir; no RDMA device here?)"
        )
