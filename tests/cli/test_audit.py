"""`gpufabric audit`: exit codes per --fail-on, formats (text, JSON, SARIF), usage errors."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.audit.conftest import apply_edits, bundle_copy, clean_bundle  # noqa: F401  (fixtures)

nft_usable = pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None, reason="nft/unshare not installed"
)


def test_usage_errors_exit_2(cli, tmp_path):
    code, _, stderr = cli("audit")
    assert code == 2 and "nothing to audit" in stderr
    code, _, stderr = cli("audit", "--config", tmp_path / "missing")
    assert code == 2 and "not a directory" in stderr
    code, _, stderr = cli("audit", "--config", tmp_path, "--live")
    assert code == 2 and "only one" in stderr
    code, _, stderr = cli("audit", "--config", tmp_path, "--fail-on", "severe")
    assert code == 2 and "severe" in stderr and "--fail-on" in stderr


@nft_usable
def test_clean_bundle_text_states_rdma_limit_and_passes(cli, clean_bundle):
    code, stdout, stderr = cli("audit", "--config", clean_bundle, "--reachability")
    assert code == 0, stdout + stderr
    assert "Host firewalls do not see RDMA traffic" in stdout and "PKey" in stdout
    assert "findings: none" in stdout and "allow matrix" in stdout
    assert "ctl      compute      compute      tcp/29400" in stdout


@nft_usable
def test_fail_on_threshold(cli, bundle_copy):
    apply_edits(
        bundle_copy,
        [{"replace": {"file": "roles/compute/etc/gpufabric/nccl.env", "old": "NCCL_MIN_NCHANNELS=16\n", "new": ""}}],
    )  # NCCL-05, medium
    assert cli("audit", "--config", bundle_copy)[0] == 1
    assert cli("audit", "--config", bundle_copy, "--fail-on", "medium")[0] == 1
    assert cli("audit", "--config", bundle_copy, "--fail-on", "high")[0] == 0


@nft_usable
def test_json_and_sarif(cli, bundle_copy):
    os.chmod(bundle_copy / "hosts/compute-2/etc/nvme/tls-keys", 0o640)
    code, stdout, _ = cli("audit", "--config", bundle_copy, "--format", "json")
    assert code == 1
    doc = json.loads(stdout)
    assert doc["schema_version"] == 1 and doc["exit_code"] == 1 and doc["fail_on"] == "low"
    [f] = doc["findings"]
    assert f["check_id"] == "NVMF-06" and f["severity"] == "high" and "0640" in f["evidence"] and f["remedy"]
    assert "ROCE-01" in doc["not_available"]
    code, stdout, _ = cli("audit", "--config", bundle_copy, "--format", "sarif")
    sarif = json.loads(stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    [result] = run["results"]
    assert result["ruleId"] == "NVMF-06" and result["level"] == "error"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "NVMF-06"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("tls-keys")


@nft_usable
def test_reachability_finds_cells_beyond_intent(cli, bundle_copy):
    apply_edits(
        bundle_copy,
        [
            {
                "replace": {
                    "file": "roles/storage/etc/nftables.conf",
                    "old": "\tchain in_mgmt {\n",
                    "new": "\tchain in_mgmt {\n\t\ttcp dport 2049 accept\n",
                }
            }
        ],
    )
    code, stdout, _ = cli("audit", "--config", bundle_copy, "--reachability", "--format", "json")
    doc = json.loads(stdout)
    ver = [f for f in doc["findings"] if f["check_id"] == "VER-01"]
    assert code == 1 and ver
    subjects = {f["subject"] for f in ver}
    # every source on the management plane, including addresses of no role, now reaches NFS
    assert "compute -> storage on mgmt tcp/2049" in subjects and "(other) -> storage on mgmt tcp/2049" in subjects
    assert all("beyond intent" in f["evidence"] for f in ver)


@nft_usable
def test_diff_shows_opened_and_closed_cells(cli, clean_bundle, bundle_copy):
    apply_edits(
        bundle_copy,
        [
            {
                "replace": {
                    "file": "roles/compute/etc/nftables.conf",
                    "old": "\tchain in_stor {\n",
                    "new": "\tchain in_stor {\n\t\ttcp dport 9100 accept\n",
                }
            },
            {
                "replace": {
                    "file": "roles/compute/etc/nftables.conf",
                    "old": "ip saddr @mgmt_login tcp dport 22 accept",
                    "new": "ip saddr @mgmt_login tcp dport 2222 accept",
                }
            },
        ],
    )
    code, stdout, _ = cli("audit", "--diff", clean_bundle, bundle_copy, "--format", "json")
    doc = json.loads(stdout)
    changes = {(c["direction"], c["src"], c["dst"], c["plane"], c["proto"], c["ports"]) for c in doc["changes"]}
    assert ("opens", "compute", "compute", "stor", "tcp", "9100") in changes
    assert ("opens", "(other)", "compute", "stor", "tcp", "9100") in changes
    assert ("closes", "login", "compute", "mgmt", "tcp", "22") in changes
    assert ("opens", "login", "compute", "mgmt", "tcp", "2222") in changes
    assert code == 1 and {f["check_id"] for f in doc["findings"]} == {"VER-02"}
    code, stdout, _ = cli("audit", "--diff", clean_bundle, clean_bundle)
    assert code == 0 and "changes: none" in stdout


def test_live_audit_never_crashes(cli):
    code, stdout, stderr = cli("audit", "--live", "--format", "json")
    assert code in (0, 1), stderr
    doc = json.loads(stdout)
    assert "Traceback" not in stderr
    # this VM has no NVMe target, no OpenSM, no RDMA: those checks are not available, not errors
    assert "IB-03" in doc["not_available"] and "NVMF-01" in doc["not_available"]
