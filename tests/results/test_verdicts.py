from __future__ import annotations

import numpy as np
import pytest

from gpufabric.results.records import Direction, Metric, Outcome, Slo, Status, TestResult
from gpufabric.results.verdicts import evaluate, judge, overall
from tests.results.factories import bw_result, latency_result, skipped_result

BW = Slo(test="iperf3.data", metric="throughput_gbps", direction=Direction.higher, expected=10.0, tolerance=0.1)
LAT = Slo(test="sockperf.data", metric="lat_p50_us", direction=Direction.lower, expected=10.0, tolerance=0.2)


@pytest.mark.parametrize(
    ("value", "passes", "margin"),
    [(9.0, True, 0.0), (9.9, True, 0.1), (8.1, False, -0.1), (12.0, True, 1 / 3)],
)
def test_expected_with_tolerance_higher_is_better(value, passes, margin):
    assert judge(value, BW) == (passes, pytest.approx(margin))


def test_lower_is_better_and_absolute_bounds():
    assert judge(11.0, LAT) == (True, pytest.approx(1 / 12))  # limit 12
    assert judge(13.2, LAT) == (False, pytest.approx(-0.1))
    both = Slo(test="t", metric="m", direction=Direction.higher, minimum=5.0, maximum=8.0)
    assert judge(7.6, both) == (True, pytest.approx(0.05))  # the max is the tighter bound
    assert judge(4.0, both) == (False, pytest.approx(-0.2))
    zero = Slo(test="t", metric="retransmits", direction=Direction.lower, maximum=0.0)
    assert judge(3.0, zero) == (False, -3.0)  # absolute margin at a zero limit
    assert judge(float("nan"), both) == (False, None)


def test_single_result_pass_and_fail_carry_measured_expected_margin():
    [ok] = evaluate([bw_result(gbps=9.5)], [BW])
    assert (ok.outcome, ok.measured, ok.expected, ok.direction, ok.unit) == (
        Outcome.passed,
        9.5,
        10.0,
        Direction.higher,
        "Gb/s",
    )
    assert ok.margin == pytest.approx(0.5 / 9)
    [bad] = evaluate([bw_result(gbps=6.0)], [BW])
    assert bad.outcome == Outcome.failed and bad.margin == pytest.approx(-1 / 3)
    assert "measured 6 Gb/s, want >= 9" in bad.reason


def test_two_of_three_repeats_pass_by_default():
    repeats = [bw_result(gbps=9.6), bw_result(gbps=7.0), bw_result(gbps=9.8)]
    [v] = evaluate(repeats, [BW])
    assert v.outcome == Outcome.passed and (v.passed_repeats, v.total_repeats) == (2, 3)
    assert v.measured == 9.6  # median of repeats
    [v] = evaluate(repeats[:2] + [bw_result(gbps=6.5)], [BW])
    assert v.outcome == Outcome.failed and "1 of 3 repeats passed, 2 needed" in v.reason


def test_min_pass_overrides_majority():
    strict = Slo(test="iperf3.data", metric="throughput_gbps", direction=Direction.higher, minimum=9.0, min_pass=3)
    [v] = evaluate([bw_result(gbps=9.6), bw_result(gbps=8.0), bw_result(gbps=9.8)], [strict])
    assert v.outcome == Outcome.failed


def test_repeats_are_per_host():
    out = evaluate([bw_result(host="a", gbps=9.5), bw_result(host="b", gbps=3.0)], [BW])
    assert {(v.host, v.outcome) for v in out} == {("a", Outcome.passed), ("b", Outcome.failed)}


def test_noisy_near_the_limit_is_unjudgeable_but_far_from_it_is_judged():
    # limit 12 us, CV ~65 %: with 300 samples the 95 % CI is about +-7 %, the margin about -2.5 %
    near = latency_result(median_us=12.3, sigma=0.6, n=300)
    [v] = evaluate([near], [LAT])
    assert v.outcome == Outcome.noisy
    assert any("of the mean" in w for w in v.warnings) and "too noisy" in v.reason
    # the same spread over 30,000 samples pins the value to +-0.7 %: judged, with the warning kept
    many = latency_result(median_us=12.3, sigma=0.6, n=30_000)
    [v] = evaluate([many], [LAT])
    assert v.outcome == Outcome.failed and v.warnings
    far = latency_result(median_us=40.0, sigma=0.6, n=300)
    [v] = evaluate([far], [LAT])
    assert v.outcome == Outcome.failed and v.warnings  # clearly broken despite the noise
    calm = latency_result(median_us=12.3, sigma=0.01, n=3000)
    [v] = evaluate([calm], [LAT])
    assert v.outcome == Outcome.failed and not v.warnings


def test_too_few_samples_warns():
    few = TestResult(
        name="sockperf.data",
        tool="sockperf",
        host="h",
        status=Status.ok,
        metrics=(
            Metric(name="lat_p50_us", value=12.05, unit="us", direction=Direction.lower, samples=(12.0, 12.05, 12.1)),
        ),
    )
    [v] = evaluate([few], [LAT])
    assert any("only 3 samples" in w for w in v.warnings)


def test_spread_across_repeats_warns_and_k_of_n_decides():
    repeats = [bw_result(gbps=g) for g in (9.1, 6.0, 12.0)]
    [v] = evaluate(repeats, [BW])
    assert v.outcome == Outcome.passed and any("repeats differ: CV 33%" in w for w in v.warnings)


def test_skipped_failed_and_missing():
    slo = Slo(test="perftest.ib_write_lat", metric="lat_p50_us", direction=Direction.lower, maximum=3.0)
    [v] = evaluate([skipped_result()], [slo])
    assert v.outcome == Outcome.skipped and v.reason == "no RDMA device"
    timeout = TestResult(name="iperf3.data", tool="iperf3", host="h", status=Status.timeout, reason="killed at 30 s")
    [v] = evaluate([timeout], [BW])
    assert v.outcome == Outcome.failed and "timeout: killed at 30 s" in v.reason
    [v] = evaluate([], [BW])
    assert v.outcome == Outcome.skipped and "no result" in v.reason
    no_metric = TestResult(name="iperf3.data", tool="iperf3", host="h", status=Status.ok)
    [v] = evaluate([no_metric], [BW])
    assert v.outcome == Outcome.failed and "not reported" in v.reason


def test_glob_slo_matches_several_tests():
    slo = Slo(test="iperf3.*", metric="throughput_gbps", direction=Direction.higher, minimum=1.0)
    out = evaluate([bw_result(name="iperf3.data"), bw_result(name="iperf3.storage"), latency_result()], [slo])
    assert sorted(v.test for v in out) == ["iperf3.data", "iperf3.storage"]


def test_overall():
    p = evaluate([bw_result(gbps=9.5)], [BW])
    f = evaluate([bw_result(gbps=1.0)], [BW])
    s = evaluate([skipped_result()], [Slo(test="perftest.ib_write_lat", metric="x", direction=Direction.lower)])
    assert overall(p + s) == Outcome.passed
    assert overall(p + f) == Outcome.failed
    assert overall(s) == Outcome.skipped


def test_noise_uses_each_repeats_samples():
    rng = np.random.default_rng(2)
    noisy = tuple(rng.exponential(9.5, 2000).tolist())
    r = bw_result(gbps=9.2, samples=noisy)
    [v] = evaluate([r], [BW])
    assert v.outcome == Outcome.noisy


def test_sweep_sizes_are_cases_not_repeats():
    from tests.results.factories import nccl_results

    slo = Slo(test="nccl.all_reduce", metric="busbw_gbps", direction=Direction.higher, minimum=100.0)
    out = evaluate(nccl_results(), [slo])
    assert len(out) == 11 and all(v.total_repeats == 1 for v in out)
    by_case = {v.test: v.outcome for v in out}
    assert by_case["nccl.all_reduce[size_bytes=1073741824]"] == Outcome.passed
    assert by_case["nccl.all_reduce[size_bytes=1024]"] == Outcome.failed
    one = Slo(
        test="nccl.all_reduce[size_bytes=1073741824]", metric="busbw_gbps", direction=Direction.higher, minimum=100.0
    )
    assert [v.outcome for v in evaluate(nccl_results(), [one])] == [Outcome.passed]


def test_nan_repeat_fails_without_poisoning_the_median():
    nan = bw_result(gbps=float("nan"))
    [v] = evaluate([bw_result(gbps=9.5), nan, bw_result(gbps=9.7)], [BW])
    assert v.outcome == Outcome.passed and v.measured == 9.6 and (v.passed_repeats, v.total_repeats) == (2, 3)
    assert "is nan" in v.reason


def test_parser_quality_warnings_reach_the_verdict():
    import dataclasses

    warned = dataclasses.replace(
        bw_result(gbps=9.5), params={"quality_warnings": "sync latency from an async engine dropped; clat suspect"}
    )
    [v] = evaluate([warned], [BW])
    assert v.outcome == Outcome.passed
    assert v.warnings == ("sync latency from an async engine dropped", "clat suspect")
    [clean] = evaluate([bw_result(gbps=9.5)], [BW])
    assert clean.warnings == ()
