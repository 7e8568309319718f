"""config's own load checks: bash -n / sh -n for scripts, nft -c (in a user namespace when
not root), a broken file fails, a missing tool is reported as not checked."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpufabric.configure import verify
from tests.audit.conftest import CORPUS, render


def test_non_root_checks_run_nft_in_a_user_namespace(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    argv = verify.nft_command(verify.Path("/x/nftables.conf"))
    if shutil.which("nft") is None or shutil.which("unshare") is None:
        assert argv is None
    else:
        assert argv[0].endswith("unshare") and argv[1] == "-rn" and argv[-3:] == ["-c", "-f", "/x/nftables.conf"]


@pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("nft", "unshare", "setpriv")),
    reason="needs root to drop to nobody, nft, unshare and setpriv",
)
def test_nft_check_really_works_as_nobody_in_a_user_namespace(tmp_path):
    import tempfile

    root = render(CORPUS / "lab-ib.yaml", tmp_path / "b")
    shared = verify.Path(tempfile.mkdtemp(prefix="bd-nft-"))  # pytest's tmp tree is 0700 to nobody
    try:
        shared.chmod(0o755)
        path = shared / "nftables.conf"
        shutil.copy(root / "roles/compute/etc/nftables.conf", path)
        path.chmod(0o644)
        _as_nobody(path)
    finally:
        shutil.rmtree(shared)


def _as_nobody(path) -> None:
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    plain = subprocess.run(
        [*nobody, "nft", "-c", "-f", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    assert plain.returncode != 0 and "Operation not permitted" in plain.stderr  # why the namespace is needed
    inside = subprocess.run(
        [*nobody, "unshare", "-rn", "nft", "-c", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if inside.returncode != 0 and "unshare" in inside.stderr:
        pytest.skip(f"user namespaces are disabled here: {inside.stderr.strip()}")
    assert inside.returncode == 0, inside.stderr


def test_broken_files_fail_and_missing_tools_are_reported(tmp_path, monkeypatch):
    (tmp_path / "ok.sh").write_text("#!/bin/sh\necho ok\n")
    (tmp_path / "bad.sh").write_text("#!/bin/bash\nif then fi\n")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nftables.conf").write_text("table inet x { chain c { policy maybe; } }\n")
    report = verify.check_tree(tmp_path)
    assert "ok.sh" in report.checked and any(f.startswith("bad.sh:") for f in report.failed)
    if shutil.which("nft"):
        assert any(f.startswith("etc/nftables.conf:") for f in report.failed)
    with pytest.raises(verify.BundleCheckFailed, match="do not load"):
        verify.verify_tree(tmp_path)
    monkeypatch.setattr(verify.shutil, "which", lambda _tool: None)
    report = verify.check_tree(tmp_path)
    assert report.failed == [] and len(report.skipped) == 3 and all("not installed" in s for s in report.skipped)
