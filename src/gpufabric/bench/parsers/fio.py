"""fio ``--output-format=json`` / ``json+`` parser.

Units (fio HOWTO "json" and stat.c add_ddir_status_json): ``bw_bytes`` is B/s, ``bw``
KiB/s, ``*_ns`` latencies and percentile values are nanoseconds, ``runtime`` ms. We
report GB/s (1e9 B/s), IOPS and microseconds.

Known nonsense values (reference/this-machine.md item 1, fio 3.33): the ``sync`` (fsync)
latency distribution is garbage with asynchronous engines (libaio, io_uring, ...), and
``sqthread_poll=1`` makes clat garbage. Those metrics are dropped and the reason is kept
as a quality warning, so nobody judges a cluster on them. A latency longer than the
whole job is impossible and is flagged the same way.
"""

from __future__ import annotations

import re
from typing import Any

from gpufabric.bench.parsers.common import (
    ANY,
    COUNT,
    Each,
    Items,
    Number,
    Obj,
    Parsed,
    check_json,
    finite,
    higher,
    load_json,
    lower,
)
from gpufabric.errors import ParseError
from gpufabric.results.records import Metric

#: Engines whose fsync is issued asynchronously, so sync.lat_ns is not a fsync latency.
ASYNC_ENGINES = frozenset({"libaio", "io_uring", "io_uring_cmd", "posixaio", "solarisaio", "windowsaio", "xnvme"})

#: Percentiles reported (fio's default list includes them all).
PERCENTILES = {"50.000000": "p50", "90.000000": "p90", "99.000000": "p99", "99.900000": "p99_9", "99.990000": "p99_99"}

#: Expand json+ histogram bins into per-I/O samples only up to this many I/Os, so the
#: results store keeps raw samples for significance tests without ballooning.
MAX_SAMPLES = 50_000


#: The fields the parser reads, with their JSON types (fio stat.c add_ddir_status_json, json+ bins).
_LAT = Obj(
    {
        "N": COUNT,
        "mean": Number(),
        "max": Number(),
        "min": Number(),
        "percentile": Each(Number()),
        "bins": Each(COUNT, key=re.compile(r"\d{1,20}"), nullable=True),
    },
    nullable=True,
)
_DDIR = Obj(
    {
        "total_ios": COUNT,
        "bw_bytes": Number(),
        "bw": Number(),
        "iops": Number(),
        "runtime": Number(nullable=True),
        "io_bytes": Number(nullable=True),
        "clat_ns": _LAT,
    },
    nullable=True,
)
_JOB = Obj(
    {
        "jobname": ANY,
        "groupid": Number(min=0),
        "error": ANY,
        "job options": Each(ANY, nullable=True),
        "job_runtime": Number(nullable=True),
        "elapsed": Number(nullable=True),
        "read": _DDIR,
        "write": _DDIR,
        "trim": _DDIR,
        "sync": Obj({"total_ios": COUNT, "lat_ns": _LAT}, nullable=True),
    }
)
SHAPE = Obj({"jobs": Items(_JOB), "global options": Each(ANY, nullable=True), "fio version": ANY})


def _options(job: dict[str, Any], doc: dict[str, Any]) -> dict[str, str]:
    merged = dict(doc.get("global options") or {})
    merged.update(job.get("job options") or {})
    return {str(k): str(v) for k, v in merged.items()}


def _samples_from_bins(bins: dict[str, Any] | None) -> tuple[float, ...]:
    """json+ ``bins`` map a bucket value in ns to a count; expand to microsecond samples."""
    if not bins:
        return ()
    pairs = sorted((int(k), int(v)) for k, v in bins.items())
    if sum(c for _, c in pairs) > MAX_SAMPLES:
        return ()
    return tuple(ns / 1000.0 for ns, count in pairs for _ in range(count))


def _lat_metrics(prefix: str, lat: dict[str, Any], *, source: str) -> list[Metric]:
    if not lat or not lat.get("N"):
        return []
    metrics = [
        lower(f"{prefix}_mean_us", finite(lat["mean"], what=f"{prefix} mean", source=source) / 1000, "us"),
        lower(f"{prefix}_max_us", finite(lat["max"], what=f"{prefix} max", source=source) / 1000, "us"),
    ]
    percentiles = lat.get("percentile") or {}
    samples = _samples_from_bins(lat.get("bins"))
    for key, label in PERCENTILES.items():
        if key in percentiles:
            value = finite(percentiles[key], what=f"{prefix} {label}", source=source) / 1000
            metrics.append(lower(f"{prefix}_{label}_us", value, "us", samples if label == "p50" else ()))
    return metrics


def _job(job: dict[str, Any], doc: dict[str, Any], *, source: str) -> Parsed:
    name = str(job.get("jobname", "?"))
    options = _options(job, doc)
    engine = options.get("ioengine", "psync")
    if job.get("error"):
        return Parsed(tool="fio", case=name, metrics=(), error=f"fio job {name} reported error {job['error']}")
    metrics: list[Metric] = []
    warnings: list[str] = []
    sqpoll = options.get("sqthread_poll", "0") not in ("0", "")
    runtime_us = max(float(job.get("job_runtime") or 0), float(job.get("elapsed") or 0) * 1000) * 1000
    for ddir in ("read", "write", "trim"):
        stats = job.get(ddir) or {}
        if not stats.get("total_ios"):
            continue
        bw_bytes = finite(stats.get("bw_bytes", stats.get("bw", 0) * 1024), what=f"{ddir} bw", source=source)
        metrics.append(higher(f"{ddir}_bw_gbps", bw_bytes / 1e9, "GB/s"))
        metrics.append(higher(f"{ddir}_iops", finite(stats.get("iops", 0), what=f"{ddir} iops", source=source), "IOPS"))
        clat = _lat_metrics(f"{ddir}_clat", stats.get("clat_ns") or {}, source=source)
        if sqpoll and clat:
            warnings.append(f"{ddir} clat dropped: fio reports garbage completion latencies with sqthread_poll=1")
            clat = []
        clat, bad = _drop_impossible(clat, runtime_us)
        if bad:
            warnings.append(f"{ddir} clat dropped: {bad} exceeds the job's whole runtime (fio measurement bug)")
        metrics += clat
    sync = job.get("sync") or {}
    if sync.get("total_ios"):
        metrics.append(higher("fsync_count", float(sync["total_ios"]), "count"))
        lat = _lat_metrics("fsync_lat", sync.get("lat_ns") or {}, source=source)
        if engine in ASYNC_ENGINES and lat:
            warnings.append(
                f"fsync latencies dropped: fio's sync.lat_ns is unreliable with the asynchronous engine {engine};"
                " use ioengine=psync to measure fsync latency"
            )
            lat = []
        lat, bad = _drop_impossible(lat, runtime_us)
        if bad:
            warnings.append(f"fsync latencies dropped: {bad} exceeds the job's whole runtime (fio measurement bug)")
        metrics += lat
    if not metrics:
        raise ParseError(f"fio job {name} did no I/O", source=source, excerpt=str(job)[:200])
    info = {"version": str(doc.get("fio version", "")), "ioengine": engine}
    info.update({k: options[k] for k in ("rw", "bs", "numjobs", "direct", "fsync", "iodepth") if k in options})
    return Parsed(tool="fio", case=name, metrics=tuple(metrics), warnings=tuple(warnings), info=info)


def _drop_impossible(metrics: list[Metric], runtime_us: float) -> tuple[list[Metric], str]:
    if runtime_us <= 0:
        return metrics, ""
    for m in metrics:
        if m.value > runtime_us * 1.5:  # 1.5: elapsed is whole seconds; allow rounding
            return [], f"{m.name}={m.value:.0f} us"
    return metrics, ""


def _merge_lat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One latency distribution of several jobs, as fio's sum_stat() merges them: N-weighted mean,
    min of mins, max of maxes; percentiles only from json+ bins (exact), never guessed."""
    parts = [p for p in parts if p and p.get("N")]
    if not parts:
        return {}
    n = sum(int(p["N"]) for p in parts)
    out: dict[str, Any] = {
        "N": n,
        "mean": sum(float(p["mean"]) * int(p["N"]) for p in parts) / n,
        "max": max(float(p["max"]) for p in parts),
        "min": min(float(p.get("min", 0)) for p in parts),
    }
    if all(p.get("bins") for p in parts):
        bins: dict[int, int] = {}
        for p in parts:
            for k, v in p["bins"].items():
                bins[int(k)] = bins.get(int(k), 0) + int(v)
        out["bins"] = {str(k): v for k, v in bins.items()}
        ordered = sorted(bins.items())
        total = sum(bins.values())
        out["percentile"] = {}
        for key in PERCENTILES:
            target, seen = float(key) / 100 * total, 0
            for value, count in ordered:
                seen += count
                if seen >= target:
                    out["percentile"][key] = value
                    break
    return out


def _group(jobs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """A job-shaped dict of a whole reporting group, as ``group_reporting`` computes it: bytes and
    I/Os summed over jobs and divided by the longest job runtime (fio stat.c sum_thread_stats)."""
    agg: dict[str, Any] = {
        "jobname": name,
        "groupid": jobs[0].get("groupid", 0),
        "error": 0,
        "job options": dict(jobs[0].get("job options") or {}),
        "job_runtime": max(float(j.get("job_runtime") or 0) for j in jobs),
        "elapsed": max(float(j.get("elapsed") or 0) for j in jobs),
    }
    for ddir in ("read", "write", "trim"):
        stats = [j.get(ddir) or {} for j in jobs]
        ios = sum(int(s.get("total_ios") or 0) for s in stats)
        if not ios:
            continue
        runtime_ms = max(float(s.get("runtime") or 0) for s in stats)
        io_bytes = sum(float(s.get("io_bytes") or 0) for s in stats)
        bw = (
            io_bytes / runtime_ms * 1000
            if runtime_ms and io_bytes
            else sum(float(s.get("bw_bytes") or 0) for s in stats)
        )
        agg[ddir] = {
            "total_ios": ios,
            "io_bytes": io_bytes,
            "runtime": runtime_ms,
            "bw_bytes": bw,
            "iops": ios / runtime_ms * 1000 if runtime_ms else sum(float(s.get("iops") or 0) for s in stats),
            "clat_ns": _merge_lat([s.get("clat_ns") or {} for s in stats]),
        }
    syncs = [j.get("sync") or {} for j in jobs]
    if any(s.get("total_ios") for s in syncs):
        agg["sync"] = {
            "total_ios": sum(int(s.get("total_ios") or 0) for s in syncs),
            "lat_ns": _merge_lat([s.get("lat_ns") or {} for s in syncs]),
        }
    return agg


def _grouped(doc: dict[str, Any], source: str) -> list[Parsed]:
    """Per job, each under its own name (clones of one job get ``.N`` like fio's file names), plus
    one aggregate per reporting group of several jobs, under the job's name (``groupN`` when the
    group mixes job names), as ``group_reporting`` would print it."""
    jobs = doc["jobs"]
    counts: dict[str, int] = {}
    for job in jobs:
        counts[str(job.get("jobname", "?"))] = counts.get(str(job.get("jobname", "?")), 0) + 1
    seen: dict[str, int] = {}
    out = []
    groups: dict[int, list[dict[str, Any]]] = {}
    for job in jobs:
        name = str(job.get("jobname", "?"))
        groups.setdefault(int(job.get("groupid", 0)), []).append(job)
        if counts[name] > 1:
            index = seen.get(name, 0)
            seen[name] = index + 1
            job = {**job, "jobname": f"{name}.{index}"}
        out.append(_job(job, doc, source=source))
    for gid, members in groups.items():
        if len(members) < 2:
            continue
        names = {str(j.get("jobname", "?")) for j in members}
        name = names.pop() if len(names) == 1 else f"group{gid}"
        agg = _job(_group([j for j in members if not j.get("error")] or members, name), doc, source=source)
        warnings = list(agg.warnings)
        if not all(
            ((j.get(d) or {}).get("clat_ns") or {}).get("bins")
            for j in members
            for d in ("read", "write")
            if (j.get(d) or {}).get("total_ios")
        ):
            warnings.append("group percentiles omitted: they need json+ latency bins (--output-format=json+)")
        info = {**agg.info, "aggregate": f"group {gid} of {len(members)} jobs (group_reporting)"}
        out.append(
            Parsed(tool="fio", case=name, metrics=agg.metrics, warnings=tuple(warnings), info=info, error=agg.error)
        )
    return out


def parse_fio(text: str, *, source: str = "") -> list[Parsed]:
    """Parse fio JSON or json+ output: one :class:`Parsed` per job, plus one per reporting group of
    several jobs (fio already aggregates when the run used ``group_reporting``)."""
    # --output-format=json,normal appends fio's text report ("<job>: (groupid=0, jobs=1): err=...").
    doc = load_json(text, source=source, tool="fio", trailing_ok=r"\S[^\n]*: \(groupid=\d+, jobs=\d+\)")
    if not isinstance(doc, dict) or "jobs" not in doc or "fio version" not in doc:
        keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
        raise ParseError("not fio JSON output: no 'fio version' and 'jobs' keys", source=source, excerpt=keys)
    check_json(doc, SHAPE, tool="fio", source=source)
    if not doc["jobs"]:
        raise ParseError("fio output has no jobs", source=source, excerpt=text[:120])
    return _grouped(doc, source)
