"""Model predictions versus the calibration points of models.md section 3.

``points()`` recomputes every row; ``render()`` prints the Markdown table that
docs/accuracy.md embeds (tests/model/test_accuracy.py asserts the doc matches and
every error stays within its recorded bound). Rows marked *input* are points a catalog
default was built on: they check the plumbing, not independent predictive power.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufabric.catalog import Catalog
from gpufabric.model import reliability, storage
from gpufabric.model.collectives import predict_collective

GIB = 2**30
TIB = 2**40


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    quantity: str
    setup: str
    predicted: float
    published: float
    unit: str
    kind: str          # "prediction" or "input"
    source: str
    bound_pct: float   # largest |error| the test accepts

    @property
    def error_pct(self) -> float:
        return (self.predicted / self.published - 1) * 100


# DLIO model shapes of mlcommons/storage configs/dlio/workload/llama3_*.yaml [V].
MLPERF_SHAPES = {
    "8B": dict(layers=32, hidden=4096, ffn=14336, vocab=128256, heads=32, kv_heads=8),
    "70B": dict(layers=80, hidden=8192, ffn=28672, vocab=128256, heads=128, kv_heads=8),
    "405B": dict(layers=126, hidden=16384, ffn=53248, vocab=128256, heads=128, kv_heads=8),
    "1T": dict(layers=128, hidden=25872, ffn=98304, vocab=128256, heads=192, kv_heads=32),
}
MLPERF_SIZES = {"8B": 105 * GIB, "70B": 912 * GIB, "405B": 5.29 * TIB, "1T": 18 * TIB}


def points(catalog: Catalog) -> list[Point]:
    """Every calibration point of models.md section 3 with the model's value."""
    out = []

    def coll(**kw) -> float:
        return predict_collective(catalog=catalog, **kw)

    p = coll(op="all_reduce", size_bytes=8 * GIB, nodes=1, gpus_per_node=8, gpu="h200", fabric="ib-ndr")
    out.append(Point(quantity="AllReduce busbw, NVLS", setup="8xH200, 8 GiB", predicted=p.busbw_gbps, published=480,
                     unit="GB/s", kind="input", source="Azure ND_H200_v5_results.md", bound_pct=5))
    p = coll(op="all_reduce", size_bytes=8 * GIB, nodes=1, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", algorithm="ring")
    out.append(Point(quantity="AllReduce busbw, ring over NVLink", setup="8xH100, NCCL_ALGO=RING, 8 GiB",
                     predicted=p.busbw_gbps, published=367.5, unit="GB/s", kind="input", source="nccl-tests #212",
                     bound_pct=5))
    p = coll(op="all_reduce", size_bytes=8 * GIB, nodes=2, gpus_per_node=8, gpu="h100-sxm", fabric="ib-ndr", algorithm="ring")
    out.append(Point(quantity="busbw per NDR NIC (ring busbw / 8 NICs)", setup="2 nodes x 8 H100, ring, 8 GiB",
                     predicted=p.busbw_gbps / 8, published=47, unit="GB/s", kind="input", source="nccl-tests #290",
                     bound_pct=5))
    p = coll(op="all_reduce", size_bytes=8, nodes=1, gpus_per_node=2, gpu="h100-sxm", fabric="ib-ndr")
    out.append(Point(quantity="small-message AllReduce latency", setup="2xH100, 8 B, CUDA graphs", predicted=p.time_us,
                     published=6.0, unit="us", kind="prediction", source="nccl #1259", bound_pct=15))
    ndr = catalog.fabric("ib-ndr")
    out.append(Point(quantity="RDMA write latency (inline)", setup="ib_write_lat, one switch", predicted=ndr.rdma_write_lat_us,
                     published=0.93, unit="us", kind="input", source="perftest #131", bound_pct=1))
    out.append(Point(quantity="RDMA read latency", setup="ib_read_lat, one switch", predicted=ndr.rdma_read_lat_us,
                     published=1.91, unit="us", kind="input", source="perftest #131", bound_pct=1))
    sw = catalog.switches[ndr.switch]
    worst = ndr.rdma_write_lat_us + 4 * sw.latency_ns / 1e3
    out.append(Point(quantity="worst-path write latency vs healthy threshold", setup="3 tiers = 5 switches",
                     predicted=worst, published=2.5, unit="us", kind="prediction (must be below)",
                     source="ngc_multinode_perf PR #97", bound_pct=100))
    for name, shape in MLPERF_SHAPES.items():
        size = float(storage.checkpoint_bytes(storage.llama_params(**shape), 14))
        out.append(Point(quantity=f"checkpoint size Llama3 {name}", setup="14 B/param of DLIO shape, GiB/TiB",
                         predicted=size, published=MLPERF_SIZES[name], unit="bytes", kind="prediction",
                         source="mlcommons/storage Submission_guidelines.md", bound_pct=20 if name == "1T" else 5))
    out.append(Point(quantity="job MTTF at 100k accelerators", setup="50,000 h per accelerator",
                     predicted=float(reliability.job_mttf_s(50000, 100000)) / 60, published=30, unit="min",
                     kind="prediction", source="MLCommons 2025-08-04", bound_pct=1))
    nv = catalog.storage_backend("local-nvme")
    out.append(Point(quantity="local NVMe seq write per node", setup="ND H200 v5 fio", predicted=nv.client_write_gbps,
                     published=33.8, unit="GB/s", kind="input", source="Azure AI-benchmarking-guide", bound_pct=1))
    out.append(Point(quantity="local NVMe seq read per node", setup="ND H200 v5 fio", predicted=nv.client_read_gbps,
                     published=55.4, unit="GB/s", kind="input", source="Azure AI-benchmarking-guide", bound_pct=1))
    return out


def _shown(value: float, unit: str) -> str:
    if unit == "bytes":  # decimal GB/TB
        return f"{value / 1e9:,.0f} GB" if value < 1e12 else f"{value / 1e12:,.2f} TB"
    return f"{value:.3g} {unit}"


def render(catalog: Catalog) -> str:
    """The Markdown table of docs/accuracy.md."""
    rows = ["| quantity | setup | predicted | published | error % | kind | source |", "|---|---|---|---|---|---|---|"]
    for p in points(catalog):
        shown_pred, shown_pub = (_shown(x, p.unit) for x in (p.predicted, p.published))
        rows.append(f"| {p.quantity} | {p.setup} | {shown_pred} | {shown_pub} | {p.error_pct:+.1f} | {p.kind} | {p.source} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python -m gpufabric.model.accuracy
    from gpufabric.catalog import load_catalog as _load

    print(render(_load()))
