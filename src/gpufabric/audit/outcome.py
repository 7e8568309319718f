"""``gpufabric audit`` as an application service: a typed request in, a typed outcome out.

The outcome owns what the command prints (its versioned JSON, SARIF and text) and its exit
status; ``cli/audit.py`` only declares the options and writes what the outcome renders.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufabric.audit.findings import Severity
from gpufabric.audit.runner import RDMA_STATEMENT, AuditReport
from gpufabric.errors import InputError
from gpufabric.results import document

if TYPE_CHECKING:
    from gpufabric.audit.kernel import Probe


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRequest:
    """What to audit (exactly one of ``config``, ``live``, ``diff``) and when to fail."""

    config: Path | None = None  # an artefact bundle (gpufabric config --out) or a copy of /etc
    live: bool = False  # this host: nft, ss, ip, files, environment, sysfs/configfs
    diff: tuple[Path, Path] | None = None  # OLD NEW bundles: cells a change opens or closes
    reachability: bool = False  # prove the allow matrix of every role/plane/port cell
    kernel: bool = False  # with config (root): probe each role's ruleset in a namespace
    fail_on: Severity = Severity.low  # exit 1 when a finding is at or above this severity

    def check(self) -> None:
        """InputError (exit 2) for a combination that cannot run."""
        chosen = sum((self.config is not None, self.live, self.diff is not None))
        if chosen == 0:
            raise InputError("nothing to audit: give --config DIR, --live or --diff OLD NEW")
        if chosen > 1:
            raise InputError("give only one of --config, --live and --diff")
        if self.kernel and self.config is None:
            raise InputError("--kernel checks the rulesets of --config DIR; give --config")
        if self.kernel and os.geteuid() != 0:
            raise InputError("--kernel needs root (it creates network namespaces); run it with sudo")


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditOutcome:
    """The audit's report, judged against the request's ``fail_on``."""

    report: AuditReport
    fail_on: Severity

    @property
    def exit_code(self) -> int:
        """1 when a finding is at or above ``fail_on``, else 0."""
        return 1 if self.report.fails(self.fail_on) else 0

    def payload(self) -> dict[str, Any]:
        """The JSON document's keys (before the envelope)."""
        report = self.report
        out: dict[str, Any] = {
            "source": report.source,
            "rdma_note": RDMA_STATEMENT,
            "fail_on": self.fail_on.value,
            "exit_code": self.exit_code,
            "findings": report.findings,
            "not_available": report.not_available,
            "passed": report.passed,
        }
        if report.proof is not None:
            out["reachability"] = _proof_json(report)
        if report.kernel is not None:
            out["kernel"] = [
                {"role": k.role, "seconds": round(k.seconds, 3), "probes": [_probe_json(q) for q in k.probes]}
                for k in report.kernel
            ]
        if report.changes is not None:
            out["changes"] = [
                {
                    "src": c.src,
                    "dst": c.dst,
                    "plane": c.plane,
                    "proto": c.proto,
                    "ports": c.ports,
                    "old": c.old,
                    "new": c.new,
                    "direction": c.direction,
                }
                for c in report.changes
            ]
        return out

    def to_json(self) -> str:
        """The versioned JSON document (``schema_version`` first)."""
        return document.dumps(self.payload())

    def to_sarif(self) -> str:
        from gpufabric.audit.sarif import to_sarif

        return json.dumps(to_sarif(self.report), indent=2) + "\n"

    def to_text(self) -> str:
        from gpufabric.audit.render import text_lines

        return "".join(line + "\n" for line in text_lines(self.report, self.fail_on, self.exit_code))


def run(request: AuditRequest) -> AuditOutcome:
    """Collect, check and (when asked) prove; every check's findings, never an exception per check."""
    from gpufabric.audit import collect
    from gpufabric.audit.runner import audit, audit_diff

    request.check()
    if request.diff is not None:
        report = audit_diff(*request.diff)
    else:
        facts = collect.from_directory(request.config) if request.config is not None else collect.live()
        report = audit(facts, reachability=request.reachability, kernel=request.kernel)
    return AuditOutcome(report=report, fail_on=request.fail_on)


def _proof_json(report: AuditReport) -> dict[str, Any]:
    p = report.proof
    assert p is not None  # the caller checked
    return {
        "hosts": p.hosts_evaluated,
        "rulesets": p.rulesets_evaluated,
        "evaluations": p.evaluations,
        "cells": p.cells_evaluated,
        "seconds": round(p.seconds, 4),
        "unsupported": p.unsupported,
        "missing_hosts": p.missing_hosts,
        "not_proven": len(p.not_proven()),
        "matrix": [
            {
                "src": c.src,
                "dst": c.dst,
                "plane": c.plane,
                "proto": c.proto,
                "ports": c.ports,
                "allowed": c.allowed,
                "intended": c.intended,
                "verdict": c.verdict,
                **({"reason": c.reason} if c.reason else {}),
            }
            for c in p.allowed()
        ],
    }


def _probe_json(q: Probe) -> dict[str, Any]:
    return {
        "src": q.src,
        "src_addr": q.src_addr,
        "dst": q.dst,
        "plane": q.plane,
        "proto": q.proto,
        "port": q.port,
        "static": q.static,
        "kernel": q.kernel,
        "agrees": q.agrees,
    }
