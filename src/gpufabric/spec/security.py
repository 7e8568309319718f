"""Security policy section of the spec: planes, node roles and allowed flows (intent).

A policy names the networks (planes) every node may sit on, the node roles, and the
flows that are allowed, as intent: "compute may reach storage on the storage plane on
tcp/4420 for NVMe/TCP". Everything not listed is denied. ``gpufabric config`` renders
firewalls and service configs from it and ``gpufabric audit`` proves them against it.

When the spec has no ``security:`` section, :func:`default_policy` gives a
least-privilege layout for a training cluster. Ports come from
reference/security-config.md section 6.3 (port inventory, each with its source).
"""

# No `from __future__ import annotations` in a module of pydantic models: pydantic would
# compile and evaluate each field's annotation string when it defines the class, ~10% of
# defining them at every start (issue 32). A method returning its own class quotes the name.

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpufabric.spec.types import HOSTNAME, Cidr, Comment, FieldsError, Hca, HostName, IfName, Name, StrictModel

PlaneKind = Literal["management", "control", "compute-data", "storage"]
RoleKind = Literal["compute", "storage", "login", "scheduler"]

#: NCCL reads at most this many NCCL_IB_HCA entries and drops the rest without a word:
#: ``#define MAX_IB_DEVS 32`` (https://github.com/NVIDIA/nccl, src/transport/net_ib.cc,
#: later net_ib/common.h; the user list is parsed into an array of that size); as_of 2026-12.
NCCL_MAX_IB_DEVS = 32
#: Upper bounds on list lengths: far above a real cluster, low enough to bound the work.
MAX_PLANES = 64
MAX_ROLES = 256
MAX_HOSTS = 1 << 20
MAX_FLOWS = 4096


class _Model(StrictModel):
    __gf_docstrings__ = True


class Plane(_Model):
    """One network: its addresses, the interface every node uses for it, and its L2 isolation."""

    name: Name
    """Plane name used by roles and flows (lowercase, for example mgmt, ctl, data, stor)."""
    kind: PlaneKind
    """What the plane carries: management (SSH, Slurm), control (rendezvous, NCCL bootstrap), compute-data (RDMA collectives) or storage (NVMe-oF)."""
    cidr: Cidr
    """IPv4 network of the plane, for example 10.10.0.0/16; hosts get consecutive addresses in it."""
    interface: IfName | None = None
    """Interface name every node uses on this plane (for example ctl0); required."""
    vlan: int | None = Field(None, ge=1, le=4094)
    """802.1Q VLAN id isolating the plane on Ethernet (RoCE designs)."""
    pkey: int | None = Field(None, ge=0x0001, le=0x7FFE)
    """InfiniBand partition key (0x0001-0x7ffe; 0x7fff is the open default partition) for IB designs."""
    hcas: list[Hca] = Field([], max_length=256)
    """Exact RDMA device:port list on this plane, for example [mlx5_0:1, mlx5_1:1]; empty: one per GPU. A compute-data plane's list becomes NCCL_IB_HCA: at most 32 entries."""

    @model_validator(mode="after")
    def _nccl_hca_limit(self) -> "Plane":
        if self.kind == "compute-data" and len(self.hcas) > NCCL_MAX_IB_DEVS:
            raise FieldsError(
                f"plane {self.name!r} lists {len(self.hcas)} HCAs; NCCL_IB_HCA takes at most {NCCL_MAX_IB_DEVS}"
                " (NCCL's MAX_IB_DEVS: it silently ignores the rest); list at most 32 device:port entries",
                fields=(f"hcas[{NCCL_MAX_IB_DEVS}]",),
            )
        return self

    @field_validator("pkey", mode="before")
    @classmethod
    def _pkey_hex(cls, value: object) -> object:
        # PKeys are conventionally written in hex; YAML reads 0x8001 as an int already,
        # but a quoted "0x8001" arrives as a string.
        if isinstance(value, str) and re.fullmatch(r"0[xX][0-9a-fA-F]{1,4}", value):
            return int(value, 16)
        return value

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.cidr)


class Role(_Model):
    """A kind of node and its hosts."""

    name: Name
    """Role name used by flows (for example compute, storage, login, scheduler)."""
    kind: RoleKind
    """compute (GPU node), storage (NVMe-oF target), login (bastion) or scheduler (slurmctld)."""
    hosts: list[HostName] | None = Field(None, max_length=MAX_HOSTS)
    """Host names of this role, in address order; give hosts or count."""
    count: int | None = Field(None, gt=0, le=MAX_HOSTS)
    """Number of hosts when hosts are not listed; they are named <role>-<n> from 1."""
    planes: list[Name] | None = Field(None, max_length=MAX_PLANES)
    """Planes the role's nodes are attached to; default: management plus every plane a flow uses."""
    port_guids: list[str] = Field([], max_length=MAX_HOSTS)
    """InfiniBand port GUIDs of this role's HCAs (0x + 16 hex digits) for partitions.conf membership."""

    @model_validator(mode="after")
    def _hosts_or_count(self) -> "Role":
        if self.hosts is None and self.count is None:
            raise FieldsError(f"role {self.name!r} needs hosts (a list of names) or count", fields=("hosts", "count"))
        if self.hosts is not None and self.count is not None and len(self.hosts) != self.count:
            raise FieldsError(
                f"role {self.name!r}: count {self.count} but {len(self.hosts)} hosts listed", fields=("count", "hosts")
            )
        if self.hosts is not None and len(set(self.hosts)) != len(self.hosts):
            raise FieldsError(f"role {self.name!r} lists a host twice", fields=("hosts",))
        for n, guid in enumerate(self.port_guids):
            if not re.fullmatch(r"0x[0-9a-fA-F]{16}", guid):
                raise FieldsError(
                    f"role {self.name!r}: port GUID {guid[:40]!r} is not 0x followed by 16 hex digits",
                    fields=(f"port_guids[{n}]",),
                )
        if self.hosts is None and not re.fullmatch(HOSTNAME, f"{self.name}-1"):
            raise FieldsError(
                f"role {self.name!r} with count names its hosts {self.name}-<n>, which is not a host name"
                " (no '_'); rename the role or list hosts",
                fields=("name", "count"),
            )
        return self

    @property
    def host_names(self) -> list[str]:
        if self.hosts is not None:
            return list(self.hosts)
        return [f"{self.name}-{i}" for i in range(1, (self.count or 0) + 1)]


class Flow(_Model):
    """One allowed flow (intent): connections from src role to dst role on a plane."""

    src: Name
    """Source role name."""
    dst: Name
    """Destination role name."""
    plane: Name
    """Plane the flow crosses (the destination's interface on it)."""
    proto: Literal["tcp", "udp"]
    """Transport protocol."""
    ports: list[int | str] = Field(min_length=1, max_length=1024)
    """Destination ports: numbers or inclusive ranges written "a-b" (1-65535)."""
    purpose: Comment = ""
    """Why the flow exists; it becomes the firewall rule's comment."""

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: list[int | str]) -> list[int | str]:
        out: list[int | str] = []
        for item in value:
            low, high = parse_port(item)
            if not 1 <= low <= high <= 65535:
                raise ValueError(f"port {str(item)[:40]!r} is out of range 1-65535 (ranges are low-high)")
            # Normalised: the text that reaches a renderer is digits and one '-', whatever was written.
            out.append(low if isinstance(item, int) else f"{low}-{high}" if high != low else str(low))
        return out

    def port_ranges(self) -> list[tuple[int, int]]:
        """Inclusive (low, high) ranges of the flow's ports."""
        return [parse_port(item) for item in self.ports]


def parse_port(item: int | str) -> tuple[int, int]:
    """``22`` -> (22, 22); ``"60001-63000"`` -> (60001, 63000)."""
    if isinstance(item, int):
        return item, item
    match = re.fullmatch(r" *(\d{1,5}) *(?:- *(\d{1,5}) *)?", str(item))
    if not match:
        raise ValueError(f"port {str(item)[:40]!r} is not a number or a range low-high")
    low = int(match.group(1))
    return low, int(match.group(2) or low)


@dataclass(slots=True, kw_only=True)
class _Memo:
    """A policy's cached derived views; ``owner`` is the id of the policy that filled it."""

    owner: int
    role_planes: dict[str, list[str]] = field(default_factory=dict)
    addresses: dict[tuple[str, str], str] | None = None
    role_of: dict[str, str] | None = None


class SecurityPolicy(_Model):
    """Planes, node roles and allowed flows (intent); everything else is denied."""

    planes: list[Plane] = Field(min_length=1, max_length=MAX_PLANES)
    """Networks: management, control, compute-data, storage."""
    roles: list[Role] = Field(min_length=1, max_length=MAX_ROLES)
    """Node roles and their hosts."""
    flows: list[Flow] = Field([], max_length=MAX_FLOWS)
    """Allowed flows; anything not listed is dropped."""
    rdma_tos: int = Field(106, ge=0, le=255)
    """IP TOS byte of RoCE traffic: DSCP << 2 | ECN; 106 = DSCP 26 << 2 | ECT(0) (reference section 3.9). The low two bits must not be 11 (Congestion Experienced)."""
    roce_priority: int = Field(3, ge=0, le=7)
    """802.1p priority that is lossless (PFC) for RoCE; 3 by the Cumulus/NVIDIA convention (reference 3.5)."""

    @field_validator("rdma_tos")
    @classmethod
    def _not_ce(cls, value: int) -> int:
        # RFC 3168 section 5: ECN field 11 is CE. A sender marking CE tells every receiver
        # that the fabric is congested on every packet, so DCQCN throttles the flow to its
        # minimum rate. ECT(0) is 10: DSCP << 2 | 2.
        if value & 0b11 == 0b11:
            raise ValueError(
                f"rdma_tos {value} sets the ECN bits to 11 (Congestion Experienced) on every RoCE packet;"
                f" ECT(0) needs the low two bits 10: DSCP << 2 | 2, here {value - 1} (DSCP {value >> 2});"
                " the default 106 is DSCP 26 with ECT(0)"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "SecurityPolicy":
        planes = {p.name: i for i, p in reversed(list(enumerate(self.planes)))}
        if len(planes) != len(self.planes):
            dup = next(i for i, p in enumerate(self.planes) if planes[p.name] != i)
            raise FieldsError(f"two planes share the name {self.planes[dup].name!r}", fields=(f"planes[{dup}].name",))
        roles = {r.name: i for i, r in reversed(list(enumerate(self.roles)))}
        if len(roles) != len(self.roles):
            dup = next(i for i, r in enumerate(self.roles) if roles[r.name] != i)
            raise FieldsError(f"two roles share the name {self.roles[dup].name!r}", fields=(f"roles[{dup}].name",))
        seen_if: dict[str, int] = {}
        for i, plane in enumerate(self.planes):
            if not plane.interface:
                raise FieldsError(
                    f"plane {plane.name!r} has no interface; set planes[].interface (for example {plane.name}0)",
                    fields=(f"planes[{i}].interface",),
                )
            if plane.interface in seen_if:
                first = seen_if[plane.interface]
                raise FieldsError(
                    f"planes {self.planes[first].name!r} and {plane.name!r} share interface {plane.interface!r}",
                    fields=(f"planes[{i}].interface", f"planes[{first}].interface"),
                )
            seen_if[plane.interface] = i
        for i, a in enumerate(self.planes):
            for j, b in enumerate(self.planes[i + 1 :], start=i + 1):
                if a.network.overlaps(b.network):
                    raise FieldsError(
                        f"planes {a.name!r} ({a.cidr}) and {b.name!r} ({b.cidr}) have overlapping CIDRs",
                        fields=(f"planes[{j}].cidr", f"planes[{i}].cidr"),
                    )
        seen_pkey: dict[int, int] = {}
        for i, plane in enumerate(self.planes):
            if plane.pkey is None:
                continue
            if plane.pkey in seen_pkey:
                raise FieldsError(
                    "two planes share a PKey; give each plane its own partition",
                    fields=(f"planes[{i}].pkey", f"planes[{seen_pkey[plane.pkey]}].pkey"),
                )
            seen_pkey[plane.pkey] = i
        hosts: set[str] = set()
        for i, role in enumerate(self.roles):
            for k, plane_name in enumerate(role.planes or []):
                if plane_name not in planes:
                    raise FieldsError(
                        f"role {role.name!r} names unknown plane {plane_name!r}; known: {', '.join(planes)}",
                        fields=(f"roles[{i}].planes[{k}]",),
                    )
            for host in role.host_names:
                if host in hosts:
                    raise FieldsError(f"host {host!r} appears in two roles", fields=(f"roles[{i}].hosts",))
                hosts.add(host)
        for n, flow in enumerate(self.flows):
            for key, end in (("src", flow.src), ("dst", flow.dst)):
                if end not in roles:
                    raise FieldsError(
                        f"flows[{n}] names unknown role {end!r}; known: {', '.join(roles)}",
                        fields=(f"flows[{n}].{key}",),
                    )
            if flow.plane not in planes:
                raise FieldsError(
                    f"flows[{n}] names unknown plane {flow.plane!r}; known: {', '.join(planes)}",
                    fields=(f"flows[{n}].plane",),
                )
            for end in (flow.src, flow.dst):
                explicit = self.roles[roles[end]].planes
                if explicit is not None and flow.plane not in explicit:
                    raise FieldsError(
                        f"flows[{n}]: role {end!r} is not attached to plane {flow.plane!r}",
                        fields=(f"flows[{n}].plane", f"roles[{roles[end]}].planes"),
                    )
        for i, plane in enumerate(self.planes):
            # network and broadcast addresses are unusable; the first host gets .1 + offset.
            attached = sum(len(r.host_names) for r in self.roles if plane.name in self.role_planes(r.name))
            if attached > plane.network.num_addresses - 2 - HOST_OFFSET:
                raise FieldsError(
                    f"plane {plane.name!r} ({plane.cidr}) is too small for {attached} hosts",
                    fields=(f"planes[{i}].cidr",),
                )
        return self

    # ---- derived views (used by configure and audit) -------------------------------
    def plane(self, name: str) -> Plane:
        return next(p for p in self.planes if p.name == name)

    def role(self, name: str) -> Role:
        return next(r for r in self.roles if r.name == name)

    def planes_of_kind(self, kind: str) -> list[Plane]:
        return [p for p in self.planes if p.kind == kind]

    def role_planes(self, role: str) -> list[str]:
        """Planes a role is attached to, in plane order."""
        memo = self._memo()
        if role not in memo.role_planes:
            memo.role_planes[role] = self._compute_role_planes(role)
        return list(memo.role_planes[role])

    def _compute_role_planes(self, role: str) -> list[str]:
        found = self.role(role)
        if found.planes is not None:
            wanted = set(found.planes)
        else:
            wanted = {p.name for p in self.planes if p.kind == "management"}
            wanted |= {f.plane for f in self.flows if role in (f.src, f.dst)}
            if found.kind == "compute":
                # collectives cross the compute-data plane even when no host-firewall flow
                # names it (RDMA bypasses netfilter): a compute node belongs there by kind,
                # or its partition would have no member and admit every adapter (issue 24)
                wanted |= {p.name for p in self.planes if p.kind == "compute-data"}
        return [p.name for p in self.planes if p.name in wanted]

    def storage_plane(self, role: str | None = None) -> str:
        """The plane NVMe-oF runs on for ``role`` (its first storage-kind plane), or the
        policy's first storage plane (the first plane when there is none)."""
        attached = self.role_planes(role) if role is not None else [p.name for p in self.planes]
        for plane in self.planes:
            if plane.kind == "storage" and plane.name in attached:
                return plane.name
        stor = self.planes_of_kind("storage")
        return stor[0].name if stor else self.planes[0].name

    def storage_flows(self, plane: str) -> list[Flow]:
        """The flows on ``plane`` whose destination is a storage role (they pair initiators with targets)."""
        return [f for f in self.flows if f.plane == plane and self.role(f.dst).kind == "storage"]

    def nvme_initiators(self, target_role: str) -> list[str]:
        """Roles whose hosts the NVMe-oF subsystems of ``target_role`` admit, in role order.

        Authorisation follows the flows, not the role kinds: the sources of the flows to
        the target on its storage plane. On RDMA the host firewall cannot stop an
        initiator that holds valid keys, so the key list is the isolation. Only when no
        flow on that plane names any storage role (NVMe/RDMA over InfiniBand needs no
        firewall flow) are the compute roles attached to the plane the initiators."""
        plane = self.storage_plane(target_role)
        to_storage = self.storage_flows(plane)
        if to_storage:
            wanted = {f.src for f in to_storage if f.dst == target_role and f.src != target_role}
        else:
            wanted = {r.name for r in self.roles if r.kind == "compute" and plane in self.role_planes(r.name)}
        return [r.name for r in self.roles if r.name in wanted]

    def _memo(self) -> _Memo:
        """Per-instance cache of derived views (the model is frozen; renderers ask per host).
        The owner check makes a ``model_copy`` (which copies ``__dict__``) start afresh."""
        memo = self.__dict__.get("_gf_memo")
        if not isinstance(memo, _Memo) or memo.owner != id(self):
            memo = _Memo(owner=id(self))
            self.__dict__["_gf_memo"] = memo
        return memo

    def addresses(self) -> dict[tuple[str, str], str]:
        """(host, plane) -> IPv4 address; hosts numbered in role order from .HOST_OFFSET+1."""
        memo = self._memo()
        if memo.addresses is None:
            memo.addresses = self._compute_addresses()
        return memo.addresses

    def _compute_addresses(self) -> dict[tuple[str, str], str]:
        out: dict[tuple[str, str], str] = {}
        for plane in self.planes:
            base = int(plane.network.network_address) + HOST_OFFSET
            index = 0
            for role in self.roles:
                if plane.name not in self.role_planes(role.name):
                    continue
                for host in role.host_names:
                    index += 1
                    out[(host, plane.name)] = str(ipaddress.IPv4Address(base + index))
        return out

    def role_of(self, host: str) -> str | None:
        """The role of ``host``; None when no role lists it."""
        memo = self._memo()
        if memo.role_of is None:
            memo.role_of = dict(self.hosts())
        return memo.role_of.get(host)

    def hosts(self) -> list[tuple[str, str]]:
        """(host, role) pairs in order."""
        return [(h, r.name) for r in self.roles for h in r.host_names]


#: Addresses .1-.HOST_OFFSET of every plane stay free for gateways and switches.
HOST_OFFSET = 9

#: Port inventory (reference/security-config.md 6.3): sshd, slurmctld, slurmd, srun
#: (SrunPortRange as in SchedMD's network guide), torchrun static and c10d rendezvous,
#: the Linux default ephemeral range used by NCCL bootstrap and socket transport
#: (net.ipv4.ip_local_port_range 32768-60999), NVMe/TCP I/O and discovery, RoCEv2.
SSH = 22
SLURMCTLD = 6817
SLURMD = 6818
SRUN_RANGE = "61000-63000"  # above the ephemeral range: srun never collides with it
TORCH_STATIC = 29500  # torchrun's default --master-port
#: The static rendezvous ports gpufabric's launchers pick, one per job: 29500 + job id mod
#: 500 (gpufabric.exec.launch.RENDEZVOUS_PORT_BASE/SPAN), below the ephemeral range.
TORCH_STATIC_RANGE = (TORCH_STATIC, TORCH_STATIC + 499)
#: The c10d endpoint of the bundle's torchrun wrapper (configure.launch, gpufabric-torchrun).
TORCH_C10D = 29400
#: Every TCP port a torch rendezvous or TCPStore of a gpufabric job listens on.
TORCH_RENDEZVOUS = ((TORCH_C10D, TORCH_C10D), TORCH_STATIC_RANGE)
EPHEMERAL_RANGE = "32768-60999"
NVME_TCP = 4420
NVME_DISCOVERY = 8009
ROCE_UDP = 4791
NFS = 2049
NCCL_RAS = 28028


def default_policy(
    *, compute_nodes: int, gpus_per_node: int = 8, storage: str = "nvmeof-tcp", fabric_kind: str = "roce"
) -> SecurityPolicy:
    """Least-privilege default for a training cluster.

    SSH only on management from the bastion; Slurm on management; rendezvous and NCCL
    bootstrap only on the control plane between compute nodes; NVMe/TCP 4420 and
    discovery 8009 only compute -> storage on the storage plane; NCCL RAS stays on
    loopback (not a flow: loopback is always accepted).
    """
    # one NIC per GPU, as far as NCCL can take them; beyond that configure refuses the
    # design with a located error (configure.fabric.rdma_hcas) rather than cut the list
    hcas = [f"mlx5_{i}:1" for i in range(gpus_per_node)] if gpus_per_node <= NCCL_MAX_IB_DEVS else []
    planes = [
        Plane(name="mgmt", kind="management", cidr="10.10.0.0/16", interface="mgmt0", vlan=10, pkey=0x0010),
        Plane(name="ctl", kind="control", cidr="10.20.0.0/16", interface="ctl0", vlan=20, pkey=0x0020),
        Plane(
            name="data", kind="compute-data", cidr="10.30.0.0/16", interface="data0", vlan=30, pkey=0x0030, hcas=hcas
        ),
        Plane(name="stor", kind="storage", cidr="10.40.0.0/16", interface="stor0", vlan=40, pkey=0x0040),
    ]
    # Two targets so a checkpoint survives one target failing; a placeholder to override.
    roles = [
        # compute sits on the data plane even without a host-firewall flow there (IB
        # collectives bypass the host firewall but still need the PKey)
        Role(name="compute", kind="compute", count=compute_nodes, planes=["mgmt", "ctl", "data", "stor"]),
        Role(name="storage", kind="storage", count=2, planes=["mgmt", "stor"]),
        Role(name="login", kind="login", count=1),
        Role(name="scheduler", kind="scheduler", count=1),
    ]
    flows = [
        Flow(src="login", dst="compute", plane="mgmt", proto="tcp", ports=[SSH], purpose="ssh from the bastion"),
        Flow(src="login", dst="storage", plane="mgmt", proto="tcp", ports=[SSH], purpose="ssh from the bastion"),
        Flow(src="login", dst="scheduler", plane="mgmt", proto="tcp", ports=[SSH], purpose="ssh from the bastion"),
        Flow(
            src="login",
            dst="scheduler",
            plane="mgmt",
            proto="tcp",
            ports=[SLURMCTLD],
            purpose="slurmctld (sbatch, squeue)",
        ),
        Flow(
            src="compute", dst="scheduler", plane="mgmt", proto="tcp", ports=[SLURMCTLD], purpose="slurmd -> slurmctld"
        ),
        Flow(src="scheduler", dst="compute", plane="mgmt", proto="tcp", ports=[SLURMD], purpose="slurmctld -> slurmd"),
        Flow(src="login", dst="compute", plane="mgmt", proto="tcp", ports=[SLURMD], purpose="srun -> slurmd"),
        Flow(
            src="compute",
            dst="login",
            plane="mgmt",
            proto="tcp",
            ports=[SRUN_RANGE],
            purpose="slurmd -> srun (SrunPortRange)",
        ),
        # srun inside a batch script runs on the first compute node: slurmd fans out to
        # the other compute nodes, and their slurmd/tasks call back to srun there
        Flow(src="compute", dst="compute", plane="mgmt", proto="tcp", ports=[SLURMD], purpose="slurmd fan-out"),
        Flow(
            src="compute",
            dst="compute",
            plane="mgmt",
            proto="tcp",
            ports=[SRUN_RANGE],
            purpose="srun callbacks (SrunPortRange)",
        ),
        Flow(
            src="compute",
            dst="compute",
            plane="ctl",
            proto="tcp",
            ports=[TORCH_C10D, f"{TORCH_STATIC_RANGE[0]}-{TORCH_STATIC_RANGE[1]}"],
            purpose="torchrun c10d/static rendezvous",
        ),
        Flow(
            src="compute",
            dst="compute",
            plane="ctl",
            proto="tcp",
            ports=[EPHEMERAL_RANGE],
            purpose="NCCL/gloo bootstrap (ephemeral ports)",
        ),
    ]
    if fabric_kind == "roce":
        flows.append(
            Flow(
                src="compute",
                dst="compute",
                plane="data",
                proto="udp",
                ports=[ROCE_UDP],
                purpose="RoCEv2 (NIC-offloaded)",
            )
        )
    if storage == "nfs":
        flows.append(Flow(src="compute", dst="storage", plane="stor", proto="tcp", ports=[NFS], purpose="NFSv4"))
    elif storage == "nvmeof-tcp":
        # discovery is served on the I/O port (4420): no separate 8009 listener
        flows.append(
            Flow(
                src="compute",
                dst="storage",
                plane="stor",
                proto="tcp",
                ports=[NVME_TCP],
                purpose="NVMe/TCP I/O and discovery",
            )
        )
    elif storage == "nvmeof-rdma" and fabric_kind == "roce":
        flows.append(
            Flow(
                src="compute",
                dst="storage",
                plane="stor",
                proto="udp",
                ports=[ROCE_UDP],
                purpose="NVMe/RDMA over RoCEv2",
            )
        )
    return SecurityPolicy(planes=planes, roles=roles, flows=flows)
