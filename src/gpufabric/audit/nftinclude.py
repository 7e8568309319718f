"""Resolve ``include`` statements of an nftables ruleset inside the audited files.

nft resolves ``include "/etc/nftables.d/*.nft"`` against the file system of the machine
that runs it: loading a bundle's ruleset on the auditing machine would read that
machine's /etc, so the host's included rules would never reach the proof (issue 24).
Here every include is resolved in the audited view instead (a bundle role's
``roles/<role>/etc/...`` and ``hosts/<host>/etc/...``, or a copy of /etc) and inlined,
with nft's own rules (nftables ``src/scanner.l``, ``scanner_include_file`` and
``include_glob``, v1.0.6): an absolute name is used as is, a bare relative name is
searched in the default include directory ``/etc`` (``nft -h``: "Default is: /etc"),
a wildcard (``*``, ``?``, ``[``) expands like glob(3) in sorted order without dotfiles,
and includes nest at most 16 deep (MAX_INCLUDE_DEPTH). Whatever the audit cannot see is
refused (:class:`IncludeRefused`, the FW-08 finding): a name that is not in the audited
files, ``./`` and ``../`` names (relative to nft's working directory), and a wildcard
that matches nothing (nft would load nothing, but the host may hold files there).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from gpufabric.errors import InputError

#: nft's MAX_INCLUDE_DEPTH (src/scanner.l): deeper nesting is an error there too.
MAX_INCLUDE_DEPTH = 16
#: The include directory nft searches for a bare relative name (``nft -h`` on Debian 12).
DEFAULT_INCLUDE_DIR = "/etc"
#: The inlined text is bounded like one audited file times a few (a runaway glob stays small).
MAX_FLAT_BYTES = 64 * 1024 * 1024
#: nft's quoted strings have no escapes (``quotedstring \"[^"]*\"``); comments run to the end of the line.
_TOKEN = re.compile(r'"[^"\n]*"|#[^\n]*|(?<![\w$@-])include(?![\w-])\s*("[^"\n]*")?')
_WILDCARD = re.compile(r"[*?\[]")


class IncludeRefused(InputError):
    """An include the audit cannot resolve inside the audited files (FW-08)."""


def has_include(text: str) -> bool:
    return any(m.group(0).startswith("include") for m in _TOKEN.finditer(text))


def flatten(
    entry: str, files: Mapping[str, Path], read: Callable[[Path], str], *, where: str = "the audited files"
) -> str:
    """The ruleset ``entry`` (a host path in ``files``) with every include inlined."""
    total = [0]
    return _flatten(entry, files, read, where, 0, total)


def _flatten(
    entry: str, files: Mapping[str, Path], read: Callable[[Path], str], where: str, depth: int, total: list[int]
) -> str:
    text = read(files[entry])
    total[0] += len(text)
    if total[0] > MAX_FLAT_BYTES:
        raise IncludeRefused(f"{entry}: the included files exceed {MAX_FLAT_BYTES} bytes")
    out: list[str] = []
    last = 0
    for m in _TOKEN.finditer(text):
        if not m.group(0).startswith("include"):
            continue
        line = text.count("\n", 0, m.start()) + 1
        name = (m.group(1) or "")[1:-1]
        if not name:
            raise IncludeRefused(f"{entry}:{line}: include without a quoted file name")
        if depth + 1 > MAX_INCLUDE_DEPTH:
            raise IncludeRefused(f"{entry}:{line}: includes nest deeper than {MAX_INCLUDE_DEPTH} (nft's limit)")
        out.append(text[last : m.start()])
        for path in _resolve(entry, line, name, files, where):
            out.append(f"\n# gpufabric: included {path}\n")
            out.append(_flatten(path, files, read, where, depth + 1, total))
            out.append("\n")
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def _resolve(entry: str, line: int, name: str, files: Mapping[str, Path], where: str) -> list[str]:
    if name.startswith(("./", "../")):
        raise IncludeRefused(
            f'{entry}:{line}: include "{name}" is relative to the directory nft runs in; use an absolute path'
        )
    path = name if name.startswith("/") else f"{DEFAULT_INCLUDE_DIR}/{name}"
    if not _WILDCARD.search(path):
        if path not in files:
            raise IncludeRefused(
                f'{entry}:{line}: include "{name}" names {path}, which is not in {where}; '
                "add the file (or remove the include) so the proof sees what the host loads"
            )
        return [path]
    found = sorted(p for p in files if _glob_match(path, p))
    if not found:
        raise IncludeRefused(
            f'{entry}:{line}: include "{name}" matches no file in {where}; the host may hold files there '
            "that the proof cannot see: add them, or include them by name"
        )
    return found


def _glob_match(pattern: str, path: str) -> bool:
    """glob(3) without GLOB_PERIOD: per path component, and a leading dot only by a literal dot."""
    want, have = pattern.split("/"), path.split("/")
    if len(want) != len(have):
        return False
    for w, h in zip(want, have, strict=True):
        if h.startswith(".") and not w.startswith("."):
            return False
        if not fnmatch.fnmatchcase(h, w):
            return False
    return True
