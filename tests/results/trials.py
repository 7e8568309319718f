"""Seeded synthetic runs with realistic noise for the compare gate's trial tests (issue 16).

Each run has ``TESTS`` latency tests with ``repeats`` repeats of ``samples`` samples. Within
a repeat the samples are a stationary AR(1) series (lag-1 autocorrelation ``rho`` drawn in
[0, 0.5] per test) of Student-t innovations with 3 degrees of freedom (heavy tails), made
multiplicative: ``latency = median * exp(cv * x)`` with ``cv`` drawn in [0.05, 0.20] per
test, so the per-repeat coefficient of variation is 5-20 %. Each repeat also carries a 1 %
(log-sd) repeat-to-repeat jitter. The parameters of a test are shared by both runs of a
trial: the runs are two draws from the same distribution.

Every test reports, per repeat, what sockperf reports: p50 (with the raw samples), mean,
p99, max, p99.999 (equal to max below 100,000 samples, as sockperf prints it), stddev, a
throughput (messages/s, from the mean) and the observation count: 8 metrics, 80 per run.
"""

from __future__ import annotations

import numpy as np
from scipy import signal

from gpufabric.results.records import Direction, Metric, RunRecord, Status, TestResult

TESTS = 10
#: (metric, unit, direction) per repeat; samples ride on p50 as the parsers attach them.
METRICS = (
    ("lat_p50_us", "us", Direction.lower),
    ("lat_avg_us", "us", Direction.lower),
    ("lat_p99_us", "us", Direction.lower),
    ("lat_max_us", "us", Direction.lower),
    ("lat_p99999_us", "us", Direction.lower),
    ("lat_stddev_us", "us", Direction.lower),
    ("msg_rate_kps", "k/s", Direction.higher),
    ("observations", "count", Direction.higher),
)
#: Metrics a planted regression may hit: the central ones (tails have a 10 % minimum effect by design).
CENTRAL = ("lat_p50_us", "lat_avg_us", "msg_rate_kps")


def draw_values(rng: np.random.Generator, *, trials: int, repeats: int, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-repeat metric values, shape (trials, 2 runs, TESTS, repeats, len(METRICS)), and the p50 samples,
    shape (trials, 2, TESTS, repeats, samples)."""
    cv = rng.uniform(0.05, 0.20, (trials, 1, TESTS, 1, 1))
    rho = rng.uniform(0.0, 0.5, (trials, TESTS))
    median = rng.uniform(5.0, 500.0, (trials, 1, TESTS, 1, 1))
    e = rng.standard_t(3, (trials, 2, TESTS, repeats, samples)) / np.sqrt(3.0)  # unit variance
    x = np.empty_like(e)
    for t in range(trials):
        for k in range(TESTS):
            r = rho[t, k]
            # Stationary start: the first sample already has the process's unit variance.
            x[t, :, k] = signal.lfilter([np.sqrt(1 - r * r)], [1.0, -r], e[t, :, k], axis=-1)
    jitter = rng.normal(0.0, 0.01, (trials, 2, TESTS, repeats, 1))
    lat = median * np.exp(cv * x + jitter)
    s = np.sort(lat, axis=-1)
    mean = lat.mean(axis=-1)
    values = np.stack(
        [
            np.median(lat, axis=-1),
            mean,
            np.quantile(s, 0.99, axis=-1),
            s[..., -1],
            s[..., -1],
            lat.std(axis=-1, ddof=1),
            1e3 / mean,
            np.full(mean.shape, float(samples)),
        ],
        axis=-1,
    )
    return values, lat


def make_run(run_id: int, values: np.ndarray, samples: np.ndarray | None) -> RunRecord:
    """One run from ``values`` (TESTS, repeats, len(METRICS)) and optional p50 ``samples`` (TESTS, repeats, n)."""
    results = []
    for k in range(values.shape[0]):
        for r in range(values.shape[1]):
            metrics = tuple(
                Metric(
                    name=name,
                    value=float(values[k, r, j]),
                    unit=unit,
                    direction=direction,
                    samples=tuple(samples[k, r].tolist()) if samples is not None and j == 0 else (),
                )
                for j, (name, unit, direction) in enumerate(METRICS)
            )
            results.append(
                TestResult(
                    name=f"sockperf.t{k}",
                    tool="sockperf",
                    host="node1",
                    status=Status.ok,
                    metrics=metrics,
                    params={"repeat": str(r + 1)},
                )
            )
    return RunRecord(
        id=run_id,
        kind="bench",
        status="passed",
        started_at=0.0,
        finished_at=1.0,
        argv=(),
        fingerprint={},
        results=tuple(results),
    )
