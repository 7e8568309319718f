"""One Jinja filter per output context: every value that lands in a generated file goes
through exactly one of these, which quotes it for that context or refuses it.

Defence in depth: the spec validates identifiers at the boundary (spec/security.py),
but a renderer must stay safe even when a value slips past (a model built in code, a
validator loosened later). Quoting is preferred where the format has quoting (shell);
formats without an escape mechanism (nftables strings, OpenSM, sysctl keys, INI
values, nvme-cli's discovery.conf) get an allow-list and a refusal naming the value.
``tests/configure/test_quoting.py`` proves every ``{{ }}`` in every template ends in
one of :data:`CONTEXT_FILTERS`.
"""

from __future__ import annotations

import ipaddress
import math
import re
import shlex
from collections.abc import Iterable
from typing import Any

from gpufabric.errors import InputError

#: Linux interface names: 1-15 bytes (IFNAMSIZ 16 with the NUL), not "." or "..", no
#: '/', ':' or whitespace (kernel dev_valid_name). We also refuse quotes and shell or nft
#: metacharacters so one checked name is safe in every context it reaches.
_IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")
#: nftables identifiers (set, chain names): scanner rule {letter}({letter}|{digit}|[_/.-])*.
_NFT_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
#: OpenSM partitions.conf words (names, members): no separators of its grammar (, : ; = #) or spaces.
_OPENSM_WORD = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: Words of config files parsed by whitespace/'=' splitters (tuned INI, discovery.conf, slurm options).
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+-]{1,255}")
#: Printable ASCII except quotes and backslash: what free text may keep in a comment.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_COMMENT_UNSAFE = re.compile(r"[^\x20-\x7e]|[\"\\`]")


def refuse(value: object, context: str, pattern: str, what: str = "value") -> InputError:
    return InputError(f"{what} {str(value)[:80]!r} cannot be written into {context}; allowed: {pattern}")


def sh(value: object) -> str:
    """A single shell word (POSIX sh/bash): single-quoted unless plainly safe; control characters refused."""
    text = _text(value, "a shell script")
    return shlex.quote(text)


def sh_words(values: Iterable[object]) -> str:
    """Several shell words separated by spaces, each quoted by :func:`sh`."""
    return " ".join(sh(v) for v in values)


def env_value(value: object) -> str:
    """The right-hand side of ``KEY=value`` in an env file sourced by a shell (``set -a; . file``)."""
    return sh(value)


def comment(value: object) -> str:
    """Free text on a ``#`` comment line: one line, printable ASCII, no quotes or backslashes."""
    return _COMMENT_UNSAFE.sub("?", str(value))[:200]


def nft_comment(value: object) -> str:
    """Text inside an nftables ``comment "..."`` (no escape exists; NFT_USERDATA_MAXLEN 128)."""
    return _COMMENT_UNSAFE.sub("?", str(value)).replace("'", "?")[:120]


def ifname(value: object, what: str = "interface name") -> str:
    """A Linux interface name, valid in shell, nftables strings, sysctl files and nvme-cli lines."""
    text = str(value)
    if not _IFNAME.fullmatch(text) or text in (".", ".."):
        raise refuse(value, "a generated file as an interface name", _IFNAME.pattern + " (IFNAMSIZ 15)", what)
    return text


def nft_ident(value: object, what: str = "nftables identifier") -> str:
    text = str(value)
    if not _NFT_IDENT.fullmatch(text):
        raise refuse(value, "an nftables ruleset", _NFT_IDENT.pattern, what)
    return text


def opensm_word(value: object, what: str = "OpenSM name") -> str:
    text = str(value)
    if not _OPENSM_WORD.fullmatch(text):
        raise refuse(value, "an OpenSM configuration file", _OPENSM_WORD.pattern, what)
    return text


def plain(value: object, what: str = "value") -> str:
    """A word for whitespace-split config formats (tuned INI, sysctl values, discovery.conf)."""
    text = str(value)
    if not _PLAIN.fullmatch(text):
        raise refuse(value, "a whitespace-separated configuration file", _PLAIN.pattern, what)
    return text


def sysctl_ifname(value: object) -> str:
    """An interface name as a sysctl key component: '.' becomes '/' (sysctl(8) key syntax)."""
    return ifname(value).replace(".", "/")


def ipv4(value: object) -> str:
    """A dotted-quad IPv4 address (nft would resolve a name through DNS)."""
    try:
        return str(ipaddress.IPv4Address(str(value)))
    except ValueError:
        raise refuse(value, "an address field", "a dotted-quad IPv4 address") from None


def num(value: object) -> str:
    """A finite number (bool refused: it is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refuse(value, "a numeric field", "an integer or finite number")
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse(value, "a numeric field", "a finite number")
    return str(value)


def hex4(value: object) -> str:
    """A 16-bit value as 0x%04x (PKeys)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise refuse(value, "a 16-bit hex field", "an integer 0-0xffff")
    return f"0x{value:04x}"


def md(value: object) -> str:
    """Text in a Markdown table cell or paragraph: one line, table pipes and inline markup escaped."""
    text = comment(value)
    return re.sub(r"([|*_<>\[\]])", r"\\\1", text)


def _text(value: object, context: str) -> str:
    # shell quoting would keep a newline safe, but every generated file is line-based for
    # some reader (systemd EnvironmentFile, audit, diff): one value, one line
    text = str(value)
    if _CONTROL.search(text):
        raise refuse(value, context, "text without control characters (newline, CR, NUL, ...)")
    return text


#: Every context filter; a template output must end in one of these (or be a literal).
CONTEXT_FILTERS: dict[str, Any] = {
    "sh": sh,
    "sh_words": sh_words,
    "env_value": env_value,
    "comment": comment,
    "nft_comment": nft_comment,
    "ifname": ifname,
    "nft_ident": nft_ident,
    "opensm_word": opensm_word,
    "plain": plain,
    "sysctl_ifname": sysctl_ifname,
    "ipv4": ipv4,
    "num": num,
    "hex4": hex4,
    "md": md,
}


def install(env: Any) -> None:
    env.filters.update(CONTEXT_FILTERS)
