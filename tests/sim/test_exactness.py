"""The order-statistics path against the brute-force path and against closed forms."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, special, stats

from gpufabric.sim import (
    CommLatency,
    Constant,
    Empirical,
    Hiccup,
    LogNormal,
    Normal,
    ShiftedExponential,
    SimConfig,
    Stragglers,
    expected_max,
    simulate,
)
from gpufabric.sim.distributions import draw_max
from gpufabric.sim.engine import draw_layout, step_times
from gpufabric.sim.parse import load_empirical

SOCKPERF = Path(__file__).resolve().parents[1] / "data" / "sockperf" / "pingpong_udp_mps2000_fulllog.csv"

DISTS = {
    "const": Constant(value_s=0.1),
    "normal": Normal(mu_s=0.1, sigma_s=0.002),
    "normal-truncated": Normal(mu_s=0.001, sigma_s=0.002),
    "lognormal": LogNormal(median_s=0.002, sigma=0.5, loc_s=0.1),
    "exp": ShiftedExponential(shift_s=0.1, mean_excess_s=0.001),
    "hiccup": Hiccup(prob=0.01, delay_s=0.005, loc_s=0.1),
    "empirical": load_empirical(str(SOCKPERF)),
}


def _gen(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _both(cfg: SimConfig, brute_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Step times from both paths: same slow nodes and links, independent step draws."""
    lay = draw_layout(cfg, _gen(cfg.seed))
    fast = step_times(cfg, lay, _gen(cfg.seed + 1000))
    brute = step_times(replace(cfg, steps=brute_steps), lay, _gen(cfg.seed + 2000), brute_force=True)
    return fast, brute


@pytest.mark.parametrize("n", [2, 64, 4096])
@pytest.mark.parametrize("name", sorted(DISTS))
def test_order_statistics_match_brute_force(name, n):
    cfg = SimConfig(num_ranks=n, steps=20_000, compute=DISTS[name], seed=1, attribution=False)
    fast, brute = _both(cfg, brute_steps=2_000 if n == 4096 else 4_000)
    result = stats.ks_2samp(fast, brute)
    assert result.pvalue > 0.01, (name, n, result)


@pytest.mark.parametrize("n", [2, 64, 4096])
def test_effects_match_brute_force(n):
    # Stragglers, hiccups (binomial split), leaf jitter and an exact ring all at once.
    # Same seed -> both paths see the same slow nodes and links.
    cfg = SimConfig(
        num_ranks=n,
        ranks_per_node=2,
        ranks_per_leaf=2 if n == 2 else 16,
        compute=Normal(mu_s=0.1, sigma_s=0.002),
        hiccup=Hiccup(prob=0.002, delay_s=0.004),
        stragglers=Stragglers(fraction=0.05, factor=1.02),
        leaf_jitter=ShiftedExponential(shift_s=0.0, mean_excess_s=0.0005),
        comm=CommLatency(
            alpha=Normal(mu_s=1e-5, sigma_s=2e-6),
            dependent_steps=6,
            width=max(2, n // 16),
            slow_links=Stragglers(fraction=0.2, factor=1.5),
        ),
        fixed_s=0.01,
        steps=20_000,
        seed=5,
        attribution=False,
    )
    fast, brute = _both(cfg, brute_steps=1_500 if n == 4096 else 4_000)
    assert stats.ks_2samp(fast, brute).pvalue > 0.01


def test_hiccup_with_an_offset_matches_brute_force():
    cfg = SimConfig(
        num_ranks=64,
        compute=DISTS["normal"],
        hiccup=Hiccup(prob=0.01, delay_s=0.004, loc_s=0.001),
        steps=20_000,
        seed=8,
        attribution=False,
    )
    fast, brute = _both(cfg, brute_steps=4_000)
    assert stats.ks_2samp(fast, brute).pvalue > 0.01
    assert fast.min() > 0.1  # the offset applies to every rank, hiccup or not


def test_a_wrong_rank_count_is_detected():
    # The KS test has the power to see an off-by-a-factor-of-two rank count.
    cfg = SimConfig(num_ranks=64, steps=20_000, compute=DISTS["normal"], seed=3, attribution=False)
    fast, _ = _both(cfg, 1)
    _, brute = _both(replace(cfg, num_ranks=128), 4_000)
    assert stats.ks_2samp(fast, brute).pvalue < 1e-6


def _expected_max_normal_excess(n: int) -> float:
    # E[max of n standard normals] = integral of x * n * phi(x) * Phi(x)^(n-1).
    f = lambda x: x * n * stats.norm.pdf(x) * stats.norm.cdf(x) ** (n - 1)  # noqa: E731
    return integrate.quad(f, -12, 12, limit=200)[0]


@pytest.mark.parametrize("n", [64, 1024, 16384])
def test_max_of_normals_matches_numerical_integration(n):
    mu, sigma = 0.1, 0.002
    r = simulate(SimConfig(num_ranks=n, steps=100_000, compute=Normal(mu_s=mu, sigma_s=sigma), seed=2))
    excess = (r.step_time_ms.mean * 1e-3 - mu) / sigma
    assert excess == pytest.approx(_expected_max_normal_excess(n), rel=0.005)


@pytest.mark.parametrize("n", [2, 100, 16384])
def test_max_of_exponentials_matches_harmonic_numbers(n):
    shift, mean = 0.05, 0.001
    h_n = float(np.sum(1.0 / np.arange(1, n + 1)))
    r = simulate(
        SimConfig(num_ranks=n, steps=100_000, compute=ShiftedExponential(shift_s=shift, mean_excess_s=mean), seed=4)
    )
    excess = r.step_time_ms.mean * 1e-3 - shift
    assert excess == pytest.approx(mean * h_n, rel=0.005)
    assert expected_max(ShiftedExponential(shift_s=shift, mean_excess_s=mean), n) == pytest.approx(
        shift + mean * h_n, rel=1e-6
    )


@pytest.mark.parametrize("n", [10, 100, 1024])
def test_hiccup_probability_of_a_slow_step(n):
    q, d = 0.01, 0.005
    expected = 1 - (1 - q) ** n  # Tail at Scale: q = 1 %, N = 100 -> 63 %
    # Both ways in: as the rank distribution (inverse-CDF path) and as an added hiccup
    # process (binomial split).
    for cfg in (
        SimConfig(num_ranks=n, steps=100_000, compute=Hiccup(prob=q, delay_s=d, loc_s=0.1), seed=7),
        SimConfig(num_ranks=n, steps=100_000, compute=Constant(value_s=0.1), hiccup=Hiccup(prob=q, delay_s=d), seed=7),
    ):
        slow = np.mean(simulate(cfg).step_times_s > 0.1 + d / 2)
        assert slow == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / 100_000) + 1e-4)


def test_tail_survival_keeps_precision_at_large_n():
    # At n = 1e6 the naive 1 - u**(1/n) keeps ~10 digits; the expm1 form agrees with a
    # high-precision reference to 1e-12 relative.
    u = np.array([0.5, 1e-3, 0.999])
    n = 1_000_000
    from gpufabric.sim.distributions import max_survival

    exact = np.array([-math.expm1(math.log(v) / n) for v in u])
    np.testing.assert_allclose(max_survival(u, n), exact, rtol=1e-14)
    x = draw_max(Normal(mu_s=0.0, sigma_s=1.0, lower_s=-50.0), n, u)
    np.testing.assert_allclose(x, -special.ndtri(exact), rtol=1e-12)


def test_truncated_normal_matches_scipy():
    d = Normal(mu_s=0.001, sigma_s=0.002)
    ref = stats.truncnorm(a=-0.5, b=np.inf, loc=0.001, scale=0.002)
    q = np.array([0.9, 0.5, 1e-3, 1e-9])
    np.testing.assert_allclose(d.isf(q), ref.isf(q), rtol=1e-9)
    assert d.mean == pytest.approx(ref.mean(), rel=1e-9)
    x = np.array([0.0, 0.001, 0.004])
    np.testing.assert_allclose(d.cdf(x), ref.cdf(x), atol=1e-12)


def test_empirical_from_histogram_quantiles():
    e = Empirical.from_histogram([0.0, 1.0, 2.0, 4.0], [1, 0, 3])
    # Uniform within bins: a quarter of the mass on [0, 1], none on [1, 2], the rest on [2, 4].
    assert float(e.isf(np.array(0.5))) == pytest.approx(2 + 2 * (0.25 / 0.75))
    assert float(e.isf(np.array(0.7))) == pytest.approx(2 + 2 * (0.05 / 0.75))
    assert float(e.cdf(np.array(2.5))) == pytest.approx(0.25 + 0.75 * 0.25)
    assert float(e.cdf(np.array(1.5))) == pytest.approx(0.25)
    assert e.mean == pytest.approx(0.25 * 0.5 + 0.75 * 3.0)


def test_sockperf_samples_are_read_in_seconds():
    e = load_empirical(str(SOCKPERF))
    assert len(e.values_s) == 1106  # "Total 1106 observations" in the same file
    assert e.values_s[-1] == pytest.approx(3133.047e-6)
    assert e.values_s[0] == pytest.approx(7.588e-6, rel=1e-3)  # the summary's <MIN>, printed rounded


def test_ring_normal_limit_matches_exact_sum():
    # Above exact_ring_steps the sum of S maxima is drawn from its normal limit with the
    # exact mean and variance; compare with the exact sum.
    from dataclasses import replace

    base = SimConfig(
        num_ranks=8,
        compute=Constant(value_s=0.0),
        comm=CommLatency(alpha=ShiftedExponential(shift_s=1e-5, mean_excess_s=2e-6), dependent_steps=254, width=128),
        steps=5_000,
        seed=9,
        exact_ring_steps=1000,
    )
    exact = simulate(base).step_times_s
    approx = simulate(replace(base, exact_ring_steps=8, steps=20_000)).step_times_s
    assert approx.mean() == pytest.approx(exact.mean(), rel=1e-3)
    assert approx.std() == pytest.approx(exact.std(), rel=0.05)
    assert stats.ks_2samp(exact, approx).pvalue > 0.01
