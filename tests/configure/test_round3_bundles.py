"""Issue 24, bundles: NVMe-oF authorisation follows flows (two compute/storage pairs), the
compute role joins its compute-data plane by kind (no open IB partition), ECN-CE ToS
values, NCCL_IB_HCA beyond NCCL's 32 and interface names starting with '-' are refused
where the spec is read; a bundle from a complete InfiniBand spec audits clean."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpufabric.audit.collect import from_directory
from gpufabric.audit.runner import audit
from gpufabric.cli.app import main
from gpufabric.spec.security import Plane, SecurityPolicy
from tests.audit.conftest import CORPUS, render

SPEC = (CORPUS / "lab-ib.yaml").read_text()
PAIRS_ROLES = """  roles:
    - {name: compute, kind: compute, count: 2, planes: [mgmt, ctl, data, stor],
       port_guids: ["0x0002c90300001001", "0x0002c90300001002"]}
    - {name: gpub, kind: compute, count: 2, planes: [mgmt, ctl, data, stor],
       port_guids: ["0x0002c90300001003", "0x0002c90300001004"]}
    - {name: storage, kind: storage, count: 2, planes: [mgmt, stor],
       port_guids: ["0x0002c90300002001", "0x0002c90300002002"]}
    - {name: storb, kind: storage, count: 1, planes: [mgmt, stor],
       port_guids: ["0x0002c90300002003"]}
"""


def _spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _pairs(tmp_path: Path) -> Path:
    start = SPEC.index("  roles:\n")
    end = SPEC.index("    - {name: login")
    text = SPEC[:start] + PAIRS_ROLES + SPEC[end:]
    text = text.replace(
        "    - {src: login, dst: storage,",
        "    - {src: login, dst: storb, plane: mgmt, proto: tcp, ports: [22]}\n    - {src: login, dst: storage,",
    )
    text += "    - {src: gpub, dst: storb, plane: stor, proto: tcp, ports: [4420], purpose: pair b}\n"
    return render(_spec(tmp_path, text), tmp_path / "bundle")


def _hostnqn(root: Path, host: str) -> str:
    return (root / "hosts" / host / "etc" / "nvme" / "hostnqn").read_text().strip()


def test_nvme_authorisation_follows_flows_with_two_pairs(tmp_path):
    root = _pairs(tmp_path)
    pair_a = {_hostnqn(root, h) for h in ("compute-1", "compute-2")}
    pair_b = {_hostnqn(root, h) for h in ("gpub-1", "gpub-2")}
    for target, want in (("storage-1", pair_a), ("storage-2", pair_a), ("storb-1", pair_b)):
        doc = json.loads((root / "hosts" / target / "etc" / "nvmet" / "config.json").read_text())
        assert set(doc["subsystems"][0]["allowed_hosts"]) == want, target
        assert {h["nqn"] for h in doc["hosts"]} == want
        tls = (root / "hosts" / target / "etc" / "nvme" / "tls-keys").read_text()
        assert {line.split()[1] for line in tls.splitlines()} == want  # PSKs only for admitted hosts
    # each initiator discovers only its own targets
    conf_a = (root / "hosts" / "compute-1" / "etc" / "nvme" / "discovery.conf").read_text()
    conf_b = (root / "hosts" / "gpub-1" / "etc" / "nvme" / "discovery.conf").read_text()
    assert conf_a.count("--traddr=") == 2 and conf_b.count("--traddr=") == 1
    report = audit(from_directory(root))
    assert "NVMF-14" in report.passed
    assert not [f for f in report.findings if f.severity.value in ("high", "critical")], report.findings


def test_audit_flags_an_over_grant(tmp_path):
    root = _pairs(tmp_path)
    path = root / "hosts" / "storb-1" / "etc" / "nvmet" / "config.json"
    doc = json.loads(path.read_text())
    doc["subsystems"][0]["allowed_hosts"].append(_hostnqn(root, "compute-1"))
    path.write_text(json.dumps(doc))
    found = [f for f in audit(from_directory(root)).findings if f.check_id == "NVMF-14"]
    assert len(found) == 1 and "compute-1" in found[0].evidence and found[0].severity.value == "high"


def test_complete_ib_spec_bundle_audits_clean(tmp_path):
    root = render(CORPUS / "lab-ib.yaml", tmp_path / "b")
    report = audit(from_directory(root), reachability=True)
    assert not [f for f in report.findings if f.severity.value in ("high", "critical")], report.findings
    parts = (root / "fabric" / "etc" / "opensm" / "partitions.conf").read_text()
    assert "ALL_CAS" not in parts
    env = (root / "roles" / "compute" / "etc" / "gpufabric" / "nccl.env").read_text()
    hca = re.search(r"NCCL_IB_HCA=\S*", env)
    assert hca and hca.group(0).count("mlx5_") == 8
    assert main(["audit", "--config", str(root), "--reachability", "--format", "json"]) == 0


def test_compute_joins_its_compute_data_plane_by_kind(tmp_path):
    # the documented layout: the compute role lists no planes and no flow names the data plane
    text = SPEC.replace("planes: [mgmt, ctl, data, stor],\n       port_guids", "port_guids")
    assert text != SPEC
    policy_root = render(_spec(tmp_path, text), tmp_path / "b")
    parts = (policy_root / "fabric" / "etc" / "opensm" / "partitions.conf").read_text()
    data = next(line for line in parts.splitlines() if "0x0030" in line or "0x8030" in line)
    assert "ALL_CAS" not in data and "0x0002c90300001001" in data
    pol = SecurityPolicy.model_validate(json.loads((policy_root / "policy.json").read_text())["policy"])
    assert "data" in pol.role_planes("compute") and "data" not in pol.role_planes("login")


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ("  flows:\n", "  rdma_tos: 255\n  flows:\n", "rdma_tos", "Congestion Experienced"),
        ("  flows:\n", "  rdma_tos: 107\n  flows:\n", "rdma_tos", "ECT(0)"),
        ("interface: data0", "interface: -data0", "interface", "not starting with '-'"),
        ('hcas: ["mlx5_0:1",', 'hcas: ["-mlx5_0:1",', "hcas", "not starting with '-'"),
        (
            'hcas: ["mlx5_0:1",',
            "hcas: [" + ", ".join(f'"mlx5_{i}:1"' for i in range(8, 33)) + ', "mlx5_0:1",',
            "hcas",
            "at most 32",
        ),
    ],
)
def test_spec_values_refused_with_a_location(tmp_path, capsys, old, new, field, words):
    assert SPEC.count(old) == 1
    path = _spec(tmp_path, SPEC.replace(old, new))
    assert main(["config", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search(rf"{re.escape(str(path))}:\d+:\d+: \S*{field}", err), err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_ect0_and_not_ect_tos_values_are_accepted():
    base = SecurityPolicy.model_validate(json.loads(json.dumps(_policy_doc())))
    for tos in (106, 104, 254, 0):
        assert base.model_copy(update={"rdma_tos": tos}).rdma_tos == tos
    with pytest.raises(ValueError, match="Congestion Experienced"):
        SecurityPolicy.model_validate({**_policy_doc(), "rdma_tos": 3})


def test_default_policy_beyond_32_gpus_is_refused_not_truncated(tmp_path, capsys):
    text = SPEC.replace("gpus_per_node: 8", "gpus_per_node: 64").replace("dp: 2}", "dp: 16}")
    start, end = text.index("security:\n"), len(text)
    path = _spec(tmp_path, text[:start] + text[end:])
    code = main(["config", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "at most 32" in err and "Traceback" not in err
    assert Plane(name="d", kind="storage", cidr="10.0.0.0/24", interface="d0", hcas=[f"m{i}:1" for i in range(40)])


def _policy_doc() -> dict:
    return {
        "planes": [{"name": "mgmt", "kind": "management", "cidr": "10.0.0.0/24", "interface": "mgmt0"}],
        "roles": [{"name": "compute", "kind": "compute", "count": 1}],
    }


def test_unpaired_roles_on_a_shared_storage_plane_get_a_note(tmp_path):
    from gpufabric.configure import KeySource, design_from_spec, render_bundle
    from gpufabric.spec import load_spec

    start, end = SPEC.index("  roles:\n"), SPEC.index("    - {name: login")
    text = SPEC[:start] + PAIRS_ROLES + SPEC[end:]
    text = text.replace(
        "    - {src: compute, dst: storage, plane: stor, proto: tcp, ports: [4420], purpose: NVMe/TCP I/O and discovery}\n",
        "",
    )
    text = text.replace("storage: [nvmeof-tcp]", "storage: [nvmeof-rdma]")
    spec = load_spec(_spec(tmp_path, text)).spec
    bundle = render_bundle(spec, design_from_spec(spec), KeySource(seed=b"x"))
    notes = [n for n in bundle.notes if "no flow names a storage role" in n]
    assert len(notes) == 1 and "compute, gpub" in notes[0] and "storage, storb" in notes[0]
