"""`gpufabric config`: exit codes, located errors, plan input, secrets never printed."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

from tests.audit.conftest import CORPUS

SPEC = CORPUS / "lab-ib.yaml"
SECRET = re.compile(r"DHHC-1:|NVMeTLSkey-1:|m_key 0x")


def test_config_writes_bundle_and_prints_no_secret(cli, tmp_path):
    out = tmp_path / "b"
    code, stdout, stderr = cli("config", SPEC, "--out", out)
    assert code == 0, stderr
    assert "design: fabric ib-ndr (ib), storage nvmeof-tcp" in stdout
    assert "(secret)" in stdout
    assert not SECRET.search(stdout + stderr)
    secret_file = out / "hosts/storage-1/etc/nvmet/config.json"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert "DHHC-1:03:" in secret_file.read_text()
    # a second run over its own bundle is allowed
    code, _, _ = cli("config", SPEC, "--out", out, "--format", "json")
    assert code == 0


def test_config_json_dry_run_writes_nothing(cli, tmp_path):
    code, stdout, stderr = cli("config", SPEC, "--dry-run", "--format", "json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["schema_version"] == 1 and doc["dry_run"] is True
    assert doc["design"]["fabric_kind"] == "ib"
    paths = {f["path"]: f for f in doc["files"]}
    assert paths["fabric/etc/opensm/opensm.conf"]["secret"] is True
    assert paths["fabric/etc/opensm/opensm.conf"]["mode"] == "0600"
    assert not SECRET.search(stdout + stderr)
    assert list(tmp_path.iterdir()) == []


def test_config_uses_the_plans_recommended_candidate(cli, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "recommended": "c2",
                "candidates": [
                    {"id": "c1", "fabric": "ib-ndr", "storage": "nvmeof-tcp"},
                    {"id": "c2", "fabric": "roce-400g", "storage": "nvmeof-rdma"},
                ],
            }
        )
    )
    code, stdout, _ = cli("config", SPEC, "--plan", plan, "--dry-run", "--format", "json")
    assert code == 0
    doc = json.loads(stdout)
    assert doc["design"]["fabric"] == "roce-400g" and doc["design"]["storage"] == "nvmeof-rdma"
    assert any(f["path"].endswith("gpufabric-roce-qos") for f in doc["files"])


def test_config_bad_plan_exits_2(cli, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"recommended": "zz", "candidates": []}))
    code, _, stderr = cli("config", SPEC, "--plan", plan, "--dry-run")
    assert code == 2 and "recommended candidate 'zz'" in stderr
    plan.write_text("{not json")
    code, _, stderr = cli("config", SPEC, "--plan", plan, "--dry-run")
    assert code == 2 and "not JSON" in stderr


def test_config_usage_errors_exit_2(cli, tmp_path):
    code, _, stderr = cli("config", SPEC)
    assert code == 2 and "--out" in stderr
    code, _, stderr = cli("config", SPEC, "--dry-run", "--seed", "a", "--key-file", SPEC)
    assert code == 2 and "not both" in stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "precious.txt").write_text("x")
    code, _, stderr = cli("config", SPEC, "--out", busy)
    assert code == 2 and "not empty" in stderr


def _plain_spec_text() -> str:
    """lab-ib.yaml without its security section (these tests bring their own, or the default)."""
    import yaml

    doc = yaml.safe_load(SPEC.read_text())
    doc.pop("security")
    return yaml.safe_dump(doc, sort_keys=False)


def _spec_with_security(tmp_path: Path, security: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(_plain_spec_text() + security)
    return path


def test_config_security_errors_are_located(cli, tmp_path):
    base = (
        "security:\n  planes:\n    - {name: mgmt, kind: management, cidr: 10.1.0.0/24, interface: mgmt0}\n"
        "    - {name: ctl, kind: control, cidr: 10.2.0.0/24, interface: ctl0}\n"
        "  roles:\n    - {name: compute, kind: compute, count: 2}\n"
    )
    cases = {
        "flows:\n    - {src: compute, dst: gpu, plane: ctl, proto: tcp, ports: [1]}\n": "unknown role 'gpu'",
        "flows:\n    - {src: compute, dst: compute, plane: data, proto: tcp, ports: [1]}\n": "unknown plane 'data'",
        "flows:\n    - {src: compute, dst: compute, plane: ctl, proto: tcp, ports: [65536]}\n": "out of range",
    }
    for extra, message in cases.items():
        path = _spec_with_security(tmp_path, base + "  " + extra)
        code, stdout, stderr = cli("config", path, "--dry-run")
        assert code == 2, stdout
        assert message in stderr and f"{path}:" in stderr and "Traceback" not in stderr
        assert len(stderr.strip().splitlines()) == 1
    overlap = base.replace("10.2.0.0/24", "10.1.0.128/25")
    code, _, stderr = cli("config", _spec_with_security(tmp_path, overlap), "--dry-run")
    assert code == 2 and "overlapping CIDRs" in stderr and re.search(r"spec\.yaml:\d+:\d+: security", stderr)
    no_if = base.replace(", interface: ctl0", "")
    code, _, stderr = cli("config", _spec_with_security(tmp_path, no_if), "--dry-run")
    assert code == 2 and "plane 'ctl' has no interface" in stderr


def test_config_custom_policy_renders(cli, tmp_path):
    sec = (
        "security:\n  planes:\n    - {name: m, kind: management, cidr: 10.1.0.0/24, interface: m0}\n"
        "    - {name: c, kind: control, cidr: 10.2.0.0/24, interface: c0}\n"
        "  roles:\n    - {name: gpu, kind: compute, hosts: [n1, n2]}\n    - {name: bastion, kind: login, count: 1}\n"
        "  flows:\n    - {src: bastion, dst: gpu, plane: m, proto: tcp, ports: [22], purpose: ssh}\n"
        "    - {src: gpu, dst: gpu, plane: c, proto: tcp, ports: ['29400-29401']}\n"
    )
    spec = (
        _spec_with_security(tmp_path, sec)
        .read_text()
        .replace("  storage:\n  - nvmeof-tcp", "  storage:\n  - local-nvme")
    )
    assert "local-nvme" in spec
    path = tmp_path / "custom.yaml"
    path.write_text(spec)
    out = tmp_path / "out"
    code, _, stderr = cli("config", path, "--out", out)
    assert code == 0, stderr
    nft = (out / "roles/gpu/etc/nftables.conf").read_text()
    assert "ip saddr @c_gpu tcp dport 29400-29401 accept" in nft
    assert "ip saddr @m_bastion tcp dport 22 accept" in nft
    assert "NCCL_SOCKET_IFNAME==c0" in (out / "roles/gpu/etc/gpufabric/nccl.env").read_text()


def test_rerender_removes_files_of_hosts_that_left(cli, tmp_path):
    out = tmp_path / "b"
    plain = tmp_path / "two.yaml"
    plain.write_text(_plain_spec_text())
    assert cli("config", plain, "--out", out, "--seed", "a")[0] == 0
    assert (out / "hosts/compute-2/etc/nvme/config.json").exists()
    smaller = tmp_path / "one.yaml"
    smaller.write_text(_plain_spec_text().replace("nodes: 2\n", "nodes: 1\n").replace("dp: 2\n", "dp: 1\n"))
    code, _, err = cli("config", smaller, "--out", out, "--seed", "a")
    assert code == 0, err
    assert not (out / "hosts/compute-2/etc/nvme/config.json").exists()
    assert (out / "hosts/compute-1/etc/nvme/config.json").exists()


def test_config_exits_1_when_a_ruleset_does_not_load(cli, tmp_path, monkeypatch):
    import shutil

    import pytest

    if shutil.which("nft") is None:
        pytest.skip("nft not installed")
    from gpufabric.configure import nftables

    real = nftables.render_text
    monkeypatch.setattr(
        nftables, "render_text", lambda *a, **k: real(*a, **k).replace("policy drop;", "policy dorp;", 1)
    )
    out = tmp_path / "b"
    code, _, stderr = cli("config", SPEC, "--out", out)
    assert code == 1 and "do not load" in stderr and "nftables.conf" in stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_config_reports_the_checks_it_ran(cli):
    code, stdout, stderr = cli("config", SPEC, "--dry-run", "--format", "json")
    assert code == 0, stderr
    checks = json.loads(stdout)["checks"]
    assert any(p.endswith("nftables.conf") for p in checks["passed"] + checks["skipped"])
    assert any(p.endswith("gpufabric-torchrun") for p in checks["passed"])


def test_hostile_spec_name_never_executes(cli, tmp_path):
    import yaml

    canary = tmp_path / "canary"
    doc = yaml.safe_load(SPEC.read_text())
    doc["name"] = f"x\n$(touch {canary})`touch {canary}`'\"; touch {canary}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "b"
    code, _, stderr = cli("config", spec, "--out", out, "--seed", "x")
    # docs/spec.md: `name` is a slug (lower-case letters, digits, '.', '_', '-'), so this one is
    # a located user error before anything is rendered; quoting of rendered values is covered
    # by tests/configure/test_quoting.py.
    assert code == 2 and "Traceback" not in stderr
    assert f"{spec}:" in stderr and "name:" in stderr and "is not allowed" in stderr
    assert not out.exists() and not canary.exists()


def test_config_without_plan_configures_the_planners_recommendation(cli):
    from tests.conftest import EXAMPLES

    spec = EXAMPLES / "lab-2node.yaml"
    code, stdout, _ = cli("plan", spec, "--format", "json")
    doc = json.loads(stdout)
    best = next(c for c in doc["candidates"] if c["id"] == doc["recommended"])
    code, stdout, stderr = cli("config", spec, "--dry-run", "--format", "json")
    assert code == 0, stderr
    design = json.loads(stdout)["design"]
    assert (design["fabric"], design["storage"]) == (best["fabric"], best["storage"])
    assert doc["recommended"] in design["source"] and "planner" in design["source"]
    code, stdout, _ = cli("config", spec, "--dry-run")
    assert f"from the planner's recommendation {doc['recommended']}" in stdout


def test_design_option_overrides_and_is_checked(cli):
    code, stdout, stderr = cli(
        "config", SPEC, "--dry-run", "--format", "json", "--design", "fabric=roce-400g,storage=nfs"
    )
    assert code == 0, stderr
    assert json.loads(stdout)["design"] | {} == {
        "fabric": "roce-400g",
        "storage": "nfs",
        "fabric_kind": "roce",
        "source": "--design",
    }
    for bad in ("fabric=ib-xdr9,storage=nfs", "fabric=ib-ndr", "storage=nfs,storage=nfs", "ib-ndr"):
        code, _, stderr = cli("config", SPEC, "--dry-run", "--design", bad)
        assert code == 2 and "--design" in stderr and len(stderr.strip().splitlines()) == 1, stderr


def test_no_feasible_design_exits_1_naming_why_unless_design_is_given(cli, tmp_path):
    import yaml

    doc = yaml.safe_load(SPEC.read_text())
    doc["requirements"]["budget_usd"] = 1000  # no cluster of 16 H100s costs that
    spec = tmp_path / "poor.yaml"
    spec.write_text(yaml.safe_dump(doc))
    code, _, stderr = cli("config", spec, "--dry-run")
    assert code == 1 and "no design meets every requirement" in stderr and "budget" in stderr, stderr
    assert "--design fabric=" in stderr and "Traceback" not in stderr
    code, _, stderr = cli("config", spec, "--dry-run", "--design", "fabric=ib-ndr,storage=nvmeof-tcp")
    assert code == 0, stderr


def _no_layout_fits(tmp_path: Path) -> Path:
    """lab-ib with a 700B model on its 16 GPUs: no layout of the spec fits in 80 GiB of HBM."""
    import yaml

    doc = yaml.safe_load(SPEC.read_text())
    doc["workload"]["model"]["params"] = 7e11
    spec = tmp_path / "huge.yaml"
    spec.write_text(yaml.safe_dump(doc))
    return spec


def test_no_recommendation_exits_1_naming_the_closest_design(cli, tmp_path):
    """The planner recommends nothing (memory): one line with the closest design and its violation, no traceback."""
    spec = _no_layout_fits(tmp_path)
    code, stdout, _ = cli("plan", spec, "--format", "json")
    doc = json.loads(stdout)
    assert code == 1 and doc["recommended"] is None  # the precondition this test is about
    code, stdout, stderr = cli("config", spec, "--dry-run")
    assert code == 1 and stdout == "" and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "no layout fits in GPU memory" in stderr and "GiB per GPU" in stderr
    # the closest is the design with the smallest memory shortfall, as the plan's rationale names it
    closest = min(doc["candidates"], key=lambda c: c["memory_gb"] - c["memory_capacity_gb"])
    assert f"closest {closest['id']}:" in stderr and f"Closest: {closest['id']} " in doc["rationale"]
    assert f"--design fabric={closest['fabric']},storage={closest['storage']}" in stderr
    code, stdout, stderr = cli(
        "config",
        spec,
        "--dry-run",
        "--format",
        "json",
        "--design",
        f"fabric={closest['fabric']},storage={closest['storage']}",
    )
    assert code == 0, stderr
    assert json.loads(stdout)["design"]["source"] == "--design"


def test_catalog_option_checks_ids_against_the_users_catalog(cli, tmp_path):
    """An id the user's catalog adds is unknown without --catalog (exit 2) and configured with it."""
    from importlib import resources

    import yaml

    shipped = yaml.safe_load(resources.files("gpufabric.catalog").joinpath("data/storage.yaml").read_text())
    extra = tmp_path / "site-storage.yaml"
    extra.write_text(yaml.safe_dump({"storage": {"hd-scratch": shipped["storage"]["local-nvme"]}}))
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.read_text().replace("storage: [", "storage: [hd-scratch, ", 1))
    assert "hd-scratch" in spec.read_text()
    code, _, stderr = cli("config", spec, "--dry-run", "--design", "fabric=ib-ndr,storage=hd-scratch")
    assert code == 2 and "unknown catalog id 'hd-scratch'" in stderr, stderr
    code, stdout, stderr = cli(
        "config",
        spec,
        "--dry-run",
        "--format",
        "json",
        "--catalog",
        extra,
        "--design",
        "fabric=ib-ndr,storage=hd-scratch",
    )
    assert code == 0, stderr
    assert json.loads(stdout)["design"]["storage"] == "hd-scratch"
    code, _, stderr = cli("config", spec, "--dry-run", "--catalog", tmp_path / "missing.yaml")
    assert code == 2 and "cannot read catalog" in stderr, stderr
    # a saved plan recommending the user's id is checked against the same merged catalog
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"recommended": "c1", "candidates": [{"id": "c1", "fabric": "ib-ndr", "storage": "hd-scratch"}]})
    )
    code, _, stderr = cli("config", SPEC, "--dry-run", "--plan", plan)
    assert code == 2 and "unknown storage id 'hd-scratch'" in stderr, stderr
    code, stdout, stderr = cli("config", SPEC, "--dry-run", "--format", "json", "--plan", plan, "--catalog", extra)
    assert code == 0, stderr
    assert json.loads(stdout)["design"]["storage"] == "hd-scratch"
