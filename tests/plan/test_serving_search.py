"""The serving search's exact shortcuts (issue 32)."""

from __future__ import annotations

from statistics import NormalDist

import pytest

from gpufabric.plan.serving_search import _NORMAL_QUANTILE, _quantile


@pytest.mark.parametrize("q", sorted(_NORMAL_QUANTILE))
def test_the_tabulated_normal_quantiles_are_statistics_to_the_bit(q):
    assert _NORMAL_QUANTILE[q] == NormalDist().inv_cdf(q)


def test_the_screen_reads_only_tabulated_quantiles():
    # _Sizer.screen asks for the p50 and p99 prompt; any other quantile is a KeyError, not a guess.
    assert _quantile(4096, 0.3, 0.5, None) < _quantile(4096, 0.3, 0.99, None) <= 8 * 4096
    with pytest.raises(KeyError):
        _quantile(4096, 0.3, 0.9, None)
