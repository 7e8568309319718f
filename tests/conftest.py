"""Shared fixtures: run the CLI in-process and capture its output."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import settings

from gpufabric.cli.app import main

# CI must be reproducible: the same examples on every run (locally, hypothesis explores).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The shipped catalog's validated copy (catalog.loader) goes to a cache of this run's own,
# not the user's ~/.cache: the tests never write outside their scratch space.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="gpufabric-test-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)

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


T = TypeVar("T")

# Hang guards only: a limit far above any expected duration, so a busy machine never trips
# it; they turn "the test would hang for minutes" into a failure, never measure speed.
HANG_GUARD_S = 60.0
MARK_VAR = "GPUFABRIC_TEST_MARK"


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/ from the current output instead of comparing",
    )


def wait_until(predicate: Callable[[], bool], *, what: str, limit_s: float = HANG_GUARD_S) -> None:
    """Poll ``predicate`` until true; fail naming ``what`` if the hang guard expires first."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"hang guard: {what} not true after {limit_s:g} s")
        time.sleep(0.05)


def finishes(fn: Callable[[], T], *, limit_s: float = HANG_GUARD_S) -> T:
    """Call ``fn`` in a worker thread and return (or raise) what it does; fail if it hangs.

    The thread outlives the call it makes, so children started with a parent-death signal
    (exec.process) are not killed early. Not usable for code that installs signal handlers.
    """
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        pytest.fail(f"hang guard: call still running after {limit_s:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def group_gone(pgid: int) -> bool:
    """True when no process (zombies included) is left in the process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def process_mark(monkeypatch) -> str:
    """A unique marker in this process's environment, inherited by every child it starts."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK_VAR, mark)
    return mark


def marked_pids(mark: str) -> list[int]:
    """Live (non-zombie) processes carrying ``mark`` in their environment, other than this one.

    Only processes this test started (directly or not) can carry the marker, so the result
    never depends on what else runs on the machine; other users' environ is unreadable anyway.
    """
    needle = f"{MARK_VAR}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:  # gone meanwhile, or not ours
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)")
