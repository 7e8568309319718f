"""Individual checks on small hand-written inputs (formats from reference/security-config.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpufabric.audit.checks_fabric import ib02, ib04
from gpufabric.audit.checks_job import _ifname_matches, nccl01, torch01
from gpufabric.audit.checks_nvmf import nvmf03, nvmf05
from gpufabric.audit.collect import Facts, HostView, from_directory
from tests.audit.conftest import apply_edits


def view(tmp_path: Path, files: dict[str, str], name: str = "h", role: str | None = None) -> HostView:
    mapping = {}
    for i, (path, text) in enumerate(files.items()):
        local = tmp_path / f"f{i}"
        local.write_text(text)
        mapping[path] = local
    return HostView(name=name, role=role, files=mapping)


@pytest.mark.parametrize(
    ("rule", "bad"),
    [
        ("Default=0x7fff : ALL=full ;", True),
        ("Default=0x7fff, defmember=full : ALL ;", True),
        ("Default=0x7fff, ipoib : ALL_CAS=full, SELF=full ;", True),
        ("Default=0x7fff : ALL, SELF=full ;", False),  # bare ALL is limited unless defmember=full
        ("Default=0x7fff, ipoib : ALL=limited, SELF=full ;", False),
        ("data=0x0030 : ALL=full ;", False),  # not the default partition
    ],
)
def test_ib02_default_partition(tmp_path, rule, bad):
    facts = Facts(source="t", hosts=[view(tmp_path, {"/etc/opensm/partitions.conf": "# c\n" + rule + "\n"})])
    assert bool(list(ib02(facts))) == bad


def test_ib04_default_keys(tmp_path):
    facts = Facts(source="t", hosts=[view(tmp_path, {"/etc/opensm/opensm.conf": "part_enforce both\nsm_key 0x1\n"})])
    [f] = list(ib04(facts))
    assert "m_key 0" in f.evidence and "sm_key 1" in f.evidence and "sa_key 1" in f.evidence


def _nvmet(addr: dict, dhchap: dict) -> str:
    return json.dumps(
        {
            "hosts": [
                {"nqn": "nqn.2014-08.org.nvmexpress:uuid:0b2f3c9e-7d1a-4c2e-9a59-3f1f0c7a8e21", "dhchap": dhchap}
            ],
            "ports": [{"portid": 1, "addr": addr, "subsystems": []}],
            "subsystems": [],
        }
    )


def test_nvmf03_cleartext_and_downgrade(tmp_path):
    clear = {"trtype": "tcp", "traddr": "10.0.0.1", "trsvcid": "4420", "tsas": "none"}
    facts = Facts(source="t", hosts=[view(tmp_path, {"/etc/nvmet/config.json": _nvmet(clear, {})})])
    assert "cleartext" in list(nvmf03(facts))[0].evidence
    rdma = {"trtype": "rdma", "traddr": "10.0.0.1", "trsvcid": "4420"}
    facts = Facts(source="t", hosts=[view(tmp_path, {"/etc/nvmet/config.json": _nvmet(rdma, {})})])
    assert list(nvmf03(facts)) == []  # TLS applies to TCP only


def test_nvmf05_one_way_auth(tmp_path):
    addr = {"trtype": "tcp", "tsas": "tls1.3", "treq": "required"}
    facts = Facts(
        source="t",
        hosts=[
            view(
                tmp_path,
                {"/etc/nvmet/config.json": _nvmet(addr, {"key": "DHHC-1:00:abc:", "ctrl_key": "", "dhgroup": None})},
            )
        ],
    )
    [f] = list(nvmf05(facts))
    assert "no ctrl_key" in f.evidence and "no dhgroup" in f.evidence and "hash 00" in f.evidence


@pytest.mark.parametrize(
    ("spec", "iface", "hit"),
    [
        ("=ctl0", "ctl0", True),
        ("=ctl0", "ctl01", False),
        ("ctl", "ctl0", True),
        ("^mgmt", "ctl0", True),
        ("^mgmt", "mgmt0", False),
        ("eth,ctl", "ctl0", True),
    ],
)
def test_nccl_socket_ifname_semantics(spec, iface, hit):
    assert _ifname_matches(spec, iface) is hit


def test_nccl01_management_interface(tmp_path):
    from gpufabric.spec.security import default_policy

    policy = default_policy(compute_nodes=2)
    v = view(tmp_path, {"/etc/gpufabric/nccl.env": "NCCL_SOCKET_IFNAME=mgmt\n"}, name="compute-1", role="compute")
    facts = Facts(source="t", hosts=[v], policy=policy, policy_doc={"design": {"fabric_kind": "ib"}})
    [f] = list(nccl01(facts))
    assert "management" in f.evidence


# ---- TORCH-01: the launchers' per-job rendezvous ports (29500-29999) and the c10d port 29400 ----

_CTL = "\tchain in_ctl {\n"
_STOR = "\tchain in_stor {\n"


@pytest.mark.skipif(not (shutil.which("nft") and shutil.which("unshare")), reason="nft/unshare not installed")
@pytest.mark.parametrize(
    ("anchor", "rule", "expect"),
    [
        (None, None, []),  # the bundle admits 29400 and 29500-29999 from compute on ctl: accepted
        (_CTL, "\t\ttcp dport 29777 accept\n", ["tcp/29777"]),  # one per-job port, from anywhere
        (_CTL, "\t\ttcp dport 0-65535 accept\n", ["tcp/29400", "tcp/29500-29999"]),  # everything open
        (_CTL, "\t\tip saddr @ctl_compute tcp dport 1-65535 accept\n", []),  # compute only, on ctl: as today
        (_STOR, "\t\ttcp dport 29500-29999 accept\n", ["tcp/29500-29999"]),  # off the control plane
        (_STOR, "\t\ttcp dport 29990-30010 accept\n", ["tcp/29990-29999"]),  # only the overlap is rendezvous
    ],
)
def test_torch01_admits_the_per_job_range_and_flags_anything_broader(bundle_copy, anchor, rule, expect):
    if anchor is not None:
        apply_edits(
            bundle_copy, [{"replace": {"file": "roles/compute/etc/nftables.conf", "old": anchor, "new": anchor + rule}}]
        )
    found = list(torch01(from_directory(bundle_copy)))
    # both compute hosts share the role's ruleset: each finding once per host
    assert {f.subject.split(":")[0] for f in found} <= {"compute-1", "compute-2"}
    assert sorted({f.evidence.split(" ")[0] for f in found}) == expect, [f.evidence for f in found]


def test_security_inventory_covers_the_launchers_port_range():
    from gpufabric.exec.launch import RENDEZVOUS_PORT_BASE, RENDEZVOUS_PORT_SPAN
    from gpufabric.spec.security import TORCH_STATIC_RANGE, default_policy

    assert TORCH_STATIC_RANGE == (RENDEZVOUS_PORT_BASE, RENDEZVOUS_PORT_BASE + RENDEZVOUS_PORT_SPAN - 1)
    p = default_policy(compute_nodes=2)
    [rdzv] = [f for f in p.flows if f.purpose.startswith("torchrun")]
    assert (rdzv.src, rdzv.dst, rdzv.plane, rdzv.proto) == ("compute", "compute", "ctl", "tcp")
    assert rdzv.port_ranges() == [(29400, 29400), TORCH_STATIC_RANGE]
