"""Findings, severities and the check registry.

Audits return findings, never exceptions (STYLE.md): a check that lacks its source
reports "not available" with the reason, and everything is collected before reporting.
IDs and severities follow reference/security-config.md "Audit checks the tool should run".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


class Severity(enum.StrEnum):
    critical = "critical"
    high = "high"
    medium = "medium"
    low = "low"
    info = "info"

    @property
    def rank(self) -> int:
        return ["info", "low", "medium", "high", "critical"].index(self.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    check_id: str
    severity: Severity
    subject: str
    evidence: str
    remedy: str
    title: str = ""
    location: str = ""  # a file path inside the audited tree, when there is one


class NotAvailable(Exception):
    """Raised inside a check when its source is absent; becomes a "not available" result."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    check_id: str
    title: str
    severity: Severity
    remedy: str
    run: Callable[[Any], Iterator[Finding]]


REGISTRY: dict[str, Check] = {}


def check(check_id: str, title: str, severity: Severity, remedy: str):
    """Register a check: a generator over the collected facts that yields findings."""

    def wrap(func: Callable[..., Iterator[Finding]]) -> Callable[..., Iterator[Finding]]:
        REGISTRY[check_id] = Check(check_id=check_id, title=title, severity=severity, remedy=remedy, run=func)
        return func

    return wrap


def finding(
    check_id: str, subject: str, evidence: str, *, severity: Severity | None = None, location: str = ""
) -> Finding:
    spec = REGISTRY[check_id]
    return Finding(
        check_id=check_id,
        severity=severity or spec.severity,
        subject=subject,
        evidence=evidence,
        remedy=spec.remedy,
        title=spec.title,
        location=location,
    )
