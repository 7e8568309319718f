"""``api.evaluate`` on a list: the batch (anchors solved together, every spec's rows in one
table) gives the same candidates as evaluating each spec alone, and the bracketed anchor
solve gives the efficiency the full grid did."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from gpufabric import api
from gpufabric.errors import InputError
from gpufabric.plan.anchor import FINE_POINTS, GRID, _Problem, _stage, solve_anchor, solve_anchors
from gpufabric.plan.candidates import evaluate_candidates
from gpufabric.plan.evaluate import evaluate_table
from gpufabric.plan.table import table_from_block
from tests.conftest import EXAMPLES

CAT = api.load_catalog()
TRAINING = ["lab-2node", "llama3-70b-1k", "roce-256gpu-8b", "gb200-nvl72-70b", "build-vs-rent-70b", "llama3-405b-16k"]


def _spec(name: str, **edit):
    data = api.load_spec(EXAMPLES / f"{name}.yaml", catalog=CAT).model_dump(exclude_none=True)
    data["workload"].pop("notes", None)  # written by the validator
    for path, value in edit.items():
        *parents, leaf = path.split("__")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return api.load_spec(data, catalog=CAT)


def _varied():
    specs = [api.load_spec(EXAMPLES / f"{n}.yaml", catalog=CAT) for n in TRAINING]
    specs += [
        _spec("llama3-70b-1k", options__fabrics=["roce-400g"], options__storage=["nfs"], options__oversubscription=[2]),
        _spec("llama3-70b-1k", options__fabrics=["roce-400g"], options__storage=["local-nvme"]),
        _spec("lab-2node", options__fabrics=["tcp-100g"], workload__throughput={"compute_efficiency": 0.4}),
        _spec("llama3-70b-1k", workload__global_batch_tokens=8388608, options__storage=["nvmeof-tcp"]),
        _spec("llama3-70b-1k", workload__parallelism={"tp": 4, "pp": 8, "dp": 32}),
        _spec("llama3-70b-1k", workload__throughput={"compute_efficiency": 0.45}),
        _spec("llama3-70b-1k", workload__throughput={"tflops_per_gpu": 400.0}, options__fabrics=["roce-400g"]),
        _spec("roce-256gpu-8b", workload__global_batch_tokens=2097152),
    ]
    return specs


def _same(a, b, where: str) -> None:
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0) or (math.isnan(a) and math.isnan(b)), where
    else:
        assert a == b, where


def test_the_batch_gives_each_specs_own_candidates():
    specs = _varied()
    batch = api.evaluate(specs, CAT)
    assert len(batch) == len(specs)
    for spec, got in zip(specs, batch, strict=True):
        alone = evaluate_candidates(spec, CAT)
        assert [c.id for c in got] == [c.id for c in alone]
        for a, b in zip(alone, got, strict=True):
            _same(a, b, f"{spec.name}/{a.id}")


def test_the_batch_keeps_the_plans_recommendation():
    from gpufabric.plan import rank
    from gpufabric.plan.recommend import recommend

    specs = _varied()
    for spec, got in zip(specs, api.evaluate(specs, CAT), strict=True):
        alone = rank(evaluate_candidates(spec, CAT))
        assert [c.id for c in rank(got)] == [c.id for c in alone]
        assert recommend(rank(got)) == recommend(alone)


def _grid_efficiency(spec) -> float:
    """The solve before bracketing: every one of the 61 coarse and 65 fine points evaluated."""
    prob = _stage(spec, CAT)
    assert isinstance(prob, _Problem)
    target = prob.target_s

    def steps(effs):
        return evaluate_table(
            table_from_block(prob.block).take(np.zeros(len(effs), dtype=int)).replace(compute_eff=effs)
        ).step_time_s

    s = steps(GRID)
    k = int(np.searchsorted(-s, -target))
    fine = np.linspace(GRID[k - 1], GRID[k], FINE_POINTS)
    sf = steps(fine)
    j = min(max(int(np.searchsorted(-sf, -target)), 1), len(fine) - 1)
    x0, x1, y0, y1 = 1 / fine[j - 1], 1 / fine[j], sf[j - 1], sf[j]
    x = x0 + (target - y0) * (x1 - x0) / (y1 - y0) if y1 != y0 else x1
    return float(min(1.0, 1.0 / x))


def test_the_bracketed_solve_finds_the_full_grids_efficiency():
    specs = [s for s in _varied() if isinstance(_stage(s, CAT), _Problem)]  # a figure to solve for
    assert len(specs) >= 6
    solved = solve_anchors(specs, CAT)
    for spec, a in zip(specs, solved, strict=True):
        assert a.compute_efficiency == _grid_efficiency(spec), spec.name
        assert a == solve_anchor(spec, CAT)


def test_an_unreachable_figure_in_a_batch_names_its_spec():
    bad = _spec("llama3-70b-1k", workload__throughput={"mfu": 0.99})
    with pytest.raises(InputError, match="even a compute efficiency of 1"):
        api.evaluate([api.load_spec(EXAMPLES / "lab-2node.yaml", catalog=CAT), bad], CAT)


def test_the_search_behind_a_missed_guess_finds_the_same_root(monkeypatch):
    from gpufabric.plan import anchor

    specs = [s for s in _varied() if isinstance(_stage(s, CAT), _Problem)]
    guessed = [a.compute_efficiency for a in solve_anchors(specs, CAT)]

    def miss(table, target, eff, fixed):
        k, j, s, _ = real(table, target, eff, fixed)
        return k, j, np.full_like(s, np.nan), np.zeros(len(target), dtype=bool)

    real = anchor._probe_cell
    monkeypatch.setattr(anchor, "_probe_cell", miss)
    assert [a.compute_efficiency for a in solve_anchors(specs, CAT)] == guessed


def test_a_retried_guess_finds_the_same_root(monkeypatch):
    from gpufabric.plan import anchor

    specs = [s for s in _varied() if isinstance(_stage(s, CAT), _Problem)]
    guessed = [a.compute_efficiency for a in solve_anchors(specs, CAT)]
    real = anchor._predict
    # A first guess 0.3% low: its cell misses, the secant through the probed points retries.
    monkeypatch.setattr(anchor, "_predict", lambda table, target, fixed: real(table, target, fixed) * 0.997)
    assert [a.compute_efficiency for a in solve_anchors(specs, CAT)] == guessed


def test_a_batch_pauses_the_collector_and_gives_it_back_as_found() -> None:
    import gc

    from gpufabric.plan import candidates

    seen: list[bool] = []
    real = candidates._evaluate_batch

    def spy(specs, catalog):
        seen.append(gc.isenabled())
        if len(seen) == 3:
            raise RuntimeError("a batch that fails")
        return real(specs, catalog)

    spec = _spec("lab-2node")
    was = gc.isenabled()
    try:
        candidates._evaluate_batch = spy
        gc.enable()
        api.evaluate([spec], CAT)
        assert gc.isenabled()
        gc.disable()  # a caller that turned it off keeps it off
        api.evaluate([spec], CAT)
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(RuntimeError):  # and on again after an error
            api.evaluate([spec], CAT)
        assert gc.isenabled()
    finally:
        candidates._evaluate_batch = real
        gc.enable() if was else gc.disable()
    assert seen == [False, False, False]


def _efficiency_specs():
    """Specs whose efficiency-model inputs differ: dense and MoE, bf16 and fp8, with and without
    FlashAttention and sequence parallelism, recomputation, another GPU, a measured point of its
    own sequence length."""
    moe = {"params": 400e9, "experts": 16, "top_k": 2, "active_params": 70e9}
    specs = [api.load_spec(EXAMPLES / f"{n}.yaml", catalog=CAT) for n in TRAINING]
    specs += [
        _spec("llama3-70b-1k", **{f"workload__model__{k}": v for k, v in moe.items()}, workload__parallelism__ep=8),
        _spec("llama3-70b-1k", **{f"workload__model__{k}": v for k, v in moe.items()}),
        _spec("llama3-70b-1k", workload__precision="fp8", workload__flash_attention=False),
        _spec("llama3-70b-1k", workload__parallelism__sequence_parallel=False, workload__recompute="selective"),
        _spec("llama3-70b-1k", workload__recompute="full", workload__model__dropout=True),
    ]
    return specs


def test_the_efficiency_model_read_from_a_table_is_the_specs_own_to_the_bit():
    from gpufabric.plan.anchor import model_efficiency, table_efficiencies
    from gpufabric.plan.layouts import spec_layout
    from gpufabric.plan.table import Design, table_block

    specs = [s for s in _efficiency_specs() if not s.searched]
    assert len(specs) >= 8
    blocks = []
    for s in specs:
        o = s.options
        design = Design(fabric=o.fabrics[0], topology=o.topologies[0], oversubscription=1.0, storage=o.storage[0])
        blocks.append(table_block(s, CAT, [design], [spec_layout(s)]))
    got = table_efficiencies(specs, table_from_block(np.concatenate(blocks, axis=1)), CAT)
    want = [float(model_efficiency(s, CAT, [spec_layout(s)])[0]) for s in specs]
    assert got.tolist() == want
    assert len(set(want)) >= 8  # the inputs differ where it matters


def test_records_are_complete_and_equal_to_constructed_ones():
    """``to_records`` builds records without their ``__init__`` (``frozen_maker``): every field is
    set, and a copy through the constructor is equal, field by field."""
    from gpufabric.model.collectives import ALGORITHMS
    from gpufabric.plan.layouts import Layout

    specs = _varied()
    for spec, cands in zip(specs, api.evaluate(specs, CAT), strict=True):
        for c in cands:
            again = dataclasses.replace(c, breakdown=dataclasses.replace(c.breakdown))
            _same(c, again, f"{spec.name}/{c.id}")
            assert c == again and hash(c.layout) == hash(again.layout)
            # Each value in its own field (the builder takes them by position).
            assert c.id.startswith(f"{c.fabric}/{c.topology}/" if c.capacity == "build" else "rent/")
            assert c.id.split("/")[-2 if c.in_network_reduction else -1] == c.storage
            assert c.dp_algorithm in (*ALGORITHMS, "none") and c.meets_requirements == (not c.violations)
            assert isinstance(c.layout, Layout) and isinstance(c.layout_note, str)
            assert c.rental is None if c.capacity == "build" else c.rental in c.id
            assert (c.breakdown.num_ranks, c.breakdown.num_nodes) == (spec.num_gpus, spec.cluster.nodes)
            assert c.storage_read_gbps_per_node == c.storage_read_gbps / spec.cluster.nodes
            assert 0 < c.compute_efficiency <= 1 and c.break_even_months is None


def test_frozen_maker_wants_every_field_once():
    from gpufabric.model.step import StepBreakdown
    from gpufabric.plan.candidates import frozen_maker

    names = [f.name for f in dataclasses.fields(StepBreakdown)]
    with pytest.raises(TypeError, match="fields named once"):
        frozen_maker(StepBreakdown, names[:-1])
    with pytest.raises(TypeError, match="fields named once"):
        frozen_maker(StepBreakdown, [*names, names[0]])
    make = frozen_maker(StepBreakdown, names[::-1])
    values = {n: float(i) for i, n in enumerate(names)}
    assert make(values[n] for n in names[::-1]) == StepBreakdown(**values)


def test_the_solves_fixed_communication_gives_the_step_time_to_the_bit():
    """``comm_fixed`` once for a table, then rows of it at other compute efficiencies: the step
    times of a pass that computes everything (the solve's passes rely on it)."""
    from gpufabric.plan.evaluate import comm_fixed, step_and_compute_s, step_time_s

    more = [
        _spec("llama3-70b-1k", workload__parallelism={"tp": 8, "cp": 2, "pp": 1, "dp": 64, "zero_stage": 3}),
        _spec("llama3-70b-1k", workload__parallelism={"tp": 4, "cp": 4, "pp": 4, "dp": 16, "virtual_stages": 2}),
    ]
    probs = [p for p in (_stage(s, CAT) for s in _varied() + _efficiency_specs() + more) if isinstance(p, _Problem)]
    assert len(probs) >= 12
    table = table_from_block(np.concatenate([p.block for p in probs], axis=1))
    fixed = comm_fixed(table.replace(compute_eff=0.3))
    rng = np.random.default_rng(32)
    for _ in range(3):
        effs = rng.uniform(0.05, 0.9, len(probs))
        at = table.replace(compute_eff=effs)
        assert step_time_s(at, fixed=fixed).tolist() == step_time_s(at).tolist()
        got = step_and_compute_s(at, quantise_tail=True, fixed=fixed)
        assert [g.tolist() for g in got] == [w.tolist() for w in step_and_compute_s(at, quantise_tail=True)]
        rows = rng.choice(len(probs), 5)
        sub = at.take(rows)
        assert step_time_s(sub, fixed=fixed.take(rows)).tolist() == step_time_s(sub).tolist()
