"""The scratch directory benchmarks write into, and the rules that keep user data safe.

* A block device is always refused: fio would overwrite it, and gpufabric only ever
  writes files. (``--force`` does not change this; point ``--target-dir`` at a
  directory on the mounted filesystem instead.)
* A non-empty directory is refused without ``--force``: a typo must not mix benchmark
  files into someone's data.
* Even with ``--force``, everything is written into a fresh subdirectory
  ``gpufabric-bench-<pid>-<n>`` of the target, and only that subdirectory is removed
  afterwards; a target that did not exist is created and removed again.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpufabric.errors import InputError

_counter = itertools.count()


@dataclass(frozen=True, slots=True, kw_only=True)
class Scratch:
    """Where a suite writes (``path``), and what to remove afterwards (``remove``)."""

    path: Path
    remove: Path

    def cleanup(self) -> None:
        shutil.rmtree(self.remove, ignore_errors=True)


def check_target(target: Path, *, force: bool) -> None:
    """Raise InputError when ``target`` must not be written to."""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISBLK(mode) or stat.S_ISCHR(mode):
        raise InputError(
            f"--target-dir {target} is a device; gpufabric writes files only, never raw devices:"
            " give a directory on the mounted filesystem to test"
        )
    if not stat.S_ISDIR(mode):
        raise InputError(f"--target-dir {target} is not a directory")
    if not force and any(target.iterdir()):
        raise InputError(
            f"--target-dir {target} is not empty; pass --force to use it anyway"
            " (files go into a new subdirectory that is removed afterwards)"
        )


def plan_path(target: Path | None) -> Path:
    """The directory a suite would use, without creating anything (for --dry-run)."""
    base = Path(tempfile.gettempdir()) if target is None else target
    return base / f"gpufabric-bench-{os.getpid()}-0"


def prepare(target: Path | None, *, force: bool = False) -> Scratch:
    """Check ``target`` and create the scratch directory inside it (a temp dir when None)."""
    if target is None:
        path = Path(tempfile.mkdtemp(prefix="gpufabric-bench-"))
        return Scratch(path=path, remove=path)
    target = target.expanduser()
    check_target(target, force=force)
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    while True:
        path = target / f"gpufabric-bench-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
            break
        except FileExistsError:
            continue
    return Scratch(path=path, remove=target if created else path)
