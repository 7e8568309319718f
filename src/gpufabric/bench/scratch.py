"""The scratch directory benchmarks write into, and the rules that keep user data safe.

* A block device is always refused: fio would overwrite it, and gpufabric only ever
  writes files. (``--force`` does not change this; point ``--target-dir`` at a
  directory on the mounted filesystem instead.)
* A non-empty directory is refused without ``--force``: a typo must not mix benchmark
  files into someone's data.
* Even with ``--force``, everything is written into a fresh subdirectory
  ``gpufabric-bench-<pid>-<n>`` of the target, and only that subdirectory is removed
  afterwards; a target that did not exist is created and removed again.
* Every scratch directory holds a marker ``.gpufabric-owner`` with the owning process's
  PID and start time. A run killed with ``kill -9`` cannot clean up, so the next run
  removes every marked directory whose owner is gone (a reused PID has another start
  time), and such leftovers never make a target count as "not empty". Directories
  without the marker are never touched.
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


#: The file naming a scratch directory's owner: "<pid> <start time in clock ticks>".
MARKER = ".gpufabric-owner"
_PREFIX = "gpufabric-bench-"


def _start_time(pid: int) -> str:
    """The process's start time (field 22 of /proc/PID/stat), '' where /proc is not there."""
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses; fields follow the last ')'.
    return stat_text.rsplit(")", 1)[1].split()[19]


def _owner_token(pid: int) -> str:
    return f"{pid} {_start_time(pid)}".strip()


def _owner_alive(token: str) -> bool:
    parts = token.split()
    if not parts or not parts[0].isdigit():
        return False
    pid = int(parts[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    return len(parts) < 2 or _start_time(pid) in ("", parts[1])


def stale_dirs(base: Path) -> list[Path]:
    """Marked scratch directories in ``base`` whose owning process is gone."""
    try:
        children = list(base.iterdir())
    except OSError:
        return []
    stale = []
    for child in children:
        if not child.name.startswith(_PREFIX) or child.is_symlink() or not child.is_dir():
            continue
        try:
            token = (child / MARKER).read_text(encoding="ascii")[:64]
        except (OSError, UnicodeDecodeError):
            continue
        if not _owner_alive(token):
            stale.append(child)
    return stale


def sweep(base: Path) -> list[Path]:
    """Remove the scratch directories left in ``base`` by runs that were killed; returns them."""
    removed = stale_dirs(base)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def _mark(path: Path) -> None:
    (path / MARKER).write_text(_owner_token(os.getpid()), encoding="ascii")


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
    leftovers = set(stale_dirs(target))
    if not force and any(p not in leftovers for p in target.iterdir()):
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
        sweep(Path(tempfile.gettempdir()))
        path = Path(tempfile.mkdtemp(prefix=_PREFIX))
        _mark(path)
        return Scratch(path=path, remove=path)
    target = target.expanduser()
    if target.is_dir() and not target.is_symlink():
        sweep(target)
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
    _mark(path)
    return Scratch(path=path, remove=target if created else path)
