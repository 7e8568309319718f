from __future__ import annotations

import numpy as np
import pytest

from gpufabric.errors import InputError
from gpufabric.results.compare import Change, compare_runs, inconclusive_regressions, metric_class
from gpufabric.results.inference import batch_medians, benjamini_hochberg, holm, relative_effect
from gpufabric.results.records import Direction, Metric, RunRecord, Status, TestResult
from tests.results import trials
from tests.results.factories import bw_result, latency_result


def _run(run_id, results):
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


def _delta(cmp, metric, test=None):
    return next(d for d in cmp.deltas if d.metric == metric and (test is None or d.test == test))


def _ar1(rng, n, rho, median=10.0, cv=0.1):
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = rho * x[i - 1] + np.sqrt(1 - rho * rho) * e[i]
    return median * np.exp(cv * x)


def _sampled(name, samples, metric="lat_p50_us"):
    return TestResult(
        name=name,
        tool="sockperf",
        host="node1",
        status=Status.ok,
        metrics=(
            Metric(
                name=metric,
                value=float(np.median(samples)),
                unit="us",
                direction=Direction.lower,
                samples=tuple(samples.tolist()),
            ),
        ),
    )


# --- the statistics ---------------------------------------------------------------------------------------------


def test_holm_and_bh_adjust_as_published():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # Holm: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1 -> 0.02, 0.03, 0.06, 0.06 (monotone)
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted p*m/rank 0.02, 0.02, 0.04, 0.04 (step-up minimum from the top)
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_welch_on_logs_gives_a_relative_effect_and_interval():
    base = np.array([10.0, 10.2, 9.9, 10.1, 10.0])
    eff = relative_effect(base, base * 1.2, level=0.9)
    assert eff.effect == pytest.approx(0.2, rel=1e-9) and eff.ci_low < 0.2 < eff.ci_high and eff.p_value < 1e-6
    same = relative_effect(base, base, level=0.9)
    assert same.effect == 0 and same.p_value == 1.0


def test_batches_are_longer_when_samples_are_autocorrelated():
    rng = np.random.default_rng(5)
    iid = batch_medians(_ar1(rng, 4000, 0.0))
    correlated = batch_medians(_ar1(rng, 4000, 0.9))
    assert iid is not None and iid.size == 32
    # rho 0.9 -> tau 19 -> batches of >= 190 samples -> 21 batches of 4000
    assert correlated is not None and 8 <= correlated.size < 32
    assert batch_medians(_ar1(rng, 500, 0.95)) is None  # too few independent batches: no verdict


def test_metric_classes():
    assert metric_class("observations", "count") == "count"
    assert metric_class("lat_p999_us", "us") == "tail" and metric_class("rtt_max_us", "us") == "tail"
    assert metric_class("clat_p99_9_us", "us") == "tail" and metric_class("lat_p50_us", "us") == "latency"
    assert metric_class("lat_stddev_us", "us") == "spread" and metric_class("step_time_cv", "ratio") == "spread"
    assert metric_class("busbw_gbps", "GB/s") == "throughput" and metric_class("cpu_host_percent", "%") == "percent"


# --- per-metric behaviour ---------------------------------------------------------------------------------------


def test_autocorrelated_identical_runs_are_not_a_regression():
    """Issue 16: 40,000 autocorrelated samples were tested as independent (p < 1e-300)."""
    rng = np.random.default_rng(11)
    # Two runs of one slowly wandering process: rho 0.95, so 40,000 samples hold ~1,000 independent ones.
    base, cand = _ar1(rng, 40_000, 0.95), _ar1(rng, 40_000, 0.95)
    cmp = compare_runs(_run(1, [_sampled("sockperf.data", base)]), _run(2, [_sampled("sockperf.data", cand)]))
    d = _delta(cmp, "lat_p50_us")
    assert d.method == "batch medians" and d.verdict == Change.unchanged and d.p_value > 0.05
    from scipy.stats import mannwhitneyu

    # What the old compare (U test on the raw samples) said of the same two runs: a wild "difference".
    assert mannwhitneyu(base, cand).pvalue < 1e-9


def test_one_repeat_with_samples_detects_a_real_shift():
    rng = np.random.default_rng(3)
    base, cand = _ar1(rng, 20_000, 0.5), _ar1(rng, 20_000, 0.5) * 1.15
    d = _delta(compare_runs(_run(1, [_sampled("s", base)]), _run(2, [_sampled("s", cand)])), "lat_p50_us")
    assert d.verdict == Change.regression and d.effect == pytest.approx(0.15, abs=0.03)


def test_repeats_are_the_evidence():
    base = _run(1, [bw_result(gbps=g) for g in (9.4, 9.5, 9.45, 9.5, 9.42)])
    cand = _run(2, [bw_result(gbps=g) for g in (7.1, 7.0, 7.2, 7.05, 7.15)])
    d = _delta(compare_runs(base, cand), "throughput_gbps")
    assert d.method == "repeats" and d.n_base == 5 and d.ci_high < 0 and d.verdict == Change.regression
    noisy = _run(3, [bw_result(gbps=g) for g in (5.0, 14.0, 6.0, 13.0)])
    d = _delta(compare_runs(base, noisy), "throughput_gbps")
    assert d.ci_low < 0 < d.ci_high and d.verdict == Change.inconclusive  # could be -40 % or +40 %
    steady = _run(4, [bw_result(gbps=g) for g in (9.45, 9.41, 9.5, 9.44, 9.47)])
    assert _delta(compare_runs(base, steady), "throughput_gbps").verdict == Change.unchanged


def test_minimum_effect_decides_and_is_per_class():
    base = _run(1, [bw_result(gbps=g) for g in (9.40, 9.50, 9.45, 9.48)])
    cand = _run(2, [bw_result(gbps=g) for g in (9.00, 9.02, 8.98, 9.01)])  # -4.8 %, very significant
    d = _delta(compare_runs(base, cand), "throughput_gbps")
    assert d.verdict == Change.unchanged and "below the 5% minimum effect" in d.note
    assert _delta(compare_runs(base, cand, tolerance=0.03), "throughput_gbps").verdict == Change.regression
    assert (
        _delta(compare_runs(base, cand, min_effect={"throughput": 0.02}), "throughput_gbps").verdict
        == Change.regression
    )
    with pytest.raises(InputError, match="unknown metric class"):
        compare_runs(base, cand, min_effect={"speed": 0.1})


def test_counts_are_not_performance_and_duplicates_are_tested_once():
    def run(run_id, scale):
        out = []
        for r, x in enumerate((10.0, 10.3, 9.8)):
            v = x * scale
            out.append(
                TestResult(
                    name="sockperf.data",
                    tool="sockperf",
                    host="node1",
                    status=Status.ok,
                    params={"repeat": str(r)},
                    metrics=(
                        Metric(name="lat_max_us", value=v * 9, unit="us", direction=Direction.lower),
                        Metric(name="lat_p99999_us", value=v * 9, unit="us", direction=Direction.lower),
                        Metric(name="observations", value=4000.0 * scale, unit="count"),
                        Metric(name="msg_rate_kps", value=1e3 / v, unit="k/s"),  # the same quantity, inverted: tested
                        Metric(name="bw_gbps", value=v * 0.064, unit="GB/s", direction=Direction.lower),  # proportional
                    ),
                )
            )
        return _run(run_id, out)

    cmp = compare_runs(run(1, 1.0), run(2, 1.5))
    obs = _delta(cmp, "observations")
    assert obs.method == "not performance" and obs.verdict == Change.unchanged and obs.delta == pytest.approx(0.5)
    mx, dup = _delta(cmp, "lat_max_us"), _delta(cmp, "lat_p99999_us")
    assert mx.verdict == Change.regression and dup.duplicate_of == "lat_max_us" and dup.verdict == Change.regression
    assert _delta(cmp, "bw_gbps").duplicate_of == "lat_max_us"  # proportional, same direction
    assert _delta(cmp, "msg_rate_kps").duplicate_of == ""  # a different shape: its own test
    assert cmp.tested == 2 and [d.metric for d in cmp.regressions] == ["lat_max_us", "msg_rate_kps"]


def test_too_little_data_is_inconclusive_and_missing_metrics_are_listed():
    base = _run(1, [bw_result(gbps=9.5), bw_result(name="iperf3.storage")])
    cand = _run(2, [bw_result(gbps=5.0), latency_result()])
    cmp = compare_runs(base, cand)
    d = _delta(cmp, "throughput_gbps", "iperf3.data")
    assert d.verdict == Change.inconclusive and "one value per side" in d.note and d.p_value is None
    assert inconclusive_regressions(cmp) == (d,)
    notes = {(x.test, x.note) for x in cmp.deltas if x.method == "-" and x.delta is None}
    assert ("iperf3.storage", "only in base") in notes and ("sockperf.data", "only in candidate") in notes
    assert cmp.regressions == ()


def test_sweep_sizes_are_compared_size_by_size():
    from tests.results.factories import nccl_results

    cmp = compare_runs(_run(1, nccl_results(peak=180.0)), _run(2, nccl_results(peak=150.0)))
    busbw = [d for d in cmp.deltas if d.metric == "busbw_gbps"]
    assert len(busbw) == 11 and {d.test for d in busbw} >= {"nccl.all_reduce[size_bytes=1024]"}
    assert all(d.verdict == Change.inconclusive for d in busbw)  # one value per size and side
    top = next(d for d in busbw if d.test == "nccl.all_reduce[size_bytes=1073741824]")
    assert top.delta == pytest.approx(150 / 180 - 1, rel=1e-3)


# --- the gate's bars: seeded trials with realistic noise ----------------------------------------------------------


def _trial_values(repeats, samples, seed):
    rng = np.random.default_rng(seed)
    values, lat = trials.draw_values(rng, trials=200, repeats=repeats, samples=samples)
    return rng, values, lat


def test_same_distribution_gives_no_regression_in_95_percent_of_200_trials():
    _, values, _ = _trial_values(5, 500, seed=2026)
    clean = sum(
        not compare_runs(trials.make_run(1, v[0], None), trials.make_run(2, v[1], None)).regressions for v in values
    )
    assert clean >= 190


def test_same_distribution_single_repeat_batches_give_no_regression_in_95_percent():
    _, values, lat = _trial_values(1, 2000, seed=7)
    clean = sum(
        not compare_runs(
            trials.make_run(1, values[t, 0], lat[t, 0]), trials.make_run(2, values[t, 1], lat[t, 1])
        ).regressions
        for t in range(200)
    )
    assert clean >= 190


def test_planted_10_percent_regression_is_found_in_95_percent_of_200_trials():
    rng, values, _ = _trial_values(5, 500, seed=1)
    names = [m[0] for m in trials.METRICS]
    found = spurious = 0
    for v in values:
        test = int(rng.integers(trials.TESTS))
        name = trials.CENTRAL[int(rng.integers(len(trials.CENTRAL)))]
        cand = v[1].copy()
        # 10 % worse: latency up by 10 %, a rate down to 1/1.1
        cand[test, :, names.index(name)] *= 1 / 1.1 if name == "msg_rate_kps" else 1.1
        regs = compare_runs(trials.make_run(1, v[0], None), trials.make_run(2, cand, None)).regressions
        hit = {(d.test, d.metric) for d in regs}
        found += (f"sockperf.t{test}", name) in hit
        spurious += len(hit - {(f"sockperf.t{test}", name)})
    assert found >= 190 and spurious <= 10
