from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.errors import InputError
from gpufabric.results.stats import SKETCH_ACCURACY, summarize


def _codes(summary):
    return {w.code for w in summary.warnings}


def test_percentiles_match_numpy_exactly():
    x = np.random.default_rng(3).lognormal(2.0, 0.7, 123_457)
    s = summarize(x, unit="us")
    want = np.percentile(x, [50, 90, 99, 99.9, 99.99])
    assert [s.p50, s.p90, s.p99, s.p999, s.p9999] == pytest.approx(want.tolist(), rel=1e-12)
    assert (s.min, s.max, s.count) == (x.min(), x.max(), x.size)
    assert s.mean == pytest.approx(x.mean(), rel=1e-12)
    assert s.std == pytest.approx(x.std(ddof=1), rel=1e-9)
    assert s.cv == pytest.approx(x.std(ddof=1) / x.mean(), rel=1e-9)
    assert s.percentiles_exact


def test_histogram_is_log_spaced_for_latencies_and_counts_everything():
    x = np.random.default_rng(4).lognormal(2.0, 1.0, 50_000)
    s = summarize(x, unit="us")
    h = s.histogram
    assert h.log
    assert sum(h.counts) == x.size
    ratios = np.diff(np.log(h.edges))
    assert np.allclose(ratios, ratios[0])
    assert h.edges[0] == pytest.approx(x.min()) and h.edges[-1] == pytest.approx(x.max())
    # the mode bin of a lognormal(2, 1) in log space sits near exp(2)
    peak = int(np.argmax(h.counts))
    assert h.edges[peak] < math.exp(2.0) * 1.5 and h.edges[peak + 1] > math.exp(2.0) / 1.5


def test_narrow_throughput_histogram_is_linear():
    s = summarize(np.random.default_rng(5).normal(100, 1, 1000), unit="Gb/s")
    assert not s.histogram.log
    assert sum(s.histogram.counts) == 1000


def test_quality_warnings_are_data():
    noisy = summarize(np.random.default_rng(6).exponential(10, 5000), unit="us")
    assert "cv_high" in _codes(noisy) and noisy.noisy
    few = summarize([10.0, 10.1, 9.9], unit="us")
    assert "few_samples" in _codes(few) and few.noisy
    calm = summarize(np.random.default_rng(7).normal(100, 1, 100_000), unit="us")
    assert not calm.noisy
    assert "tail_thin" in _codes(calm)  # p99.99 of 1e5 samples has < 10 beyond it
    nan = summarize([1.0, math.nan, 2.0, math.inf] + [1.5] * 40)
    assert "non_finite" in _codes(nan) and nan.count == 42


def test_empty_and_single_sample():
    empty = summarize(np.array([]))
    assert empty.count == 0 and math.isnan(empty.p50) and "empty" in _codes(empty)
    one = summarize([5.0])
    assert (one.p50, one.p9999, one.std, one.min, one.max) == (5.0, 5.0, 0.0, 5.0, 5.0)


def test_merge_equals_summarising_everything_within_sketch_accuracy():
    rng = np.random.default_rng(8)
    parts = [rng.lognormal(3, 0.4, 40_000) for _ in range(3)]
    parts.append(rng.lognormal(3.5, 0.4, 20_000))  # a slow host shifts the tail
    merged = summarize(parts[0], unit="us")
    for part in parts[1:]:
        merged = merged.merge(summarize(part, unit="us"))
    whole = np.concatenate(parts)
    truth = summarize(whole, unit="us")
    assert merged.count == whole.size and not merged.percentiles_exact
    assert merged.mean == pytest.approx(truth.mean, rel=1e-9)
    assert merged.std == pytest.approx(truth.std, rel=1e-9)
    assert (merged.min, merged.max) == (truth.min, truth.max)
    for name in ("p50", "p90", "p99", "p999"):
        assert getattr(merged, name) == pytest.approx(getattr(truth, name), rel=2 * SKETCH_ACCURACY), name
    assert sum(merged.histogram.counts) == whole.size


def test_merge_handles_zero_and_negative_values():
    a = summarize(np.array([-3.0, -1.0, 0.0, 0.0, 2.0]))
    b = summarize(np.array([-2.0, 4.0, 0.0]))
    m = a.merge(b)
    assert m.count == 8 and m.min == -3.0 and m.max == 4.0
    assert m.p50 == pytest.approx(0.0, abs=1e-12)


def test_merging_different_units_raises():
    with pytest.raises(InputError, match="different units"):
        summarize([1.0, 2.0], unit="us").merge(summarize([1.0, 2.0], unit="ms"))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=1e-3, max_value=1e6), min_size=1, max_size=300),
    st.lists(st.floats(min_value=1e-3, max_value=1e6), min_size=1, max_size=300),
)
def test_merge_percentiles_are_within_relative_accuracy_of_a_true_sample(a, b):
    merged = summarize(np.array(a)).merge(summarize(np.array(b)))
    whole = np.sort(np.array(a + b))
    assert merged.count == whole.size
    # DDSketch guarantee: the estimate is within `a` relative error of the sample at rank q (n - 1)
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        rank = q * (whole.size - 1)
        lo_v, hi_v = whole[int(math.floor(rank))], whole[int(math.ceil(rank))]
        est = getattr(merged, name)
        assert lo_v * (1 - SKETCH_ACCURACY) - 1e-9 <= est <= hi_v * (1 + SKETCH_ACCURACY) + 1e-9, name


def test_ten_million_samples_summarised():
    """Ten million samples in one call (the issue's < 1 s bar is measured by
    benchmarks/bench_stats.py, not asserted here: a test's wall clock depends on the machine's load)."""
    x = np.random.default_rng(9).lognormal(3, 0.5, 10_000_000)
    s = summarize(x, unit="us")
    assert s.count == 10_000_000
    assert s.mean == pytest.approx(float(x.mean()), rel=1e-9)
    assert s.p50 == pytest.approx(float(np.median(x)), rel=0.02)
    assert s.p99 == pytest.approx(float(np.quantile(x, 0.99)), rel=0.02)
