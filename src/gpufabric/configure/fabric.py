"""Fabric artefacts: OpenSM partitions and keys (InfiniBand), host QoS script (RoCEv2)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpufabric.configure.keys import KeySource
from gpufabric.configure.quoting import ifname, refuse
from gpufabric.errors import InputError
from gpufabric.spec.security import NCCL_MAX_IB_DEVS, SecurityPolicy

#: One RDMA device:port as NCCL_IB_HCA and the QoS script take it (rdma-core device names).
_HCA = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}:[0-9]{1,3}")
#: What ALL_CAS=full admits: every channel adapter on the subnet (opensm partition-config.txt).
OPEN_MEMBERS = "ALL_CAS"


@dataclass(frozen=True, slots=True, kw_only=True)
class Member:
    guid: str
    membership: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    name: str
    pkey: int
    members: tuple[Member, ...]
    indx0: bool
    comment: str


def compute_data_plane(policy: SecurityPolicy) -> str | None:
    planes = policy.planes_of_kind("compute-data")
    return planes[0].name if planes else None


def full_roles(policy: SecurityPolicy, plane: str) -> set[str]:
    """Roles that must be full members of ``plane``'s partition.

    Limited members reach only full members (IBTA 10.9.1), so every flow on the plane
    needs a full member at one end. On a storage plane the targets are full and
    initiators limited (initiators cannot reach each other there); on every other plane
    all roles are full unless no flow needs them to be."""
    attached = [r for r in policy.roles if plane in policy.role_planes(r.name)]
    if policy.plane(plane).kind != "storage":
        return {r.name for r in attached}
    full = {r.name for r in attached if r.kind == "storage"}
    for flow in policy.flows:
        if flow.plane == plane and flow.src not in full and flow.dst not in full:
            full |= {flow.src, flow.dst}
    return full


def partitions(policy: SecurityPolicy) -> tuple[list[Partition], list[str]]:
    """One partition per plane with a PKey, membership per role (see :func:`full_roles`).
    The compute-data PKey goes to table index 0 (``indx0``) so NCCL_IB_PKEY=0 selects it.
    A plane whose roles list no port GUIDs admits every adapter (ALL_CAS=full), with a
    note; ``audit`` reports it as BND-01."""
    notes: list[str] = []
    open_parts: list[str] = []
    data_plane = compute_data_plane(policy)
    out = []
    for plane in policy.planes:
        if plane.pkey is None:
            continue
        roles = [r for r in policy.roles if plane.name in policy.role_planes(r.name)]
        full = full_roles(policy, plane.name)
        members: list[Member] = []
        comment = f"plane {plane.name} ({plane.kind}), roles: {', '.join(r.name for r in roles)}"
        if roles and all(r.port_guids for r in roles):
            for role in roles:
                kind = "full" if role.name in full else "limited"
                members += [Member(guid=g, membership=kind) for g in role.port_guids]
        else:
            members = [Member(guid=OPEN_MEMBERS, membership="full")]
            open_parts.append(f"{plane.name} (0x{plane.pkey:04x})")
        out.append(
            Partition(
                name=plane.name,
                pkey=plane.pkey,
                members=tuple(members),
                indx0=plane.name == data_plane,
                comment=comment,
            )
        )
    if open_parts:
        notes.append(
            f"partitions {', '.join(open_parts)} admit every CA because their roles list no port_guids;"
            " set roles[].port_guids to restrict membership"
        )
    return out, notes


def opensm_conf(env: Any, *, keys: KeySource, version: str, spec_name: str) -> str:
    return env.get_template("opensm.conf.j2").render(
        version=version,
        spec_name=spec_name,
        m_key=keys.ib_key(f"m_key/{spec_name}"),
        sm_key=keys.ib_key(f"sm_key/{spec_name}"),
        sa_key=keys.ib_key(f"sa_key/{spec_name}"),
    )


def rdma_hcas(policy: SecurityPolicy, gpus_per_node: int) -> list[str]:
    """The compute-data plane's HCAs, or one mlx5 device per GPU when the policy lists none."""
    plane = compute_data_plane(policy)
    hcas = list(policy.plane(plane).hcas) if plane else []
    if not hcas and gpus_per_node > NCCL_MAX_IB_DEVS:
        raise InputError(
            f"cluster.gpus_per_node {gpus_per_node} would give NCCL_IB_HCA one HCA per GPU, but NCCL takes at most"
            f" {NCCL_MAX_IB_DEVS} (MAX_IB_DEVS; it ignores the rest silently); list the NICs in"
            f" security.planes[{plane or 'compute-data'}].hcas (at most {NCCL_MAX_IB_DEVS})"
        )
    return checked_hcas(hcas or [f"mlx5_{i}:1" for i in range(gpus_per_node)], plane or "compute-data")


def checked_hcas(hcas: list[str], plane: str) -> list[str]:
    for hca in hcas:
        if not _HCA.fullmatch(hca):
            raise refuse(
                hca, "NCCL_IB_HCA and the RoCE QoS script", _HCA.pattern + " (device:port)", f"plane {plane} HCA"
            )
    return hcas


def pfc_vector(priority: int) -> str:
    """mlnx_qos --pfc vector with only ``priority`` lossless, e.g. 0,0,0,1,0,0,0,0."""
    return ",".join("1" if i == priority else "0" for i in range(8))


def roce_qos(env: Any, *, policy: SecurityPolicy, role: str, version: str, gpus_per_node: int) -> str:
    """QoS script: compute roles configure their GPU HCAs, storage targets the NIC of the
    storage plane (found from its netdev at run time), never the GPU HCAs."""
    kind = policy.role(role).kind
    if kind == "storage":
        hcas: list[str] = []
        stor = [p for p in policy.planes_of_kind("storage") if p.name in policy.role_planes(role)]
        netdevs = [ifname(p.interface or "", what=f"plane {p.name} interface") for p in stor]
        listed = [h for p in stor for h in p.hcas]
        if listed:
            hcas, netdevs = checked_hcas(listed, stor[0].name), []
    else:
        hcas, netdevs = rdma_hcas(policy, gpus_per_node), []
    return env.get_template("roce-qos.sh.j2").render(
        role=role,
        version=version,
        prio=policy.roce_priority,
        dscp=policy.rdma_tos >> 2,
        tos=policy.rdma_tos,
        pfc=pfc_vector(policy.roce_priority),
        hcas=hcas,
        netdevs=netdevs,
    )
