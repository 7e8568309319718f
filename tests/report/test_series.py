from __future__ import annotations

import re

import pytest

from gpufabric.report import plots, series
from gpufabric.results.records import Direction, Metric, RunRecord, Status, TestResult
from tests.results.factories import fio_result, latency_result, nccl_results


def _run(results):
    return RunRecord(
        id=1,
        kind="bench",
        status="passed",
        started_at=0.0,
        finished_at=1.0,
        argv=(),
        fingerprint={},
        results=tuple(results),
    )


def test_busbw_from_one_result_per_size():
    [s] = series.busbw_series(_run(nccl_results()))
    assert s.x[0] == 1024 and s.x[-1] == 2**30 and len(s.x) == 11
    assert s.y == tuple(sorted(s.y))  # saturating curve, ordered by size


def test_busbw_from_nccl_parser_metrics_infers_top_size_from_algbw_times_time():
    # nccl-tests definition algbw = S / t: 8 GiB in 80000 us -> algbw 107.37 GB/s
    size, time_us = 2**33, 80_000.0
    algbw = size / (time_us * 1e-6) / 1e9
    r = TestResult(
        name="nccl.all_reduce",
        tool="nccl-tests",
        host="n1",
        status=Status.ok,
        metrics=(
            Metric(name="busbw_gbps", value=algbw * 1.75, unit="GB/s"),
            Metric(name="algbw_gbps", value=round(algbw, 2), unit="GB/s"),  # as printed: 2 decimals
            Metric(name="time_us", value=time_us, unit="us", direction=Direction.lower),
            Metric(name="busbw_gbps@1048576B", value=20.5, unit="GB/s"),
            Metric(name="busbw_gbps@8B", value=0.0, unit="GB/s"),
        ),
    )
    [s] = series.busbw_series(_run([r]))
    assert s.x == (8.0, 1048576.0, float(2**33))
    assert s.y[-1] == pytest.approx(algbw * 1.75)


def test_percentiles_parse_fio_names():
    [s] = series.percentile_series(_run([fio_result()]), tool="fio")
    assert s.x == (50.0, 90.0, 99.0, 99.9, 99.99)
    assert s.y == (95.0, 140.0, 410.0, 1900.0, 5200.0) and s.unit == "us"
    assert "clat" in s.label


def test_latency_samples_are_named_by_distribution_not_p50():
    [(label, unit, samples)] = series.latency_samples(_run([latency_result(n=100)]))
    assert label == "sockperf.data lat_us @node1" and unit == "us" and len(samples) == 100


def test_svg_ids_are_prefixed_and_self_contained():
    a = plots.busbw_chart(series.busbw_series(_run(nccl_results())))
    b = plots.cdf_chart(series.latency_samples(_run([latency_result(n=300_000)])))
    ids_a = set(re.findall(r'\bid="([^"]+)"', a))
    ids_b = set(re.findall(r'\bid="([^"]+)"', b))
    assert ids_a and ids_b and not ids_a & ids_b
    assert all(i.startswith("busbw_") for i in ids_a)
    for ref in re.findall(r"url\(#([^)]+)\)", b):
        assert ref in ids_b
    assert a.startswith("<svg") and "<metadata>" not in a and "<?xml" not in a
    assert len(b) < 200_000  # 300k samples drawn from a bounded quantile grid
