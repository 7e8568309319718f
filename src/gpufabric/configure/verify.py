"""Load every rendered artefact with the program that parses it, before the bundle lands.

``bash -n`` (or ``sh -n`` for ``#!/bin/sh`` scripts) for every script, ``nft -c -f`` for
every nftables ruleset (as non-root inside ``unshare -rn``: ``nft -c`` needs
CAP_NET_ADMIN, which a user namespace grants). A check whose tool is missing is
skipped and reported, never passed silently.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from gpufabric.errors import CommandTimeout, EnvironmentFailure, ToolNotFound
from gpufabric.exec.process import run

#: Per file; syntax checks take milliseconds, this only bounds a hung tool.
CHECK_TIMEOUT_S = 30


class BundleCheckFailed(EnvironmentFailure):
    """A rendered file does not load in its consumer (exit 1)."""


@dataclass(slots=True, kw_only=True)
class CheckReport:
    checked: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def shell_of(text: str) -> str | None:
    """The shell a script runs under, from its shebang; None for non-scripts."""
    first = text.split("\n", 1)[0]
    if first in ("#!/bin/bash", "#!/usr/bin/env bash"):
        return "bash"
    if first == "#!/bin/sh":
        return "sh"
    return None


def nft_command(path: Path) -> list[str] | None:
    """argv that checks ``path`` with nft, or None when nft (or unshare, for non-root) is absent."""
    nft = shutil.which("nft")
    if nft is None:
        return None
    if os.geteuid() == 0:
        return [nft, "-c", "-f", str(path)]
    unshare = shutil.which("unshare")
    return [unshare, "-rn", nft, "-c", "-f", str(path)] if unshare else None


def check_tree(root: Path, paths: list[str] | None = None) -> CheckReport:
    """Check every script and nftables ruleset under ``root`` (or among ``paths`` below it)."""
    report = CheckReport()
    if paths is None:
        candidates = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    else:
        candidates = [root / rel for rel in sorted(paths)]
    for path in candidates:
        rel = path.relative_to(root).as_posix()
        if path.name == "nftables.conf":
            argv = nft_command(path)
            _run(report, rel, argv, "nft (and unshare for non-root)")
            continue
        if path.stat().st_mode & 0o111 == 0 and not path.name.endswith(".sh"):
            continue
        with path.open("rb") as handle:
            head = handle.read(64).decode("ascii", "replace")
        shell = shell_of(head)
        if shell is not None:
            tool = shutil.which(shell)
            _run(report, rel, [tool, "-n", str(path)] if tool else None, shell)
    return report


def _run(report: CheckReport, rel: str, argv: list[str] | None, tool: str) -> None:
    if argv is None:
        report.skipped.append(f"{rel} ({tool} not installed)")
        return
    try:
        done = run(argv, timeout_s=CHECK_TIMEOUT_S)
    except CommandTimeout:
        report.failed.append(f"{rel}: {Path(argv[0]).name} timed out")
        return
    except ToolNotFound:
        report.skipped.append(f"{rel} ({tool} not installed)")
        return
    if done.returncode != 0:
        if argv[0].endswith("unshare") and "unshare" in done.stderr and "Operation not permitted" in done.stderr:
            report.skipped.append(f"{rel} (user namespaces are disabled: {done.stderr.strip()[:120]})")
            return
        tail = (done.stderr or done.stdout).strip().splitlines()[:3]
        report.failed.append(f"{rel}: {' / '.join(tail)[:300]}")
        return
    report.checked.append(rel)


def verify_tree(root: Path, paths: list[str] | None = None) -> CheckReport:
    """:func:`check_tree`, raising :class:`BundleCheckFailed` when a file does not load."""
    report = check_tree(root, paths)
    if report.failed:
        raise BundleCheckFailed(f"{len(report.failed)} rendered file(s) do not load: " + "; ".join(report.failed[:5]))
    return report
