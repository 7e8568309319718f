"""Run every registered check over collected facts; add the reachability proof on request."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpufabric.audit import (  # noqa: F401  (registration)
    checks_bundle,
    checks_fabric,
    checks_host,
    checks_job,
    checks_nvmf,
)
from gpufabric.audit.collect import Facts, flat_ruleset, from_directory
from gpufabric.audit.findings import REGISTRY, Finding, NotAvailable, Severity
from gpufabric.audit.nft import Ruleset
from gpufabric.audit.reachability import Change, Proof, cell_at, diff, prove
from gpufabric.errors import InputError

if TYPE_CHECKING:
    from gpufabric.audit.kernel import KernelCheck

RDMA_STATEMENT = (
    "Host firewalls do not see RDMA traffic: InfiniBand and RoCE data bypass netfilter in the NIC, so the nftables "
    "rules and the reachability proof cover TCP/UDP services only. RDMA isolation needs PKey (IB, part_enforce both) "
    "or VLAN/VRF plus switch-ACL (RoCE) evidence; FW-05 and IB-* check it."
)


@dataclass(slots=True, kw_only=True)
class AuditReport:
    source: str
    findings: list[Finding] = field(default_factory=list)
    not_available: dict[str, str] = field(default_factory=dict)
    passed: list[str] = field(default_factory=list)
    proof: Proof | None = None
    changes: list[Change] | None = None
    kernel: list[KernelCheck] | None = None  # audit --kernel: static and kernel verdicts per probe

    def fails(self, threshold: Severity) -> bool:
        return any(f.severity.rank >= threshold.rank for f in self.findings)


def run_checks(facts: Facts, report: AuditReport) -> None:
    for check_id in sorted(REGISTRY):
        spec = REGISTRY[check_id]
        try:
            found = list(spec.run(facts))
        except NotAvailable as exc:
            report.not_available[check_id] = str(exc)
            continue
        if found:
            report.findings.extend(found)
        else:
            report.passed.append(check_id)


def host_rulesets(facts: Facts) -> dict[str, Ruleset]:
    """Host name -> parsed ruleset, for the policy's hosts that have one."""
    rulesets = {}
    for view in facts.hosts:
        if view.role is None:
            continue
        rs = view.ruleset()
        if rs is not None:
            rulesets[view.name] = rs
    return rulesets


def audit(facts: Facts, *, reachability: bool = False, kernel: bool = False) -> AuditReport:
    """The proof runs first, so FW-04 lists every construct its evaluation met. ``kernel``
    (root) also loads each role's ruleset into a namespace and probes every cell."""
    report = AuditReport(source=facts.source)
    if reachability or kernel:
        if facts.policy is None:
            report.not_available["VER-01"] = "no policy.json: no intent to prove against"
        else:
            rulesets = host_rulesets(facts)
            if not rulesets:
                report.not_available["VER-01"] = "no host of the policy has a ruleset"
            else:
                report.proof = prove(facts.policy, rulesets)
                report.findings.extend(proof_findings(report.proof))
                if kernel:
                    report.kernel = kernel_checks(facts, report.proof)
                    report.findings.extend(kernel_findings(report.kernel))
    run_checks(facts, report)
    return report


def kernel_checks(facts: Facts, proof: Proof) -> list[KernelCheck]:
    """One kernel check per role that has a ruleset file (the first host of the role holding one)."""
    from gpufabric.audit.kernel import check_role

    assert facts.policy is not None
    done: list[KernelCheck] = []
    for role in facts.policy.roles:
        view = next((v for v in facts.hosts if v.role == role.name and v.has("/etc/nftables.conf")), None)
        if view is None or view.ruleset() is None:
            continue
        with flat_ruleset(view) as path:  # the text the proof read, includes inlined
            done.append(check_role(facts.policy, proof, role.name, path))
    return done


def kernel_findings(checks: list[KernelCheck]) -> list[Finding]:
    return [
        Finding(
            check_id="VER-03",
            severity=Severity.high,
            title="Static proof and kernel disagree",
            subject=f"{p.src} ({p.src_addr}) -> {p.dst} on {p.plane} {p.proto}/{p.port}",
            evidence=f"static proof: {p.static}, kernel: {p.kernel}",
            remedy="report the ruleset (a bug of the proof); trust the kernel's verdict meanwhile",
        )
        for check in checks
        for p in check.disagreements()
    ]


def proof_findings(proof: Proof) -> list[Finding]:
    out = []
    for cell in proof.violations():
        if cell.verdict == "not-proven":
            # fail closed: an undecided isolation cell is a high finding, an undecided intended one medium
            out.append(
                Finding(
                    check_id="VER-01",
                    severity=Severity.medium if cell.intended else Severity.high,
                    title="Plane-pair reachability not proven",
                    subject=f"{cell.src} -> {cell.dst} on {cell.plane} {cell.proto}/{cell.ports}",
                    evidence=f"not proven ({'intended' if cell.intended else 'must be isolated'}): {cell.reason}",
                    remedy="replace the undecidable rule (FW-04 lists them) or check it with `audit --kernel`",
                )
            )
            continue
        what = "allowed beyond intent" if cell.verdict == "beyond-intent" else "intended but blocked"
        out.append(
            Finding(
                check_id="VER-01",
                severity=Severity.high,
                title="Plane-pair reachability differs from intent",
                subject=f"{cell.src} -> {cell.dst} on {cell.plane} {cell.proto}/{cell.ports}",
                evidence=f"{what} (firewall admits: {cell.allowed})",
                remedy="change the rules (or the policy's flows) until the matrix equals the intent",
            )
        )
    return out


def audit_diff(old: Path, new: Path) -> AuditReport:
    """Cells a change opens or closes (VER-02); opened cells beyond the new intent are findings."""
    facts_old, facts_new = from_directory(old), from_directory(new)
    policy_old, policy_new = facts_old.policy, facts_new.policy
    if policy_old is None or policy_new is None:
        path = old if policy_old is None else new
        raise InputError(f"{path} has no policy.json; --diff compares two bundles or /etc copies with policy.json")
    rs_old, rs_new = host_rulesets(facts_old), host_rulesets(facts_new)
    p_old = prove(policy_old, rs_old)
    p_new = prove(policy_new, rs_new)
    changes = diff(p_old, p_new)
    report = AuditReport(source=f"diff {old} -> {new}", proof=p_new, changes=changes)
    for ch in changes:
        cell = cell_at(p_new, ch.src, ch.dst, ch.plane, ch.proto, ch.port_lo)
        if ch.direction == "opens" and not (cell is not None and cell.intended):
            report.findings.append(
                Finding(
                    check_id="VER-02",
                    severity=Severity.high,
                    title="Change opens cells beyond intent",
                    subject=f"{ch.src} -> {ch.dst} on {ch.plane} {ch.proto}/{ch.ports}",
                    evidence=f"{ch.old} -> {ch.new}",
                    remedy="revert the opening or add the flow to the policy on purpose",
                )
            )
    return report
