"""Contained, atomic bundle writes.

Every artefact path is relative, made of plain components (no ``..``, no absolute part,
no empty or hidden-traversal component) and is created inside a fresh temporary sibling
of ``--out`` without following symlinks; the finished tree then replaces ``--out`` in
one rename (``renameat2(RENAME_EXCHANGE)`` where the kernel has it), so Ctrl-C or a crash
leaves either the old bundle or the new one, never half of one. Directories that hold
a secret are 0700 and secrets 0600 whatever the umask.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufabric.errors import InputError

#: One path component: what host, role and file names may become on disk.
_COMPONENT = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,254}")
#: renameat2 flag (linux/fs.h): swap two paths atomically.
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
TMP_MARK = ".gpufabric-tmp-"


def check_relative(rel: str) -> str:
    """``rel`` if it is a safe relative path of plain components; InputError otherwise."""
    parts = rel.split("/")
    if not rel or len(rel) > 4096 or any(not _COMPONENT.fullmatch(p) for p in parts):
        raise InputError(
            f"refusing bundle path {rel[:120]!r}: every component must match {_COMPONENT.pattern} "
            "(no '..', no absolute or empty parts); check host and role names"
        )
    return rel


def make_parents(root: Path, rel: str, made: set[str]) -> str:
    """Create the directories of ``rel`` below ``root`` (0755 whatever the umask); return the last.

    ``root`` is a fresh directory only this process writes (:func:`atomic_tree`), so every
    directory below it is one we made (``made`` remembers them); a path component that
    exists without being ours is refused. Plain strings, not pathlib: this runs once per
    file of a 2,048-host bundle."""
    check_relative(rel)
    current = os.fspath(root)
    for part in rel.split("/")[:-1]:
        current = current + "/" + part
        if current in made:
            continue
        try:
            os.mkdir(current, 0o755)
        except FileExistsError:
            raise InputError(f"refusing bundle path {rel!r}: {part} exists and is not ours") from None
        os.chmod(current, 0o755)  # the umask may have narrowed it
        made.add(current)
    return current


def write_file(root: Path, rel: str, content: str, *, mode: int, secret: bool, made: set[str] | None = None) -> Path:
    """Create ``root/rel`` (never existing before, never through a symlink), mode exact;
    a secret's directory becomes 0700."""
    parent = make_parents(root, rel, set() if made is None else made)
    if secret:
        os.chmod(parent, 0o700)
    path = parent + "/" + rel.rsplit("/", 1)[-1]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(content)
    return Path(path)


@contextmanager
def atomic_tree(out: Path) -> Iterator[Path]:
    """Yield a fresh empty directory next to ``out``; on success it replaces ``out``."""
    out = Path(os.path.abspath(out))
    if out.is_symlink():
        raise InputError(f"--out {out} is a symbolic link; give the real directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}{TMP_MARK}{os.getpid()}-", dir=out.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if out.exists():
            if not _exchange(tmp, out):
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}{TMP_MARK}{os.getpid()}-old-", dir=out.parent))
                os.rename(out, old / "b")
                os.rename(tmp, out)
                tmp = old
        else:
            os.rename(tmp, out)
            return
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)  # the old bundle, swapped out


def remove_orphans(out: Path) -> list[Path]:
    """Remove temporary siblings of ``out`` left by a killed ``config`` (kill -9 skips the
    cleanup): their names carry the writer's PID, and only dead writers' trees go."""
    removed = []
    for path in out.parent.glob(f".{glob_escape(out.name)}{TMP_MARK}*"):
        pid_text = path.name[len(out.name) + 1 + len(TMP_MARK) :].split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)) or path.is_symlink() or not path.is_dir():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux renameat2); False where unsupported."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: filesystem or kernel without it
        return False
    raise OSError(err, os.strerror(err), str(b))
