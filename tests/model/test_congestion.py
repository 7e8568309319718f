"""Congestion above the leaf (model.congestion) and its effect on planned steps."""

from __future__ import annotations

import numpy as np
import pytest

from gpufabric.catalog import load_catalog
from gpufabric.model.congestion import cross_fraction, expected_max_load, uplink_slowdown
from gpufabric.plan.evaluate import evaluate_table
from gpufabric.plan.table import Design, build_table
from gpufabric.spec import load_spec
from tests.conftest import EXAMPLES

CAT = load_catalog()


@pytest.mark.parametrize(("balls", "bins"), [(2, 8), (8, 8), (16, 8), (16, 32), (64, 16), (256, 64)])
def test_expected_max_load_matches_monte_carlo(balls, bins):
    rng = np.random.default_rng(7)
    mc = np.mean([np.bincount(rng.integers(0, bins, balls), minlength=bins).max() for _ in range(20_000)])
    assert float(expected_max_load(balls, bins)) == pytest.approx(mc, rel=0.05)


def test_slowdown_grows_with_oversubscription_and_crossing():
    one, four = uplink_slowdown(nics_per_leaf=32, uplinks=[32, 8], cross=1.0)
    assert four > one > 1  # ECMP collisions even at 1:1 when every flow leaves the leaf
    assert float(uplink_slowdown(nics_per_leaf=32, uplinks=8, cross=1 / 32)) == 1.0  # a sparse ring fits
    # A light demand (storage clients at a tenth of the NICs) is not slowed even at 4:1.
    assert float(uplink_slowdown(nics_per_leaf=32, uplinks=8, cross=1.0, demand=0.1)) == 1.0
    assert float(cross_fraction(group_nodes=64, nodes_per_leaf=8, scattered=False)) == pytest.approx(1 / 8)
    assert float(cross_fraction(group_nodes=64, nodes_per_leaf=8, scattered=True)) == 1.0
    assert float(cross_fraction(group_nodes=8, nodes_per_leaf=8, scattered=True)) == 0.0
    assert float(cross_fraction(group_nodes=64, nodes_per_leaf=16, scattered=False, all_to_all=True)) == 0.75


def _rows(path, placement, designs):
    spec = load_spec(path).spec
    spec = spec.model_copy(update={"options": spec.options.model_copy(update={"placement": placement})})
    return evaluate_table(build_table(spec, CAT, designs, compute_efficiency=0.5))


def test_oversubscription_lengthens_a_dp_exposed_step_and_topologies_differ():
    ds = [
        Design(fabric="roce-400g", topology=t, oversubscription=r, storage="nvmeof-rdma")
        for t in ("rail-optimized", "fat-tree")
        for r in (1.0, 4.0)
    ]
    out = _rows(EXAMPLES / "llama3-70b-1k.yaml", "contiguous", ds)
    rail1, rail4, fat1, fat4 = range(4)
    assert out.dp_exposed_s[fat4] > out.dp_exposed_s[fat1] > 0
    assert out.step_time_s[fat4] > out.step_time_s[fat1]
    # Rail-aligned DP rings stay on their rail leaves: rail-optimized is untouched at 4:1,
    # the classic fat tree (whole nodes per leaf, g times fewer) is not.
    assert out.dp_congestion[rail4] == 1.0 and out.dp_congestion[fat4] > 1.2
    assert out.step_time_s[rail4] < out.step_time_s[fat4]
    scattered = _rows(EXAMPLES / "llama3-70b-1k.yaml", "scattered", ds)
    assert scattered.dp_exposed_s[fat4] > out.dp_exposed_s[fat4]
    assert scattered.dp_congestion[fat1] > 1.0  # ECMP collisions without any oversubscription
