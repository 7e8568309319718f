"""SARIF 2.1.0 rendering of an audit report (for CI code-scanning dashboards)."""

from __future__ import annotations

from typing import Any

from gpufabric import __version__
from gpufabric.audit.findings import REGISTRY, Severity
from gpufabric.audit.runner import AuditReport

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {
    Severity.critical: "error",
    Severity.high: "error",
    Severity.medium: "warning",
    Severity.low: "note",
    Severity.info: "note",
}


def to_sarif(report: AuditReport) -> dict[str, Any]:
    ids = sorted(set(REGISTRY) | {f.check_id for f in report.findings})
    rules = []
    for check_id in ids:
        spec = REGISTRY.get(check_id)
        title = spec.title if spec else next(f.title for f in report.findings if f.check_id == check_id)
        remedy = spec.remedy if spec else next(f.remedy for f in report.findings if f.check_id == check_id)
        level = _LEVEL[spec.severity] if spec else "error"
        rules.append(
            {
                "id": check_id,
                "name": check_id.replace("-", ""),
                "shortDescription": {"text": title},
                "help": {"text": remedy},
                "defaultConfiguration": {"level": level},
            }
        )
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for f in report.findings:
        result: dict[str, Any] = {
            "ruleId": f.check_id,
            "ruleIndex": index[f.check_id],
            "level": _LEVEL[f.severity],
            "message": {"text": f"{f.subject}: {f.evidence}. Remedy: {f.remedy}"},
            "properties": {"severity": f.severity.value, "subject": f.subject},
        }
        if f.location:
            result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": f.location}}}]
        results.append(result)
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
