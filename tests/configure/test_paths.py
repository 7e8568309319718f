"""Contained, atomic bundle writes (issue 9 item 3): paths stay inside --out, Ctrl-C
leaves the old bundle or nothing, secret directories 0700 whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from gpufabric.configure import paths
from gpufabric.configure.bundle import Bundle, write_bundle
from gpufabric.errors import InputError
from tests.audit.conftest import CORPUS, render

SPEC = CORPUS / "lab-ib.yaml"


@pytest.mark.parametrize(
    "rel", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", "", "a/.hidden/../b", "a/b\n", "a/$(id)", "a\\b", ".."]
)
def test_unsafe_relative_paths_are_refused(rel):
    with pytest.raises(InputError, match="refusing bundle path"):
        paths.check_relative(rel)


def test_bundle_add_refuses_an_escaping_path():
    bundle = Bundle(design=None, policy=None, policy_source="")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        bundle.add("hosts/../../evil/etc/nvme/config.json", "x", secret=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_secret_dirs_0700_and_files_0600_under_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        out = render(SPEC, tmp_path / "b")
    finally:
        os.umask(old)
    for path in out.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            holds_secret = any(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in path.iterdir() if f.is_file())
            assert mode == (0o700 if holds_secret else 0o755), path
        else:
            assert mode in (0o600, 0o644, 0o755), path
    assert stat.S_IMODE((out / "hosts/storage-1/etc/nvmet").stat().st_mode) == 0o700


def test_a_strict_umask_does_not_narrow_public_files(tmp_path):
    old = os.umask(0o077)
    try:
        out = render(SPEC, tmp_path / "b")
    finally:
        os.umask(old)
    assert stat.S_IMODE((out / "README.md").stat().st_mode) == 0o644
    assert stat.S_IMODE((out / "roles").stat().st_mode) == 0o755


def test_interrupt_during_write_keeps_the_old_bundle_and_leaves_no_temp(tmp_path, monkeypatch):
    out = render(SPEC, tmp_path / "b", seed="old")
    before = _tree(out)
    calls = {"n": 0}
    real = paths.write_file

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(paths, "write_file", interrupted)
    monkeypatch.setattr("gpufabric.configure.bundle.write_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        render(SPEC, out, seed="new")
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_failed_verification_keeps_the_old_bundle(tmp_path):
    out = render(SPEC, tmp_path / "b", seed="old")
    before = _tree(out)
    bundle = Bundle(design=None, policy=None, policy_source="")  # type: ignore[arg-type]
    bundle.add("README.md", "new\n")

    def refuse(root: Path, _paths: list[str]) -> None:
        assert (root / "README.md").read_text() == "new\n"
        raise RuntimeError("does not load")

    with pytest.raises(RuntimeError):
        write_bundle(bundle, out, verify=refuse)
    assert _tree(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_rewrite_replaces_the_whole_bundle(tmp_path):
    out = render(SPEC, tmp_path / "b")
    (out / "hosts/compute-1/etc/nvme/stale").write_text("old key\n")
    render(SPEC, out)
    assert not (out / "hosts/compute-1/etc/nvme/stale").exists()


def test_symlinked_out_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(InputError, match="symbolic link"):
        render(SPEC, tmp_path / "link")


def _spec_with(tmp_path: Path, **security) -> Path:
    doc = yaml.safe_load(SPEC.read_text())
    doc["security"] = security
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_dotdot_host_name_never_writes_outside_out(cli, tmp_path):
    spec = _spec_with(
        tmp_path,
        planes=[
            {"name": "mgmt", "kind": "management", "cidr": "10.10.0.0/16", "interface": "mgmt0"},
            {"name": "ctl", "kind": "control", "cidr": "10.20.0.0/16", "interface": "ctl0"},
            {"name": "stor", "kind": "storage", "cidr": "10.40.0.0/16", "interface": "stor0"},
        ],
        roles=[
            {
                "name": "compute",
                "kind": "compute",
                "hosts": ["../../../escape", "ok-1"],
                "planes": ["mgmt", "ctl", "stor"],
            },
            {"name": "storage", "kind": "storage", "hosts": ["s1"], "planes": ["mgmt", "stor"]},
        ],
        flows=[{"src": "compute", "dst": "storage", "plane": "stor", "proto": "tcp", "ports": [4420]}],
    )
    victim = tmp_path / "escape"
    code, _out, err = cli("config", spec, "--out", tmp_path / "deep/er/b", "--seed", "x")
    assert code == 2 and "Traceback" not in err, err
    assert not victim.exists() and not (tmp_path / "deep/er/b").exists()
    assert not (tmp_path / "deep").exists()  # refused while rendering, before any write


def test_a_killed_configs_temporary_tree_is_removed_by_the_next_run(tmp_path):
    import subprocess
    import sys

    # a writer that dies by SIGKILL in the middle: its temporary sibling stays behind
    code = (
        "import os, signal, sys; from pathlib import Path; from gpufabric.configure.paths import atomic_tree\n"
        "with atomic_tree(Path(sys.argv[1])) as tmp:\n"
        "    (tmp / 'half').write_text('x'); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "b")],
        check=False,
        timeout=60,
        env={"PYTHONPATH": str(Path(paths.__file__).parents[2])},
    )
    assert done.returncode == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and paths.TMP_MARK in left[0]
    # a live writer's tree is never touched
    alive = tmp_path / f".b{paths.TMP_MARK}{os.getpid()}-x"
    alive.mkdir()
    render(SPEC, tmp_path / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["b", alive.name])
