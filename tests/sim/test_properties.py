"""Invariants: delays never shorten a step, more ranks never lower the tail, same seed
same numbers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.sim import (
    CheckpointPolicy,
    CommLatency,
    Constant,
    Empirical,
    Failures,
    Hiccup,
    LogNormal,
    Normal,
    ShiftedExponential,
    SimConfig,
    Stragglers,
    simulate,
)
from gpufabric.sim.engine import draw_layout, step_times

ms = st.floats(min_value=0.01, max_value=5.0).map(lambda v: v * 1e-3)

dists = st.one_of(
    st.builds(lambda m, s: Normal(mu_s=m, sigma_s=s), st.floats(0.0, 0.2), ms),
    st.builds(lambda m, s, loc: LogNormal(median_s=m, sigma=s, loc_s=loc), ms, st.floats(0.05, 1.5), st.floats(0, 0.2)),
    st.builds(lambda sh, m: ShiftedExponential(shift_s=sh, mean_excess_s=m), st.floats(0, 0.2), ms),
    st.builds(lambda q, d, loc: Hiccup(prob=q, delay_s=d, loc_s=loc), st.floats(0, 0.05), ms, st.floats(0, 0.2)),
    st.builds(lambda v: Constant(value_s=v), st.floats(0, 0.2)),
    st.builds(
        lambda xs: Empirical.from_samples(np.asarray(xs) * 1e-3),
        st.lists(st.floats(0.0, 50.0), min_size=2, max_size=40),
    ),
)


def _gen(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _steps(cfg: SimConfig) -> np.ndarray:
    return step_times(cfg, draw_layout(cfg, _gen(cfg.seed)), _gen(cfg.seed + 1))


@st.composite
def configs(draw):
    nodes = draw(st.integers(1, 64))
    rpn = draw(st.sampled_from([1, 2, 8]))
    leaf_nodes = draw(st.sampled_from([0, 1, 2, 4]))
    leaf = leaf_nodes * rpn if leaf_nodes and nodes % leaf_nodes == 0 else 0
    comm = None
    if draw(st.booleans()):
        comm = CommLatency(
            alpha=draw(dists),
            dependent_steps=draw(st.integers(0, 80)),
            width=draw(st.integers(1, 64)),
            slow_links=draw(
                st.none() | st.builds(lambda f, x: Stragglers(fraction=f, factor=x), st.floats(0, 1), st.floats(1, 3))
            ),
        )
    return SimConfig(
        num_ranks=nodes * rpn,
        ranks_per_node=rpn,
        ranks_per_leaf=leaf,
        compute=draw(dists),
        leaf_jitter=draw(st.none() | dists) if leaf else None,
        hiccup=draw(st.none() | st.builds(lambda q, d: Hiccup(prob=q, delay_s=d), st.floats(0, 0.2), ms)),
        stragglers=draw(
            st.none() | st.builds(lambda f, x: Stragglers(fraction=f, factor=x), st.floats(0, 1), st.floats(1, 3))
        ),
        fixed_s=draw(st.floats(0, 0.01)),
        comm=comm,
        steps=draw(st.integers(1, 300)),
        seed=draw(st.integers(0, 2**32)),
    )


@st.composite
def delayed(draw):
    """A config and the same config with one delay made longer (never a probability)."""
    cfg = draw(configs())
    extra = draw(st.floats(0.0, 0.01))
    kind = draw(st.sampled_from(["fixed", "compute", "hiccup", "straggler", "leaf", "alpha", "slow_link"]))
    if kind == "fixed":
        more = replace(cfg, fixed_s=cfg.fixed_s + extra)
    elif kind == "compute":
        more = replace(cfg, compute=cfg.compute.affine(loc_s=extra))
    elif kind == "hiccup" and cfg.hiccup is not None:
        more = replace(cfg, hiccup=Hiccup(prob=cfg.hiccup.prob, delay_s=cfg.hiccup.delay_s + extra))
    elif kind == "straggler" and cfg.stragglers is not None:
        more = replace(
            cfg, stragglers=Stragglers(fraction=cfg.stragglers.fraction, factor=cfg.stragglers.factor * (1 + extra))
        )
    elif kind == "leaf" and cfg.leaf_jitter is not None:
        more = replace(cfg, leaf_jitter=cfg.leaf_jitter.affine(loc_s=extra))
    elif kind == "alpha" and cfg.comm is not None:
        more = replace(cfg, comm=replace(cfg.comm, alpha=cfg.comm.alpha.affine(loc_s=extra)))
    elif kind == "slow_link" and cfg.comm is not None and cfg.comm.slow_links is not None:
        s = cfg.comm.slow_links
        more = replace(
            cfg, comm=replace(cfg.comm, slow_links=Stragglers(fraction=s.fraction, factor=s.factor * (1 + extra)))
        )
    else:
        more = replace(cfg, fixed_s=cfg.fixed_s + extra)
    return cfg, more


@settings(max_examples=150, deadline=None)
@given(delayed())
def test_adding_a_delay_never_shortens_a_step(pair):
    cfg, more = pair
    base, longer = _steps(cfg), _steps(more)
    assert np.all(longer >= base - 1e-15)


@settings(max_examples=100, deadline=None)
@given(dist=dists, n=st.integers(1, 100_000), extra=st.integers(1, 100_000), seed=st.integers(0, 2**32))
def test_more_ranks_never_lower_the_p99(dist, n, extra, seed):
    cfg = SimConfig(num_ranks=n, compute=dist, steps=500, seed=seed)
    few, many = _steps(cfg), _steps(replace(cfg, num_ranks=n + extra))
    assert np.all(many >= few)  # coupled draws: the max only grows with n
    assert np.quantile(many, 0.99) >= np.quantile(few, 0.99)


@settings(max_examples=40, deadline=None)
@given(configs())
def test_step_is_at_least_the_slowest_possible_floor(cfg):
    # No step can be shorter than the fixed time plus the fastest possible rank.
    floor = cfg.fixed_s + float(cfg.compute.isf(np.array(1.0)))
    assert np.all(_steps(cfg) >= floor - 1e-12)


def test_same_seed_same_bits_different_seed_different():
    cfg = SimConfig(
        num_ranks=4096,
        ranks_per_node=8,
        ranks_per_leaf=256,
        compute=Normal(mu_s=0.1, sigma_s=0.002),
        leaf_jitter=ShiftedExponential(shift_s=0.0, mean_excess_s=1e-4),
        hiccup=Hiccup(prob=1e-3, delay_s=0.005),
        stragglers=Stragglers(fraction=0.01, factor=1.5),
        checkpoint=CheckpointPolicy(every_steps=500, write_s=8.0),
        failures=Failures(node_mttf_s=50_000 * 3600, restart_s=600),
        steps=20_000,  # > one chunk of the leaf path: chunking must not change the bits
        runs=3,
        seed=123,
    )
    a, b = simulate(cfg), simulate(cfg)
    assert a.step_times_s.tobytes() == b.step_times_s.tobytes()
    assert a.time_to_train_s == b.time_to_train_s
    c = simulate(replace(cfg, seed=124))
    assert c.step_times_s.tobytes() != a.step_times_s.tobytes()
    # A run's numbers do not depend on how many runs there are.
    one = simulate(replace(cfg, runs=1))
    assert one.step_times_s.tobytes() == a.step_times_s[: cfg.steps].tobytes()
