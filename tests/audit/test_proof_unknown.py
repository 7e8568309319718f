"""Three-valued cells end to end: an undecidable rule in a role's ruleset makes the cells
it guards "not proven", the audit fails closed, FW-04 lists the rule, and the kernel
cross-check (root) probes every cell with real packets and agrees where the proof decides.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from gpufabric.audit.collect import from_directory
from gpufabric.audit.runner import audit
from tests.audit.conftest import bundle_copy, clean_bundle  # noqa: F401  (fixtures)
from tests.conftest import needs_root, needs_tool

nft_usable = pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None or shutil.which("ip") is None,
    reason="nft/unshare/ip not installed",
)

LIMIT = 'ip saddr @mgmt_login tcp dport 22 accept comment "ssh from the bastion"'
LIMITED = 'tcp dport 22 limit rate 5/second accept comment "ssh, rate limited"'


def _edit(bundle, role: str, old: str, new: str) -> None:
    conf = bundle / "roles" / role / "etc" / "nftables.conf"
    text = conf.read_text()
    assert text.count(old) == 1
    conf.write_text(text.replace(old, new))
    (bundle / "roles" / role / "etc" / "gpufabric" / "nftables.json").unlink()  # the text is the truth here


@nft_usable
def test_undecided_rule_makes_isolation_cells_not_proven(bundle_copy):  # noqa: F811
    _edit(bundle_copy, "compute", LIMIT, LIMITED)
    report = audit(from_directory(bundle_copy), reachability=True)
    proof = report.proof
    assert proof is not None
    undecided = proof.not_proven()
    # every source may reach 22/tcp through the rate limit: neither isolated nor reachable
    assert undecided and all(
        c.dst == "compute" and c.plane == "mgmt" and c.port_lo <= 22 <= c.port_hi for c in undecided
    )
    assert {c.src for c in undecided} >= {"(other)", "storage"}
    assert all("limit" in c.reason and c.verdict == "not-proven" for c in undecided)
    ver = [f for f in report.findings if f.check_id == "VER-01" and "not proven" in f.evidence]
    assert ver and any(f.severity.value == "high" for f in ver)
    fw04 = [f for f in report.findings if f.check_id == "FW-04"]
    assert any("limit" in f.evidence for f in fw04)  # listed after the evaluation filled it


@nft_usable
def test_cli_exits_1_not_proven(bundle_copy, tmp_path):  # noqa: F811
    _edit(bundle_copy, "compute", LIMIT, LIMITED)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpufabric",
            "audit",
            "--config",
            str(bundle_copy),
            "--reachability",
            "--fail-on",
            "high",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "not-proven" in done.stdout and "result: FAIL, not proven" in done.stdout


@nft_usable
def test_fw04_lists_undecided_without_the_proof(bundle_copy):  # noqa: F811
    _edit(bundle_copy, "storage", "chain in_mgmt {", "chain in_mgmt {\n\t\tct count over 10 drop")
    report = audit(from_directory(bundle_copy))
    fw04 = [f for f in report.findings if f.check_id == "FW-04" and f.subject.startswith("storage")]
    assert fw04 and "ct count" in fw04[0].evidence


@nft_usable
def test_iif_rule_loads_and_is_not_fw01(bundle_copy):  # noqa: F811
    # `iif` needs the device at load time: the text path creates the planes' interfaces
    _edit(bundle_copy, "storage", 'iif "lo" accept', 'iif "lo" accept\n\t\tiif "mgmt0" tcp dport 9100 drop')
    report = audit(from_directory(bundle_copy))
    assert not [f for f in report.findings if f.check_id in ("FW-01", "FW-08")]


@needs_root
@needs_tool("nft")
@needs_tool("ip")
def test_kernel_mode_side_by_side(bundle_copy, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GPUFABRIC_KERNEL_PREFIX", "fwt")
    _edit(bundle_copy, "compute", LIMIT, LIMITED)
    done = subprocess.run(
        [sys.executable, "-m", "gpufabric", "audit", "--config", str(bundle_copy), "--kernel", "--format", "json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GPUFABRIC_KERNEL_PREFIX": "fwt"},
    )
    doc = json.loads(done.stdout)
    assert done.returncode == 1  # not proven (the rate limit)
    roles = {k["role"]: k["probes"] for k in doc["kernel"]}
    assert set(roles) == {"compute", "storage", "login", "scheduler"}
    probes = [p for ps in roles.values() for p in ps]
    assert not [p for p in probes if not p["agrees"]]
    assert not [f for f in doc["findings"] if f["check_id"] == "VER-03"]
    both = {(p["static"], p["kernel"]) for p in probes}
    assert ("accept", "accept") in both and ("drop", "drop") in both
    # the rate-limited ssh: unknown statically, and the kernel accepts the first packet
    assert any(p["static"] == "unknown" and p["kernel"] == "accept" and p["port"] == 22 for p in roles["compute"])
    leftovers = subprocess.run(["ip", "netns", "list"], check=False, capture_output=True, text=True).stdout
    assert "fwt" not in leftovers
