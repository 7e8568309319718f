"""Parent side: merge the ranks' JSON-lines files into TestResult records and a diagnosis.

A size counts as finished when every rank recorded it; finished sizes become results
even when the launch failed later. When ranks fail, the one to blame is the rank that
left no final record (killed), else the first rank whose error is not a consequence of a
peer (a watchdog timeout or a closed connection).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpufabric.bench.probes import stats
from gpufabric.model.collectives import busbw_factor
from gpufabric.results.records import Direction, Metric, RankStat, RankStats, Status, TestResult
from gpufabric.results.stats import summarize


@dataclass(frozen=True, slots=True, kw_only=True)
class RankLog:
    rank: int
    host: str
    records: tuple[dict[str, Any], ...]

    @property
    def done(self) -> bool:
        return any(r["type"] == "done" for r in self.records)

    @property
    def error(self) -> dict[str, Any] | None:
        return next((r for r in self.records if r["type"] == "error"), None)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == kind]


def read_ranks(out_dir: Path, world: int) -> dict[int, RankLog]:
    """Every rank's records; a rank that never started has an empty log and host '?'."""
    logs = {}
    for rank in range(world):
        path = out_dir / f"rank{rank}.jsonl"
        records = []
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut by a kill -9: everything before it is intact
        host = records[0]["host"] if records else "?"
        logs[rank] = RankLog(rank=rank, host=host, records=tuple(records))
    return logs


def diagnose(logs: dict[int, RankLog]) -> str:
    """One-line explanation of a failed launch naming the rank and host, or '' when all finished."""
    if all(log.done for log in logs.values()):
        return ""
    silent = [log for log in logs.values() if not log.done and log.error is None]
    if silent:
        first = silent[0]
        last = first.of("size")[-1:] or first.of("step")[-1:]
        after = f" after {_describe(last[0])}" if last else (" before starting" if not first.records else "")
        names = ", ".join(f"rank {s.rank} ({s.host})" for s in silent)
        return f"{names} died without an error record{after}; the other ranks stopped"
    errors = [(log, log.error) for log in logs.values() if log.error is not None]
    primary, error = next(((log, err) for log, err in errors if not _peer_consequence(err)), errors[0])
    return f"rank {primary.rank} ({primary.host}) failed: {error['message']}"


def oversubscribed(logs: Mapping[int, RankLog]) -> str:
    """Why straggler verdicts cannot be trusted: a machine running more ranks than it has CPUs.

    Ranks that share cores are descheduled in turn, so one of them always looks slow; that
    says nothing about the host's network or GPU. Ranks are grouped by machine (the kernel's
    boot id in their start record), not by host label: the lab's namespace "hosts" are one
    machine, and four ranks on two vCPUs are oversubscribed even at two per namespace.
    Returns '' when every machine has enough.
    """
    ranks: dict[str, int] = defaultdict(int)
    cpus: dict[str, int] = {}
    labels: dict[str, list[str]] = defaultdict(list)
    for log in logs.values():
        start = log.of("start")
        first = start[0] if start else {}
        machine = str(first.get("machine") or "") or f"host:{log.host}"
        ranks[machine] += 1
        if log.host not in labels[machine]:
            labels[machine].append(log.host)
        if first.get("cpus"):
            cpus[machine] = int(first["cpus"])
    busy = []
    for machine, n in ranks.items():
        if machine not in cpus or n <= cpus[machine]:
            continue
        hosts = labels[machine]
        where = hosts[0] if len(hosts) == 1 else f"one machine ({', '.join(hosts)}: namespaces sharing its CPUs)"
        busy.append(f"{n} ranks on {where} with {cpus[machine]} CPUs")
    return "; ".join(busy)


def _peer_consequence(err: dict[str, Any]) -> bool:
    text = err.get("message", "").lower()
    return bool(err.get("timeout")) or any(
        s in text for s in ("connection closed", "connection reset", "broken pipe", "peer", "ncclremoteerror")
    )


def _describe(rec: dict[str, Any]) -> str:
    if "op" in rec:
        return f"{rec['op']} {rec['dtype']} {rec['size_bytes']} B"
    return f"step {rec.get('step')}"


def collective_results(logs: dict[int, RankLog], *, argv: tuple[str, ...] = ()) -> list[TestResult]:
    """One TestResult per (op, dtype, size) that every rank finished, in sweep order.

    Time per iteration is averaged over ranks (nccl-tests' default ``-a`` = average);
    algbw/busbw use the median of those per-iteration times, so a scheduler tail on a
    2-core VM does not move the bandwidth figure (reference/this-machine.md item 9).
    """
    world = len(logs)
    per_key: dict[tuple[str, str, int], dict[int, dict[str, Any]]] = defaultdict(dict)
    order: list[tuple[str, str, int]] = []
    for log in logs.values():
        for rec in log.of("size"):
            key = (rec["op"], rec["dtype"], rec["size_bytes"])
            if key not in per_key:
                order.append(key)
            per_key[key][log.rank] = rec
    hosts = {r: log.host for r, log in logs.items()}
    results = []
    for key in order:
        by_rank = per_key[key]
        if len(by_rank) < world:
            continue
        op, dtype, size = key
        rank_times = np.array([by_rank[r]["times_us"] for r in range(world)], dtype=float)  # ranks x iters
        iter_us = rank_times.mean(axis=0)
        s = summarize(iter_us, unit="us")
        algbw = stats.algbw_gbps(size, s.p50 * 1e-6)
        busbw = algbw * float(busbw_factor(op, world))
        wrong = sum(int(by_rank[r]["wrong"]) for r in range(world))
        rank_p50 = {r: float(np.median(rank_times[r])) for r in range(world)}
        stragglers = stats.find_stragglers(rank_p50, hosts)
        reason = "; ".join(
            f"straggler rank {g.rank} ({g.host}): p50 {g.value:.1f} us vs median {g.median:.1f} us, z={g.z:.1f}"
            for g in stragglers
        )
        if wrong:
            reason = f"{wrong} wrong element(s)" + (f"; {reason}" if reason else "")
        results.append(
            TestResult(
                name=f"torch.{op}",
                tool="torch",
                host="cluster",
                status=Status.failed if wrong else Status.ok,
                metrics=(
                    Metric(
                        name="time_p50_us",
                        value=s.p50,
                        unit="us",
                        direction=Direction.lower,
                        samples=tuple(float(x) for x in iter_us),
                    ),
                    Metric(name="time_p99_us", value=s.p99, unit="us", direction=Direction.lower),
                    Metric(name="time_cv", value=s.cv, unit="ratio", direction=Direction.lower),
                    Metric(name="algbw_gbps", value=algbw, unit="GB/s"),
                    Metric(name="busbw_gbps", value=busbw, unit="GB/s"),
                    Metric(name="wrong_elements", value=float(wrong), unit="count", direction=Direction.lower),
                ),
                reason=reason,
                argv=argv,
                params={
                    "op": op,
                    "dtype": dtype,
                    "size_bytes": str(size),
                    "num_ranks": str(world),
                    "count": str(by_rank[0]["count"]),
                    "iters": str(rank_times.shape[1]),
                },
                ranks=RankStats(
                    quantity="time_us",
                    ranks=tuple(RankStat(rank=r, host=hosts[r], p50=v) for r, v in rank_p50.items()),
                    stragglers=tuple(g.rank for g in stragglers),
                    oversubscribed=oversubscribed(logs),
                ),
            )
        )
    return results
