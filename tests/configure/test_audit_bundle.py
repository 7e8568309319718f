"""Audit finds what config warns about (issue 11 item 3): BND-01..03, and a bundle from a
spec with a complete security section audits clean."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gpufabric.audit.collect import from_directory
from gpufabric.audit.runner import audit
from tests.audit.conftest import CORPUS, render

SECURE = Path(__file__).parent / "data" / "secure-ib.yaml"


def _ids(root: Path) -> list[tuple[str, str]]:
    return sorted((f.check_id, f.subject) for f in audit(from_directory(root)).findings)


def test_complete_security_section_audits_with_zero_findings(cli, tmp_path):
    out = tmp_path / "b"
    code, stdout, stderr = cli("config", SECURE, "--out", out, "--seed", "x")
    assert code == 0 and "note:" not in stdout, stderr
    report = audit(from_directory(out), reachability=True)
    assert report.findings == []
    assert {"BND-01", "BND-02", "BND-03"} <= set(report.passed)
    assert cli("audit", "--config", out)[0] == 0


def test_partitions_admitting_every_adapter_are_bnd01(cli, tmp_path):
    doc = yaml.safe_load((CORPUS / "lab-ib.yaml").read_text())
    doc.pop("security")  # the default policy: no port GUIDs
    spec = tmp_path / "plain.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "b"
    code, stdout, _ = cli("config", spec, "--out", out, "--seed", "x")
    assert code == 0 and "admit every CA" in stdout  # config warns ...
    found = _ids(out)  # ... and audit reports the same thing
    assert found == [("BND-01", f"subnet-manager: partition {p}") for p in ("ctl", "data", "mgmt", "stor")]
    code, stdout, _ = cli("audit", "--config", out)
    assert code == 1 and "BND-01" in stdout and "port_guids" in stdout


def test_pinned_gid_index_is_bnd02(tmp_path):
    out = render(SECURE, tmp_path / "b", fabrics="roce-400g", storage="nvmeof-tcp")
    env = out / "roles/compute/etc/gpufabric/nccl.env"
    assert "NCCL_IB_GID_INDEX=" not in env.read_text()
    assert not [s for i, s in _ids(out) if i == "BND-02"]
    env.write_text(env.read_text() + "NCCL_IB_GID_INDEX=3\n")
    # (FW-05 also fires: secure-ib.yaml's planes carry no VLAN ids for a RoCE design)
    assert [s for i, s in _ids(out) if i == "BND-02"] == ["gpu-a1", "gpu-a2"]


def test_port_open_for_a_service_the_role_does_not_run_is_bnd03(tmp_path):
    # the policy opens NVMe/TCP 4420 on the targets, the design exports NVMe/RDMA
    out = render(SECURE, tmp_path / "b", storage="nvmeof-rdma")
    assert _ids(out) == [("BND-03", "stor-a1: 4420/tcp on stor")]
    # slurmctld's port on a compute node: nothing there runs slurmctld
    doc = yaml.safe_load(SECURE.read_text())
    doc["security"]["flows"].append(
        {"src": "login", "dst": "compute", "plane": "mgmt", "proto": "tcp", "ports": [6817], "purpose": "stray"}
    )
    spec = tmp_path / "stray.yaml"
    spec.write_text(yaml.safe_dump(doc))
    found = _ids(render(spec, tmp_path / "c"))
    assert found == [("BND-03", "gpu-a1: 6817/tcp on mgmt")]


def test_nft_json_comment_matches_the_loaded_text_rule(tmp_path):
    # nftables.conf neutralises ' in comments; nftables.json (the drift baseline) must
    # carry the same text or every quoted purpose reads as drift.
    doc = yaml.safe_load(SECURE.read_text())
    doc["security"]["flows"].append(
        {"src": "login", "dst": "compute", "plane": "mgmt", "proto": "tcp", "ports": [6819], "purpose": "admin's"}
    )
    spec = tmp_path / "quoted.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = render(spec, tmp_path / "b")
    etc = out / "roles/compute/etc"
    assert 'comment "admin?s"' in (etc / "nftables.conf").read_text()
    rules = [i["rule"] for i in json.loads((etc / "gpufabric/nftables.json").read_text())["nftables"] if "rule" in i]
    assert "admin?s" in [r.get("comment") for r in rules]
