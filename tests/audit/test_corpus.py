"""The clean bundle audits with zero findings; each planted violation gives exactly its ID."""

from __future__ import annotations

import shutil

import pytest

from gpufabric.audit.collect import from_directory, nft_text_to_json
from gpufabric.audit.runner import audit
from tests.audit.conftest import apply_edits, corpus_cases, load_case

# Reading nftables.conf goes through the real nft in a throwaway network namespace.
nft_usable = pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None, reason="nft/unshare not installed"
)


@nft_usable
def test_clean_bundle_has_zero_findings(clean_bundle):
    report = audit(from_directory(clean_bundle), reachability=True)
    assert report.findings == []
    # the checks that matter for this IB + NVMe/TCP design really ran
    for check_id in (
        "NVMF-01",
        "NVMF-03",
        "NVMF-06",
        "NVMF-08",
        "IB-02",
        "IB-03",
        "NCCL-01",
        "NCCL-05",
        "TORCH-01",
        "FW-01",
        "FW-07",
    ):
        assert check_id in report.passed, report.not_available.get(check_id)
    assert report.proof is not None and report.proof.violations() == []


@nft_usable
def test_generated_text_and_json_rulesets_agree(clean_bundle):
    """nft's own reading of nftables.conf equals the nftables.json the bundle ships."""
    import json

    from gpufabric.audit import nft
    from gpufabric.audit.reachability import prove
    from gpufabric.spec.security import SecurityPolicy

    doc = json.loads((clean_bundle / "policy.json").read_text())
    policy = SecurityPolicy.model_validate(doc["policy"])
    from_text, from_json = {}, {}
    for role in policy.roles:
        live, error = nft_text_to_json(clean_bundle / "roles" / role.name / "etc/nftables.conf")
        assert error is None
        from_text[role.name] = nft.parse(live)
        from_json[role.name] = nft.parse(
            json.loads((clean_bundle / "roles" / role.name / "etc/gpufabric/nftables.json").read_text())
        )
    hosts = dict(policy.hosts())
    a = prove(policy, {h: from_text[r] for h, r in hosts.items()})
    b = prove(policy, {h: from_json[r] for h, r in hosts.items()})
    assert [(c.src, c.dst, c.plane, c.proto, c.port_lo, c.port_hi, c.allowed) for c in a.cells] == [
        (c.src, c.dst, c.plane, c.proto, c.port_lo, c.port_hi, c.allowed) for c in b.cells
    ]
    assert len(a.cells) > 50 and any(c.allowed == "all" for c in a.cells)


@nft_usable
@pytest.mark.parametrize("case", corpus_cases(), ids=lambda p: p.stem)
def test_planted_violation_detected_alone(case, bundle_copy):
    spec = load_case(case)
    apply_edits(bundle_copy, spec["edits"])
    report = audit(from_directory(bundle_copy))
    ids = sorted({f.check_id for f in report.findings})
    assert ids == [spec["expect"]], [(f.check_id, f.subject, f.evidence) for f in report.findings]


def test_corpus_covers_the_required_violations():
    expected = {"NVMF-01", "NVMF-06", "FW-07", "TORCH-01", "IB-03", "IB-02", "NCCL-01", "NVMF-03", "NVMF-08", "FW-01"}
    assert {load_case(c)["expect"] for c in corpus_cases()} == expected
