"""Reading files the user names, with a size cap (a key, a sample file, a spec).

Kept free of heavy imports: the simulator's sample reader and the spec loader both use it.
"""

from __future__ import annotations

from pathlib import Path

from gpufabric.errors import InputError


def read_capped(path: str | Path, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of a file the user named.

    A file larger than ``limit`` (or a device such as /dev/zero) is an InputError, never
    an unbounded read into memory.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror}") from None
    if len(raw) > limit:
        raise InputError(f"{path}: {what} file is larger than {limit:,} bytes")
    return raw
