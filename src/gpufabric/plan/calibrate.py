"""Fit the collective model to a measured run and write a catalog override.

Works on every run that holds collective timings: ``bench collectives`` probe runs
(one result per op and size, ``time_p50_us``), suite and ingested nccl-tests results
(one result per table: ``time_us`` at the largest size and ``time_us@<size>B`` for the
others, with ranks, nodes, GPUs per node and the GPU model read from the nccl-tests
header). Ranks and nodes come from the run; the GPU too where the header names it
(``--gpu`` otherwise); the fabric cannot be read from any tool output, so multi-node
points need ``--fabric``.

Each point (op, size S, time t) is reduced to the alpha-beta form the model uses (NCCL
tuning.cc: ``time = lat + bytes/bw``, reference/models.md 1.6 item 2) with nccl-tests'
bus factor f: ``t = alpha + f*S / beta``, so beta is the busbw asymptote. Repeats of a
point are reduced to their median first; the fit is a Huber regression on relative
residuals (scipy least_squares, loss="huber", f_scale 5%), so one slow repeat or one
outlier size (nccl-tests tables often have one) does not drag the line. Points are
grouped by link class: ``inter`` when the ranks span nodes, ``intra`` otherwise.

A parameter the sweep cannot identify is refused, not guessed: alpha needs a size whose
time is mostly latency (at least half at the smallest size), beta a size whose time is
mostly bytes (at least half at the largest).

The fit becomes catalog fields through the model itself (iterated so the model, with all
its protocol and algorithm choices, reproduces the fitted line at the smallest and the
largest measured size): ``inter`` sets the fabric's ``nic_efficiency`` (and
``nic_line_gbps`` when the measured rate exceeds it) and ``proxy_us``; ``intra`` sets the
GPU's ``nvlink_busbw_gbps`` and ``nvls_busbw_gbps`` (scaled together) and
``eager_launch_us``. Storage figures come from fio results: the median over repeats of
write/read bandwidth and fsync p50 latency.
"""

from __future__ import annotations

import datetime
import math
import re
import statistics
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from gpufabric.catalog.names import gpu_id
from gpufabric.errors import InputError
from gpufabric.model.collectives import OPS, busbw_factor, busbw_gbps
from gpufabric.results.ranks import rank_stats
from gpufabric.spec.loader import read_text

#: nccl-tests binary names -> model op names.
_NCCL_OPS = {"alltoall": "all_to_all", "sendrecv": "send_recv"}
#: Share of the time that must be latency (smallest size) / bytes (largest size) to identify alpha / beta.
IDENTIFY_SHARE = 0.5
#: A repeat slower than this x the fastest repeat of its point is a disturbance (warm-up,
#: preemption), not the transfer [U, estimate: in the published tables of tests/data/
#: nccl-tests 8 of 228 rows have out-of-place/in-place twins further apart than 1.5x (the
#: #309 8 B warm-up row 2.8x); the rest lie within it].
DISTURBED_FACTOR = 1.5
#: A fit "worsens" its own points when their median |error| grows by more than this many
#: percentage points: below it the change is rounding (nccl-tests prints 4 significant
#: digits) and repeat-to-repeat jitter, not a worse model [U, estimate].
WORSEN_TOLERANCE_PCT = 0.1
_SIZE_METRIC = re.compile(r"^time_us@(\d+)B$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    op: str
    size_bytes: int
    time_us: float
    num_ranks: int
    nodes: int
    gpus_per_node: int
    busbw_gbps: float
    timing: str = "eager"
    repeats: int = 1
    harness: str = "per-gpu"  # model.collectives.HARNESSES: how the run launched its ops
    nccl_version: str | None = None  # the NCCL release its header named (None: the newest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit:
    link_class: str  # "inter" or "intra"
    alpha_us: float
    beta_gbps: float  # busbw asymptote, GB/s
    points: int
    rms_rel_error: float
    latency_anchor_us: float = 0.0  # median time of the latency-dominated sizes (what the model must match)
    busbw_anchor_gbps: float = 0.0  # median busbw of the largest sizes (at most 3)
    latency_sizes_bytes: tuple[int, ...] = ()  # the sizes behind latency_anchor_us
    busbw_sizes_bytes: tuple[int, ...] = ()  # the sizes behind busbw_anchor_gbps


def _stored_harness(params: Any) -> str:
    """The harness an ingested nccl-tests result was measured with: ``tool_harness`` (the
    parser derives it from the header's ``nThread T nGpus G``: T x G > 1 GPUs per process is
    nccl-tests ``-g N``, one thread launching on every GPU), else ``tool_gpus_per_process``;
    "per-gpu" where the result stored neither (older ingests, suite runs)."""
    stored = params.get("tool_harness", "")
    if stored:
        return str(stored)
    per_process = params.get("tool_gpus_per_process", "")
    return "single-process" if per_process.isdigit() and int(per_process) > 1 else "per-gpu"


def _stored_nccl_version(params: Any) -> str | None:
    """The NCCL release an ingested nccl-tests header named (``tool_nccl_version``, e.g.
    "2.26.2+cuda12.8"): its algorithms and p2p channel rule (model.p2p) are what the run
    measured. None where absent or not a release."""
    from gpufabric.model.nccl_tuner import nccl_version_tuple

    stored = str(params.get("tool_nccl_version", "") or "").split("+")[0]
    try:
        nccl_version_tuple(stored)
    except InputError:
        return None
    return stored


def _nccl_points(r: Any) -> list[Point]:
    p = r.params
    op = _NCCL_OPS.get(p.get("tool_op", ""), p.get("tool_op", ""))
    if op not in OPS or "tool_ranks" not in p:
        return []
    ranks, nodes = int(p["tool_ranks"]), int(p.get("tool_nodes", "1"))
    g = int(p.get("tool_gpus_per_node", str(max(1, ranks // nodes))))
    timing = "graph" if p.get("tool_graph") == "1" else "eager"
    harness = _stored_harness(p)
    version = _stored_nccl_version(p)
    # Out-of-place and in-place rows time the same transfer: the parser keeps both as the
    # metric's samples, two repeats of one point.
    sized = [
        (int(m.group(1)), v) for x in r.metrics if (m := _SIZE_METRIC.match(x.name)) for v in (x.samples or (x.value,))
    ]
    top = r.metric("time_us")
    if top is not None and "tool_max_size_bytes" in p:
        sized += [(int(p["tool_max_size_bytes"]), v) for v in (top.samples or (top.value,))]
    return [
        Point(
            op=op,
            size_bytes=s,
            time_us=t,
            num_ranks=ranks,
            nodes=nodes,
            gpus_per_node=g,
            timing=timing,
            harness=harness,
            nccl_version=version,
            busbw_gbps=busbw_gbps(op, s, t * 1e-6, ranks),
        )
        for s, t in sized
        if s > 0 and t > 0 and math.isfinite(t)
    ]


def points_from_run(run: Any, *, reduce: str = "median") -> list[Point]:
    """Measured collective points of a run: torch probes and nccl-tests results (suite or ingested).

    Each point keeps the harness and NCCL release its result was measured with
    (:func:`_stored_harness`, :func:`_stored_nccl_version`).
    Repeats of one (op, size, ranks, nodes, timing, harness, release) are reduced to their median time; with
    ``reduce="robust"`` (what the fit uses: see ``calibrate``) repeats slower than
    ``DISTURBED_FACTOR`` x the fastest are dropped first.
    """
    raw: list[Point] = []
    for r in run.results:
        if r.status.value != "ok":
            continue
        if r.tool == "nccl-tests":
            raw += _nccl_points(r)
            continue
        p = r.params
        t = r.metric("time_p50_us") or r.metric("time_us")
        if "op" not in p or "size_bytes" not in p or t is None:
            continue
        n = int(p.get("num_ranks", "0") or 0)
        ranks = rank_stats(r)
        nodes = len({s.host for s in ranks.ranks}) if ranks and ranks.ranks else int(p.get("nodes", "1"))
        size = int(p["size_bytes"])
        raw.append(
            Point(
                op=p["op"],
                size_bytes=size,
                time_us=t.value,
                num_ranks=n,
                nodes=nodes,
                gpus_per_node=max(1, n // nodes),
                busbw_gbps=busbw_gbps(p["op"], size, t.value * 1e-6, n),
            )
        )
    groups: dict[tuple, list[Point]] = defaultdict(list)
    for pt in raw:
        groups[(pt.op, pt.size_bytes, pt.num_ranks, pt.nodes, pt.timing, pt.harness, pt.nccl_version)].append(pt)
    out = []
    for pts in groups.values():
        times = [p.time_us for p in pts]
        if reduce == "robust":
            times = [t for t in times if t <= DISTURBED_FACTOR * min(times)]
        t = statistics.median(times)
        first = pts[0]
        out.append(
            replace(
                first,
                time_us=t,
                repeats=len(pts),
                busbw_gbps=busbw_gbps(first.op, first.size_bytes, t * 1e-6, first.num_ranks),
            )
        )
    return sorted(out, key=lambda p: (p.op, p.nodes, p.size_bytes))


def fit_alpha_beta(points: Sequence[Point], link_class: str) -> Fit:
    """t = alpha + f*S/beta, Huber regression on relative residuals, alpha and 1/beta >= 0.

    Raises:
        InputError: fewer than 2 sizes, or a parameter the sizes cannot identify.
    """
    sizes = {p.size_bytes for p in points}
    if len(sizes) < 2:
        raise InputError(f"calibrate needs at least 2 measured sizes for the {link_class} link class, got {len(sizes)}")
    x = np.array([float(busbw_factor(p.op, p.num_ranks)) * p.size_bytes for p in points])
    t = np.array([p.time_us for p in points])
    # Start from the ordinary least-squares line on relative residuals, then make it robust.
    a0 = np.column_stack([np.ones_like(x), x]) / t[:, None]
    start, *_ = np.linalg.lstsq(a0, np.ones_like(t), rcond=None)
    start = np.clip(start, 1e-12, None)
    scale = np.array([max(float(np.min(t)), 1e-6), max(float(np.max(t) / np.max(x)), 1e-18)])

    def resid(v: np.ndarray) -> np.ndarray:
        return (v[0] * scale[0] + x * v[1] * scale[1]) / t - 1

    sol = least_squares(resid, start / scale, loss="huber", f_scale=0.05, bounds=(0, np.inf), x_scale="jac")
    alpha, inv_beta = float(sol.x[0] * scale[0]), float(sol.x[1] * scale[1])
    small, big = int(np.argmin(x)), int(np.argmax(x))
    lat_share = alpha / (alpha + x[small] * inv_beta) if alpha + x[small] * inv_beta > 0 else 0.0
    bw_share = x[big] * inv_beta / (alpha + x[big] * inv_beta) if alpha + x[big] * inv_beta > 0 else 0.0
    if lat_share < IDENTIFY_SHARE:
        raise InputError(
            f"the {link_class} sweep cannot identify alpha (latency): at its smallest size, {min(sizes)} B, only "
            f"{lat_share:.0%} of the time is latency; add small sizes (nccl-tests -b 8, bench collectives --sizes 8:...)"
        )
    if bw_share < IDENTIFY_SHARE or inv_beta <= 0:
        raise InputError(
            f"the {link_class} sweep cannot identify beta (bandwidth): at its largest size, {max(sizes)} B, only "
            f"{bw_share:.0%} of the time moves bytes; add large sizes (nccl-tests -e 1G or more)"
        )
    pred = alpha + x * inv_beta
    # Anchors for mapping the fit onto the model: a straight alpha-beta line bends away from
    # real curves in the protocol-switch region, so the model is matched where each parameter
    # rules: the median time of the sizes that are >= 80% latency, the median busbw of the
    # largest (up to 3) sizes.
    latency_pts = [p for p, xi in zip(points, x, strict=True) if alpha / (alpha + xi * inv_beta) >= 0.8]
    latency_sizes = [p.time_us for p in latency_pts]
    top = [p for p in sorted(points, key=lambda p: p.size_bytes) if p.size_bytes * 8 >= max(sizes)][-3:]
    return Fit(
        link_class=link_class,
        alpha_us=alpha,
        beta_gbps=1.0 / inv_beta * 1e6 / 1e9,
        points=len(points),
        rms_rel_error=float(np.sqrt(np.mean(((pred - t) / t) ** 2))),
        latency_anchor_us=statistics.median(latency_sizes) if latency_sizes else float(pred[small]),
        busbw_anchor_gbps=statistics.median(p.busbw_gbps for p in top),
        latency_sizes_bytes=tuple(p.size_bytes for p in latency_pts) or (points[small].size_bytes,),
        busbw_sizes_bytes=tuple(p.size_bytes for p in top),
    )


def _predict(p: Point, catalog: Any, gpu: str, fabric: str) -> Any:
    from gpufabric.model.collectives import predict_collective

    return predict_collective(
        op=p.op,
        size_bytes=p.size_bytes,
        nodes=p.nodes,
        gpus_per_node=p.gpus_per_node,
        gpu=gpu,
        fabric=fabric,
        catalog=catalog,
        timing=p.timing,
        harness=p.harness,
        nccl_version=p.nccl_version,
    )


def _error(points: Sequence[Point], catalog: Any, gpu: str, fabric: str) -> dict[str, float]:
    """Median and max |predicted/measured - 1| of time, in percent."""
    err = np.array([abs(_predict(p, catalog, gpu, fabric).time_us / p.time_us - 1) for p in points])
    return {"median_abs_error_pct": float(np.median(err) * 100), "max_abs_error_pct": float(err.max() * 100)}


def _load(files: Sequence[Path]) -> Any:
    from gpufabric.catalog import load_catalog

    return load_catalog(list(files))


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    run_id: int
    fits: tuple[Fit, ...]
    override: dict[str, Any]  # the catalog override document
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]
    comparison: tuple[dict[str, Any], ...]  # per point: measured, predicted before/after
    gpu: str = ""
    fabric: str = ""
    notes: tuple[str, ...] = ()

    @property
    def worsened(self) -> tuple[str, ...]:
        """Link classes whose median error on the fitted points is worse after the fit than
        before: such a fit is refused (``calibrate --force`` keeps it)."""
        return tuple(
            c
            for c in self.before
            if self.after[c]["median_abs_error_pct"] > self.before[c]["median_abs_error_pct"] + WORSEN_TOLERANCE_PCT
        )


def _run_gpu(run: Any) -> str | None:
    models = {r.params.get("tool_gpu_model", "") for r in run.results if r.params.get("tool_gpu_model")}
    ids = {gpu_id(m) for m in models} - {None}
    return ids.pop() if len(ids) == 1 else None


def _resolve_gpu(run: Any, gpu: str | None, points: Sequence[Point], notes: list[str]) -> str:
    """The catalog GPU of ``run``: ``gpu`` if given, else the run's '# Rank' header; a
    one-rank-per-node run without one assumes h100-sxm (only its launch overhead matters)."""
    if gpu is not None:
        return gpu
    found = _run_gpu(run)
    if found is not None:
        notes.append(f"GPU {found} read from the run")
        return found
    if points and any(p.gpus_per_node > 1 for p in points):
        raise InputError(
            f"run {run.id} does not name its GPU model (no nccl-tests '# Rank' header); name it with --gpu (e.g. h100-sxm)"
        )
    if points:
        notes.append("GPU unknown; h100-sxm assumed (one rank per node: only its launch overhead matters)")
    return "h100-sxm"


def _refit(
    fits: Sequence[Fit],
    groups: dict[str, list[Point]],
    cat: Any,
    gpu: str,
    fabric: str,
    fab_fields: dict[str, float],
    gpu_fields: dict[str, float],
) -> None:
    """One fixed-point step: move the fitted fields so the model meets each fit's anchors
    under catalog ``cat`` (the fields of the previous step). Updates the dicts in place."""
    for fit in fits:
        pts = groups[fit.link_class]
        small = min(pts, key=lambda p: p.size_bytes)
        # The model is matched on the same points as each anchor (the median over the
        # latency-dominated sizes, the median over the top sizes): comparing a median
        # over many sizes with the model at one end size biased the fit by the model's
        # own growth between them (and worsened the fit rows, issue 25).
        lat_pts = [p for p in pts if p.size_bytes in fit.latency_sizes_bytes] or [small]
        top_pts = [p for p in pts if p.size_bytes in fit.busbw_sizes_bytes] or [max(pts, key=lambda p: p.size_bytes)]
        model_busbw = statistics.median(_predict(p, cat, gpu, fabric).busbw_gbps for p in top_pts)
        model_lat = statistics.median(_predict(p, cat, gpu, fabric).time_us for p in lat_pts)
        ratio = fit.busbw_anchor_gbps / model_busbw  # > 1: model too slow
        delta = fit.latency_anchor_us - model_lat  # > 0: model too fast
        if fit.link_class == "inter":
            eff = fab_fields["nic_efficiency"] * ratio
            if eff > 1.0:  # measured faster than the catalog's line rate: the line rate was wrong
                fab_fields["nic_line_gbps"] = float(fab_fields["nic_line_gbps"] * eff)
                eff = 1.0
            fab_fields["nic_efficiency"] = float(eff)
            # proxy_us is paid once per op across nodes (model.collectives._launch_us).
            fab_fields["proxy_us"] = float(max(fab_fields["proxy_us"] + delta, 0.0))
        else:
            for key in ("nvlink_busbw_gbps", "nvls_busbw_gbps"):
                if key in gpu_fields:
                    gpu_fields[key] = float(gpu_fields[key] * ratio)
            gpu_fields["eager_launch_us"] = float(max(gpu_fields["eager_launch_us"] + delta, 0.1))


def _compare(
    groups: dict[str, list[Point]], before_cat: Any, after_cat: Any, gpu: str, fabric: str
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], list[dict[str, Any]]]:
    """Error per link class before and after, and every point's measured and predicted figures."""
    before, after, rows = {}, {}, []
    for c, pts in groups.items():
        before[c] = _error(pts, before_cat, gpu, fabric)
        after[c] = _error(pts, after_cat, gpu, fabric)
        for p in pts:
            b, a = _predict(p, before_cat, gpu, fabric), _predict(p, after_cat, gpu, fabric)
            rows.append(
                {
                    "link_class": c,
                    "op": p.op,
                    "size_bytes": p.size_bytes,
                    "nodes": p.nodes,
                    "ranks": p.num_ranks,
                    "repeats": p.repeats,
                    "timing": p.timing,
                    "harness": p.harness,
                    "measured_time_us": p.time_us,
                    "predicted_before_us": b.time_us,
                    "predicted_after_us": a.time_us,
                    "measured_busbw_gbps": p.busbw_gbps,
                    "predicted_before_gbps": b.busbw_gbps,
                    "predicted_after_gbps": a.busbw_gbps,
                }
            )
    return before, after, rows


def _with_harness(points: Sequence[Point], harness: str | None) -> list[Point]:
    """``points`` under the harness they were measured with: each point's stored one when
    ``harness`` is None, else ``harness`` for every point (the user's word: a torch probe, or
    a table ingested before the parser recorded ``nGpus``). The harness's launch cost (nccl-
    tests -g N: one thread launches on every GPU, ``SINGLE_PROCESS_US`` per extra GPU) is
    then modelled, not fitted into the GPU's ``eager_launch_us`` or the fabric's
    ``proxy_us``: fitting a single-process table as per-GPU biased both by ~34 us on 8 GPUs.

    Raises:
        InputError: ``harness`` (or a stored one) is not one of the model's harnesses.
    """
    from gpufabric.model.collectives import HARNESSES

    out = [p if harness is None else replace(p, harness=harness) for p in points]
    for value in ({harness} | {p.harness for p in out}) - {None}:
        if value not in HARNESSES:
            raise InputError(f"unknown harness {value!r}; choose from {', '.join(HARNESSES)}")
    return out


def calibrate(
    run: Any,
    *,
    gpu: str | None = None,
    fabric: str | None = None,
    storage: str | None = None,
    base_catalog: Sequence[Path] = (),
    iterations: int = 6,
    harness: str | None = None,
) -> Calibration:
    """Fit alpha/beta per link class of ``run`` and build the override for its GPU/fabric/storage.

    ``gpu`` and ``fabric`` override what the run says; the fabric is needed only when the
    run has multi-node points. The fitted fields (NIC efficiency and proxy cost across
    nodes; NVLink/NVLS busbw and eager launch inside one) are moved ``iterations`` times
    until the model meets the fits' anchors (:func:`_refit`). Each point is predicted under
    the harness it was measured with (``harness`` None: what its result stored, see
    :func:`_with_harness`), so a ``-g 8`` table does not fit its launch cost into the GPU's.

    Raises:
        InputError: nothing to fit, a parameter cannot be identified, or the GPU/fabric is unknown.
    """
    # Disturbed repeats are dropped before the median: disturbances (the first call's
    # warm-up, a preempted proxy thread) only ever add time, and nccl-tests tables show
    # them at their smallest size (nccl-tests#309: 68.5 us out of place, 24.7 us in place
    # at 8 B), which a two-size calibration would take as the latency.
    points = _with_harness(points_from_run(run, reduce="robust"), harness)
    catalog = _load(base_catalog)
    for check, value in ((catalog.gpu, gpu), (catalog.fabric, fabric)):
        if value is not None:
            check(value)  # an unknown id is a CatalogError before anything else
    groups: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        groups["inter" if p.nodes > 1 else "intra"].append(p)
    storage_fields = _storage_fields(run) if storage else {}
    if not groups and not storage_fields:
        raise InputError(
            f"run {run.id} has no collective sweep results (torch probes or nccl-tests tables)"
            " or fio results with --storage to fit"
        )
    notes: list[str] = []
    stored = Counter(p.harness for p in points)
    if harness is None and set(stored) - {"per-gpu"}:
        notes.append(
            "harness read from the run: "
            + ", ".join(f"{h} for {n} of {len(points)} points" for h, n in sorted(stored.items()))
        )
    gpu = _resolve_gpu(run, gpu, points, notes)
    if "inter" in groups and fabric is None:
        n = max(p.nodes for p in groups["inter"])
        raise InputError(
            f"run {run.id} spans {n} nodes: name the fabric it ran over with --fabric"
            " (a catalog id such as ib-ndr or roce-400g); no tool output says it"
        )
    fabric = fabric or "ib-ndr"  # intra-node only: the fabric never enters the prediction
    gpu_entry = catalog.gpu(gpu)
    fab = catalog.fabric(fabric)
    fits = tuple(fit_alpha_beta(groups[c], c) for c in ("inter", "intra") if c in groups)
    stamp = {"source": f"measured, run {run.id}", "as_of": datetime.date.today().isoformat(), "tag": "user"}
    fab_fields = {
        "nic_line_gbps": float(fab.nic_line_gbps),
        "nic_efficiency": float(fab.nic_efficiency),
        "proxy_us": float(getattr(fab, "proxy_us", 0.0)),
    }
    gpu_fields = {
        "nvlink_busbw_gbps": float(gpu_entry.nvlink_busbw_gbps),
        "eager_launch_us": float(getattr(gpu_entry, "eager_launch_us", 0.0) or catalog.site.launch_us),
    }
    if gpu_entry.nvls:
        gpu_fields["nvls_busbw_gbps"] = float(gpu_entry.nvls_busbw_gbps)

    def doc() -> dict[str, Any]:
        d: dict[str, Any] = {}
        if "inter" in groups:
            d["fabrics"] = {fabric: {**stamp, **fab_fields}}
        if "intra" in groups:
            d["gpus"] = {gpu: {**stamp, **gpu_fields}}
        if storage_fields:
            d["storage"] = {storage: {**stamp, **storage_fields}}
        return d

    with tempfile.TemporaryDirectory(prefix="gpufabric-calibrate-") as tmp:
        path = Path(tmp) / "override.yaml"
        for _ in range(iterations):
            path.write_text(yaml.safe_dump(doc(), sort_keys=False), encoding="utf-8")
            _refit(fits, groups, _load([*base_catalog, path]), gpu, fabric, fab_fields, gpu_fields)
        final = doc()
        path.write_text(yaml.safe_dump(final, sort_keys=False), encoding="utf-8")
        before, after, rows = _compare(groups, catalog, _load([*base_catalog, path]), gpu, fabric)
    return Calibration(
        run_id=run.id,
        fits=fits,
        override=final,
        before=before,
        after=after,
        comparison=tuple(rows),
        gpu=gpu,
        fabric=fabric,
        notes=tuple(notes),
    )


def _median(run: Any, metric: str) -> float | None:
    values = [
        m.value
        for r in run.results
        if r.tool == "fio"
        and r.status.value == "ok"
        and (m := r.metric(metric))
        and m.value > 0
        and math.isfinite(m.value)
    ]
    return statistics.median(values) if values else None


def _storage_fields(run: Any) -> dict[str, float]:
    """client_write/read_gbps and commit_latency_ms: medians over the run's fio results (a robust
    statistic: one lucky or unlucky repeat does not set the catalog)."""
    out: dict[str, float] = {}
    if (w := _median(run, "write_bw_gbps")) is not None:
        out["client_write_gbps"] = w
    if (r := _median(run, "read_bw_gbps")) is not None:
        out["client_read_gbps"] = r
    if (f := _median(run, "fsync_lat_p50_us")) is not None:
        out["commit_latency_ms"] = f / 1e3
    return out


def render_yaml(cal: Calibration) -> str:
    header = (
        f"# Catalog override written by `gpufabric calibrate` from run {cal.run_id}.\n"
        "# Use it with: gpufabric plan SPEC --catalog THIS_FILE\n"
    )
    return header + yaml.safe_dump(cal.override, sort_keys=False)


_META_KEYS = frozenset({"source", "as_of", "tag", "name"})


def overrides_in(files: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The catalog fields that user override files set (for ``plan --catalog`` to list).

    Each entry: ``file``, ``field`` (section.id.key), ``value`` and the entry's ``source``.
    The files were validated by the catalog loader already; this only reads them again.
    """
    out: list[dict[str, Any]] = []
    for file in files:
        try:
            doc = yaml.safe_load(read_text(file, "catalog")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"{file}: cannot read catalog override: {exc}") from None
        for section, entries in doc.items() if isinstance(doc, dict) else ():
            for entry_id, fields in (entries or {}).items() if isinstance(entries, dict) else ():
                if not isinstance(fields, dict):
                    continue
                source = str(fields.get("source", "user"))
                for key, value in fields.items():
                    if key in _META_KEYS:
                        continue
                    if isinstance(value, dict):  # {value, source, ...}
                        source, value = str(value.get("source", source)), value.get("value")
                    out.append(
                        {"file": str(file), "field": f"{section}.{entry_id}.{key}", "value": value, "source": source}
                    )
    return out
