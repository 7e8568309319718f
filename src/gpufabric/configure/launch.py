"""Job-side artefacts: NCCL env file, torchrun and sbatch wrappers, tuned profile, sysctl."""

from __future__ import annotations

import re
from typing import Any

from gpufabric.configure.design import Design
from gpufabric.configure.fabric import rdma_hcas
from gpufabric.spec.models import Spec
from gpufabric.spec.security import (
    EPHEMERAL_RANGE,
    NCCL_RAS,
    SRUN_RANGE,
    TORCH_C10D,
    Plane,
    SecurityPolicy,
    parse_port,
)

#: Channels pinned for bitwise runs: any fixed value works; 16 is NCCL's usual maximum
#: on 8-GPU H100 nodes (assumption, documented in docs/config.md).
BITWISE_CHANNELS = 16


def control_plane(policy: SecurityPolicy) -> Plane:
    return policy.planes_of_kind("control")[0]


def nccl_env(env: Any, *, spec: Spec, policy: SecurityPolicy, design: Design, role: str, version: str) -> str:
    data = policy.planes_of_kind("compute-data")
    pkey = data[0].pkey if data and data[0].pkey is not None else 0x7FFF
    return env.get_template("nccl.env.j2").render(
        role=role,
        version=version,
        kind=design.fabric_kind,
        ctl_if=control_plane(policy).interface,
        hcas=rdma_hcas(policy, spec.cluster.gpus_per_node),
        tos=policy.rdma_tos,
        dscp=policy.rdma_tos >> 2,
        pkey=pkey,
        pkey_index=0,
        ras_port=NCCL_RAS,
        bitwise=spec.requirements.reproducibility == "bitwise",
        channels=BITWISE_CHANNELS,
    )


def torchrun(env: Any, *, policy: SecurityPolicy, role: str, version: str) -> str:
    ctl = control_plane(policy)
    return env.get_template("torchrun.sh.j2").render(
        role=role,
        version=version,
        ctl_if=ctl.interface,
        ctl_cidr=ctl.cidr,
        rdzv_port=TORCH_C10D,
    )


def sbatch(env: Any, *, spec: Spec, policy: SecurityPolicy, version: str) -> str:
    ctl = control_plane(policy)
    return env.get_template("train.sbatch.j2").render(
        version=version,
        spec_name=spec.name,
        job_name=job_name(spec.name),
        nodes=spec.cluster.nodes,
        gpus_per_node=spec.cluster.gpus_per_node,
        ctl_if=ctl.interface,
        srun_range=SRUN_RANGE,
    )


def job_name(spec_name: str) -> str:
    """A Slurm job name from the spec name: #SBATCH lines have no quoting, so only a slug."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", spec_name).strip("-.")[:40] or "gpufabric"


def tuned(env: Any, *, role: str, version: str) -> str:
    return env.get_template("tuned.conf.j2").render(role=role, version=version)


def sysctl(env: Any, *, policy: SecurityPolicy, role: str, version: str) -> str:
    low, high = parse_port(EPHEMERAL_RANGE)
    srun_low, srun_high = parse_port(SRUN_RANGE)
    interfaces = [policy.plane(p).interface for p in policy.role_planes(role) if policy.plane(p).interface]
    return env.get_template("sysctl.conf.j2").render(
        role=role,
        version=version,
        ephemeral_low=low,
        ephemeral_high=high,
        srun_low=srun_low,
        srun_high=srun_high,
        interfaces=interfaces,
    )
