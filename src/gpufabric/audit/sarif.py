"""SARIF 2.1.0 rendering of an audit report (for CI code-scanning dashboards).

Valid against the OASIS SARIF 2.1.0 JSON schema (tests/data/schemas) and shaped as GitHub
code scanning requires (docs.github.com, "SARIF support for code scanning", as of 2026):

* every result has a location: the file inside the audited tree when the finding names one
  (``physicalLocation``), else the audited subject (a host, a role, a service) as a
  ``logicalLocation``, which is what a live audit finds things on;
* every rule has ``help`` (text and Markdown: the remedy), a full description, the tag
  ``security`` and ``security-severity``, the CVSS-like score GitHub maps to its levels
  (over 9.0 critical, 7.0-8.9 high, 4.0-6.9 medium, 0.1-3.9 low);
* ``partialFingerprints`` keep an alert the same alert from run to run (rule, subject, location).
"""

from __future__ import annotations

import hashlib
from typing import Any

from gpufabric import __version__
from gpufabric.audit.findings import REGISTRY, Finding, Severity
from gpufabric.audit.runner import AuditReport

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {
    Severity.critical: "error",
    Severity.high: "error",
    Severity.medium: "warning",
    Severity.low: "note",
    Severity.info: "note",
}
#: GitHub's security-severity bands, one score inside each (info is no security severity: 0.0).
SECURITY_SEVERITY = {
    Severity.critical: "9.5",
    Severity.high: "8.0",
    Severity.medium: "5.5",
    Severity.low: "2.0",
    Severity.info: "0.0",
}


def _rule(check_id: str, title: str, remedy: str, severity: Severity) -> dict[str, Any]:
    return {
        "id": check_id,
        "name": check_id.replace("-", ""),
        "shortDescription": {"text": title},
        "fullDescription": {"text": f"{title}. Remedy: {remedy}"},
        "help": {"text": remedy, "markdown": f"**{check_id}: {title}**\n\nRemedy: {remedy}"},
        "defaultConfiguration": {"level": _LEVEL[severity]},
        "properties": {"tags": ["security"], "security-severity": SECURITY_SEVERITY[severity]},
    }


def _location(f: Finding, source: str) -> dict[str, Any]:
    if f.location:
        return {"physicalLocation": {"artifactLocation": {"uri": f.location}}}
    return {
        "logicalLocations": [
            {"name": f.subject or source or "audit", "fullyQualifiedName": f"{source}/{f.subject}", "kind": "resource"}
        ]
    }


def to_sarif(report: AuditReport) -> dict[str, Any]:
    ids = sorted(set(REGISTRY) | {f.check_id for f in report.findings})
    rules = []
    for check_id in ids:
        spec = REGISTRY.get(check_id)
        if spec:
            rules.append(_rule(check_id, spec.title, spec.remedy, spec.severity))
        else:
            first = next(f for f in report.findings if f.check_id == check_id)
            rules.append(_rule(check_id, first.title or check_id, first.remedy, first.severity))
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for f in report.findings:
        identity = "\0".join((f.check_id, f.subject, f.location))
        results.append(
            {
                "ruleId": f.check_id,
                "ruleIndex": index[f.check_id],
                "level": _LEVEL[f.severity],
                "message": {"text": f"{f.subject}: {f.evidence}. Remedy: {f.remedy}"},
                "locations": [_location(f, report.source)],
                "partialFingerprints": {"gpufabricFinding/v1": hashlib.sha256(identity.encode()).hexdigest()[:32]},
                "properties": {
                    "severity": f.severity.value,
                    "subject": f.subject,
                    "security-severity": SECURITY_SEVERITY[f.severity],
                },
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "gpufabric-audit", "version": __version__, "rules": rules}},
                "results": results,
                "properties": {"source": report.source, "notAvailable": report.not_available},
            }
        ],
    }
