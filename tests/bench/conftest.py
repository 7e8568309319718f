"""Fixtures for the bench tests: an in-memory result sink with the Store's write methods."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


class MemoryStore:
    """Implements the part of results.store.Store a suite writes to (add_result, ...)."""

    def __init__(self) -> None:
        self.results: list = []
        self.verdicts: list = []
        self.artifacts: dict[str, str] = {}
        self.status: str | None = None

    def add_result(self, run_id: int, result) -> int:
        self.results.append(result)
        return len(self.results)

    def add_results(self, run_id: int, results) -> list[int]:
        return [self.add_result(run_id, r) for r in results]

    def add_verdicts(self, run_id: int, verdicts) -> None:
        self.verdicts.extend(verdicts)

    def add_artifact(self, run_id: int, name: str, content: str) -> None:
        self.artifacts[name] = content

    def update_fingerprint(self, run_id: int, fingerprint) -> None:
        self.fingerprint = dict(fingerprint)

    def finish_run(self, run_id: int, status: str, info=None) -> None:
        self.status = status
        self.info = info


@pytest.fixture
def memory_store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def fake_tool_dir(tmp_path: Path):
    """Write executable fake tools into a directory; returns (make, env with it first on PATH)."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()

    def make(name: str, body: str) -> Path:
        path = bindir / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    return make, env
