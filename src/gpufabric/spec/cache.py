"""Derived data kept in the user's cache, keyed by the content it is derived from.

Start-up work whose result depends only on files shipped with gpufabric (the validated
catalog, the spec models' field docstrings) is done once per content and read back after:
``$XDG_CACHE_HOME/gpufabric/<kind>-<key>.pickle`` (default ``~/.cache/gpufabric``), where
``key`` is a digest of everything that shapes the value, so an edit to any of it is a
miss. Unpickling runs what the file says, so only a file this user owns and nobody else
may write is read; a missing, foreign, corrupt or unreadable file, or an unwritable cache
directory, costs only the work again (docs/performance.md, issue 32).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

#: A file of another key older than this is removed when a new one is written: another
#: install (a second virtualenv, the previous version) may still be using it today.
STALE_S = 86400.0


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gpufabric`` (default ``~/.cache/gpufabric``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpufabric"


def cache_path(kind: str, key: str) -> Path:
    """Where the value of ``kind`` for ``key`` is kept."""
    return cache_dir() / f"{kind}-{key}.pickle"


def read(path: Path) -> Any | None:
    """The value pickled at ``path``, or None (missing, unreadable, foreign, writable by
    others, or not a pickle)."""
    try:
        with open(path, "rb") as handle:
            # Only our own file, writable by nobody else: unpickling runs what the file says.
            info = os.fstat(handle.fileno())
            if info.st_uid != os.getuid() or info.st_mode & 0o022:
                return None
            return pickle.load(handle)
    except Exception:  # missing, unreadable, truncated or stale: the caller does the work
        return None


def write(path: Path, value: Any) -> None:
    """Pickle ``value`` to ``path`` atomically (mode 0600, directory 0700), removing files of
    the same kind older than a day; a failure to write is ignored (the next start does the
    work again)."""
    import tempfile  # only on a miss
    import time

    kind = path.name.rsplit("-", 1)[0]
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        stale_s = time.time() - STALE_S
        for old in path.parent.glob(f"{kind}-*.pickle"):
            if old.stat().st_mtime < stale_s:
                old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{kind}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # read-only home, full disk
        pass
