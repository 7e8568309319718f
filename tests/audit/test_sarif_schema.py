"""A real static audit's SARIF validates against the OASIS SARIF 2.1.0 schema (issue 23, Deliver 7)."""

from __future__ import annotations

import json
import os
import shutil

import jsonschema
import pytest

from tests.audit.conftest import apply_edits
from tests.conftest import DATA

nft_usable = pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None, reason="nft/unshare not installed"
)


@nft_usable
def test_audit_sarif_of_a_bundle_with_findings_is_valid(cli, bundle_copy):
    os.chmod(bundle_copy / "hosts/compute-2/etc/nvme/tls-keys", 0o640)  # NVMF-06, with a file
    apply_edits(
        bundle_copy,
        [{"replace": {"file": "roles/compute/etc/gpufabric/nccl.env", "old": "NCCL_MIN_NCHANNELS=16\n", "new": ""}}],
    )  # NCCL-05
    code, stdout, _ = cli("audit", "--config", bundle_copy, "--format", "sarif")
    assert code == 1
    doc = json.loads(stdout)
    jsonschema.Draft4Validator(json.loads((DATA / "schemas" / "sarif-schema-2.1.0.json").read_text())).validate(doc)
    (run,) = doc["runs"]
    assert {r["ruleId"] for r in run["results"]} >= {"NVMF-06", "NCCL-05"}
    assert all(r["locations"] for r in run["results"])
    assert all(
        "security-severity" in rule["properties"] and rule["help"]["text"] for rule in run["tool"]["driver"]["rules"]
    )
