"""Reference storage tiers of published architectures, priced beside the plan's choice.

The planner buys storage for this job's minimum (model.storage: capacity, checkpoint
write, data loading, restore, other consumers). A reviewer compares that with what
published AI clusters provision; each reference tier below is a bandwidth per GPU taken
from its source, scaled to this cluster and priced in building blocks of the storage the
plan chose (or, when it chose local NVMe, the first shared backend of options.storage).

Sources (as_of in each entry):
- NVIDIA DGX SuperPOD reference architecture (DGX H100), storage architecture section:
  "a GDS-enabled application should be able to read data at over 40 GBps" per DGX over
  the storage fabric (the enhanced tier); its standard tier is an order of magnitude
  lower. Per DGX of 8 GPUs.
- Meta, "The Llama 3 Herd of Models" (arXiv:2407.21783, sec. 3.1.1): Tectonic, 240 PB on
  7,500 SSD servers, 2 TB/s sustained and 7 TB/s peak for up to 16,384 H100 GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpufabric.catalog import Catalog
from gpufabric.plan.evaluate import Candidate
from gpufabric.spec.models import Spec


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceTier:
    """A published storage provisioning level, per GPU."""

    name: str
    read_gbps_per_gpu: float
    write_gbps_per_gpu: float
    source: str
    as_of: str
    tag: str  # models.md verification tag


REFERENCE_TIERS = (
    ReferenceTier(
        name="dgx-superpod-standard",
        read_gbps_per_gpu=4.0 / 8,
        write_gbps_per_gpu=2.0 / 8,
        source="NVIDIA DGX SuperPOD RA (DGX H100), storage performance guidelines, standard tier: ~4 GB/s read,"
        " ~2 GB/s write per DGX (recalled from the RA's table, not re-read)",
        as_of="2023",
        tag="U",
    ),
    ReferenceTier(
        name="dgx-superpod-enhanced",
        read_gbps_per_gpu=40.0 / 8,
        write_gbps_per_gpu=20.0 / 8,
        source="NVIDIA DGX SuperPOD RA (DGX H100), storage architecture: a GDS-enabled application reads over"
        " 40 GB/s per DGX; write taken as half (the RA's enhanced tier, write not re-read)",
        as_of="2023",
        tag="S",
    ),
    ReferenceTier(
        name="meta-llama3",
        read_gbps_per_gpu=7000.0 / 16384,
        write_gbps_per_gpu=7000.0 / 16384,
        source="Meta, The Llama 3 Herd of Models (arXiv:2407.21783) sec. 3.1.1: Tectonic 2 TB/s sustained,"
        " 7 TB/s peak for 16,384 H100s (peak per GPU, read and write alike)",
        as_of="2024-07",
        tag="S",
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TierPrice:
    """One storage provisioning level for this cluster: bandwidth, blocks and cost."""

    name: str  # "workload-minimum" or a reference tier's name
    backend: str  # catalog storage id the blocks are of
    read_gbps: float
    write_gbps: float
    read_gbps_per_node: float
    write_gbps_per_node: float
    units: int
    capex_usd: float
    source: str = ""


def _shared_backend(best: Candidate, spec: Spec, catalog: Catalog) -> str:
    if catalog.storage_backend(best.storage).kind != "local":
        return best.storage
    return next((s for s in spec.options.storage if catalog.storage_backend(s).kind != "local"), "pfs")


def price_tiers(best: Candidate, spec: Spec, catalog: Catalog) -> list[TierPrice]:
    """The plan's storage (the workload minimum) and each reference tier, priced in blocks of one backend."""
    nodes, gpus = spec.cluster.nodes, spec.num_gpus
    backend = _shared_backend(best, spec, catalog)
    st = catalog.storage_backend(backend)
    floor_units = best.storage_units if backend == best.storage else 1  # capacity the plan needs
    minimum = TierPrice(
        name="workload-minimum",
        backend=best.storage,
        read_gbps=best.storage_read_gbps_per_node * nodes,
        write_gbps=best.storage_write_gbps_per_node * nodes,
        read_gbps_per_node=best.storage_read_gbps_per_node,
        write_gbps_per_node=best.storage_write_gbps_per_node,
        units=best.storage_units,
        capex_usd=best.storage_capex_usd,
    )
    out = [minimum]
    for tier in REFERENCE_TIERS:
        read, write = tier.read_gbps_per_gpu * gpus, tier.write_gbps_per_gpu * gpus
        units = max(
            floor_units,
            math.ceil(read / st.unit_read_gbps) if st.unit_read_gbps > 0 else 1,
            math.ceil(write / st.unit_write_gbps) if st.unit_write_gbps > 0 else 1,
        )
        out.append(
            TierPrice(
                name=tier.name,
                backend=backend,
                read_gbps=read,
                write_gbps=write,
                read_gbps_per_node=read / nodes,
                write_gbps_per_node=write / nodes,
                units=units,
                capex_usd=units * st.unit_usd,
                source=f"{tier.source} ({tier.as_of}) [{tier.tag}]",
            )
        )
    return out


def _money(x: float) -> str:
    return f"${x / 1e6:,.2f}M" if abs(x) >= 1e6 else f"${x / 1e3:,.1f}k"


def tiers_text(prices: Sequence[TierPrice], best: Candidate) -> str:
    """The workload minimum and each reference tier side by side, one sentence each."""
    if not prices:
        return ""
    lines = []
    for p in prices:
        what = (
            f"{p.read_gbps:,.0f} GB/s read, {p.write_gbps:,.0f} GB/s write ({p.read_gbps_per_node:.2f} /"
            f" {p.write_gbps_per_node:.2f} GB/s per node): {p.units} x {p.backend}, {_money(p.capex_usd)}"
        )
        if p.name == "workload-minimum":
            lines.append(f"Storage workload minimum (the plan's choice): {what}")
        else:
            extra = p.capex_usd - best.storage_capex_usd
            share = extra / best.capex_usd if best.capex_usd > 0 else 0.0
            lines.append(f"Storage reference tier: {p.name}: {what}, {_money(extra)} more ({share:+.1%} of capex)")
    return ". ".join(lines) + "."
