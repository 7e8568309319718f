"""Spec loading: every error class gives file:line:col, field, fix; the CLI exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.errors import SpecError
from gpufabric.spec import load_spec
from tests.conftest import EXAMPLES

GOOD = """\
name: t
cluster: {nodes: 2, gpus_per_node: 8, gpu: h100-sxm}
workload:
  model: {params: 7e9, layers: 32, hidden: 4096, seq_len: 4096}
  parallelism: {tp: 8, pp: 1, dp: 2}
  global_batch_tokens: 1048576
  total_tokens: 20e9
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_load(example):
    loaded = load_spec(example)
    par = loaded.spec.workload.parallelism
    if loaded.spec.searched:  # parallelism: auto
        assert par.searched == ("tp", "cp", "pp", "dp", "microbatch_size", "virtual_stages", "zero_stage")
    else:
        assert par.tp * par.cp * par.pp * par.dp == loaded.spec.num_gpus


def test_scientific_notation_without_dot_is_a_number(tmp_path):
    # YAML 1.1 reads 7e9 as a string; the spec must still accept it as a number.
    spec = load_spec(write(tmp_path, GOOD)).spec
    assert spec.workload.model.params == 7e9
    assert spec.workload.total_tokens == 20e9


def test_unknown_key_has_location_and_did_you_mean(tmp_path):
    path = write(tmp_path, GOOD.replace("gpu: h100-sxm", "gpus: h100-sxm"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    err = info.value
    assert (err.line, err.field) == (2, "cluster.gpus")
    assert "unknown key 'gpus'" in str(err)
    assert "did you mean 'gpu'" in str(err)


def test_product_mismatch_names_the_numbers(tmp_path):
    path = write(tmp_path, GOOD.replace("dp: 2", "dp: 3"))
    with pytest.raises(SpecError, match=r"tp x pp x dp = 8 x 1 x 3 = 24 but the cluster has 16 GPUs"):
        load_spec(path)


def test_tp_across_nodes_needs_opt_in(tmp_path):
    """The NVLink domain is a catalog property (72 GPUs in a GB200 NVL72 rack), so the
    planner checks tp against it: beyond the domain it is refused without the opt-in."""
    from gpufabric.catalog import load_catalog
    from gpufabric.errors import InputError
    from gpufabric.plan import make_plan
    from gpufabric.plan.capacity import check_options

    text = GOOD.replace("tp: 8, pp: 1, dp: 2", "tp: 16, pp: 1, dp: 1")
    loaded = load_spec(write(tmp_path, text))
    with pytest.raises(InputError, match="allow_cross_node_tp"):
        make_plan(loaded.spec, load_catalog())
    # The CLI checks it located: file, line and field of tp.
    with pytest.raises(SpecError, match=r"spec\.yaml:\d+.*workload\.parallelism\.tp.*NVLink domain of 8"):
        check_options(loaded.spec, load_catalog(), loaded.located)
    allowed = text.replace("dp: 1}", "dp: 1, allow_cross_node_tp: true}")
    assert load_spec(write(tmp_path, allowed)).spec.workload.parallelism.tp == 16


def test_ep_must_divide_dp(tmp_path):
    path = write(tmp_path, GOOD.replace("dp: 2}", "dp: 2, ep: 4}"))
    with pytest.raises(SpecError, match="ep = 4 must divide dp = 2"):
        load_spec(path)


@pytest.mark.parametrize("field,bad", [("nodes: 2", "nodes: 0"), ("hidden: 4096", "hidden: -5")])
def test_zero_or_negative_sizes(tmp_path, field, bad):
    path = write(tmp_path, GOOD.replace(field, bad))
    with pytest.raises(SpecError, match="greater than 0") as info:
        load_spec(path)
    assert info.value.line is not None


def test_missing_field_says_what_to_add(tmp_path):
    path = write(tmp_path, GOOD.replace("  total_tokens: 20e9\n", ""))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.field == "workload.total_tokens"
    assert "Tokens to train on" in str(info.value)


def test_unknown_catalog_id(tmp_path):
    path = write(tmp_path, GOOD.replace("h100-sxm", "h100-sxn"))
    with pytest.raises(SpecError) as info:
        load_spec(path, known_ids={"cluster.gpu": {"h100-sxm", "a100-sxm"}})
    assert (info.value.line, info.value.field) == (2, "cluster.gpu")
    assert "did you mean 'h100-sxm'" in str(info.value)


def test_bad_yaml_and_duplicate_keys(tmp_path):
    with pytest.raises(SpecError, match=r"spec.yaml:\d+:\d+: <top level>: not valid YAML"):
        load_spec(write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(SpecError, match="duplicate key") as info:
        load_spec(write(tmp_path, GOOD + "name: again\n"))
    assert info.value.line == 8


def test_unsafe_tag_is_a_located_error(tmp_path):
    with pytest.raises(SpecError, match=r"spec.yaml:1:7: <top level>: not valid YAML: .*python/object"):
        load_spec(write(tmp_path, "name: !!python/object:os.system {}\n"))


def test_missing_file():
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec("/nonexistent/spec.yaml")


def test_microbatches_cannot_exceed_sequences_per_replica(tmp_path):
    # 1,048,576 tokens / 4,096 per sequence / dp 2 = 128 sequences per replica.
    path = write(tmp_path, GOOD.replace("dp: 2}", "dp: 2, microbatches: 129}"))
    with pytest.raises(SpecError, match="microbatches = 129 exceeds the 128 sequences"):
        load_spec(path)
    assert load_spec(write(tmp_path, GOOD.replace("dp: 2}", "dp: 2, microbatches: 128}"))).spec.microbatches == 128


def test_default_microbatches_are_the_batch_over_dp_and_microbatch_size(tmp_path):
    # Behaviour changed with issue 14: the default was 4 x pp capped by the batch; it is now
    # the sequences per replica over the microbatch size (what Megatron runs).
    spec = load_spec(write(tmp_path, GOOD.replace("tp: 8, pp: 1", "tp: 1, pp: 8"))).spec
    assert spec.microbatches == 128  # 1,048,576 / 4,096 / dp 2
    two = load_spec(write(tmp_path, GOOD.replace("tp: 8, pp: 1", "tp: 1, pp: 8, microbatch_size: 2"))).spec
    assert two.microbatches == 64
    small = GOOD.replace("tp: 8, pp: 1", "tp: 1, pp: 8").replace("1048576", "16384")
    assert load_spec(write(tmp_path, small)).spec.microbatches == 2  # 16,384 / 4,096 / 2 replicas


def test_batch_must_give_each_replica_a_sequence(tmp_path):
    with pytest.raises(SpecError, match="less than one sequence"):
        load_spec(write(tmp_path, GOOD.replace("1048576", "4096")))


def test_virtual_stages_need_a_layer_each(tmp_path):
    text = GOOD.replace("tp: 8, pp: 1", "tp: 1, pp: 8").replace("dp: 2}", "dp: 2, virtual_stages: 5}")
    with pytest.raises(SpecError, match="pp x virtual_stages = 40 exceeds layers = 32"):
        load_spec(write(tmp_path, text))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tp", "0", "workload.parallelism.tp: expected an integer >= 1, or auto"),
        ("tp", "eight", "workload.parallelism.tp: expected an integer >= 1, or auto"),
        ("zero_stage", "4", "workload.parallelism.zero_stage: expected an integer >= 0 and <= 3, or auto"),
    ],
)
def test_auto_fields_name_the_field_and_the_choice(tmp_path, field, value, message):
    text = (
        GOOD.replace("dp: 2}", f"dp: 2, {field}: {value}}}") if field != "tp" else GOOD.replace("tp: 8", f"tp: {value}")
    )
    with pytest.raises(SpecError, match=message):
        load_spec(write(tmp_path, text))


def test_parallelism_auto_and_interval_auto_load(tmp_path):
    text = (
        GOOD.replace("parallelism: {tp: 8, pp: 1, dp: 2}", "parallelism: auto") + "  checkpoint: {interval_min: auto}\n"
    )
    spec = load_spec(write(tmp_path, text)).spec
    assert spec.searched and spec.workload.recompute == "auto"
    assert spec.workload.checkpoint.interval_min == "auto"
    partial = load_spec(write(tmp_path, GOOD.replace("pp: 1, dp: 2", "pp: auto, dp: auto"))).spec
    assert partial.workload.parallelism.searched == ("pp", "dp") and partial.workload.recompute == "none"
    with pytest.raises(SpecError, match="do not divide|does not divide"):
        load_spec(write(tmp_path, GOOD.replace("tp: 8, pp: 1, dp: 2", "tp: 3, pp: auto, dp: auto")))


def test_workload_notes_are_read_only(tmp_path):
    with pytest.raises(SpecError, match="workload.notes is read-only"):
        load_spec(write(tmp_path, GOOD + "  notes: [hello]\n"))
