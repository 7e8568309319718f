"""``gpufabric audit``: findings with IDs, evidence and remedy; proof of segmentation."""

from __future__ import annotations

import enum
import sys
from pathlib import Path

import typer

from gpufabric.audit.findings import Severity
from gpufabric.cli.options import format_option, refuse_unused


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
    from gpufabric.audit.outcome import AuditRequest, run

    request = AuditRequest(
        config=config, live=live, diff=diff, reachability=reachability, kernel=kernel, fail_on=fail_on
    )
    request.check()
    refuse_unused(diff is not None, {"reachability": "--reachability"}, "with --diff (it compares two bundles' cells)")
    outcome = run(request)
    render = {AuditFormat.sarif: outcome.to_sarif, AuditFormat.json: outcome.to_json, AuditFormat.text: outcome.to_text}
    sys.stdout.write(render[fmt]())
    sys.stdout.flush()
    return outcome.exit_code
