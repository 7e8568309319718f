"""The single-value and memoised paths added for ``api.evaluate``'s speed (issue 32) give
what the general numpy forms give, bit for bit, and are keyed on all of their inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpufabric import api
from gpufabric.model.congestion import replaced_fraction
from gpufabric.model.flops import RECOMPUTE, flops_per_token
from gpufabric.model.topology import nic_host_gbps
from gpufabric.plan import anchor as anchor_mod
from gpufabric.plan import candidates, table
from gpufabric.plan.anchor import layout_efficiencies, solve_anchor
from gpufabric.plan.layouts import Layout, spec_layout
from tests.conftest import EXAMPLES

CAT = api.load_catalog()


def _spec(name: str = "llama3-70b-1k"):
    return api.load_spec(EXAMPLES / f"{name}.yaml", catalog=CAT)


@pytest.mark.parametrize("name", ["llama3-70b-1k", "llama3-405b-16k", "roce-256gpu-8b"])
def test_a_problem_sets_every_anchor_field_but_the_solves(name: str) -> None:
    prob = anchor_mod._stage(_spec(name), CAT)
    assert isinstance(prob, anchor_mod._Problem)
    solved = {"compute_efficiency", "anchor_step_s", "scale", "model_at_anchor"}
    # A field added to Anchor and not set by the stage would take its default here.
    assert set(prob.fields) | solved == {f.name for f in dataclasses.fields(anchor_mod.Anchor)}
    assert not set(prob.fields) & solved
    got = anchor_mod._solved(prob.fields, 0.6, 3.0, 0.5)
    assert (got.compute_efficiency, got.anchor_step_s, got.scale, got.model_at_anchor) == (0.6, 3.0, 0.6 / 0.5, 0.5)
    assert all(getattr(got, k) == v for k, v in prob.fields.items())


@pytest.mark.parametrize(
    "name", ["llama3-70b-1k", "roce-256gpu-8b", "build-vs-rent-70b", "llama3-405b-16k", "lab-2node"]
)
def test_one_measured_layouts_efficiency_is_the_general_forms(name: str) -> None:
    spec = _spec(name)
    a = solve_anchor(spec, CAT)
    assert a.measured_layout is not None
    fast = layout_efficiencies(a, spec, CAT, [a.measured_layout])
    general = layout_efficiencies(a, spec, CAT, (a.measured_layout,))  # a tuple takes the numpy path
    assert np.array_equal(fast, general)


def test_figure_flops_are_flops_per_token_and_keyed_on_each_input() -> None:
    a = solve_anchor(_spec(), CAT)
    lays = [dataclasses.replace(a.measured_layout, recompute=r) for r in RECOMPUTE]
    layers, hidden, seq, vocab = a.model_shape
    for conv in ("megatron", "6pt"):
        b = dataclasses.replace(a, flops=conv)
        want = flops_per_token(
            params_active=b.params_active,
            layers=layers,
            hidden=hidden,
            seq_len=seq,
            vocab=vocab,
            recompute=np.array([RECOMPUTE.index(x.recompute) for x in lays], dtype=float),
            convention=conv,
        )
        assert np.array_equal(b.figure_flops_per_token(lays), want)
    m = dataclasses.replace(a, flops="megatron")  # 6pt reads only the parameters
    base = m.figure_flops_per_token(lays)
    for changed in (
        dataclasses.replace(m, params_active=a.params_active * 1.5),
        dataclasses.replace(m, model_shape=(layers, hidden, seq * 2, vocab)),
        dataclasses.replace(m, model_shape=(layers * 2, hidden, seq, vocab)),
        dataclasses.replace(m, model_shape=(layers, hidden * 2, seq, vocab)),
        dataclasses.replace(m, flops="6pt"),
    ):
        assert not np.array_equal(changed.figure_flops_per_token(lays), base)


def test_memoised_scalars_are_the_model_functions() -> None:
    for gen, lanes in [(4, 16), (5, 16), (5, 8), (6, 16)]:
        assert candidates._nic_host_gbps(gen, lanes) == float(nic_host_gbps(gen, lanes))
    for gpn, mttf in [(8.0, 50_000.0), (4.0, 50_000.0), (8.0, 10_000.0), (72.0, 1e6)]:
        assert table._replaced(gpn, mttf) == float(replaced_fraction(gpus_per_node=gpn, gpu_mttf_hours=mttf))
    assert table._replaced(8.0, 50_000.0) != table._replaced(4.0, 50_000.0)


def test_layout_columns_are_each_layouts_fields() -> None:
    lays = [
        spec_layout(_spec()),
        Layout(
            tp=2,
            pp=3,
            dp=5,
            ep=1,
            microbatch_size=2,
            microbatches=7,
            virtual_stages=2,
            zero_stage=3,
            recompute="full",
            cp=2,
        ),
    ]
    cols = table.layout_columns(lays)
    for k in ("tp", "cp", "pp", "dp", "ep", "microbatches", "microbatch_size", "virtual_stages", "zero_stage"):
        assert cols[k].tolist() == [float(getattr(x, k)) for x in lays]
    assert cols["recompute"].tolist() == [float(RECOMPUTE.index(x.recompute)) for x in lays]


def test_a_one_row_block_is_the_general_blocks_column() -> None:
    spec = _spec()
    designs = table.enumerate_designs(spec, CAT)[:1]
    lay = [spec_layout(spec)]
    one = table.table_block(spec, CAT, designs, lay, compute_efficiency=0.37)
    general = table.table_block(spec, CAT, designs, lay, pairs=(np.array([0]), np.array([0])), compute_efficiency=0.37)
    assert one.shape == general.shape == (len(table.FIELDS), 1)
    assert np.array_equal(one, general)
