"""ansible/site.yml and inventory.ini: the real ansible-playbook parses, applies and reports drift."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpufabric.configure import ansible

CORPUS = Path(__file__).parent / "data"


def _bundle(tmp_path: Path) -> Path:
    from tests.audit.conftest import render

    return render(CORPUS / "secure-ib.yaml", tmp_path / "b")


def _playbook(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    if not Path(exe).exists():
        pytest.skip("needs ansible-core (pip install 'gpufabric[test]')")
    env = {
        **os.environ,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_LOCAL_TEMP": str(cwd / ".ansible-tmp"),
    }
    return subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_playbook_passes_syntax_check(tmp_path):
    """Bar: ansible-playbook --syntax-check on the generated playbook and inventory."""
    root = _bundle(tmp_path)
    done = _playbook("--syntax-check", "-i", "ansible/inventory.ini", "ansible/site.yml", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = root / "ansible" / "broken.yml"
    broken.write_text(
        (root / "ansible/site.yml").read_text().replace("ansible.builtin.copy:", "ansible.builtin.copy: [", 1)
    )
    assert _playbook("--syntax-check", "-i", "ansible/inventory.ini", "ansible/broken.yml", cwd=root).returncode != 0


def test_every_file_of_a_role_and_its_hosts_is_placed_with_handlers(tmp_path):
    root = _bundle(tmp_path)
    plays = {p["hosts"]: p for p in yaml.safe_load((root / "ansible/site.yml").read_text())}
    assert set(plays) == {"compute", "storage", "login", "scheduler", "opensm"}
    compute = plays["compute"]
    dests = {t["name"]: t for t in compute["tasks"][1:]}
    role_files = {
        "/" + str(p.relative_to(root / "roles/compute")) for p in (root / "roles/compute").rglob("*") if p.is_file()
    }
    host_files = {
        "/" + str(p.relative_to(root / "hosts/gpu-a1")) for p in (root / "hosts/gpu-a1").rglob("*") if p.is_file()
    }
    assert set(dests) == role_files | host_files
    assert dests["/etc/nftables.conf"]["notify"] == ["reload nftables"]
    assert dests["/etc/sysctl.d/90-gpufabric.conf"]["notify"] == ["reload sysctl"]
    assert dests["/etc/nftables.conf"]["ansible.builtin.copy"]["mode"] == "0755"
    secret = dests["/etc/nvme/config.json"]
    assert secret["ansible.builtin.copy"]["mode"] == "0600" and secret["diff"] is False  # never printed by --diff
    assert "hosts/{{ inventory_hostname }}/etc/nvme/config.json" in secret["ansible.builtin.copy"]["src"]
    handlers = {h["name"]: h for h in compute["handlers"]}
    assert handlers["apply tuned profile"]["ansible.builtin.command"]["argv"] == [
        "tuned-adm",
        "profile",
        "gpufabric-compute",
    ]
    assert {h["name"] for h in plays["storage"]["handlers"]} >= {"restart nvmet", "reload nftables"}
    assert {h["name"] for h in plays["opensm"]["handlers"]} == {"restart opensm"}
    inventory = (root / "ansible/inventory.ini").read_text()
    assert "[compute]\ngpu-a1 ansible_host=10.10.0.10\ngpu-a2 ansible_host=10.10.0.11\n" in inventory


def test_handler_table():
    assert ansible.handlers_for("/etc/slurm/gres.conf") == ["restart slurmd"]
    assert ansible.handlers_for("/etc/opensm/partitions.conf") == ["restart opensm"]
    assert ansible.handlers_for("/etc/nvmet/config.json") == ["restart nvmet"]
    assert ansible.handlers_for("/etc/gpufabric/nccl.env") == []
    assert ansible.group_name("gpu-east") == "gpu_east"


@pytest.mark.slow
def test_apply_then_check_diff_shows_drift(tmp_path):
    """A real run on this host (connection local) into a scratch root: apply, edit one file, --check --diff.

    The login play (6 files) keeps it to two runs of a few tasks each (about a second a task here).
    """
    if os.geteuid() != 0:
        pytest.skip("owner root needs root")
    root = _bundle(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    inv = tmp_path / "local.ini"
    inv.write_text(f"[login]\nlogin-a1 ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    common = ["-i", str(inv), "ansible/site.yml", "--limit", "login", "-e", f"gpufabric_root={target}"]
    common += ["-e", "gpufabric_handlers=false"]
    done = _playbook(*common, cwd=root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    files = [p for p in (root / "roles/login").rglob("*") if p.is_file()]
    for src in files:
        placed = target / src.relative_to(root / "roles/login")
        assert placed.read_bytes() == src.read_bytes(), placed
        assert placed.stat().st_mode & 0o777 == src.stat().st_mode & 0o777, placed
    sysctl = target / "etc/sysctl.d/90-gpufabric.conf"
    sysctl.write_text("net.core.rmem_max = 1\n")
    drift = _playbook(*common, "--check", "--diff", cwd=root)
    # exactly the edited file drifted; --check changed nothing
    assert drift.returncode == 0 and "changed=1 " in drift.stdout, drift.stdout[-2000:]
    assert "-net.core.rmem_max = 1" in drift.stdout and "90-gpufabric.conf" in drift.stdout
    assert sysctl.read_text() == "net.core.rmem_max = 1\n"
