"""Security policy model: the default, and one test per validation error class."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from gpufabric.errors import SpecError
from gpufabric.spec import load_spec
from gpufabric.spec.security import SecurityPolicy, default_policy

PLANES = [
    {"name": "mgmt", "kind": "management", "cidr": "10.10.0.0/24", "interface": "mgmt0"},
    {"name": "ctl", "kind": "control", "cidr": "10.20.0.0/24", "interface": "ctl0"},
    {"name": "stor", "kind": "storage", "cidr": "10.40.0.0/24", "interface": "stor0", "pkey": "0x0040"},
]
ROLES = [
    {"name": "compute", "kind": "compute", "count": 3},
    {"name": "storage", "kind": "storage", "hosts": ["st-a", "st-b"]},
]
FLOWS = [{"src": "compute", "dst": "storage", "plane": "stor", "proto": "tcp", "ports": [4420, "8009"]}]


def policy(**changes) -> dict:
    doc = {"planes": [dict(p) for p in PLANES], "roles": [dict(r) for r in ROLES], "flows": [dict(f) for f in FLOWS]}
    doc.update(changes)
    return doc


def test_valid_policy_addresses_and_planes():
    p = SecurityPolicy.model_validate(policy())
    assert p.plane("stor").pkey == 0x40
    assert p.role("storage").host_names == ["st-a", "st-b"]
    assert p.role("compute").host_names == ["compute-1", "compute-2", "compute-3"]
    # management always, plus every plane a flow uses
    assert p.role_planes("compute") == ["mgmt", "stor"]
    addresses = p.addresses()
    assert addresses[("compute-1", "stor")] == "10.40.0.10"
    assert addresses[("st-b", "stor")] == "10.40.0.14"
    assert len(set(addresses.values())) == len(addresses)


def test_default_policy_is_least_privilege():
    p = default_policy(compute_nodes=128)
    kinds = {pl.kind for pl in p.planes}
    assert kinds == {"management", "control", "compute-data", "storage"}
    ssh = [f for f in p.flows if 22 in [lo for lo, _ in f.port_ranges()]]
    assert ssh and all(f.src == "login" and p.plane(f.plane).kind == "management" for f in ssh)
    rdzv = [f for f in p.flows if any(lo <= 29400 <= hi for lo, hi in f.port_ranges())]
    assert [(f.src, f.dst, p.plane(f.plane).kind) for f in rdzv] == [("compute", "compute", "control")]
    nvme = [f for f in p.flows if any(lo in (4420, 8009) for lo, _ in f.port_ranges()) and f.proto == "tcp"]
    assert {(f.src, f.dst, p.plane(f.plane).kind) for f in nvme} == {("compute", "storage", "storage")}
    assert not any(any(lo <= 28028 <= hi for lo, hi in f.port_ranges()) for f in p.flows)  # RAS stays on loopback
    for (host, plane), address in p.addresses().items():
        assert ipaddress.IPv4Address(address) in p.plane(plane).network


def test_default_policy_nfs_swaps_nvme_flows():
    p = default_policy(compute_nodes=2, storage="nfs")
    ports = {lo for f in p.flows if f.dst == "storage" and f.plane == "stor" for lo, _ in f.port_ranges()}
    assert ports == {2049}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (policy(planes=[*PLANES[:2], {**PLANES[2], "cidr": "10.20.0.128/25"}]), "overlapping CIDRs"),
        (policy(flows=[{**FLOWS[0], "src": "gpu"}]), "unknown role 'gpu'"),
        (policy(flows=[{**FLOWS[0], "dst": "nobody"}]), "unknown role 'nobody'"),
        (policy(flows=[{**FLOWS[0], "plane": "data"}]), "unknown plane 'data'"),
        (policy(flows=[{**FLOWS[0], "ports": [70000]}]), "out of range"),
        (policy(flows=[{**FLOWS[0], "ports": [0]}]), "out of range"),
        (policy(flows=[{**FLOWS[0], "ports": ["9000-8000"]}]), "out of range"),
        (policy(flows=[{**FLOWS[0], "ports": ["ssh"]}]), "not a number or a range"),
        (policy(planes=[*PLANES[:2], {k: v for k, v in PLANES[2].items() if k != "interface"}]), "has no interface"),
        (policy(planes=[*PLANES[:2], {**PLANES[2], "interface": "ctl0"}]), "share interface"),
        (policy(planes=[*PLANES[:2], {**PLANES[2], "cidr": "10.40.0.1/24"}]), "host bits"),
        (policy(planes=[*PLANES[:2], {**PLANES[2], "pkey": "0x7fff"}]), "less than or equal"),
        (policy(roles=[ROLES[0], {"name": "storage", "kind": "storage"}]), "needs hosts"),
        (policy(roles=[ROLES[0], {"name": "storage", "kind": "storage", "hosts": ["compute-1"]}]), "two roles"),
        (policy(roles=[{**ROLES[0], "planes": ["mgmt"]}, ROLES[1]]), "not attached to plane 'stor'"),
        (policy(planes=[*PLANES[:2], {**PLANES[2], "cidr": "10.40.0.0/29"}]), "too small"),
    ],
)
def test_validation_errors(doc, message):
    with pytest.raises(ValidationError, match=message):
        SecurityPolicy.model_validate(doc)


SPEC_HEAD = """\
name: sec-test
cluster: {nodes: 2, gpus_per_node: 8}
workload:
  model: {params: 7e9, layers: 32, hidden: 4096, seq_len: 4096}
  parallelism: {tp: 8, dp: 2}
  global_batch_tokens: 1048576
  total_tokens: 20e9
security:
  planes:
    - {name: mgmt, kind: management, cidr: 10.10.0.0/24, interface: mgmt0}
    - {name: ctl, kind: control, cidr: 10.10.0.128/25, interface: ctl0}
  roles:
    - {name: compute, kind: compute, count: 2}
"""


def test_spec_loader_locates_security_errors(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_HEAD)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    # Cross-field errors point at the first field they name (the second plane's cidr) and list all.
    assert f"{path}:11:34: security.planes[1].cidr:" in text and "overlapping CIDRs" in text
    assert "security.planes[0].cidr" in text


def test_derived_views_follow_model_copy():
    p = default_policy(compute_nodes=2)
    before = p.addresses()
    bigger = p.model_copy(update={"roles": [p.roles[0].model_copy(update={"count": 5}), *p.roles[1:]]})
    assert len(bigger.addresses()) == len(before) + 12  # 3 more compute hosts on 4 planes
    assert p == default_policy(compute_nodes=2) and "_gf_memo" not in p.model_dump()
