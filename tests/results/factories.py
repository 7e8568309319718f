"""Hand-built records for results/report/CLI tests (no dependence on the bench parsers).

Shapes follow reference/bench-tools.md: nccl-tests rows carry size, algbw and busbw in
GB/s (1e9 B/s); fio reports clat percentiles in ns (here converted to us) and bandwidth;
sockperf reports per-packet latency samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpufabric.results.records import Direction, Metric, Slo, Status, TestResult, Verdict
from gpufabric.results.store import Store


def latency_result(
    *,
    name: str = "sockperf.data",
    host: str = "node1",
    median_us: float = 12.0,
    sigma: float = 0.05,
    n: int = 2000,
    seed: int = 1,
) -> TestResult:
    rng = np.random.default_rng(seed)
    samples = rng.lognormal(np.log(median_us), sigma, n)
    return TestResult(
        name=name,
        tool="sockperf",
        host=host,
        status=Status.ok,
        started_at=1.7e9,
        duration_s=2.0,
        argv=("sockperf", "ping-pong", "-i", "127.0.0.1"),
        metrics=(
            Metric(
                name="lat_p50_us",
                value=float(np.median(samples)),
                unit="us",
                direction=Direction.lower,
                samples=tuple(samples.tolist()),
            ),
            Metric(name="lat_p99_us", value=float(np.percentile(samples, 99)), unit="us", direction=Direction.lower),
        ),
    )


def bw_result(
    *, name: str = "iperf3.data", host: str = "node1", gbps: float = 9.4, samples: tuple[float, ...] = ()
) -> TestResult:
    return TestResult(
        name=name,
        tool="iperf3",
        host=host,
        status=Status.ok,
        duration_s=10.0,
        metrics=(Metric(name="throughput_gbps", value=gbps, unit="Gb/s", direction=Direction.higher, samples=samples),),
    )


def nccl_results(*, host: str = "node1", peak: float = 180.0) -> list[TestResult]:
    """One result per message size, as the nccl-tests parser rows: busbw saturating towards ``peak``."""
    out = []
    for exp in range(10, 31, 2):
        size = 2**exp
        busbw = peak * size / (size + 2**24)
        out.append(
            TestResult(
                name="nccl.all_reduce",
                tool="nccl-tests",
                host=host,
                status=Status.ok,
                params={"size_bytes": str(size)},
                metrics=(
                    Metric(name="busbw_gbps", value=busbw, unit="GB/s"),
                    Metric(name="algbw_gbps", value=busbw / 1.75, unit="GB/s"),
                    Metric(name="time_us", value=size / (busbw / 1.75) / 1e3, unit="us", direction=Direction.lower),
                ),
            )
        )
    return out


def fio_result(*, host: str = "node1") -> TestResult:
    pct = {"p50": 95.0, "p90": 140.0, "p99": 410.0, "p99_9": 1900.0, "p99_99": 5200.0}
    return TestResult(
        name="fio.checkpoint_write",
        tool="fio",
        host=host,
        status=Status.ok,
        duration_s=30.0,
        argv=("fio", "--output-format=json+", "ckpt.fio"),
        metrics=(
            Metric(name="write_bw_gbps", value=2.1, unit="GB/s"),
            *(Metric(name=f"clat_{k}_us", value=v, unit="us", direction=Direction.lower) for k, v in pct.items()),
        ),
    )


def skipped_result(*, name: str = "perftest.ib_write_lat", host: str = "node1") -> TestResult:
    return TestResult(name=name, tool="perftest", host=host, status=Status.skipped, reason="no RDMA device")


def sample_run_results() -> list[TestResult]:
    return [latency_result(), bw_result(), *nccl_results(), fio_result(), skipped_result()]


SAMPLE_SLOS = (
    Slo(
        test="sockperf.data",
        metric="lat_p50_us",
        direction=Direction.lower,
        expected=15.0,
        tolerance=0.1,
        source="plan",
    ),
    Slo(
        test="iperf3.data",
        metric="throughput_gbps",
        direction=Direction.higher,
        expected=20.0,
        tolerance=0.1,
        source="thresholds:lab.yaml",
    ),
    Slo(test="fio.checkpoint_write", metric="write_bw_gbps", direction=Direction.higher, minimum=1.0, source="plan"),
    Slo(test="perftest.ib_write_lat", metric="lat_p50_us", direction=Direction.lower, maximum=3.0),
)


def make_run(
    store: Store,
    results: list[TestResult] | None = None,
    *,
    verdicts: list[Verdict] | None = None,
    status: str = "failed",
    kind: str = "bench",
) -> int:
    run_id = store.begin_run(
        kind=kind,
        argv=["gpufabric", "bench", "--suite", "quick"],
        fingerprint={"host": "node1", "kernel": "6.1.0", "nccl_env": {"NCCL_IB_HCA": "mlx5"}},
        spec_name="lab-2node",
        meta={"suite": "quick"},
    )
    for result in results if results is not None else sample_run_results():
        store.add_result(run_id, result)
    if verdicts is None:
        from gpufabric.results.verdicts import evaluate

        verdicts = evaluate(results if results is not None else sample_run_results(), SAMPLE_SLOS)
    store.add_verdicts(run_id, verdicts)
    store.add_artifact(run_id, "commands.txt", "sockperf ping-pong -i 127.0.0.1\n")
    store.finish_run(run_id, status)
    return run_id


def make_db(path: Path) -> Path:
    with Store.open(path) as store:
        make_run(store)
    return path
