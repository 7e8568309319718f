"""Is this the hardware the plan was made for? SLOs derived from a plan only mean something there.

A plan for H100 nodes with 400G RDMA NICs, checked on a 2-core VM, passed its storage SLO
by +19,622 % (issue 16): the SLOs measured nothing about the plan. Before judging, bench
compares the node's fingerprint (``bench.fingerprint.collect``) with what the plan assumes:

* **GPU model and count per node**: the catalog id's family (``h100-sxm`` -> ``H100``)
  must appear in every ``nvidia-smi`` name, and there must be ``gpus_per_node`` of them
  (needs the spec: the plan JSON names fabric and storage, not the GPU);
* **NIC speed**: at least one interface that is up reports a link speed of at least the
  fabric's line rate (``/sys/class/net/*/speed``; virtual NICs report none);
* **RDMA**: InfiniBand and RoCE fabrics need an RDMA device (``/sys/class/infiniband``).

Node count is not compared here: ``bench`` judges one node at a time against per-node
expectations, so a plan for 128 nodes is validated node by node.

A mismatch does not hide the measurements: every SLO verdict becomes
``not_planned_hardware`` with the reasons and the measured figure, and the run fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufabric.errors import InputError
from gpufabric.results.records import Outcome, Verdict
from gpufabric.spec.plan_file import SavedPlan, recommended_candidate


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedHardware:
    """What one node of the recommended design has, as far as a fingerprint can tell."""

    fabric: str
    nic_gbit_s: float  # fabric line rate per NIC, Gbit/s
    rdma: bool
    gpu: str | None = None  # catalog id; None without the spec
    gpus_per_node: int | None = None


def planned_hardware(
    plan: SavedPlan | Mapping[str, Any], spec: Any = None, *, path: str = "plan", catalog: Any = None
) -> PlannedHardware:
    """The recommended candidate's node hardware (GPU only when ``spec`` is given)."""
    if catalog is None:
        from gpufabric.catalog import load_catalog

        catalog = load_catalog()
    candidate = recommended_candidate(plan, path)
    fab = catalog.fabrics.get(candidate.fabric)
    if fab is None:
        raise InputError(f"{path}: candidate {candidate.id!r} names an unknown fabric {candidate.fabric!r}")
    return PlannedHardware(
        fabric=candidate.fabric,
        nic_gbit_s=fab.nic_line_gbps * 8,
        rdma=fab.kind in ("ib", "roce"),
        gpu=spec.cluster.gpu if spec is not None else None,
        gpus_per_node=spec.cluster.gpus_per_node if spec is not None else None,
    )


def for_design(
    fabric: str, *, gpu: str | None = None, gpus_per_node: int | None = None, catalog: Any = None
) -> PlannedHardware:
    """The node hardware of a design named directly (a serving plan's recommendation, ``--fabric``)."""
    if catalog is None:
        from gpufabric.catalog import load_catalog

        catalog = load_catalog()
    fab = catalog.fabric(fabric)
    return PlannedHardware(
        fabric=fabric,
        nic_gbit_s=fab.nic_line_gbps * 8,
        rdma=fab.kind in ("ib", "roce"),
        gpu=gpu,
        gpus_per_node=gpus_per_node,
    )


def mismatches(planned: PlannedHardware, fingerprint: Mapping[str, Any]) -> tuple[str, ...]:
    """Why this node is not the planned hardware; empty when it matches."""
    out = []
    gpus = fingerprint.get("gpus")
    gpus = gpus if isinstance(gpus, list) else []
    if planned.gpu is not None:
        family = planned.gpu.split("-")[0].upper()
        names = sorted({str(g.get("name", "")) for g in gpus})
        if not gpus:
            out.append(f"no GPU found (planned {planned.gpus_per_node} x {planned.gpu} per node)")
        elif any(family not in n.upper() for n in names):
            out.append(f"GPU {', '.join(names)} is not the planned {planned.gpu}")
        elif planned.gpus_per_node is not None and len(gpus) != planned.gpus_per_node:
            out.append(f"{len(gpus)} GPUs, planned {planned.gpus_per_node} per node")
    elif not gpus:
        out.append("no GPU found (the plan is for GPU nodes)")
    raw_nics = fingerprint.get("nics")
    nics = raw_nics if isinstance(raw_nics, Mapping) else {}
    speeds = [
        n.get("speed_mbps")
        for name, n in nics.items()
        if name != "lo" and isinstance(n, Mapping) and n.get("operstate") == "up"
    ]
    known = [s for s in speeds if isinstance(s, int) and s > 0]
    if not known or max(known) < planned.nic_gbit_s * 1000:
        fastest = f"{max(known) / 1000:g} Gbit/s" if known else "no link speed reported"
        out.append(f"fastest NIC: {fastest}, planned {planned.nic_gbit_s:g} Gbit/s ({planned.fabric})")
    rdma = fingerprint.get("rdma")
    if planned.rdma and not (isinstance(rdma, list) and rdma):
        out.append(f"no RDMA device, planned {planned.fabric}")
    return tuple(out)


def mark_not_planned(verdicts: list[Verdict] | tuple[Verdict, ...], reasons: tuple[str, ...]) -> list[Verdict]:
    """Every verdict re-labelled ``not_planned_hardware``: the SLO was derived for other hardware."""
    from dataclasses import replace

    if not reasons:
        return list(verdicts)
    why = "not the planned hardware: " + "; ".join(reasons)
    return [
        replace(
            v,
            outcome=Outcome.not_planned,
            reason=f"{why} (would have {v.outcome.value}: {v.reason})" if v.reason else why,
        )
        for v in verdicts
    ]
