"""Scratch directory safety: refuse devices and non-empty dirs, write only inside, clean up."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.bench.scratch import check_target, plan_path, prepare
from gpufabric.errors import InputError


def test_refuses_block_device():
    devices = [p for p in (Path("/dev/loop0"), Path("/dev/vda"), Path("/dev/sda")) if p.exists() and p.is_block_device()]
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
