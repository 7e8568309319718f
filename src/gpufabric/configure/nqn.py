"""NVMe Qualified Names: generation and validation.

Rules (reference/security-config.md 2.8): at most 223 bytes (libnvme NVMF_NQN_SIZE);
``nqn.`` then ``yyyy-mm.`` with month 01-12 and a non-empty suffix; printable ASCII
0x21-0x7e only (nvme-cli ``nqn_valid``); UUID NQNs lowercase because SPDK compares
NQNs byte for byte. We generate only the UUID form, derived with uuid5 from the spec
name and host, so renders are deterministic and no naming authority is claimed.
"""

from __future__ import annotations

import re
import uuid

NQN_MAX_BYTES = 223
DISCOVERY_NQN = "nqn.2014-08.org.nvmexpress.discovery"
UUID_PREFIX = "nqn.2014-08.org.nvmexpress:uuid:"

_NAMESPACE = uuid.UUID("6f1d7c52-3c1e-5a7e-9c55-8f0a6b6e9f10")
_DATE = re.compile(r"^nqn\.(\d{4})-(\d{2})\.(.+)$")
_UUID_FORM = re.compile(
    r"^nqn\.2014-08\.org\.nvmexpress:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


def stable_uuid(*parts: str) -> str:
    """A lowercase UUID determined by ``parts``."""
    return str(uuid.uuid5(_NAMESPACE, "/".join(parts)))


def uuid_nqn(*parts: str) -> str:
    return UUID_PREFIX + stable_uuid(*parts)


def nqn_problem(nqn: str) -> str | None:
    """Why ``nqn`` is invalid, or None when it is valid."""
    if len(nqn.encode()) > NQN_MAX_BYTES:
        return f"longer than {NQN_MAX_BYTES} bytes"
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in nqn):
        return "contains a character outside printable ASCII 0x21-0x7e"
    if nqn == DISCOVERY_NQN:
        return None
    match = _DATE.match(nqn)
    if not match:
        return "does not start with nqn.yyyy-mm."
    if not 1 <= int(match.group(2)) <= 12:
        return f"month {match.group(2)} is not 01-12"
    if nqn.lower().startswith(UUID_PREFIX) and not _UUID_FORM.match(nqn):
        return "UUID form must be a lowercase 8-4-4-4-12 hex UUID"
    return None
