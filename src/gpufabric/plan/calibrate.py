"""Fit the collective model to a measured run and write a catalog override.

Each measured collective point (op, size S, time t) of a stored ``bench collectives`` run
is reduced to the alpha-beta form the model uses (NCCL tuning.cc: ``time = lat +
bytes/bw``, reference/models.md 1.6 item 2) with nccl-tests' bus factor f:
``t = alpha + f*S / beta``, so beta is the busbw asymptote. Points are grouped by link
class: ``inter`` when the ranks span hosts (the scale-out fabric) and ``intra`` when they
share one (the node's scale-up link). The fit is least squares on relative error,
non-negative (scipy nnls), so small sizes weigh as much as large ones.

The fitted figures become catalog fields through the model itself: the fabric's
``nic_efficiency`` (and ``nic_line_gbps`` when the measured rate exceeds it) and
``net_latency_scale`` are scaled until the model's large-message busbw and small-message
time match beta and alpha; intra-node sweeps set the GPU's ``nvlink_busbw_gbps``. Storage
figures come straight from fio results (write/read bandwidth, fsync p50 latency).
"""

from __future__ import annotations

import datetime
import json
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import nnls

from gpufabric.bench.probes.stats import busbw_gbps
from gpufabric.errors import InputError
from gpufabric.model.collectives import busbw_factor

#: Size the model is asked for its bandwidth asymptote (large enough that latency is < 1%).
_ASYMPTOTE_BYTES = 16 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    op: str
    size_bytes: int
    time_us: float
    num_ranks: int
    nodes: int
    gpus_per_node: int
    busbw_gbps: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit:
    link_class: str        # "inter" or "intra"
    alpha_us: float
    beta_gbps: float       # busbw asymptote, GB/s
    points: int
    rms_rel_error: float


def points_from_run(run: Any) -> list[Point]:
    """Measured collective points of a run (torch probe or nccl-tests results with op/size params)."""
    out = []
    for r in run.results:
        p = r.params
        t = r.metric("time_p50_us") or r.metric("time_us")
        if "op" not in p or "size_bytes" not in p or t is None or r.status.value != "ok":
            continue
        n = int(p.get("num_ranks", "0") or 0)
        hosts = json.loads(p["rank_hosts"]) if "rank_hosts" in p else {}
        nodes = len(set(hosts.values())) if hosts else int(p.get("nodes", "1"))
        size = int(p["size_bytes"])
        busbw = r.metric("busbw_gbps")
        out.append(Point(op=p["op"], size_bytes=size, time_us=t.value, num_ranks=n, nodes=nodes,
                         gpus_per_node=max(1, n // nodes),
                         busbw_gbps=busbw.value if busbw else busbw_gbps(p["op"], size, t.value * 1e-6, n)))
    return out


def fit_alpha_beta(points: Sequence[Point], link_class: str) -> Fit:
    """t = alpha + f*S/beta by non-negative least squares on relative residuals."""
    if len(points) < 2:
        raise InputError(f"calibrate needs at least 2 measured sizes for the {link_class} link class, got {len(points)}")
    x = np.array([busbw_factor(p.op, p.num_ranks) * p.size_bytes for p in points], dtype=float)
    t = np.array([p.time_us for p in points], dtype=float)
    a = np.column_stack([np.ones_like(x), x]) / t[:, None]
    (alpha, inv_beta), _ = nnls(a, np.ones_like(t))
    beta_bytes_per_us = 1.0 / inv_beta if inv_beta > 0 else float("inf")
    pred = alpha + x * inv_beta
    return Fit(link_class=link_class, alpha_us=float(alpha), beta_gbps=float(beta_bytes_per_us * 1e6 / 1e9),
               points=len(points), rms_rel_error=float(np.sqrt(np.mean(((pred - t) / t) ** 2))))


def _predict(p: Point, catalog: Any, gpu: str, fabric: str) -> float:
    from gpufabric.model.collectives import predict_collective

    return predict_collective(op=p.op, size_bytes=p.size_bytes, nodes=p.nodes, gpus_per_node=p.gpus_per_node,
                              gpu=gpu, fabric=fabric, catalog=catalog).busbw_gbps


def _error(points: Sequence[Point], catalog: Any, gpu: str, fabric: str) -> dict[str, float]:
    """Median and max |log(pred/measured)| as percentages of busbw."""
    ratios = np.array([_predict(p, catalog, gpu, fabric) / p.busbw_gbps for p in points])
    err = np.abs(np.log(ratios))
    return {"median_abs_error_pct": float((np.exp(np.median(err)) - 1) * 100),
            "max_abs_error_pct": float((np.exp(err.max()) - 1) * 100)}


def _load(files: Sequence[Path]) -> Any:
    from gpufabric.catalog import load_catalog

    return load_catalog(list(files))


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    run_id: int
    fits: tuple[Fit, ...]
    override: dict[str, Any]           # the catalog override document
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]
    comparison: tuple[dict[str, Any], ...]   # per point: measured, predicted before/after


def calibrate(run: Any, *, gpu: str, fabric: str, storage: str | None = None,
              base_catalog: Sequence[Path] = (), iterations: int = 4) -> Calibration:
    """Fit alpha/beta per link class of ``run`` and build the override for ``gpu``/``fabric``/``storage``."""
    points = points_from_run(run)
    catalog = _load(base_catalog)
    gpu_entry = catalog.gpu(gpu)
    fab = catalog.fabric(fabric)
    groups: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        groups["inter" if p.nodes > 1 else "intra"].append(p)
    storage_fields = _storage_fields(run) if storage else {}
    if not groups and not storage_fields:
        raise InputError(f"run {run.id} has no collective sweep results (or fio results with --storage) to fit")
    fits = tuple(fit_alpha_beta(groups[c], c) for c in ("inter", "intra") if c in groups)
    stamp = {"source": f"measured, run {run.id}", "as_of": datetime.date.today().isoformat(), "tag": "user"}
    fab_fields = {"nic_line_gbps": float(fab.nic_line_gbps), "nic_efficiency": float(fab.nic_efficiency),
                  "net_latency_scale": float(fab.net_latency_scale)}
    gpu_fields = {"nvlink_busbw_gbps": float(gpu_entry.nvlink_busbw_gbps)}
    with tempfile.TemporaryDirectory(prefix="gpufabric-calibrate-") as tmp:
        path = Path(tmp) / "override.yaml"

        def doc() -> dict[str, Any]:
            d: dict[str, Any] = {}
            if "inter" in groups:
                d["fabrics"] = {fabric: {**stamp, **fab_fields}}
            if "intra" in groups:
                d["gpus"] = {gpu: {**stamp, **gpu_fields}}
            if storage_fields:
                d["storage"] = {storage: {**stamp, **storage_fields}}
            return d

        for _ in range(iterations):
            path.write_text(yaml.safe_dump(doc(), sort_keys=False), encoding="utf-8")
            cat = _load([*base_catalog, path])
            for fit in fits:
                big = max(groups[fit.link_class], key=lambda p: p.size_bytes)
                asym = _predict(replace(big, size_bytes=_ASYMPTOTE_BYTES), cat, gpu, fabric)
                if fit.link_class == "inter":
                    eff = fab_fields["nic_efficiency"] * fit.beta_gbps / asym
                    if eff > 1.0:  # measured faster than the catalog's line rate: the line rate was wrong
                        fab_fields["nic_line_gbps"] = float(fab_fields["nic_line_gbps"] * eff)
                        eff = 1.0
                    fab_fields["nic_efficiency"] = float(eff)
                    small = min(groups["inter"], key=lambda p: p.size_bytes)
                    t_model = small.size_bytes * busbw_factor(small.op, small.num_ranks) / (
                        _predict(small, cat, gpu, fabric) * 1e3)
                    t_fit = fit.alpha_us + busbw_factor(small.op, small.num_ranks) * small.size_bytes / (fit.beta_gbps * 1e3)
                    fab_fields["net_latency_scale"] = float(fab_fields["net_latency_scale"] * max(t_fit, 1e-3)
                                                            / max(t_model, 1e-3))
                else:
                    gpu_fields["nvlink_busbw_gbps"] = float(gpu_fields["nvlink_busbw_gbps"] * fit.beta_gbps / asym)
        final = doc()
        path.write_text(yaml.safe_dump(final, sort_keys=False), encoding="utf-8")
        after_cat = _load([*base_catalog, path])
        before, after, rows = {}, {}, []
        for c, pts in groups.items():
            before[c] = _error(pts, catalog, gpu, fabric)
            after[c] = _error(pts, after_cat, gpu, fabric)
            for p in pts:
                rows.append({"link_class": c, "op": p.op, "size_bytes": p.size_bytes, "measured_busbw_gbps": p.busbw_gbps,
                             "predicted_before_gbps": _predict(p, catalog, gpu, fabric),
                             "predicted_after_gbps": _predict(p, after_cat, gpu, fabric)})
    return Calibration(run_id=run.id, fits=fits, override=final, before=before, after=after, comparison=tuple(rows))


def _storage_fields(run: Any) -> dict[str, float]:
    """client_write/read_gbps and commit_latency_ms from the run's fio results (best of each)."""
    write = [m.value for r in run.results if r.tool == "fio" and (m := r.metric("write_bw_gbps")) and m.value > 0]
    read = [m.value for r in run.results if r.tool == "fio" and (m := r.metric("read_bw_gbps")) and m.value > 0]
    fsync = [m.value for r in run.results if r.tool == "fio" and (m := r.metric("fsync_lat_p50_us"))]
    out: dict[str, float] = {}
    if write:
        out["client_write_gbps"] = max(write)
    if read:
        out["client_read_gbps"] = max(read)
    if fsync:
        out["commit_latency_ms"] = min(fsync) / 1e3
    return out


def render_yaml(cal: Calibration) -> str:
    header = (f"# Catalog override written by `gpufabric calibrate` from run {cal.run_id}.\n"
              "# Use it with: gpufabric plan SPEC --catalog THIS_FILE\n")
    return header + yaml.safe_dump(cal.override, sort_keys=False)
