"""Fabric artefacts: OpenSM partitions and keys (InfiniBand), host QoS script (RoCEv2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufabric.configure.keys import KeySource
from gpufabric.spec.security import SecurityPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    name: str
    pkey: int
    members: str
    indx0: bool
    comment: str


def compute_data_plane(policy: SecurityPolicy) -> str | None:
    planes = policy.planes_of_kind("compute-data")
    return planes[0].name if planes else None


def partitions(policy: SecurityPolicy) -> tuple[list[Partition], list[str]]:
    """One partition per plane with a PKey. Storage targets are full members of their
    plane and compute nodes limited ones (limited members reach only full members, so
    compute nodes cannot talk to each other over the storage partition). The
    compute-data PKey goes to table index 0 (``indx0``) so NCCL_IB_PKEY=0 selects it."""
    notes: list[str] = []
    open_parts: list[str] = []
    data_plane = compute_data_plane(policy)
    out = []
    for plane in policy.planes:
        if plane.pkey is None:
            continue
        roles = [r for r in policy.roles if plane.name in policy.role_planes(r.name)]
        has_storage = any(r.kind == "storage" for r in roles)
        members: list[str] = []
        comment = f"plane {plane.name} ({plane.kind}), roles: {', '.join(r.name for r in roles)}"
        if roles and all(r.port_guids for r in roles):
            for role in roles:
                kind = "limited" if has_storage and role.kind != "storage" else "full"
                members += [f"{g}={kind}" for g in role.port_guids]
        else:
            members = ["ALL_CAS=full"]
            open_parts.append(f"{plane.name} (0x{plane.pkey:04x})")
        out.append(Partition(name=plane.name, pkey=plane.pkey, members=", ".join(members),
                             indx0=plane.name == data_plane, comment=comment))
    if open_parts:
        notes.append(f"partitions {', '.join(open_parts)} admit every CA because their roles list no port_guids;"
                     " set roles[].port_guids to restrict membership")
    return out, notes


def opensm_conf(env: Any, *, keys: KeySource, version: str, spec_name: str) -> str:
    return env.get_template("opensm.conf.j2").render(
        version=version, spec_name=spec_name,
        m_key=keys.ib_key(f"m_key/{spec_name}"), sm_key=keys.ib_key(f"sm_key/{spec_name}"),
        sa_key=keys.ib_key(f"sa_key/{spec_name}"),
    )


def rdma_hcas(policy: SecurityPolicy, gpus_per_node: int) -> list[str]:
    """The compute-data plane's HCAs, or one mlx5 device per GPU when the policy lists none."""
    plane = compute_data_plane(policy)
    hcas = policy.plane(plane).hcas if plane else []
    return list(hcas) or [f"mlx5_{i}:1" for i in range(gpus_per_node)]


def pfc_vector(priority: int) -> str:
    """mlnx_qos --pfc vector with only ``priority`` lossless, e.g. 0,0,0,1,0,0,0,0."""
    return ",".join("1" if i == priority else "0" for i in range(8))


def roce_qos(env: Any, *, policy: SecurityPolicy, role: str, version: str, gpus_per_node: int) -> str:
    return env.get_template("roce-qos.sh.j2").render(
        role=role, version=version, prio=policy.roce_priority, dscp=policy.rdma_tos >> 2, tos=policy.rdma_tos,
        pfc=pfc_vector(policy.roce_priority), hcas=rdma_hcas(policy, gpus_per_node),
    )
