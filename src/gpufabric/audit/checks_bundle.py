"""Bundle checks (BND-*): what ``gpufabric config`` warns about, or no longer renders, is a
finding when it appears in an audited tree (issue 11 item 3).

BND-01 partitions that admit every adapter (``ALL_CAS=full``); BND-02 a pinned
``NCCL_IB_GID_INDEX``; BND-03 a firewall that opens the port of a service the role does
not run in the configured design.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from gpufabric.audit.checks_fabric import PARTITIONS, partition_rules
from gpufabric.audit.collect import Facts
from gpufabric.audit.envfiles import nccl_settings
from gpufabric.audit.exposure import admitted, firewalled_views, planes_of
from gpufabric.audit.findings import Finding, NotAvailable, Severity, check, finding
from gpufabric.spec.security import (
    NFS,
    NVME_DISCOVERY,
    NVME_TCP,
    ROCE_UDP,
    SLURMCTLD,
    SLURMD,
    TORCH_C10D,
    TORCH_STATIC,
)


@check(
    "BND-01",
    "Partition admits every adapter",
    Severity.high,
    "list the role's HCA port GUIDs in roles[].port_guids so partitions.conf names its members",
)
def bnd01(facts: Facts) -> Iterator[Finding]:
    for p in partition_rules(facts):
        if p.is_default:
            continue  # the Default partition is IB-02's
        if re.search(r"\bALL(_CAS|_SWITCHES|_ROUTERS)?\s*=\s*full\b", p.members, re.IGNORECASE):
            yield finding(
                "BND-01",
                f"{p.view.name}: partition {p.head.split('=', 1)[0].strip()}",
                f"{p.rule.strip()!r}: any HCA on the subnet joins this plane as a full member",
                location=p.view.where(PARTITIONS),
            )


@check(
    "BND-02",
    "NCCL_IB_GID_INDEX pinned",
    Severity.high,
    "remove NCCL_IB_GID_INDEX; set NCCL_IB_ROCE_VERSION_NUM=2 and NCCL_IB_ADDR_FAMILY=AF_INET so NCCL picks the GID",
)
def bnd02(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        settings = nccl_settings(view)
        if settings is None:
            continue
        seen = True
        value = settings[0].get("NCCL_IB_GID_INDEX")
        if value is not None:
            yield finding(
                "BND-02",
                view.name,
                f"NCCL_IB_GID_INDEX={value} (from {', '.join(settings[1])}): with VLAN "
                "netdevs a fixed index names another netdev's GID or a RoCE v1 one",
            )
    if not seen:
        raise NotAvailable("no NCCL environment file in the audited tree")


@dataclass(frozen=True, slots=True, kw_only=True)
class Service:
    name: str
    proto: str
    port: int
    role_kinds: frozenset[str]
    storage: frozenset[str] | None = None  # designs whose storage runs it; None: any
    fabric: frozenset[str] | None = None


#: Which role kinds run which service (security.py port inventory), and in which design.
SERVICES = (
    Service(name="slurmctld", proto="tcp", port=SLURMCTLD, role_kinds=frozenset({"scheduler"})),
    Service(name="slurmd", proto="tcp", port=SLURMD, role_kinds=frozenset({"compute"})),
    Service(name="torchrun c10d rendezvous", proto="tcp", port=TORCH_C10D, role_kinds=frozenset({"compute"})),
    Service(name="torchrun static rendezvous", proto="tcp", port=TORCH_STATIC, role_kinds=frozenset({"compute"})),
    Service(
        name="NVMe/TCP target",
        proto="tcp",
        port=NVME_TCP,
        role_kinds=frozenset({"storage"}),
        storage=frozenset({"nvmeof-tcp"}),
    ),
    Service(
        name="NVMe/TCP discovery",
        proto="tcp",
        port=NVME_DISCOVERY,
        role_kinds=frozenset({"storage"}),
        storage=frozenset({"nvmeof-tcp"}),
    ),
    Service(name="NFS server", proto="tcp", port=NFS, role_kinds=frozenset({"storage"}), storage=frozenset({"nfs"})),
    Service(name="RoCEv2", proto="udp", port=ROCE_UDP, role_kinds=frozenset({"compute"}), fabric=frozenset({"roce"})),
    Service(
        name="NVMe/RDMA over RoCEv2",
        proto="udp",
        port=ROCE_UDP,
        role_kinds=frozenset({"storage"}),
        storage=frozenset({"nvmeof-rdma"}),
        fabric=frozenset({"roce"}),
    ),
)


def runs(service: Service, role_kind: str | None, storage: str | None, fabric: str | None) -> bool:
    if role_kind not in service.role_kinds:
        return False
    if service.storage is not None and storage not in service.storage:
        return False
    return service.fabric is None or fabric in service.fabric


@check(
    "BND-03",
    "Port open for a service the role does not run",
    Severity.medium,
    "remove the flow: a port open with nothing meant to listen is attack surface the next install fills",
)
def bnd03(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json: which role runs which service is unknown")
    by_port: dict[tuple[str, int], list[Service]] = {}
    for service in SERVICES:
        by_port.setdefault((service.proto, service.port), []).append(service)
    done: set[tuple[str | None, str, int]] = set()
    for view, rs in firewalled_views(facts):
        kind = facts.role_kind(view.role)
        for (proto, port), services in by_port.items():
            if (view.role, proto, port) in done or any(
                runs(s, kind, facts.storage, facts.fabric_kind) for s in services
            ):
                continue
            for plane, _kind, iface in planes_of(facts, view):
                if iface and admitted(rs, iface, proto, port):
                    done.add((view.role, proto, port))
                    names = " / ".join(s.name for s in services)
                    yield finding(
                        "BND-03",
                        f"{view.name}: {port}/{proto} on {plane}",
                        f"{names} is open, but role {view.role} ({kind}) does not run it in design "
                        f"{facts.fabric_kind}/{facts.storage}",
                    )
                    break
