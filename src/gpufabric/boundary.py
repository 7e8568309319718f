"""Small helpers for input at the user boundary, free of heavy imports.

* :func:`read_capped`: reading a file the user names (a key, a sample file, a spec) with
  a size cap; the simulator's sample reader and the spec loader use it.
* :func:`loads_json` / :func:`json_too_deep`: JSON with its nesting bounded (a deeply
  nested document is an InputError, never a RecursionError traceback).
* :func:`set_default_ids` / :func:`default_ids`: where catalog ids come from when a spec
  or saved plan is checked without explicit ids. The spec sits below the catalog
  (docs/architecture.md) and cannot load it; the CLI, above both, registers the shipped
  catalog here, so every command checks ids without importing pydantic at start-up.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from gpufabric.errors import InputError

IdProvider = Callable[[], Mapping[str, Collection[str]]]
_default_ids: IdProvider | None = None


def set_default_ids(provider: IdProvider | None) -> None:
    """Register the catalog-id provider used when a caller gives no ids."""
    global _default_ids
    _default_ids = provider


def default_ids() -> Mapping[str, Collection[str]]:
    """The registered catalog ids per spec field; empty (no check) when none are registered."""
    return _default_ids() if _default_ids is not None else {}


def read_capped(path: str | Path, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of a regular file the user named.

    Opened with O_NONBLOCK and checked with fstat before the first read: a FIFO without a
    writer would block the read forever, a device such as /dev/zero never ends, a
    directory has no bytes; all three are an InputError naming the file, never a hang or
    an unbounded read. A file larger than ``limit`` is an InputError too.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror}") from None
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            raise InputError(
                f"{path}: {what} is not a regular file ({_KINDS.get(stat.S_IFMT(kind), 'special file')});"
                " give a file (copy it first)"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as handle:
            fd = -1  # the file object owns it now
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > limit:
        raise InputError(f"{path}: {what} file is larger than {limit:,} bytes")
    return raw


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}

#: Deepest nesting of a JSON document gpufabric reads (tool output, a bundle's nvmetcli or
#: manifest JSON, a plan, a report): real documents nest under 20 levels (nft -j about 15);
#: 128 keeps every recursive consumer far below Python's recursion limit.
MAX_JSON_DEPTH = 128
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: one C loop per string
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")  # UTF-8 continuation bytes are never brackets


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON text nests deeper than ``limit`` (or its brackets do not pair).

    Strings are cut out and the brackets kept (both at C speed); each round then removes
    the innermost pairs, so ``limit`` rounds empty any document at most that deep. A
    1 GiB ingest file costs seconds, not a RecursionError."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _JSON_STRING.sub("", text).encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKET)
    for _ in range(limit):
        if not brackets:
            return False
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(brackets):
            return False  # unpaired (cut off, malformed): the parser says where
        brackets = shorter
    return bool(brackets) and len(brackets.replace(b"[]", b"").replace(b"{}", b"")) < len(brackets)


def loads_json(text: str, *, source: str, what: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for a document the user gave, nesting bounded (InputError, exit 2).

    ValueError (json.JSONDecodeError) passes through for the caller's own message."""
    import json  # here, not at the top: only a command that reads JSON loads it (~1 ms, issue 32)

    if json_too_deep(text, limit):
        raise InputError(f"{source}: {what} nests deeper than {limit} levels; not a document gpufabric reads")
    try:
        return json.loads(text)
    except RecursionError:  # malformed and deep (never closed): the C decoder recursed first
        raise InputError(f"{source}: {what} nests deeper than {limit} levels; not a document gpufabric reads") from None
