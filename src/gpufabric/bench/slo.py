"""SLOs for a validation run: derived from the plan/spec, or read from a thresholds file.

From the plan (or the spec with its first fabric/storage option), per node:

* ``fio.checkpoint_write write_bw_gbps >=`` the bandwidth that keeps checkpoint stalls
  within ``requirements.max_checkpoint_stall_fraction`` (sync: the whole write blocks,
  so it must fit in ``stall x interval``; async: only the snapshot blocks, so the write
  must merely finish before the next checkpoint, ``interval``).
* ``fio.checkpoint_restore read_bw_gbps >=`` checkpoint / nodes / restart budget
  (``reliability.restart_min``): a restore cannot take longer than the whole restart.
* ``fio.dataset_read read_bw_gbps >=`` tokens per second x bytes per token / nodes, when
  the plan gives a step time and the spec a dataset.
* ``fio.small_file_commit fsync_lat_p99_us <=`` the storage's commit latency + 3 sigma
  (catalog ``commit_latency_ms``/``commit_jitter_ms``): the plan's checkpoint model
  assumes that figure.
* Latency bounds for the step budget: the plan's step time assumes the fabric's
  small-message latency (catalog ``rdma_write_lat_us``) with ``jitter_us`` per dependent
  step. p50 must be within 50 % of it and p99 within mean + 3 sigma (normal tail),
  measured with perftest ib_write_lat on RDMA fabrics and sockperf on TCP ones.
* ``iperf3.tcp throughput_gbit_s`` on TCP fabrics: line rate x 1448/1538, the TCP
  payload share of an MTU-1500 Ethernet frame (1500 - 52 bytes IP+TCP with timestamps,
  over 1500 + 38 bytes of Ethernet framing, preamble and gap), 10 % tolerance.
* ``fio.checkpoint_write write_bw_gbps ~`` this node's share of the bandwidth the plan's
  checkpoint model assumed (checkpoint bytes / nodes / the candidate's modelled
  ``checkpoint_write_s``), 20 % tolerance, when the plan gives it.
* ``nccl.all_reduce busbw_gbps`` expected from ``predict_collective`` for this node's
  GPUs with the algorithms the bundle allows (bitwise reproducibility: no NVLS or
  CollNet), with the 15 % error bound docs/accuracy.md records for collective predictions.

Whether the node is the planned hardware at all is ``bench.planned``'s question.

A thresholds file (one per hardware type) sets targets directly::

    hardware: h100-sxm-node          # what these thresholds are for (free text)
    tests:
      fio.checkpoint_write:
        write_bw_gbps: {min: 2.0}
      iperf3.tcp:
        throughput_gbit_s: {target: 90, tolerance: 0.1, min_pass: 2}
      sockperf.udp:
        lat_p99_us: {max: 60}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpufabric.errors import InputError
from gpufabric.results.records import Direction, Slo
from gpufabric.spec.plan_file import SavedPlan, recommended_candidate

#: TCP payload per MTU-1500 Ethernet frame: 1448 bytes (1500 - 20 IP - 32 TCP with
#: timestamps) of 1538 on the wire (1500 + 14 header + 4 FCS + 8 preamble + 12 gap).
TCP_PAYLOAD_EFFICIENCY = 1448 / 1538
#: RDMA WRITE payload per 4096-byte-MTU packet over its bytes on the wire. InfiniBand: LRH 8 +
#: BTH 12 + ICRC 4 + VCRC 2 bytes per middle packet (IBTA Architecture Specification Vol. 1
#: Rel. 1.4, ch. 5 and 9; as_of 2020); RoCEv2: Ethernet 14 + FCS 4 + preamble and gap 20 +
#: IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (IBTA Annex A17 RoCEv2, 2014). The NIC's purchased rate
#: is what ``perftest.ib_write_bw`` must show, within 10 %.
RDMA_PAYLOAD_EFFICIENCY = {"ib": 4096 / (4096 + 26), "roce": 4096 / (4096 + 82)}
#: Tolerance of a collective busbw expectation: the error bound docs/accuracy.md records for
#: collective predictions (15 %; tests/model/test_accuracy.py holds the model to it). The
#: DCGM-style 0.75 x golden (bench-tools.md section 6) was wider than the model's own error,
#: and with NVLS predicted where the bundle pins ring a healthy node sat on the edge (issue 16).
PREDICT_TOLERANCE = 0.15
#: Tolerance of the per-node storage bandwidth the plan's checkpoint model assumed: the
#: catalog client bandwidths are fio inputs or estimates [U] (docs/accuracy.md, storage rows),
#: and fio's sequential write runs ~10 % from run to run on one node; 20 % covers both.
STORAGE_TOLERANCE = 0.20

_LOWER_HINTS = ("_us", "_ms", "retransmits", "lost", "wrong", "dropped", "jitter", "cpu_")


def direction_of(metric: str) -> Direction:
    """Lower is better for latencies, times, losses and errors; higher for the rest."""
    base = metric.split("@", 1)[0]
    return Direction.lower if any(h in base for h in _LOWER_HINTS) else Direction.higher


class _Bound(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: float | None = None
    tolerance: float = Field(0.1, ge=0, le=1)
    min: float | None = None
    max: float | None = None
    direction: Direction | None = None
    min_pass: int | None = Field(None, gt=0)


class _Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hardware: str = ""
    tests: dict[str, dict[str, _Bound]]


def load_thresholds(path: Path) -> list[Slo]:
    """SLOs from a thresholds YAML file; a bad file is an InputError naming file and field."""
    from gpufabric.errors import SpecError
    from gpufabric.spec.loader import parse_yaml, read_text

    # The spec's reader: size cap, UTF-8, bounded alias expansion, located YAML errors.
    try:
        doc = parse_yaml(read_text(path, "thresholds"), str(path)).data
    except SpecError as exc:
        raise InputError(str(exc)) from None
    try:
        parsed = _Thresholds.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "<top level>"
        raise InputError(f"{path}: {where}: {err['msg']} (see gpufabric bench --help for the format)") from None
    slos = []
    source = f"thresholds:{path.name}" + (f" ({parsed.hardware})" if parsed.hardware else "")
    for test, metrics in parsed.tests.items():
        for metric, bound in metrics.items():
            if bound.target is None and bound.min is None and bound.max is None:
                raise InputError(f"{path}: tests.{test}.{metric}: give target, min or max")
            slos.append(
                Slo(
                    test=test,
                    metric=metric,
                    direction=bound.direction or direction_of(metric),
                    expected=bound.target,
                    tolerance=bound.tolerance,
                    minimum=bound.min,
                    maximum=bound.max,
                    source=source,
                    min_pass=bound.min_pass,
                )
            )
    return slos


def from_spec(
    spec,
    *,
    fabric: str | None = None,
    storage: str | None = None,
    step_time_s: float | None = None,
    checkpoint_write_s: float | None = None,
    storage_read_gbps: float | None = None,
    catalog=None,
    source: str = "spec",
) -> list[Slo]:
    """SLOs for one node of the design (see the module docstring for each rule).

    ``checkpoint_write_s``: the plan's modelled checkpoint write time; with it the
    checkpoint write SLO also expects this node's share of the modelled bandwidth.
    ``storage_read_gbps``: the designed storage's aggregate read bandwidth (the plan's
    ``storage_read_gbps``); with it the restore and dataset reads expect this node's share.
    Each storage SLO's minimum is the larger of the workload's need and
    ``1 - STORAGE_TOLERANCE`` of the purchased share (``_bought``).
    """
    if catalog is None:
        from gpufabric.catalog import load_catalog

        catalog = load_catalog()
    fabric_id = fabric or spec.options.fabrics[0]
    storage_id = storage or spec.options.storage[0]
    fab = catalog.fabrics.get(fabric_id)
    sto = catalog.storage.get(storage_id)
    if fab is None or sto is None:
        missing = fabric_id if fab is None else storage_id
        raise InputError(f"{source}: unknown catalog id {missing!r}")
    nodes = spec.cluster.nodes
    work = spec.workload
    ckpt_bytes = work.model.params * work.checkpoint.bytes_per_param
    if work.checkpoint.interval_min == "auto":  # chosen per design by the planner
        raise InputError(
            f"{source}: checkpoint.interval_min is auto; set the interval in minutes for bench SLOs"
            " (the plan's checkpoint_interval_min gives the one it chose)"
        )
    interval_s = work.checkpoint.interval_min * 60
    stall = spec.requirements.max_checkpoint_stall_fraction
    slos: list[Slo] = []
    tag = f"{source} ({fabric_id}, {storage_id})"
    if work.checkpoint.mode == "sync" and stall:
        write_budget_s = stall * interval_s
        why = f"sync checkpoint of {ckpt_bytes / 1e9:.0f} GB within {stall:.0%} of {interval_s / 60:g} min"
    else:
        write_budget_s = interval_s
        why = f"async checkpoint of {ckpt_bytes / 1e9:.0f} GB drained before the next one ({interval_s / 60:g} min)"
    expected = None
    if checkpoint_write_s:
        # The model writes the whole checkpoint in checkpoint_write_s with the backend's bandwidth
        # shared by all nodes (min(N x client, units x unit)): this node's share of it.
        expected = ckpt_bytes / nodes / checkpoint_write_s / 1e9
        why += (
            f"; plan models {expected:.3g} GB/s per node ({ckpt_bytes / 1e9:.0f} GB over {nodes} nodes"
            f" in {checkpoint_write_s:.3g} s)"
        )
    slos.append(
        _bought(
            "fio.checkpoint_write",
            "write_bw_gbps",
            need_gbps=ckpt_bytes / nodes / write_budget_s / 1e9,
            why_need=why.split("; plan models")[0],
            share_gbps=expected,
            why_share=f"plan's checkpoint write of {ckpt_bytes / 1e9:.0f} GB over {nodes} nodes"
            f" in {checkpoint_write_s or 0:.3g} s",
            tag=tag,
        )
    )
    read_share = storage_read_gbps / nodes if storage_read_gbps else None
    why_read = f"plan's storage reads {storage_read_gbps or 0:.4g} GB/s over {nodes} nodes"
    restart_s = spec.reliability.restart_min * 60
    if restart_s > 0:
        slos.append(
            _bought(
                "fio.checkpoint_restore",
                "read_bw_gbps",
                need_gbps=ckpt_bytes / nodes / restart_s / 1e9,
                why_need=f"restore within the {spec.reliability.restart_min:g} min restart budget",
                share_gbps=read_share,
                why_share=why_read,
                tag=tag,
            )
        )
    if work.dataset is not None and step_time_s:
        need = work.global_batch_tokens / step_time_s * work.dataset.bytes_per_token / nodes
        slos.append(
            _bought(
                "fio.dataset_read",
                "read_bw_gbps",
                need_gbps=need / 1e9,
                why_need=f"data loading at the planned step time {step_time_s:.3g} s",
                share_gbps=read_share,
                why_share=why_read,
                tag=tag,
            )
        )
    slos += _hardware_slos(fab, sto, tag)
    predicted = _predicted_busbw(spec, fabric_id, catalog)
    if predicted is not None:
        busbw, algorithm = predicted
        pin = " (bitwise: no NVLS/CollNet)" if spec.requirements.reproducibility == "bitwise" else ""
        slos.append(
            Slo(
                test="nccl.all_reduce",
                metric="busbw_gbps",
                direction=Direction.higher,
                expected=busbw,
                tolerance=PREDICT_TOLERANCE,
                source=f"{tag}: predict_collective all_reduce 128 MiB, {algorithm}{pin}",
            )
        )
    return slos


def _bought(
    test: str,
    metric: str,
    *,
    need_gbps: float,
    why_need: str,
    share_gbps: float | None,
    why_share: str,
    tag: str,
) -> Slo:
    """A storage bandwidth SLO: at least the workload's need and what was bought.

    What was bought is this node's share of the designed storage's bandwidth; it is the
    target (``STORAGE_TOLERANCE``) and ``1 - STORAGE_TOLERANCE`` of it is a floor, so storage
    delivering 3 % of the purchase no longer passes on a workload that needs little (issue 23:
    a 0.0128 GB/s restore SLO where the plan's storage gives 0.47 GB/s per node).
    """
    if not share_gbps:
        return Slo(
            test=test,
            metric=metric,
            direction=Direction.higher,
            minimum=need_gbps,
            source=f"{tag}: min = need {need_gbps:.4g} GB/s ({why_need}); no purchased bandwidth known (give --plan)",
        )
    floor = (1 - STORAGE_TOLERANCE) * share_gbps
    binding = "purchased" if floor >= need_gbps else "need"
    return Slo(
        test=test,
        metric=metric,
        direction=Direction.higher,
        expected=share_gbps,
        tolerance=STORAGE_TOLERANCE,
        minimum=max(need_gbps, floor),
        source=f"{tag}: min = max(need {need_gbps:.4g} GB/s: {why_need},"
        f" purchased {1 - STORAGE_TOLERANCE:g} x {share_gbps:.4g} GB/s per node: {why_share}) = {binding};"
        f" target the purchased share",
    )


def _hardware_slos(fab, sto, tag: str) -> list[Slo]:
    """SLOs that need only the chosen fabric and storage (not the model's sizes)."""
    slos: list[Slo] = []
    slos.append(
        Slo(
            test="fio.small_file_commit",
            metric="fsync_lat_p99_us",
            direction=Direction.lower,
            maximum=(sto.commit_latency_ms + 3 * sto.commit_jitter_ms) * 1000,
            source=f"{tag}: catalog commit latency + 3 sigma",
        )
    )
    mean_us = fab.rdma_write_lat_us
    p99_us = mean_us + 3 * fab.jitter_us
    latency_test = "sockperf.udp" if fab.kind == "tcp" else "perftest.ib_write_lat"
    slos.append(
        Slo(
            test=latency_test,
            metric="lat_p50_us",
            direction=Direction.lower,
            expected=mean_us,
            tolerance=0.5,
            source=f"{tag}: step model's per-step latency",
        )
    )
    slos.append(
        Slo(
            test=latency_test,
            metric="lat_p99_us",
            direction=Direction.lower,
            maximum=p99_us,
            source=f"{tag}: step model's latency + 3 sigma jitter",
        )
    )
    if fab.kind in RDMA_PAYLOAD_EFFICIENCY:
        slos.append(
            Slo(
                test="perftest.ib_write_bw",
                metric="bw_avg_gbps",
                direction=Direction.higher,
                expected=fab.nic_line_gbps * RDMA_PAYLOAD_EFFICIENCY[fab.kind],
                tolerance=0.1,
                source=f"{tag}: purchased NIC line rate {fab.nic_line_gbps * 8:g} Gbit/s x RDMA payload efficiency",
            )
        )
    if fab.kind == "tcp":
        slos.append(
            Slo(
                test="iperf3.tcp",
                metric="throughput_gbit_s",
                direction=Direction.higher,
                expected=fab.nic_line_gbps * 8 * TCP_PAYLOAD_EFFICIENCY,
                tolerance=0.1,
                source=f"{tag}: NIC line rate x TCP payload efficiency",
            )
        )
    return slos


def _predicted_busbw(spec, fabric_id: str, catalog) -> tuple[float, str] | None:
    """(busbw, algorithm) of one node's all-reduce as the bundle configures it: a bitwise spec
    pins NCCL to deterministic algorithms (configure/launch.py), so NVLS is not predicted."""
    try:
        from gpufabric.model.collectives import predict_collective
    except ModuleNotFoundError:  # the planner's model is optional for bench
        return None
    prediction = predict_collective(
        op="all_reduce",
        size_bytes=128 * 1024 * 1024,
        nodes=1,
        gpus_per_node=spec.cluster.gpus_per_node,
        gpu=spec.cluster.gpu,
        fabric=fabric_id,
        catalog=catalog,
        deterministic=spec.requirements.reproducibility == "bitwise",
    )
    return float(prediction.busbw_gbps), str(prediction.algorithm)


def from_plan(plan: SavedPlan | Mapping[str, Any], spec=None, *, path: str = "plan", catalog=None) -> list[Slo]:
    """SLOs for the plan's recommended candidate.

    The plan JSON names the fabric and storage but not the model's sizes: without the
    spec only the fabric/storage SLOs (latency, TCP throughput, commit latency) apply.
    """
    if catalog is None:
        from gpufabric.catalog import load_catalog

        catalog = load_catalog()
    candidate = recommended_candidate(plan, path, catalog.known_ids())
    source = f"plan {Path(path).name} candidate {candidate.id}"
    if spec is not None:
        write_s = candidate.breakdown.get("checkpoint_write_s")
        read_gbps = candidate.storage_read_gbps
        return from_spec(
            spec,
            fabric=candidate.fabric,
            storage=candidate.storage,
            step_time_s=candidate.step_time_s,
            catalog=catalog,
            source=source,
            checkpoint_write_s=_positive(write_s),
            storage_read_gbps=_positive(read_gbps),
        )
    fab = catalog.fabrics.get(candidate.fabric)
    sto = catalog.storage.get(candidate.storage)
    if fab is None or sto is None:
        raise InputError(f"{path}: candidate {candidate.id!r} names an unknown fabric or storage")
    return _hardware_slos(fab, sto, f"{source} ({candidate.fabric}, {candidate.storage})")


def _positive(value: Any) -> float | None:
    """A plan figure usable as a bandwidth or time: a finite positive number, else None."""
    import math

    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def describe(slos: Sequence[Slo]) -> list[str]:
    """One line per SLO, for --dry-run and logs."""
    lines = []
    for s in slos:
        parts = []
        if s.expected is not None:
            parts.append(f"~{s.expected:.4g} (tol {s.tolerance:.0%})")
        if s.minimum is not None:
            parts.append(f">= {s.minimum:.4g}")
        if s.maximum is not None:
            parts.append(f"<= {s.maximum:.4g}")
        lines.append(f"{s.test} {s.metric} {' and '.join(parts)}  [{s.source}]")
    return lines


#: Metrics the plan-derived SLOs above judge (whatever the test).
PLAN_SLO_METRICS = (
    "write_bw_gbps",
    "read_bw_gbps",
    "fsync_lat_p99_us",
    "lat_p50_us",
    "lat_p99_us",
    "throughput_gbit_s",
    "busbw_gbps",
)

#: Calibrated thresholds sit at least this far from the golden value on the bad side:
#: DCGM's diagnostics fail a node below ~0.75 x its golden figure (bench-tools.md section 6).
CALIBRATION_TOLERANCE = 0.25
#: ... or this many coefficients of variation of the calibration repeats, when wider (a
#: noisy metric must not flap) ...
CALIBRATION_CVS = 3.0
#: ... but never wider than this: a bandwidth bound below 40 % of golden tests nothing.
CALIBRATION_MAX_TOLERANCE = 0.6
#: Tails (p99 and beyond, max; results.compare.metric_class) vary far more between runs
#: than within one: fio's fsync p99 here was 7.9 ms in one quick run and 15.3 ms in the
#: next (2026-12-01, shared 2-vCPU VM). Their bound is at least 2x golden, at most 3x.
CALIBRATION_TAIL_TOLERANCE = (1.0, 2.0)


def thresholds_from_run(run, *, hardware: str) -> str:
    """A thresholds YAML whose targets are ``run``'s medians ("golden values" of this hardware).

    Metrics: those the run's SLO verdicts judged, each test's headline (first) metric, and
    any metric the plan's SLOs use (``PLAN_SLO_METRICS``).
    Tolerance per metric: ``max(CALIBRATION_TOLERANCE, CALIBRATION_CVS x CV across repeats)``,
    capped at ``CALIBRATION_MAX_TOLERANCE``; tail latencies ``CALIBRATION_TAIL_TOLERANCE``. Counts and failed or skipped results are left out.
    """
    import statistics

    import yaml

    from gpufabric.results.compare import metric_class
    from gpufabric.results.records import Status

    values: dict[tuple[str, str], list[float]] = {}
    directions: dict[tuple[str, str], Direction] = {}
    units: dict[tuple[str, str], str] = {}
    wanted = {(v.test, v.metric) for v in run.verdicts}
    for r in run.results:
        if r.status != Status.ok or not r.metrics:
            continue
        wanted.add((r.name, r.metrics[0].name))
        wanted.update((r.name, m.name) for m in r.metrics if m.name in PLAN_SLO_METRICS)
    for r in run.results:
        if r.status != Status.ok:
            continue
        for m in r.metrics:
            if (r.name, m.name) in wanted and m.unit != "count" and m.value == m.value:
                values.setdefault((r.name, m.name), []).append(m.value)
                directions[(r.name, m.name)] = m.direction
                units[(r.name, m.name)] = m.unit
    tests: dict[str, dict[str, dict[str, Any]]] = {}
    for (test, metric), xs in sorted(values.items()):
        median = statistics.median(xs)
        if median == 0:
            continue  # no relative scale
        cv = statistics.stdev(xs) / abs(statistics.mean(xs)) if len(xs) > 1 else 0.0
        direction = directions[(test, metric)]
        floor, cap = (
            CALIBRATION_TAIL_TOLERANCE
            if direction == Direction.lower and metric_class(metric, units[(test, metric)]) == "tail"
            else (CALIBRATION_TOLERANCE, CALIBRATION_MAX_TOLERANCE)
        )
        tol = round(min(cap, max(floor, CALIBRATION_CVS * cv)), 3)
        # A thresholds tolerance is at most 1 (a fraction); a wider bound on a time is an absolute max.
        tests.setdefault(test, {})[metric] = (
            {"target": float(f"{median:.6g}"), "tolerance": tol, "direction": direction.value}
            if tol <= 1
            else {"max": float(f"{median * (1 + tol):.6g}"), "direction": direction.value}
        )
    header = (
        f"# Calibrated from run {run.id} on {run.fingerprint.get('host', '?')}: targets are that run's medians;\n"
        f"# tolerance max({CALIBRATION_TOLERANCE:g}, {CALIBRATION_CVS:g} x CV of its repeats).\n"
    )
    return header + yaml.safe_dump({"hardware": hardware, "tests": tests}, sort_keys=False)


def probe_slos(
    kind: str,
    plan: SavedPlan | Mapping[str, Any],
    spec=None,
    *,
    path: str = "plan",
    nodes: int,
    nproc: int,
    config: Mapping[str, Any],
    catalog=None,
) -> list[Slo]:
    """What a torch probe should measure on the plan's recommended design, at the probe's scale.

    * collectives (needs the spec's GPU): all_reduce busbw at the largest size of the sweep
      from ``predict_collective`` for ``nodes`` x ``nproc`` ranks on the plan's fabric,
      within ``PREDICT_TOLERANCE``;
    * checkpoint: the probe's write and read rates (all its ranks together) at least
      ``1 - STORAGE_TOLERANCE`` of its ``nodes``' share of the designed storage (``_bought``);
      the write share needs the spec's checkpoint size;
    * train: none (the probe's model is scaled down; the plan's step time does not apply).
    """
    if catalog is None:
        from gpufabric.catalog import load_catalog

        catalog = load_catalog()
    candidate = recommended_candidate(plan, path, catalog.known_ids())
    fabric_id = candidate.fabric
    tag = f"plan {Path(path).name} candidate {candidate.id} ({fabric_id}, {candidate.storage})"
    breakdown = candidate.breakdown
    plan_nodes = _positive(breakdown.get("num_nodes"))
    slos: list[Slo] = []
    if kind == "collectives" and spec is not None and "all_reduce" in config.get("ops", ()):
        size = max(int(s) for s in config["sizes"])
        dtype = config.get("dtypes", ["float32"])[0]
        slos.append(
            _predicted_busbw_slo(
                # The case of one size (records.CASE_PARAMS): the expectation is for that size only.
                f"torch.all_reduce[dtype={dtype} size_bytes={size}]",
                spec,
                catalog,
                fabric_id,
                op="all_reduce",
                size=size,
                nodes=nodes,
                gpus=nproc,
                source=f"{tag}: predict_collective all_reduce {size} B on {nodes} x {nproc} ranks",
            )
        )
    if kind == "checkpoint" and plan_nodes:
        read = _positive(candidate.storage_read_gbps)
        write_s = _positive(breakdown.get("checkpoint_write_s"))
        if spec is not None and write_s:
            ckpt = spec.workload.model.params * spec.workload.checkpoint.bytes_per_param
            slos.append(
                _bought(
                    "torch.checkpoint.*",
                    "write_gbps",
                    need_gbps=0.0,
                    why_need="none for the probe",
                    share_gbps=ckpt / plan_nodes / write_s / 1e9 * nodes,
                    why_share=f"{nodes} node(s)' share of the plan's checkpoint write ({ckpt / 1e9:.0f} GB over"
                    f" {plan_nodes:g} nodes in {write_s:.3g} s)",
                    tag=tag,
                )
            )
        if read:
            slos.append(
                _bought(
                    "torch.checkpoint.*",
                    "read_gbps",
                    need_gbps=0.0,
                    why_need="none for the probe",
                    share_gbps=read / plan_nodes * nodes,
                    why_share=f"{nodes} node(s)' share of the plan's storage read {read:.4g} GB/s"
                    f" over {plan_nodes:g} nodes",
                    tag=tag,
                )
            )
    return slos


def ingest_slos(plan: SavedPlan | Mapping[str, Any], spec, results, *, path: str = "plan", catalog=None) -> list[Slo]:
    """What an imported nccl-tests table should show on the plan's fabric, at the table's own scale.

    One busbw expectation per collective whose tables share one scale (nodes x GPUs per node,
    as nccl-tests prints them): ``predict_collective`` at the table's largest size on the
    recommended candidate's fabric, within ``PREDICT_TOLERANCE``; a table taken at the
    planned node count is judged at the planned scale. Tables of several scales for one
    collective get no expectation (one SLO cannot name them apart).
    """
    from gpufabric.model.collectives import OPS

    if catalog is None:
        from gpufabric.catalog import load_catalog

        catalog = load_catalog()
    candidate = recommended_candidate(plan, path, catalog.known_ids())
    fabric_id = candidate.fabric
    scales: dict[str, set[tuple[int, int, int]]] = {}
    for r in results:
        op = r.params.get("tool_op", "")
        try:
            scale = (
                int(r.params["tool_nodes"]),
                int(r.params["tool_gpus_per_node"]),
                int(r.params["tool_max_size_bytes"]),
            )
        except (KeyError, ValueError):
            continue
        if r.tool == "nccl-tests" and op in OPS and r.metric("busbw_gbps") is not None and min(scale) > 0:
            scales.setdefault(op, set()).add(scale)
    slos = []
    for op, found in sorted(scales.items()):
        if len(found) != 1:
            continue
        nodes, gpus, size = next(iter(found))
        slos.append(
            _predicted_busbw_slo(
                f"nccl.{op}",
                spec,
                catalog,
                fabric_id,
                op=op,
                size=size,
                nodes=nodes,
                gpus=gpus,
                source=f"plan {Path(path).name} candidate {candidate.id} ({fabric_id}):"
                f" predict_collective {op} {size} B on {nodes} x {gpus} {spec.cluster.gpu}",
            )
        )
    return slos


def _predicted_busbw_slo(
    test: str, spec: Any, catalog: Any, fabric_id: str, *, op: str, size: int, nodes: int, gpus: int, source: str
) -> Slo:
    """busbw ~ what the collective model predicts at this scale on the plan's fabric."""
    from gpufabric.model.collectives import predict_collective

    prediction = predict_collective(
        op=op,
        size_bytes=size,
        nodes=nodes,
        gpus_per_node=gpus,
        gpu=spec.cluster.gpu,
        fabric=fabric_id,
        catalog=catalog,
        deterministic=spec.requirements.reproducibility == "bitwise",
    )
    return Slo(
        test=test,
        metric="busbw_gbps",
        direction=Direction.higher,
        expected=float(prediction.busbw_gbps),
        tolerance=PREDICT_TOLERANCE,
        source=f"{source}, {prediction.algorithm}",
    )


def gpu_mismatch(spec, results) -> tuple[str, ...]:
    """Why imported tables were not measured on the spec's GPU (their ``gpu_model``); empty when they were."""
    family = spec.cluster.gpu.split("-")[0].upper()
    models = sorted({r.params["tool_gpu_model"] for r in results if r.params.get("tool_gpu_model")})
    bad = [m for m in models if family not in m.upper()]
    return tuple(f"table's GPU {m} is not the planned {spec.cluster.gpu}" for m in bad)
