"""The text report of ``gpufabric audit`` (its JSON and SARIF are :mod:`.outcome`'s)."""

from __future__ import annotations

from gpufabric.audit.findings import Severity
from gpufabric.audit.runner import RDMA_STATEMENT, AuditReport


def text_lines(report: AuditReport, threshold: Severity, code: int) -> list[str]:
    """The report as lines: the proof's matrix, the kernel cross-check, the changes, then the
    findings by severity and the result line."""
    lines: list[str] = []
    out = lines.append
    out(f"gpufabric audit: {report.source}")
    out(f"note: {RDMA_STATEMENT}")
    if report.proof is not None:
        p = report.proof
        out("")
        out(
            f"allow matrix ({p.cells_evaluated} cells over {p.hosts_evaluated} hosts, {p.rulesets_evaluated} distinct"
            f" rulesets, every port 1-65535; {p.seconds:.2f} s):"
        )
        out(
            f"  {'plane':<8} {'source':<12} {'destination':<12} {'proto/ports':<20} {'firewall':<8} {'intent':<7} verdict"
        )
        for c in p.allowed():
            out(
                f"  {c.plane:<8} {c.src:<12} {c.dst:<12} {c.proto + '/' + c.ports:<20} {c.allowed:<8}"
                f" {'yes' if c.intended else 'no':<7} {c.verdict}" + (f": {c.reason}" if c.reason else "")
            )
        out("  every other cell: denied, as intended" if not p.violations() else "  every other cell: denied")
        if p.missing_hosts:
            out(
                f"  not proven: {len(p.missing_hosts)} hosts of the policy without a ruleset"
                f" ({', '.join(p.missing_hosts[:5])}{' ...' if len(p.missing_hosts) > 5 else ''})"
            )
        if p.not_proven():
            out(
                f"  NOT PROVEN: {len(p.not_proven())} cells are undecided (listed above with their rule); "
                "they count as neither isolated nor reachable"
            )
    if report.kernel is not None:
        out("")
        out("kernel cross-check (real packets into each role's ruleset in a namespace):")
        out(
            f"  {'plane':<8} {'source':<12} {'address':<15} {'destination':<12} {'proto/port':<12} {'static':<8} {'kernel':<7} result"
        )
        for k in report.kernel:
            for q in k.probes:
                if q.static == q.kernel == "drop":
                    continue  # closed in both: summarised below
                result = "agree" if q.static == q.kernel else "n/a (static unknown)" if q.agrees else "DISAGREE"
                out(
                    f"  {q.plane:<8} {q.src:<12} {q.src_addr:<15} {q.dst:<12} {q.proto + '/' + str(q.port):<12}"
                    f" {q.static:<8} {q.kernel:<7} {result}"
                )
            closed = sum(q.static == q.kernel == "drop" for q in k.probes)
            out(
                f"  role {k.role}: {len(k.probes)} probes, {closed} dropped by both, "
                f"{len(k.disagreements())} disagreements ({k.seconds:.1f} s)"
            )
    if report.changes is not None:
        out("")
        out(f"changes ({len(report.changes)}):" if report.changes else "changes: none (no cell opens or closes)")
        for change in report.changes:
            out(
                f"  {change.direction:<6} {change.plane:<8} {change.src} -> {change.dst} {change.proto}/{change.ports}:"
                f" {change.old} -> {change.new}"
            )
    out("")
    out(f"findings ({len(report.findings)}):" if report.findings else "findings: none")
    order = sorted(report.findings, key=lambda f: (-f.severity.rank, f.check_id, f.subject))
    for f in order:
        out(f"  {f.severity.value.upper():<8} {f.check_id:<8} {f.subject}: {f.title}")
        out(f"           evidence: {f.evidence}")
        out(f"           remedy: {f.remedy}")
    if report.not_available:
        out(f"not available ({len(report.not_available)}):")
        for check_id, reason in sorted(report.not_available.items()):
            out(f"  {check_id:<8} {reason}")
    if report.passed:
        out(f"passed ({len(report.passed)}): {', '.join(report.passed)}")
    undecided = [c for c in report.proof.not_proven() if not c.intended] if report.proof is not None else []
    verdict = "FAIL, not proven" if undecided else "FAIL" if code else "PASS"
    out(f"result: {verdict} (--fail-on {threshold.value})")
    return lines
