"""``gpufabric audit``: findings with IDs, evidence and remedy; proof of segmentation."""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpufabric.audit.findings import Severity
from gpufabric.cli.options import format_option, refuse_unused
from gpufabric.errors import InputError

if TYPE_CHECKING:
    from gpufabric.audit.runner import AuditReport


class AuditFormat(enum.StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)


def audit(
    config: Path | None = typer.Option(
        None, "--config", help="An artefact bundle (gpufabric config --out) or a copy of /etc."
    ),
    live: bool = typer.Option(
        False, "--live", help="Audit this host: nft, ss, ip, files, environment, sysfs/configfs."
    ),
    reachability: bool = typer.Option(
        False, "--reachability", help="Prove the allow matrix of every role/plane/port cell against the intent."
    ),
    diff: tuple[Path, Path] | None = typer.Option(None, "--diff", help="OLD NEW: cells a change opens or closes."),
    kernel: bool = typer.Option(
        False,
        "--kernel",
        help="With --config (root): load each role's ruleset into a namespace and probe every cell with real packets; static and kernel verdicts side by side.",
    ),
    fail_on: Severity = typer.Option(
        Severity.low, "--fail-on", help="Exit 1 when a finding is at or above this severity."
    ),
    fmt: AuditFormat = format_option(AuditFormat.text),
) -> int:
    """Audit NVMe-oF, InfiniBand, RoCE, NCCL, PyTorch, host and firewall security; exit 1 on findings."""
    from gpufabric.audit import collect
    from gpufabric.audit.runner import audit as run_audit
    from gpufabric.audit.runner import audit_diff

    chosen = sum((config is not None, live, diff is not None))
    if chosen == 0:
        raise InputError("nothing to audit: give --config DIR, --live or --diff OLD NEW")
    if chosen > 1:
        raise InputError("give only one of --config, --live and --diff")
    refuse_unused(diff is not None, {"reachability": "--reachability"}, "with --diff (it compares two bundles' cells)")
    if kernel and config is None:
        raise InputError("--kernel checks the rulesets of --config DIR; give --config")
    if kernel and os.geteuid() != 0:
        raise InputError("--kernel needs root (it creates network namespaces); run it with sudo")
    if diff is not None:
        report = audit_diff(*diff)
    else:
        facts = collect.from_directory(config) if config is not None else collect.live()
        report = run_audit(facts, reachability=reachability, kernel=kernel)
    code = 1 if report.fails(fail_on) else 0
    _emit(report, fmt, fail_on, code)
    return code


def _emit(report: AuditReport, fmt: AuditFormat, threshold: Severity, code: int) -> None:
    from gpufabric.audit.runner import RDMA_STATEMENT
    from gpufabric.cli.output import print_json

    if fmt is AuditFormat.sarif:
        import json
        import sys

        from gpufabric.audit.sarif import to_sarif

        sys.stdout.write(json.dumps(to_sarif(report), indent=2) + "\n")
        return
    if fmt is AuditFormat.json:
        payload: dict[str, Any] = {
            "source": report.source,
            "rdma_note": RDMA_STATEMENT,
            "fail_on": threshold.value,
            "exit_code": code,
            "findings": report.findings,
            "not_available": report.not_available,
            "passed": report.passed,
        }
        if report.proof is not None:
            p = report.proof
            payload["reachability"] = {
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
        if report.kernel is not None:
            payload["kernel"] = [
                {
                    "role": k.role,
                    "seconds": round(k.seconds, 3),
                    "probes": [
                        {
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
                        for q in k.probes
                    ],
                }
                for k in report.kernel
            ]
        if report.changes is not None:
            payload["changes"] = [
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
        print_json(payload)
        return
    echo = typer.echo
    echo(f"gpufabric audit: {report.source}")
    echo(f"note: {RDMA_STATEMENT}")
    if report.proof is not None:
        p = report.proof
        echo("")
        echo(
            f"allow matrix ({p.cells_evaluated} cells over {p.hosts_evaluated} hosts, {p.rulesets_evaluated} distinct"
            f" rulesets, every port 1-65535; {p.seconds:.2f} s):"
        )
        echo(
            f"  {'plane':<8} {'source':<12} {'destination':<12} {'proto/ports':<20} {'firewall':<8} {'intent':<7} verdict"
        )
        for c in p.allowed():
            echo(
                f"  {c.plane:<8} {c.src:<12} {c.dst:<12} {c.proto + '/' + c.ports:<20} {c.allowed:<8}"
                f" {'yes' if c.intended else 'no':<7} {c.verdict}" + (f": {c.reason}" if c.reason else "")
            )
        echo("  every other cell: denied, as intended" if not p.violations() else "  every other cell: denied")
        if p.missing_hosts:
            echo(
                f"  not proven: {len(p.missing_hosts)} hosts of the policy without a ruleset"
                f" ({', '.join(p.missing_hosts[:5])}{' ...' if len(p.missing_hosts) > 5 else ''})"
            )
        if p.not_proven():
            echo(
                f"  NOT PROVEN: {len(p.not_proven())} cells are undecided (listed above with their rule); "
                "they count as neither isolated nor reachable"
            )
    if report.kernel is not None:
        echo("")
        echo("kernel cross-check (real packets into each role's ruleset in a namespace):")
        echo(
            f"  {'plane':<8} {'source':<12} {'address':<15} {'destination':<12} {'proto/port':<12} {'static':<8} {'kernel':<7} result"
        )
        for k in report.kernel:
            for q in k.probes:
                if q.static == q.kernel == "drop":
                    continue  # closed in both: summarised below
                result = "agree" if q.static == q.kernel else "n/a (static unknown)" if q.agrees else "DISAGREE"
                echo(
                    f"  {q.plane:<8} {q.src:<12} {q.src_addr:<15} {q.dst:<12} {q.proto + '/' + str(q.port):<12}"
                    f" {q.static:<8} {q.kernel:<7} {result}"
                )
            closed = sum(q.static == q.kernel == "drop" for q in k.probes)
            echo(
                f"  role {k.role}: {len(k.probes)} probes, {closed} dropped by both, "
                f"{len(k.disagreements())} disagreements ({k.seconds:.1f} s)"
            )
    if report.changes is not None:
        echo("")
        echo(f"changes ({len(report.changes)}):" if report.changes else "changes: none (no cell opens or closes)")
        for change in report.changes:
            echo(
                f"  {change.direction:<6} {change.plane:<8} {change.src} -> {change.dst} {change.proto}/{change.ports}:"
                f" {change.old} -> {change.new}"
            )
    echo("")
    echo(f"findings ({len(report.findings)}):" if report.findings else "findings: none")
    order = sorted(report.findings, key=lambda f: (-f.severity.rank, f.check_id, f.subject))
    for f in order:
        echo(f"  {f.severity.value.upper():<8} {f.check_id:<8} {f.subject}: {f.title}")
        echo(f"           evidence: {f.evidence}")
        echo(f"           remedy: {f.remedy}")
    if report.not_available:
        echo(f"not available ({len(report.not_available)}):")
        for check_id, reason in sorted(report.not_available.items()):
            echo(f"  {check_id:<8} {reason}")
    if report.passed:
        echo(f"passed ({len(report.passed)}): {', '.join(report.passed)}")
    undecided = [c for c in report.proof.not_proven() if not c.intended] if report.proof is not None else []
    verdict = "FAIL, not proven" if undecided else "FAIL" if code else "PASS"
    echo(f"result: {verdict} (--fail-on {threshold.value})")
