"""Parent side of the training and checkpoint probes: records -> TestResults, reproducibility.

Training: the cluster's time for step k is the max over ranks (a synchronous step ends
when its slowest rank does); p50/p99/CV are over those per-step maxima. Checkpoint:
duration = max over ranks and throughput = min over ranks (MLPerf Storage convention).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufabric.bench.probes import stats
from gpufabric.bench.probes.results import RankLog, oversubscribed
from gpufabric.results.records import Direction, Metric, RankStat, RankStats, Status, TestResult
from gpufabric.results.stats import summarize

#: Environment settings that change the reduction order or kernels when left unpinned
#: (reference/models.md 1.6 item 4; PyTorch "Reproducibility" notes for cuBLAS).
PIN_SETTINGS = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_NVLS_ENABLE",
    "CUBLAS_WORKSPACE_CONFIG",
)


def train_result(
    logs: Mapping[int, RankLog], config: Mapping[str, Any], *, argv: tuple[str, ...] = (), repeat: int = 0
) -> TestResult | None:
    """One TestResult for the run (steps every rank finished), or None when no step finished."""
    world = len(logs)
    steps: dict[int, dict[int, float]] = {}
    losses: dict[int, float] = {}
    for rank, log in logs.items():
        for rec in log.of("step"):
            if not rec["warmup"]:
                steps.setdefault(rec["step"], {})[rank] = rec["step_s"]
                if rank == 0:
                    losses[rec["step"]] = rec["loss"]
    complete = sorted(s for s, by_rank in steps.items() if len(by_rank) == world)
    if not complete:
        return None
    matrix = np.array([[steps[s][r] for s in complete] for r in range(world)])  # ranks x steps
    cluster = matrix.max(axis=0)
    s = summarize(cluster, unit="s")
    hosts = {r: log.host for r, log in logs.items()}
    per_rank = {r: summarize(matrix[r], unit="s") for r in range(world)}
    rank_p50 = {r: per_rank[r].p50 for r in range(world)}
    stragglers = stats.find_stragglers(rank_p50, hosts)
    checksum = next(iter(logs[0].of("checksum")), None)
    tokens = config["batch"] * config["seq_len"] * world
    reason = "; ".join(
        f"straggler rank {g.rank} ({g.host}): step p50 {g.value * 1e3:.1f} ms vs median"
        f" {g.median * 1e3:.1f} ms, z={g.z:.1f}"
        for g in stragglers
    )
    return TestResult(
        name="torch.train",
        tool="torch",
        host="cluster",
        status=Status.ok if checksum else Status.failed,
        metrics=(
            Metric(
                name="step_time_p50_s",
                value=s.p50,
                unit="s",
                direction=Direction.lower,
                samples=tuple(float(x) for x in cluster),
            ),
            Metric(name="step_time_p99_s", value=s.p99, unit="s", direction=Direction.lower),
            Metric(name="step_time_cv", value=s.cv, unit="ratio", direction=Direction.lower),
            Metric(name="tokens_per_s", value=tokens / s.p50, unit="tokens/s"),
            Metric(
                name="final_loss", value=losses.get(complete[-1], float("nan")), unit="nats", direction=Direction.lower
            ),
        ),
        reason=reason or ("" if checksum else "no parameter checksum (run did not finish)"),
        argv=argv,
        params={
            "num_ranks": str(world),
            "mode": config["mode"],
            "seed": str(config["seed"]),
            "steps": str(len(complete)),
            "hidden": str(config["hidden"]),
            "layers": str(config["layers"]),
            "seq_len": str(config["seq_len"]),
            "batch": str(config["batch"]),
            "spec_layout": config["spec_layout"],
            "repeat": str(repeat),
            "sha256": checksum["sha256"] if checksum else "",
            "num_params": str(checksum["num_params"] if checksum else 0),
        },
        ranks=RankStats(
            quantity="step_s",
            ranks=tuple(RankStat(rank=r, host=hosts[r], p50=v.p50, p99=v.p99, cv=v.cv) for r, v in per_rank.items()),
            stragglers=tuple(g.rank for g in stragglers),
            oversubscribed=oversubscribed(logs),
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Reproducibility:
    identical: bool
    max_abs_diff: float
    max_rel_diff: float
    differing_elements: int
    num_params: int
    differences: tuple[str, ...]  # what differed between the runs' setups
    unpinned: tuple[str, ...]  # settings that were not pinned in either run


def compare_params(
    a: np.ndarray | None,
    b: np.ndarray | None,
    *,
    setup_a: Mapping[str, Any],
    setup_b: Mapping[str, Any],
    env: Mapping[str, str],
) -> Reproducibility:
    """Bitwise comparison of two parameter vectors, with max abs/rel difference when they differ."""
    differences = tuple(
        f"{k}: {setup_a.get(k)} vs {setup_b.get(k)}"
        for k in sorted(set(setup_a) | set(setup_b))
        if setup_a.get(k) != setup_b.get(k)
    )
    unpinned = tuple(k for k in PIN_SETTINGS if k not in env)
    if a is None or b is None or a.shape != b.shape:
        note = (
            "parameter vectors missing" if a is None or b is None else f"parameter counts differ: {a.size} vs {b.size}"
        )
        return Reproducibility(
            identical=False,
            max_abs_diff=float("inf"),
            max_rel_diff=float("inf"),
            differing_elements=-1,
            num_params=0,
            differences=(*differences, note),
            unpinned=unpinned,
        )
    same = a.view(np.uint32) == b.view(np.uint32)  # bitwise, so -0.0 vs 0.0 and NaN payloads count
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    denom = np.maximum(np.abs(a.astype(np.float64)), 1e-30)
    return Reproducibility(
        identical=bool(same.all()),
        max_abs_diff=float(diff.max()) if diff.size else 0.0,
        max_rel_diff=float((diff / denom).max()) if diff.size else 0.0,
        differing_elements=int((~same).sum()),
        num_params=int(a.size),
        differences=differences,
        unpinned=unpinned,
    )


#: Phases of the commit path each rank times (checkpoint.py); metric = the slowest rank's.
COMMIT_PHASES = ("write_data_s", "fsync_s", "rename_s", "dir_fsync_s")


def checkpoint_results(logs: Mapping[int, RankLog], *, directory: str, argv: tuple[str, ...] = ()) -> list[TestResult]:
    """One TestResult per format that every rank finished."""
    world = len(logs)
    by_fmt: dict[str, dict[int, dict[str, Any]]] = {}
    for rank, log in logs.items():
        for rec in log.of("checkpoint"):
            by_fmt.setdefault(rec["format"], {})[rank] = rec
    out = []
    for fmt, recs in by_fmt.items():
        if len(recs) < world:
            continue
        ranks = [recs[r] for r in range(world)]
        total = sum(r["bytes"] for r in ranks)
        write_s = max(r["write_s"] for r in ranks)
        read_s = max(r["read_s"] for r in ranks)
        wrong = sum(r["wrong_tensors"] for r in ranks)
        phases = [
            Metric(
                name=name,
                value=max(r[name] for r in ranks),
                unit="s",
                direction=Direction.lower,
                samples=tuple(r[name] for r in ranks),
            )
            for name in COMMIT_PHASES
            if all(name in r for r in ranks)
        ]
        out.append(
            TestResult(
                name=f"torch.checkpoint.{fmt}",
                tool="torch",
                host="cluster",
                status=Status.failed if wrong else Status.ok,
                metrics=(
                    Metric(
                        name="write_duration_s",
                        value=write_s,
                        unit="s",
                        direction=Direction.lower,
                        samples=tuple(r["write_s"] for r in ranks),
                    ),
                    Metric(
                        name="read_duration_s",
                        value=read_s,
                        unit="s",
                        direction=Direction.lower,
                        samples=tuple(r["read_s"] for r in ranks),
                    ),
                    # Headline: the checkpoint as a whole, total bytes over the slowest rank's time.
                    Metric(name="write_gbps", value=total / write_s / 1e9, unit="GB/s"),
                    Metric(name="read_gbps", value=total / read_s / 1e9, unit="GB/s"),
                    # The slowest rank's own rate (MLPerf Storage v2.0 guidelines 2.2.3 per-rank metric).
                    Metric(
                        name="write_min_rank_gbps",
                        value=min(r["bytes"] / r["write_s"] for r in ranks) / 1e9,
                        unit="GB/s",
                    ),
                    Metric(
                        name="read_min_rank_gbps", value=min(r["bytes"] / r["read_s"] for r in ranks) / 1e9, unit="GB/s"
                    ),
                    *phases,
                    Metric(name="wrong_tensors", value=float(wrong), unit="count", direction=Direction.lower),
                ),
                reason=f"{wrong} tensor(s) read back differ" if wrong else "",
                argv=argv,
                params={"format": fmt, "bytes": str(total), "num_ranks": str(world), "directory": directory},
                ranks=RankStats(ranks=tuple(RankStat(rank=r, host=logs[r].host) for r in range(world))),
            )
        )
    return out
