"""Shared fixtures: run the CLI in-process and capture its output."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from gpufabric.cli.app import main

# CI must be reproducible: the same examples on every run (locally, hypothesis explores).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def cli(capsys):
    """Call ``gpufabric`` in-process: returns (exit_code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def needs_tool(tool: str):
    """Skip unless ``tool`` is on PATH."""
    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} not installed")


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)")
