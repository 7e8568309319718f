from __future__ import annotations

import pytest

from gpufabric.results.compare import Change, compare_runs, untestable_regressions
from gpufabric.results.records import RunRecord
from tests.results.factories import bw_result, latency_result


def _run(run_id, results):
    return RunRecord(id=run_id, kind="bench", status="passed", started_at=0.0, finished_at=1.0, argv=(),
                     fingerprint={}, results=tuple(results))


def _delta(cmp, metric):
    return next(d for d in cmp.deltas if d.metric == metric)


def test_latency_shift_is_a_significant_regression_by_mann_whitney():
    base = _run(1, [latency_result(median_us=10.0, seed=1)])
    cand = _run(2, [latency_result(median_us=11.5, seed=2)])
    d = _delta(compare_runs(base, cand), "lat_p50_us")
    assert d.method == "mann-whitney" and d.p_value < 1e-6 and d.significant
    assert d.delta == pytest.approx(0.15, abs=0.01)
    assert d.change == Change.regression  # lower is better and it went up


def test_same_distribution_is_unchanged():
    base = _run(1, [latency_result(median_us=10.0, seed=1)])
    cand = _run(2, [latency_result(median_us=10.0, seed=2)])
    d = _delta(compare_runs(base, cand), "lat_p50_us")
    assert d.change == Change.unchanged and d.p_value > 0.01


def test_faster_latency_is_an_improvement():
    cmp = compare_runs(_run(1, [latency_result(median_us=10.0)]), _run(2, [latency_result(median_us=8.0, seed=3)]))
    assert _delta(cmp, "lat_p50_us").change == Change.improvement
    assert cmp.regressions == ()


def test_small_significant_shift_within_tolerance_is_not_a_regression():
    base = _run(1, [latency_result(median_us=10.0, seed=1, n=20000)])
    cand = _run(2, [latency_result(median_us=10.2, seed=2, n=20000)])
    d = _delta(compare_runs(base, cand, tolerance=0.05), "lat_p50_us")
    assert d.significant and d.change == Change.unchanged
    d = _delta(compare_runs(base, cand, tolerance=0.01), "lat_p50_us")
    assert d.change == Change.regression


def test_bootstrap_over_repeats():
    base = _run(1, [bw_result(gbps=g) for g in (9.4, 9.5, 9.45, 9.5, 9.42)])
    cand = _run(2, [bw_result(gbps=g) for g in (7.1, 7.0, 7.2, 7.05, 7.15)])
    d = _delta(compare_runs(base, cand), "throughput_gbps")
    assert d.method == "bootstrap" and d.ci_high < 0 and d.change == Change.regression
    noisy = _run(3, [bw_result(gbps=g) for g in (5.0, 14.0, 6.0, 13.0)])
    d = _delta(compare_runs(base, noisy), "throughput_gbps")
    assert d.method == "bootstrap" and d.ci_low < 0 < d.ci_high and d.change == Change.unchanged


def test_single_values_are_not_testable_and_missing_metrics_are_listed():
    base = _run(1, [bw_result(gbps=9.5), bw_result(name="iperf3.storage")])
    cand = _run(2, [bw_result(gbps=5.0), latency_result()])
    cmp = compare_runs(base, cand)
    d = _delta(cmp, "throughput_gbps")
    assert d.method == "not testable" and d.change == Change.untestable and d.significant is None
    assert untestable_regressions(cmp) == (d,)
    missing = {(x.test, x.note) for x in cmp.deltas if x.change == Change.missing}
    assert ("iperf3.storage", "only in base") in missing and ("sockperf.data", "only in candidate") in missing
    assert cmp.regressions == ()


def test_sweep_sizes_are_compared_size_by_size():
    from tests.results.factories import nccl_results

    cmp = compare_runs(_run(1, nccl_results(peak=180.0)), _run(2, nccl_results(peak=150.0)))
    busbw = [d for d in cmp.deltas if d.metric == "busbw_gbps"]
    assert len(busbw) == 11 and {d.test for d in busbw} >= {"nccl.all_reduce[size_bytes=1024]"}
    assert all(d.method == "not testable" for d in busbw)
    top = next(d for d in busbw if d.test == "nccl.all_reduce[size_bytes=1073741824]")
    assert top.delta == pytest.approx(150 / 180 - 1, rel=1e-3)
