"""Pydantic models of the hardware and price catalog.

Every numeric figure carries its provenance: ``source`` (URL or reference), ``as_of``
(date the figure was true) and ``tag`` (models.md verification tags: V read in the
primary source, S secondary source, U unverified estimate, D derived from cited inputs,
"user" for a user override). In YAML a figure is either a bare number, which inherits
the entry's ``source``/``as_of``/``tag``, or a mapping ``{value, source, as_of, tag}``.
After loading, the value sits in the field and its provenance in ``entry.provenance``.
"""

# No `from __future__ import annotations` in a module of pydantic models: pydantic would
# compile and evaluate each field's annotation string when it defines the class, ~10% of
# defining them at every start (issue 32). A method returning its own class quotes the name.

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from gpufabric.spec.types import CatalogId, Description, StrictModel

Tag = Literal["V", "S", "U", "D", "user"]


#: Largest magnitude of any catalog figure: prices reach ~1e6 USD and rates ~1e4 GB/s;
#: anything near 1e12 is a typo that would dominate every comparison.
MAX_FIGURE = 1e12


class Provenance(StrictModel):
    """Where one figure comes from."""

    source: Description = Field(min_length=1)
    """URL or reference the figure was read from, or how it was derived."""
    as_of: str = Field(min_length=1, max_length=32)
    """When the figure was true (YYYY-MM or YYYY)."""
    tag: Tag
    """Verification tag (models.md): V, S, U, D or user."""


class Entry(StrictModel):
    """Base of every catalog entry: figures plus their provenance."""

    # No use_attribute_docstrings: pydantic would re-read this file's source at import
    # (~0.2 s at every CLI start); the docstrings document the fields for readers.
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Description = ""
    """Human-readable name."""
    source: Description = ""
    """Default source of this entry's bare-number figures."""
    as_of: str = Field("", max_length=32)
    """Default as-of date of this entry's bare-number figures."""
    tag: Tag = "U"
    """Default verification tag of this entry's bare-number figures."""
    provenance: dict[str, Provenance] = Field(default_factory=dict)
    """Per-figure provenance (filled by the loader; do not write it by hand)."""

    @model_validator(mode="before")
    @classmethod
    def _split_figures(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        prov = dict(out.get("provenance") or {})
        for key, value in data.items():
            if key == "provenance":
                continue
            if isinstance(value, dict) and "value" in value:
                prov[key] = {
                    "source": value.get("source", data.get("source", "")),
                    "as_of": str(value.get("as_of", data.get("as_of", ""))),
                    "tag": value.get("tag", data.get("tag", "U")),
                }
                out[key] = value["value"]
        out["provenance"] = prov
        return out

    @model_validator(mode="after")
    def _every_figure_has_provenance(self) -> "Entry":
        for key in type(self).model_fields:
            value = getattr(self, key)
            if key == "provenance" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if abs(value) > MAX_FIGURE:
                raise ValueError(f"figure {key!r} = {value:g} is beyond any real hardware (|value| <= {MAX_FIGURE:g})")
            if key in self.provenance:
                continue
            if not (self.source and self.as_of):
                raise ValueError(
                    f"figure {key!r} has no source/as_of: give the entry a source and as_of, or write {{value, source, as_of, tag}}"
                )
            self.provenance[key] = Provenance(source=self.source, as_of=str(self.as_of), tag=self.tag)
        return self

    def cite(self, key: str) -> str:
        """``source (as_of) [tag]`` of one figure."""
        p = self.provenance[key]
        return f"{p.source} ({p.as_of}) [{p.tag}]"


class Gpu(Entry):
    """A GPU model and the server (node) built around it."""

    peak_bf16_tflops: float = Field(gt=0)
    """Dense BF16/FP16 tensor peak, TFLOP/s."""
    peak_fp8_tflops: float = Field(gt=0)
    """Dense FP8 tensor peak, TFLOP/s (equal to bf16 where FP8 is not supported)."""
    peak_fp32_tflops: float = Field(gt=0)
    """FP32 (TF32 tensor) peak, TFLOP/s."""
    hbm_gb: float = Field(gt=0)
    """Device memory, GB."""
    hbm_gbps: float = Field(gt=0)
    """Device memory bandwidth, GB/s."""
    nvlink_gbps: float = Field(gt=0)
    """Scale-up (NVLink or PCIe) line rate per GPU per direction, GB/s."""
    nvlink_busbw_gbps: float = Field(gt=0)
    """Achievable NCCL ring busbw inside a node (Simple protocol), GB/s."""
    nvls: bool = False
    """NVLink SHARP (in-switch reduction, NCCL NVLS) available."""
    nvls_busbw_gbps: float = Field(0, ge=0)
    """Achievable NVLS all-reduce busbw (nccl-tests factor 2(n-1)/n), GB/s; 0 without NVLS."""
    nvls_latency_us: float = Field(0, ge=0)
    """NVLS all-reduce latency term, us."""
    nvlink_latency_scale: float = Field(1.0, gt=0, le=10)
    """This generation's NVLink per-step latency relative to the tuner's (Hopper-era)
    constants; multiplies NCCL's NVLink hardware latencies."""
    eager_launch_us: float = Field(0, ge=0)
    """Per-collective launch and host overhead when kernels are launched eagerly (nccl-tests
    without -G), us; 0 means the site's CUDA-graph ``launch_us``."""
    intra_link: Literal["nvlink", "pci"] = "nvlink"
    """Which NCCL hardware-latency class applies inside a node."""
    host_copy_gbps: float = Field(gt=0)
    """Device-to-host copy bandwidth per GPU (async checkpoint snapshot), GB/s."""
    gemm_efficiency: float | None = Field(None, gt=0, le=1)
    """Measured: bf16 large-GEMM efficiency e_max of the compute model (model/efficiency.py),
    fitted by ``calibrate`` on a ``bench gpu`` run; the training planner uses it in place of the
    generation's published figure. None until measured."""
    hbm_efficiency: float | None = Field(None, gt=0, le=1)
    """Measured: read-only HBM bandwidth over ``hbm_gbps`` (``bench gpu`` then ``calibrate``); the
    serving model uses it where a spec leaves ``hbm_efficiency`` unset. None until measured."""
    compute_jitter_cv: float = Field(ge=0)
    """Per-rank, per-step compute time coefficient of variation (clocks, OS noise)."""
    tdp_w: float = Field(gt=0)
    """GPU board power, W."""
    node_power_kw: float = Field(gt=0)
    """Power of one server with gpus_per_node GPUs (max system power), kW."""
    node_usd: float = Field(gt=0)
    """Price of one server with its GPUs, without the scale-out NICs, USD."""
    gpus_per_node: int = Field(8, gt=0)
    """GPUs in the server that node_usd and node_power_kw describe."""
    generation: Literal["ampere", "ada", "hopper", "blackwell"] | None = None
    """GPU architecture generation: which published kernel efficiencies apply (model/efficiency.py);
    None: looked up by the entry's id there (Hopper when unknown)."""
    nvlink_domain: int | None = Field(None, gt=0, le=1024)
    """GPUs joined by one NVLink/NVSwitch domain; None: the server's gpus_per_node (HGX). A GB200 NVL72
    rack joins 72 GPUs in 18 trays of 4: tensor and expert parallelism may span trays inside it."""

    @property
    def nvlink_domain_gpus(self) -> int:
        """GPUs of one NVLink domain (``nvlink_domain``, else the server's)."""
        return self.nvlink_domain or self.gpus_per_node

    nic_pcie_gen: int = Field(5, ge=3, le=7)
    """PCIe generation of each scale-out NIC's host slot in this server."""
    nic_pcie_lanes: int = Field(16, gt=0, le=32)
    """PCIe lanes per scale-out NIC."""


class Fabric(Entry):
    """A scale-out fabric: NIC, switch family, protocol behaviour."""

    kind: Literal["ib", "roce", "tcp", "efa", "tcpx"]
    """Transport family; also the id prefix. efa (AWS Elastic Fabric Adapter, SRD) and tcpx
    (Google GPUDirect-TCPX/TCPXO) exist only in rented offerings (``rented_only``)."""
    nic_line_gbps: float = Field(gt=0)
    """NIC line rate, GB/s (400 Gb/s = 50 GB/s)."""
    nic_efficiency: float = Field(gt=0, le=1)
    """Fraction of line rate NCCL achieves per NIC (busbw per NIC / line rate)."""
    net_latency_scale: float = Field(gt=0)
    """Multiplier on NCCL's NET per-step latencies (tuning.cc constants were measured on IB)."""
    host_latency_us: float = Field(ge=0)
    """End-host latency per side (NIC + PCIe + stack), us."""
    rdma_write_lat_us: float = Field(ge=0)
    """Small-message one-way latency (perftest ib_write_lat half RTT; sockperf for TCP), one switch, us."""
    rdma_read_lat_us: float = Field(ge=0)
    """Small-message read round trip (perftest ib_read_lat; 2x one-way for TCP), one switch, us."""
    jitter_us: float = Field(ge=0)
    """Std-dev of per-dependent-step latency of a collective, us."""
    hiccup_prob: float = Field(ge=0, le=1)
    """Probability per rank per step of a rare long delay (retransmit timeout, PFC pause storm)."""
    hiccup_ms: float = Field(ge=0)
    """Length of that delay, ms."""
    proxy_us: float = Field(0, ge=0)
    """Per-collective network proxy overhead of an eagerly launched op, once per op across
    nodes, us."""
    in_network_reduction: bool = False
    """The fabric's switches can reduce in the network (InfiniBand SHARP); used only when the
    spec chooses it (``options.in_network_reduction``)."""
    sharp_usd_per_switch: float = Field(0, ge=0)
    """In-network reduction licence per switch, USD (with ``options.in_network_reduction``)."""
    sharp_usd_per_node: float = Field(0, ge=0)
    """Aggregation manager (fabric manager licence and its servers) per node, USD (with
    ``options.in_network_reduction``)."""
    rented_only: bool = False
    """A provider's fabric (EFA, GPUDirect-TCPX): only rented offerings use it; it cannot be built."""
    switch: CatalogId
    """Switch id (catalog switches) used for every tier."""
    nic_optic: CatalogId
    """Optic/cable id on the NIC side of node-leaf links."""
    switch_optic: CatalogId
    """Optic id on switch ports."""
    fiber: CatalogId
    """Cable id (fiber or copper) per link."""
    nic_usd: float = Field(ge=0)
    """Price of one NIC, USD."""
    nic_power_w: float = Field(ge=0)
    """Power of one NIC, W."""


class Switch(Entry):
    """A switch model."""

    radix: int = Field(gt=1)
    """Ports at the fabric's NIC speed."""
    latency_ns: float = Field(ge=0)
    """Port-to-port latency, ns."""
    price_usd: float = Field(ge=0)
    """Price, USD."""
    power_w: float = Field(ge=0)
    """Typical power, W."""


class Optic(Entry):
    """A transceiver or a cable."""

    ports_per_module: int = Field(1, gt=0)
    """Links one module (or cable) carries (twin-port 800G OSFP: 2)."""
    price_usd: float = Field(ge=0)
    """Price per module or cable, USD."""
    power_w: float = Field(0, ge=0)
    """Power per module, W."""


class Storage(Entry):
    """A checkpoint/dataset storage backend."""

    kind: Literal["local", "block", "file", "parallel"]
    """local: NVMe in each node; block: NVMe-oF/iSCSI volumes; file: NFS; parallel: PFS."""
    client_write_gbps: float = Field(gt=0)
    """Write bandwidth one node achieves, GB/s."""
    client_read_gbps: float = Field(gt=0)
    """Read bandwidth one node achieves, GB/s."""
    unit_write_gbps: float = Field(ge=0)
    """Write bandwidth of one storage building block (0 for local NVMe), GB/s."""
    unit_read_gbps: float = Field(ge=0)
    """Read bandwidth of one building block, GB/s."""
    unit_capacity_tb: float = Field(gt=0)
    """Usable capacity of one building block (local: per node), TB."""
    unit_usd: float = Field(ge=0)
    """Price of one building block, USD."""
    unit_power_w: float = Field(ge=0)
    """Power of one building block, W."""
    commit_latency_ms: float = Field(ge=0)
    """Latency to commit one shard (create + write tail + fsync + rename), ms."""
    commit_jitter_ms: float = Field(ge=0)
    """Std-dev of that commit latency, ms."""
    commit_concurrency: float = Field(gt=0)
    """Commits in flight across the cluster (per node for local/block; metadata servers for file)."""
    commit_scope: Literal["node", "cluster"] = "cluster"
    """node: commit_concurrency is per node (independent volumes); cluster: shared metadata."""
    async_drain: bool = False
    """Checkpoints land locally and drain in the background to durable storage."""
    drain_gbps_per_node: float = Field(0, ge=0)
    """Background drain bandwidth per node to durable storage, GB/s."""
    drive_dwpd: float = Field(0, ge=0)
    """Rated endurance of the building block's drives, full drive writes per day over the
    warranty (flash DWPD; disks: the workload rating over capacity); 0: not limited."""
    drive_warranty_years: float = Field(5, gt=0, le=20)
    """Years the endurance rating covers (the drive warranty)."""


class Site(Entry):
    """Site-wide cost and operations assumptions."""

    usd_per_kwh: float = Field(gt=0)
    """Electricity price, USD per kWh."""
    pue: float = Field(ge=1)
    """Power usage effectiveness of the data centre."""
    amortization_years: float = Field(gt=0)
    """Years over which capex is amortised into $/GPU-hour."""
    checkpoints_kept: int = Field(gt=0)
    """Checkpoints kept on storage (sizes the storage system)."""
    launch_us: float = Field(ge=0)
    """Collective launch overhead with CUDA graphs, us."""
    checkpoint_write_target_s: float = Field(gt=0)
    """Shared storage is sized to write one checkpoint in this time (as well as to hold them), s."""
    checkpoint_duty_max: float = Field(0.25, gt=0, le=1)
    """Largest share of time the storage may spend writing checkpoints (bounds the ``auto`` interval)."""
    restore_target_s: float = Field(300, gt=0)
    """Shared storage is sized to read one checkpoint back after a failure in this time, s."""
    resale_fraction: float = Field(0.5, ge=0, le=1)
    """Share of the remaining book value a cluster sells for at the end of a horizon shorter than its amortisation."""
    facility_usd_per_mw: float = Field(0, ge=0)
    """Data-centre build cost per MW of IT load, USD (total cost of ownership only)."""
    facility_years: float = Field(15, gt=0)
    """Years over which the facility is amortised."""
    staff_usd_per_gpu_year: float = Field(0, ge=0)
    """Operations staff cost per GPU and year, USD (total cost of ownership only)."""
    frontend_network_usd_per_node: float = Field(0, ge=0)
    """Front-end (in-band management, data ingest) network per node, USD (total cost of ownership only)."""
    storage_network_usd_per_node: float = Field(0, ge=0)
    """Storage network per node when storage has its own fabric, USD (total cost of ownership only)."""


class Rental(Entry):
    """A rentable GPU instance (cloud or GPU-cloud offering) and its scale-out fabric.

    Prices are per instance-hour in USD; committed prices are the effective hourly rate of
    a 1- or 3-year commitment, paid whether the instance is busy or not.
    """

    provider: str = Field(min_length=1)
    """Who rents it (aws, azure, gcp, oci, coreweave, ...)."""
    instance_type: str = Field(min_length=1)
    """The provider's name for the instance (p5.48xlarge, Standard_ND96isr_H100_v5, ...)."""
    gpu: str
    """GPU id (catalog gpus) of the instance's GPUs."""
    gpus: int = Field(gt=0)
    """GPUs per instance (one instance is one node)."""
    fabric: str
    """Fabric id (catalog fabrics) that models the instance's scale-out network."""
    fabric_gbps: float = Field(gt=0)
    """Published scale-out bandwidth per instance, Gb/s (documentation; the fabric entry models it)."""
    local_nvme_tb: float = Field(ge=0)
    """Local NVMe per instance, TB."""
    storage: list[str] = Field(min_length=1)
    """Storage backend ids (catalog storage) the offering can model: local-nvme and the provider's managed file systems."""
    storage_usd_per_tb_month: float = Field(ge=0)
    """Durable storage the checkpoints land on (object store or managed file system), USD per TB-month."""
    usd_per_hour_on_demand: float = Field(gt=0)
    """On-demand price per instance-hour, USD."""
    usd_per_hour_1y: float = Field(gt=0)
    """Effective price per instance-hour with a 1-year commitment, USD."""
    usd_per_hour_3y: float = Field(gt=0)
    """Effective price per instance-hour with a 3-year commitment, USD."""

    def usd_per_gpu_hour(self, term: str) -> float:
        """Catalog price per GPU-hour for ``term`` (on_demand, 1y, 3y)."""
        return {"on_demand": self.usd_per_hour_on_demand, "1y": self.usd_per_hour_1y, "3y": self.usd_per_hour_3y}[
            term
        ] / self.gpus


#: Catalog sections (the top-level keys of a catalog or --catalog file) and their entry models.
SECTIONS: dict[str, type[Entry]] = {
    "gpus": Gpu,
    "fabrics": Fabric,
    "switches": Switch,
    "optics": Optic,
    "storage": Storage,
    "site": Site,
    "rentals": Rental,
}
