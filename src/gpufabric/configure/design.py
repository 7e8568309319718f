"""Which design to configure: fabric and storage from a saved plan or from the spec."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.spec.models import Spec
from gpufabric.spec.plan_file import load_plan, recommended_candidate
from gpufabric.spec.security import SecurityPolicy, default_policy


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    """The chosen design: catalog ids and the fabric kind (the id prefix)."""

    fabric: str
    storage: str
    source: str
    rented: bool = False  # a rented offering: the provider owns switches and storage targets

    @property
    def fabric_kind(self) -> str:
        return self.fabric.split("-", 1)[0]

    @property
    def storage_transport(self) -> str | None:
        """NVMe-oF transport of the storage design: tcp, rdma, or None when not NVMe-oF (or rented:
        the provider serves the storage)."""
        if self.rented:
            return None
        if self.storage == "nvmeof-tcp":
            return "tcp"
        if self.storage == "nvmeof-rdma":
            return "rdma"
        return None


def design_from_plan(path: Path, known_ids: Mapping[str, Collection[str]] | None = None) -> Design:
    """Read the recommended candidate's fabric/storage from a ``gpufabric plan --format json`` file.

    Args:
        known_ids: the catalog ids to check against (``config --catalog``); None: the shipped catalog's.
    """
    candidate = recommended_candidate(load_plan(path), path, known_ids)
    fabric, storage, wanted = candidate.fabric, candidate.storage, candidate.id
    rented = candidate.capacity == "rent"
    _check_kind(fabric, f"{path}: candidate {wanted!r}", rented=rented)
    return Design(fabric=fabric, storage=storage, source=f"plan {path} (recommended {wanted})", rented=rented)


def design_from_candidate(*, fabric: str, storage: str, candidate_id: str, rented: bool = False) -> Design:
    """The design of a candidate the planner recommends (``gpufabric plan`` ranks them)."""
    _check_kind(fabric, f"planner candidate {candidate_id!r}", rented=rented)
    return Design(
        fabric=fabric,
        storage=storage,
        rented=rented,
        source=f"the planner's recommendation {candidate_id} (as `gpufabric plan` ranks it)",
    )


def design_from_option(text: str, catalog: Catalog) -> Design:
    """``--design fabric=ib-ndr,storage=nvmeof-tcp``: both ids checked against the catalog."""
    fields: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in ("fabric", "storage") or not value or key in fields:
            raise InputError(f"--design {text!r}: expected fabric=<id>,storage=<id> (each once)")
        fields[key] = value
    if set(fields) != {"fabric", "storage"}:
        raise InputError(f"--design {text!r}: give both fabric=<id> and storage=<id>")
    for key, known in (("fabric", catalog.fabrics), ("storage", catalog.storage)):
        if fields[key] not in known:
            raise InputError(f"--design: unknown {key} {fields[key]!r}; known: {', '.join(sorted(known))}")
    _check_kind(fields["fabric"], "--design fabric")
    return Design(fabric=fields["fabric"], storage=fields["storage"], source="--design")


def design_from_spec(spec: Spec) -> Design:
    """The first fabric and storage in spec.options (tests and fixtures; the CLI plans)."""
    fabric, storage = spec.options.fabrics[0], spec.options.storage[0]
    _check_kind(fabric, "spec options.fabrics[0]")
    return Design(fabric=fabric, storage=storage, source="spec options (first fabric and storage)")


def _check_kind(fabric: str, where: str, *, rented: bool = False) -> None:
    # Providers' fabrics (efa-*, tcpx-*) exist only rented: host-side artefacts only.
    kinds = ("ib", "roce", "tcp", "efa", "tcpx") if rented else ("ib", "roce", "tcp")
    if fabric.split("-", 1)[0] not in kinds:
        raise InputError(f"{where}: fabric {fabric!r} is not {', '.join(k + '-*' for k in kinds)}")


def effective_policy(spec: Spec, design: Design) -> SecurityPolicy:
    """The spec's policy, or the least-privilege default sized to the cluster."""
    if spec.security is not None:
        return spec.security
    return default_policy(
        compute_nodes=spec.cluster.nodes,
        gpus_per_node=spec.cluster.gpus_per_node,
        storage=design.storage,
        fabric_kind=design.fabric_kind,
    )
