"""Typed identifiers, finite bounded numbers and resource limits at the spec boundary (issue 9)."""

from __future__ import annotations

import re

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import SpecError
from gpufabric.spec import load_spec
from tests.conftest import EXAMPLES

BASE = (EXAMPLES / "lab-2node.yaml").read_text()

SECURITY = """
security:
  planes:
    - {name: mgmt, kind: management, cidr: 10.10.0.0/24, interface: mgmt0}
    - {name: data, kind: compute-data, cidr: 10.30.0.0/24, interface: IFACE, hcas: [HCA]}
  roles:
    - {name: compute, kind: compute, hosts: [HOST, node-2]}
  flows:
    - {src: compute, dst: compute, plane: data, proto: udp, ports: [4791], purpose: PURPOSE}
"""


def write(tmp_path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def with_security(tmp_path, *, iface="data0", hca="mlx5_0:1", host="node-1", purpose="RoCEv2"):
    text = BASE + SECURITY.replace("IFACE", iface).replace("HCA", hca).replace("HOST", host)
    return write(tmp_path, text.replace("PURPOSE", purpose))


def error_of(path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def test_valid_identifiers_load(tmp_path):
    spec = load_spec(with_security(tmp_path)).spec
    assert spec.security.planes[1].hcas == ["mlx5_0:1"]
    assert spec.security.roles[0].hosts == ["node-1", "node-2"]


@pytest.mark.parametrize("name", ['"lab\\nsrun id"', '"$(id)"', '"a b"', '"../x"', '"Lab"', '"-x"', "x" * 64])
def test_name_is_a_slug(tmp_path, name):
    text = error_of(write(tmp_path, BASE.replace("name: lab-2node-16gpu", f"name: {name}")))
    assert re.search(r"spec\.yaml:3:1: name: .* is not allowed \(allowed: lower-case letters", text), text
    assert "pattern ^[a-z0-9]" in text


def test_description_is_free_text_on_one_line(tmp_path):
    ok = write(tmp_path, BASE + 'description: "Llama 3 70B fine-tune, $ budget (v2)"\n')
    assert load_spec(ok).spec.description.startswith("Llama 3")
    text = error_of(write(tmp_path, BASE + 'description: "two\\nlines"\n'))
    assert "description" in text and "one line" in text


@pytest.mark.parametrize("host", ["../etc", "a/b", '"$(id)"', "node_1", "-node", '"a b"', "x" * 64, "a..b"])
def test_host_names_are_rfc1123(tmp_path, host):
    text = error_of(with_security(tmp_path, host=host))
    assert "security.roles[0].hosts[0]" in text and "RFC 1123" in text, text


@pytest.mark.parametrize("iface", ["eth0:1", '"a b"', "a/b", "abcdefghijklmnop", '".."', '"$(id)"'])
def test_interface_names_follow_kernel_rules(tmp_path, iface):
    text = error_of(with_security(tmp_path, iface=iface))
    assert "security.planes[1].interface" in text, text


@pytest.mark.parametrize("hca", ['"$(id)"', '"mlx5_0;reboot"', "mlx5_0:0", "mlx5_0:256", '"mlx5 0"'])
def test_hca_is_device_and_port(tmp_path, hca):
    text = error_of(with_security(tmp_path, hca=hca))
    assert "security.planes[1].hcas[0]" in text, text


@pytest.mark.parametrize("purpose", ['"say \\"hi\\""', '"a\\nb"', '"$(id)"', '"x\\\\y"', "x" * 129])
def test_flow_purpose_is_a_safe_comment(tmp_path, purpose):
    text = error_of(with_security(tmp_path, purpose=purpose))
    assert "security.flows[0].purpose" in text, text


def test_ports_are_normalised(tmp_path):
    path = with_security(tmp_path)
    path.write_text(path.read_text().replace("ports: [4791]", 'ports: [4791, " 60001 - 60010 "]'))
    assert load_spec(path).spec.security.flows[0].ports == [4791, "60001-60010"]
    path.write_text(path.read_text().replace('" 60001 - 60010 "', '"1-2\\n3"'))
    assert "security.flows[0].ports" in error_of(path)


def test_role_with_count_needs_host_name_prefix(tmp_path):
    path = with_security(tmp_path)
    path.write_text(
        path.read_text()
        .replace(
            "{name: compute, kind: compute, hosts: [node-1, node-2]}", "{name: gpu_nodes, kind: compute, count: 2}"
        )
        .replace("compute, dst: compute", "gpu_nodes, dst: gpu_nodes")
    )
    assert "not a host name" in error_of(path)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("gpu_mttf_hours: 50000", "gpu_mttf_hours: .inf", "reliability.gpu_mttf_hours"),
        ("gpu_mttf_hours: 50000", "gpu_mttf_hours: .nan", "reliability.gpu_mttf_hours"),
        ("mfu: 0.35", "mfu: .nan", "workload.throughput.mfu"),
        ("total_tokens: 20e9", "total_tokens: 1e300", "workload.total_tokens"),
        ("budget_usd: 1.5e6", "budget_usd: -.inf", "requirements.budget_usd"),
        ("gpu_mttf_hours: 50000", "gpu_mttf_hours: 1e12", "reliability.gpu_mttf_hours"),
        ("interval_min: 30", "interval_min: 1e9", "workload.checkpoint.interval_min"),
        ("nodes: 2", "nodes: 1000000000000000000000000000000", "cluster.nodes"),
        ("oversubscription: [1]", "oversubscription: [1e308]", "options.oversubscription"),
    ],
)
def test_numbers_are_finite_and_bounded(tmp_path, old, new, field):
    assert old in BASE
    text = error_of(write(tmp_path, BASE.replace(old, new)))
    assert f": {field}" in text, text


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("nodes: 2", "nodes: true", "cluster.nodes"),
        ("mfu: 0.35", "mfu: true", "workload.throughput.mfu"),
        ("oversubscription: [1]", "oversubscription: [true]", "options.oversubscription"),
        (
            "parallelism: {tp: 8, pp: 1, dp: 2}",
            "parallelism: {tp: 8, pp: 1, dp: 2, allow_cross_node_tp: 1}",
            "workload.parallelism.allow_cross_node_tp",
        ),
        # a `bool | list[bool]` field checks every item of the list form
        (
            "oversubscription: [1]",
            "oversubscription: [1]\n  in_network_reduction: [true, 0]",
            "options.in_network_reduction[1]",
        ),
    ],
)
def test_booleans_are_not_numbers(tmp_path, old, new, field):
    text = error_of(write(tmp_path, BASE.replace(old, new)))
    assert f": {field}" in text and ("boolean" in text or "true or false" in text), text


def test_cross_field_error_names_fields_not_the_spec(tmp_path):
    text = error_of(write(tmp_path, BASE.replace("dp: 2}", "dp: 3}")))
    assert "spec.yaml:7:" in text and "workload.parallelism.tp" in text and "cluster.nodes" in text
    assert "global_batch_tokens" not in text and "{" not in text  # no dump of the section
    assert len(text) < 500


BOMB = """\
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_alias_bomb_is_refused(tmp_path, cli):
    assert len(BOMB) < 600
    code, _, err = cli("plan", write(tmp_path, BOMB))
    assert code == 2 and "alias expansion exceeds 1,000,000 nodes" in err and "Traceback" not in err


def test_recursive_alias_and_deep_nesting_are_refused(tmp_path, cli):
    code, _, err = cli("plan", write(tmp_path, "a: &a [*a]\n"))
    assert code == 2 and ("recursive" in err or "undefined alias" in err), err
    code, _, err = cli("plan", write(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n"))
    assert code == 2 and "Traceback" not in err, err


def test_non_utf8_spec_is_a_located_error(tmp_path, cli):
    path = tmp_path / "spec.yaml"
    path.write_bytes(BASE.encode() + b"description: caf\xe9\n")
    code, _, err = cli("plan", path)
    assert code == 2 and f"{path}:{BASE.count(chr(10)) + 1}: " in err and "not UTF-8" in err, err


def test_catalog_ids_and_figures_checked(tmp_path):
    bad_id = tmp_path / "ids.yaml"
    bad_id.write_text('gpus:\n  "../x": {peak_bf16_tflops: 1}\n')
    with pytest.raises(SpecError, match=r"ids\.yaml:2:.*catalog id '\.\./x' is not allowed"):
        load_catalog([bad_id])
    inf = tmp_path / "inf.yaml"
    inf.write_text("gpus:\n  h100-sxm: {node_usd: .inf}\n")
    with pytest.raises(SpecError, match=r"inf\.yaml:2:.*node_usd.*finite"):
        load_catalog([inf])
    huge = tmp_path / "huge.yaml"
    huge.write_text("fabrics:\n  ib-ndr: {nic_usd: 1e300}\n")
    with pytest.raises(SpecError, match=r"nic_usd"):
        load_catalog([huge])


def test_field_descriptions_equal_pydantics_attribute_docstrings():
    """issue 32: the spec models take their field docstrings from one ast.parse per module
    (spec.types.field_docstrings), not pydantic's per-class source lookup; every description
    is the one use_attribute_docstrings would give, and every documented field has one."""
    import importlib

    from pydantic import BaseModel
    from pydantic._internal._docs_extraction import extract_docstrings_from_cls

    checked = 0
    for module in ("gpufabric.spec.models", "gpufabric.spec.security", "gpufabric.spec.inference"):
        for cls in vars(importlib.import_module(module)).values():
            if not (isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__module__ == module):
                continue
            expected = extract_docstrings_from_cls(cls, use_inspect=True)
            for name, info in cls.model_fields.items():
                if name in expected:
                    assert info.description == expected[name], (cls.__name__, name)
                    checked += 1
    assert checked > 150


def test_field_docstrings_are_parsed_once_per_content_then_read_from_the_cache(tmp_path, monkeypatch):
    """issue 32: the ast.parse of spec/models.py (~0.01 s) runs on a miss only; a cached
    file that is not ours to trust, or an edited source, parses again."""
    import os

    from gpufabric.spec import cache, types

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parsed = []
    real = types._parse_docstrings
    monkeypatch.setattr(types, "_parse_docstrings", lambda source: parsed.append(len(source)) or real(source))
    types.field_docstrings.cache_clear()
    try:
        first = types.field_docstrings("gpufabric.spec.models")
        (path,) = (tmp_path / "gpufabric").glob("fields.gpufabric.spec.models-*.pickle")
        assert len(parsed) == 1 and oct(path.stat().st_mode & 0o777) == "0o600"
        assert first["Cluster"]["nodes"] and cache.read(path) == first
        types.field_docstrings.cache_clear()
        assert types.field_docstrings("gpufabric.spec.models") == first and len(parsed) == 1  # a hit
        os.chmod(path, 0o666)  # writable by others: not trusted
        types.field_docstrings.cache_clear()
        assert types.field_docstrings("gpufabric.spec.models") == first and len(parsed) == 2
        os.chmod(path, 0o600)
        path.write_bytes(b"not a pickle")
        types.field_docstrings.cache_clear()
        assert types.field_docstrings("gpufabric.spec.models") == first and len(parsed) == 3
    finally:
        types.field_docstrings.cache_clear()
