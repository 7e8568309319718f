"""Small helpers for input at the user boundary, free of heavy imports.

* :func:`read_capped`: reading a file the user names (a key, a sample file, a spec) with
  a size cap; the simulator's sample reader and the spec loader use it.
* :func:`set_default_ids` / :func:`default_ids`: where catalog ids come from when a spec
  or saved plan is checked without explicit ids. The spec sits below the catalog
  (docs/architecture.md) and cannot load it; the CLI, above both, registers the shipped
  catalog here, so every command checks ids without importing pydantic at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path

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
