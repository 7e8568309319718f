"""Size curves compared as one paired quantity (issue 23, Deliver 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests
from gpufabric.results.compare import Change, compare_runs, inconclusive_regressions
from gpufabric.results.records import Metric, RunRecord, Status, TestResult
from gpufabric.results.stats import _signed_rank_cdf, signed_rank_effect
from tests.results.curves import DATA, slower_copy
from tests.results.factories import nccl_results

TABLES = (
    "public_h100_ndr_2node_issue309.txt",  # 8 B - 16 GiB, 15 sizes >= 1 MiB
    "public_mi300x_1node_rccl_issue1562.txt",  # 8 B - 128 MiB, 8 sizes >= 1 MiB
    "public_h100_8node_issue309.txt",  # 1 MiB - 8 GiB
    "public_h100_1node_issue290.txt",  # 6 sizes, 128 MiB - 4 GiB
    "public_h100_2node_srun_issue290.txt",  # srun -l prefixes, #wrong N/A
    "public_efa_t4_2node_tag_output.txt",  # mpirun --tag-output, INFO lines between rows
    "public_b200_2node_all_gather_gke.txt",  # all_gather: size = count x 4 B x 16 ranks
)


def _run(run_id: int, results) -> RunRecord:
    return RunRecord(
        id=run_id,
        kind="ingest",
        status="passed",
        started_at=0.0,
        finished_at=1.0,
        argv=(),
        fingerprint={},
        results=tuple(results),
    )


def _table_run(run_id: int, text: str) -> RunRecord:
    (parsed,) = parse_nccl_tests(text)
    return _run(
        run_id,
        [
            TestResult(
                name=f"nccl.{parsed.case}",
                tool="nccl-tests",
                host="h",
                status=Status.ok,
                metrics=parsed.metrics,
                params=parsed.params(),
            )
        ],
    )


def _curves(cmp):
    return [d for d in cmp.deltas if d.regime and not d.duplicate_of]


def test_signed_rank_null_distribution_and_p_value():
    # T+ over 3 ranks: 0,1,2,3,3,4,5,6 -> counts 1,1,1,2,1,1,1 of 8
    assert _signed_rank_cdf(3) * 8 == pytest.approx(np.cumsum([1, 1, 1, 2, 1, 1, 1]))
    d = np.array([0.05, -0.01, 0.08, 0.03, 0.12, 0.07, -0.02, 0.09])
    effect, low, high, p = signed_rank_effect(d, level=0.9)
    assert p == pytest.approx(st.wilcoxon(d).pvalue)
    i, j = np.triu_indices(d.size)
    assert math.log1p(effect) == pytest.approx(np.median((d[i] + d[j]) / 2))
    assert low < effect < high
    assert signed_rank_effect(np.zeros(7), level=0.9) == (0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize("table", TABLES)
def test_a_real_table_12_percent_slower_above_1_mib_is_a_regression(table):
    text = (DATA / table).read_text()
    cmp = compare_runs(_table_run(1, text), _table_run(2, slower_copy(text, 1.12, min_size=1 << 20)))
    regressions = cmp.regressions
    assert regressions and all(d.method == "signed rank over sizes" for d in regressions)
    (bandwidth,) = [d for d in regressions if d.regime == "bandwidth-bound"]
    assert bandwidth.metric.startswith("time_us@[") and bandwidth.effect == pytest.approx(0.12, abs=0.01)
    for d in regressions:
        assert d.sizes >= 6 and d.p_adjusted < 0.05 and d.effect > 0.05
        # a range is only ever flagged when it holds sizes that did slow down
        assert int(d.metric.split("..")[1].rstrip("B]")) >= 1 << 20
    # the per-size metrics are listed with their curve, and the rate curve is the same quantity
    assert any(x.part_of for x in cmp.deltas if "@" in x.metric and not x.regime)
    (twin,) = [x for x in cmp.deltas if x.duplicate_of == bandwidth.metric and x.metric.startswith("busbw")]
    assert twin.verdict == Change.regression and twin.effect == pytest.approx(1 / 1.12 - 1, abs=0.01)
    assert twin not in cmp.regressions  # one quantity, counted once


@pytest.mark.parametrize("table", TABLES)
def test_the_same_table_is_not_a_regression_and_a_small_shift_is_not_one(table):
    text = (DATA / table).read_text()
    same = compare_runs(_table_run(1, text), _table_run(2, text))
    assert not same.regressions and all(d.verdict == Change.unchanged for d in _curves(same))
    small = compare_runs(_table_run(1, text), _table_run(2, slower_copy(text, 1.02, min_size=1 << 20)))
    assert not small.regressions and not inconclusive_regressions(small)


def test_a_faster_copy_is_an_improvement_not_a_regression():
    text = (DATA / TABLES[0]).read_text()
    cmp = compare_runs(_table_run(1, text), _table_run(2, slower_copy(text, 1 / 1.12, min_size=1 << 20)))
    assert not cmp.regressions and any(d.verdict == Change.improvement for d in _curves(cmp))


def test_probe_sweeps_one_result_per_size_form_a_curve():
    cmp = compare_runs(_run(1, nccl_results(peak=180.0)), _run(2, nccl_results(peak=150.0)))
    (reg,) = cmp.regressions
    assert reg.test == "nccl.all_reduce" and reg.regime == "bandwidth-bound" and reg.metric.startswith("time_us@")
    assert reg.effect == pytest.approx(180 / 150 - 1, rel=1e-6)


def _noisy(text: str, rng, cv: float) -> RunRecord:
    """The table's curve with independent multiplicative noise per size, as a rerun has."""
    run = _table_run(0, text)
    (r,) = run.results
    metrics = tuple(
        Metric(name=m.name, value=m.value * math.exp(cv * rng.standard_normal()), unit=m.unit, direction=m.direction)
        if m.unit != "count"
        else m
        for m in r.metrics
    )
    return _run(
        0, [TestResult(name=r.name, tool=r.tool, host=r.host, status=r.status, metrics=metrics, params=r.params)]
    )


def test_noise_alone_is_rarely_a_regression_and_a_12_percent_shift_under_noise_is_found():
    text = (DATA / TABLES[0]).read_text()
    slow = slower_copy(text, 1.12, min_size=1 << 20)
    rng = np.random.default_rng(2026)
    false = found = 0
    for _ in range(100):
        false += bool(compare_runs(_noisy(text, rng, 0.03), _noisy(text, rng, 0.03)).regressions)
        found += bool(compare_runs(_noisy(text, rng, 0.03), _noisy(slow, rng, 0.03)).regressions)
    assert false <= 5 and found >= 95
