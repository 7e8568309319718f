"""Enumerate candidate designs and lay them out as columns (one numpy array per input).

A *design* is fabric x topology x oversubscription x storage. The table holds every
input the evaluator needs for every candidate, so one vectorised pass evaluates them
all; the benchmark concatenates tables of many workloads the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.model.step import ACT_BYTES, GRAD_BYTES
from gpufabric.spec.models import Spec

Table = dict[str, np.ndarray]


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    """One point of the design space."""

    fabric: str
    topology: str
    oversubscription: float
    storage: str

    @property
    def id(self) -> str:
        return f"{self.fabric}/{self.topology}/{self.oversubscription:g}:1/{self.storage}"


def enumerate_designs(spec: Spec) -> list[Design]:
    """Every fabric x topology x oversubscription x storage the spec's options allow."""
    o = spec.options
    return [
        Design(fabric=f, topology=t, oversubscription=float(r), storage=s)
        for f, t, r, s in itertools.product(o.fabrics, o.topologies, o.oversubscription, o.storage)
    ]


def _peak(gpu, precision: str) -> float:
    return {"bf16": gpu.peak_bf16_tflops, "fp16": gpu.peak_bf16_tflops, "fp8": gpu.peak_fp8_tflops,
            "fp32": gpu.peak_fp32_tflops}[precision]


def build_table(spec: Spec, catalog: Catalog, designs: Sequence[Design]) -> Table:
    """Columns of inputs for ``designs`` under ``spec`` (workload columns are broadcast)."""
    n = len(designs)
    w = spec.workload
    par = w.parallelism
    gpu = catalog.gpu(spec.cluster.gpu)
    site = catalog.site
    m = spec.microbatches
    ds = w.dataset
    scalars = {
        "nodes": spec.cluster.nodes, "gpn": spec.cluster.gpus_per_node,
        "tp": par.tp, "pp": par.pp, "dp": par.dp, "ep": par.ep, "microbatches": m, "virtual_stages": par.virtual_stages,
        "params": w.model.params, "layers": w.model.layers, "hidden": w.model.hidden,
        "batch_tokens": w.global_batch_tokens, "total_tokens": w.total_tokens, "mfu": w.mfu,
        "peak_tflops": _peak(gpu, w.precision), "act_bytes": ACT_BYTES[w.precision], "grad_bytes": GRAD_BYTES[w.precision],
        "ckpt_bpp": w.checkpoint.bytes_per_param, "interval_s": w.checkpoint.interval_min * 60.0,
        "sync": w.checkpoint.mode == "sync", "dataset_tb": ds.size_tb if ds else 0.0,
        "bytes_per_token": ds.bytes_per_token if ds else 0.0, "random_read": bool(ds and ds.pattern == "random"),
        "mttf_h": spec.reliability.gpu_mttf_hours, "restart_s": spec.reliability.restart_min * 60.0,
        "deterministic": spec.requirements.reproducibility == "bitwise",
        "nvl_busbw": gpu.nvlink_busbw_gbps, "intra_pci": gpu.intra_link == "pci",
        "nvls_busbw": gpu.nvls_busbw_gbps if gpu.nvls else 0.0, "nvls_lat": gpu.nvls_latency_us,
        "host_copy": gpu.host_copy_gbps, "compute_cv": gpu.compute_jitter_cv,
        "node_usd": gpu.node_usd * spec.cluster.gpus_per_node / gpu.gpus_per_node,
        "node_kw": gpu.node_power_kw * spec.cluster.gpus_per_node / gpu.gpus_per_node,
        "launch_us": site.launch_us, "usd_per_kwh": site.usd_per_kwh, "pue": site.pue,
        "years": site.amortization_years, "kept": site.checkpoints_kept,
        "ckpt_target_s": site.checkpoint_write_target_s,
    }
    t: Table = {k: np.full(n, v) for k, v in scalars.items()}
    rows = []
    for d in designs:
        f = catalog.fabric(d.fabric)
        sw = catalog.switches[f.switch]
        s = catalog.storage_backend(d.storage)
        nic_x, sw_x, fib = catalog.optics[f.nic_optic], catalog.optics[f.switch_optic], catalog.optics[f.fiber]
        rows.append((
            f.nic_line_gbps * f.nic_efficiency, f.net_latency_scale, f.jitter_us, f.hiccup_prob, f.hiccup_ms,
            f.in_network_reduction, f.nic_usd, f.nic_power_w, sw.radix, sw.latency_ns, sw.price_usd, sw.power_w,
            nic_x.price_usd, nic_x.power_w, sw_x.price_usd, sw_x.power_w, sw_x.ports_per_module, fib.price_usd,
            d.topology == "rail-optimized", d.oversubscription,
            s.kind == "local", s.client_write_gbps, s.client_read_gbps, s.unit_write_gbps, s.unit_read_gbps,
            s.unit_capacity_tb, s.unit_usd, s.unit_power_w, s.commit_latency_ms, s.commit_jitter_ms,
            s.commit_concurrency, s.commit_scope == "node", s.async_drain, s.drain_gbps_per_node,
        ))
    names = ("nic_gbps", "net_scale", "jitter_us", "hiccup_q", "hiccup_ms", "sharp", "nic_usd", "nic_w", "radix",
             "switch_ns", "switch_usd", "switch_w", "nic_xcvr_usd", "nic_xcvr_w", "sw_xcvr_usd", "sw_xcvr_w",
             "sw_xcvr_ports", "cable_usd", "rail", "oversub", "st_local", "st_client_w", "st_client_r",
             "st_unit_w", "st_unit_r", "st_unit_tb", "st_unit_usd", "st_unit_w_power", "st_commit_ms",
             "st_commit_jitter_ms", "st_concurrency", "st_per_node", "st_drain", "st_drain_gbps")
    cols = np.array(rows, dtype=float).T if rows else np.zeros((len(names), 0))
    for name, col in zip(names, cols):
        t[name] = col
    for flag in ("sharp", "rail", "st_local", "st_per_node", "st_drain", "sync", "random_read", "deterministic", "intra_pci"):
        t[flag] = t[flag].astype(bool)
    return t


def concat_tables(tables: Sequence[Table]) -> Table:
    """Stack tables row-wise (same columns)."""
    return {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}


def scale_table(t: Table, *, network_latency: float = 1.0, storage_latency: float = 1.0) -> Table:
    """A copy with network latency/jitter or storage commit latency/jitter multiplied.

    Network: NCCL NET step latencies, switch latency, per-step jitter and hiccup length
    (launch overhead and NVLink latencies stay). Storage: commit latency and its jitter.
    """
    out = dict(t)
    for k in ("net_scale", "jitter_us", "switch_ns", "hiccup_ms"):
        out[k] = t[k] * network_latency
    for k in ("st_commit_ms", "st_commit_jitter_ms"):
        out[k] = t[k] * storage_latency
    return out
