"""Scratch directory safety: refuse devices and non-empty dirs, write only inside, clean up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpufabric.bench import scratch
from gpufabric.bench.scratch import check_target, plan_path, prepare
from gpufabric.errors import InputError


def test_refuses_block_device():
    devices = [
        p for p in (Path("/dev/loop0"), Path("/dev/vda"), Path("/dev/sda")) if p.exists() and p.is_block_device()
    ]
    if not devices:
        pytest.skip("no block device node to point at")
    with pytest.raises(InputError, match="is a device; gpufabric writes files only"):
        check_target(devices[0], force=False)
    with pytest.raises(InputError, match="is a device"):
        check_target(devices[0], force=True)


def test_refuses_char_device_and_regular_file(tmp_path):
    with pytest.raises(InputError, match="is a device"):
        check_target(Path("/dev/null"), force=True)
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        check_target(f, force=True)


def test_refuses_non_empty_dir_without_force(tmp_path):
    (tmp_path / "precious.txt").write_text("data")
    with pytest.raises(InputError, match="is not empty; pass --force"):
        prepare(tmp_path, force=False)


def test_force_uses_a_subdirectory_and_removes_only_it(tmp_path):
    (tmp_path / "precious.txt").write_text("data")
    scratch = prepare(tmp_path, force=True)
    assert scratch.path.parent == tmp_path
    (scratch.path / "junk").write_text("x")
    scratch.cleanup()
    assert [p.name for p in tmp_path.iterdir()] == ["precious.txt"]
    assert (tmp_path / "precious.txt").read_text() == "data"


def test_created_target_is_removed_again(tmp_path):
    target = tmp_path / "new" / "dir"
    scratch = prepare(target)
    assert scratch.path.is_dir() and scratch.path.parent == target
    scratch.cleanup()
    assert not target.exists()


def test_empty_existing_target_stays(tmp_path):
    scratch = prepare(tmp_path)
    scratch.cleanup()
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []


def test_default_is_a_temp_dir():
    scratch = prepare(None)
    try:
        assert scratch.path.is_dir() and scratch.path.name.startswith("gpufabric-bench-")
    finally:
        scratch.cleanup()
    assert not scratch.path.exists()


def test_plan_path_creates_nothing(tmp_path):
    path = plan_path(tmp_path / "x")
    assert not path.exists() and not (tmp_path / "x").exists()


KILLED_RUN = """
import sys, time
import os
from pathlib import Path
from gpufabric.bench import scratch
s = scratch.prepare(Path(sys.argv[1]) if sys.argv[1] != "-" else None)
(s.path / "shard.0").write_bytes(b"x" * 4096)
print(s.path, flush=True)
time.sleep(60)
"""


def _killed_run(target: str) -> Path:
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, target],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    path = Path(proc.stdout.readline().strip())
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return path


def test_kill_9_leftover_is_removed_by_the_next_run(tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    leaked = _killed_run(str(target))
    assert leaked.parent == target and (leaked / "shard.0").exists() and (leaked / scratch.MARKER).exists()
    # The leftover does not make the target "not empty", and the next run removes it.
    scratch.check_target(target, force=False)
    fresh = scratch.prepare(target)
    try:
        assert not leaked.exists() and fresh.path.is_dir()
    finally:
        fresh.cleanup()


def test_default_temp_scratch_leftover_is_removed(tmp_path):
    leaked = _killed_run("-")
    assert leaked.is_dir()
    fresh = scratch.prepare(None)
    try:
        assert not leaked.exists()
    finally:
        fresh.cleanup()


def test_live_or_unmarked_directories_are_kept(tmp_path):
    live = scratch.prepare(tmp_path)  # owned by this (live) process
    unmarked = tmp_path / "gpufabric-bench-1-0"
    unmarked.mkdir()  # no marker: not ours to judge
    other = scratch.prepare(tmp_path, force=True)
    try:
        assert live.path.is_dir() and unmarked.is_dir()
    finally:
        other.cleanup()
        live.cleanup()


def test_reused_pid_with_another_start_time_is_stale(tmp_path):
    path = tmp_path / "gpufabric-bench-x"
    path.mkdir()
    (path / scratch.MARKER).write_text(f"{os.getpid()} 1")  # our PID, but not our start time
    assert scratch.stale_dirs(tmp_path) == [path]
