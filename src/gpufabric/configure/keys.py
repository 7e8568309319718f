"""Secret material for a bundle: DH-HMAC-CHAP keys, TLS PSKs and IB management keys.

Secrets come from :mod:`secrets` (the OS CSPRNG). For tests and reproducible bundles a
seed or key file turns the source into a deterministic stream (SHAKE-256 of the seed
and a per-secret label), so the same inputs give the same keys; without one, every
run gives fresh keys and everything else in the bundle stays byte-identical.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from gpufabric.boundary import read_capped
from gpufabric.errors import InputError

#: DH-HMAC-CHAP secret lengths per hash id (nvme-cli Documentation/nvme-gen-dhchap-key.txt:
#: 32, 48 or 64 bytes for 01 SHA-256, 02 SHA-384, 03 SHA-512).
DHCHAP_LENGTH = {1: 32, 2: 48, 3: 64}

#: A key file is a seed of random bytes (``head -c 64 /dev/urandom``); 64 KiB is far more than any
#: seed needs and keeps a wrong path (a disk image, /dev/zero) from being read into memory.
MAX_KEY_FILE_BYTES = 64 * 1024


def read_key_file(path: Path) -> bytes:
    """The bytes of a regular key file of at most MAX_KEY_FILE_BYTES; InputError otherwise.

    A FIFO or device is refused before it is opened: opening a FIFO blocks until a writer
    appears, and a device such as /dev/zero or /dev/urandom would make the "reproducible"
    secrets differ on every run.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise InputError(f"{path}: cannot read key file: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise InputError(
            f"{path}: key file is not a regular file; write the key to a file "
            "(e.g. head -c 64 /dev/urandom > key && chmod 600 key)"
        )
    return read_capped(path, MAX_KEY_FILE_BYTES, "key")


@dataclass(slots=True)
class KeySource:
    """Where secret bytes come from; remembers every secret it handed out."""

    seed: bytes | None = None
    issued: list[str] = field(default_factory=list)

    @classmethod
    def from_options(cls, *, seed: str | None = None, key_file: Path | None = None) -> KeySource:
        if seed is not None and key_file is not None:
            raise InputError("give --seed or --key-file, not both")
        if key_file is not None:
            data = read_key_file(key_file)
            if len(data) < 16:
                raise InputError(f"key file {key_file} holds {len(data)} bytes; it needs at least 16")
            return cls(seed=data)
        if seed is not None:
            return cls(seed=seed.encode())
        return cls()

    def bytes(self, label: str, n: int) -> bytes:
        """``n`` secret bytes; deterministic in (seed, label) when seeded."""
        if self.seed is None:
            return secrets.token_bytes(n)
        return hashlib.shake_256(self.seed + b"\0" + label.encode()).digest(n)

    def _remember(self, value: str) -> str:
        self.issued.append(value)
        return value

    def dhchap(self, label: str, hmac_id: int = 3) -> str:
        """A ``DHHC-1:<hh>:<base64(key || crc32le)>:`` secret as ``nvme gen-dhchap-key`` prints it."""
        return self._remember(encode_dhchap(self.bytes(label, DHCHAP_LENGTH[hmac_id]), hmac_id))

    def tls_psk(self, label: str) -> str:
        """A TLS PSK in NVMe interchange format ``NVMeTLSkey-1:01:<base64(32 bytes || crc32le)>:``."""
        return self._remember(encode_tls_psk(self.bytes(label, 32)))

    def ib_key(self, label: str) -> str:
        """A 64-bit InfiniBand management key (m_key, sm_key, sa_key) as 0x + 16 hex digits, never 0 or 1."""
        value = int.from_bytes(self.bytes(label, 8), "big") | (1 << 63)
        return self._remember(f"0x{value:016x}")


def _framed(prefix: str, key: bytes) -> str:
    """``<prefix>:<base64(key || crc32le(key))>:``, the framing nvme-cli gives both secret kinds."""
    crc = zlib.crc32(key).to_bytes(4, "little")
    return f"{prefix}:{base64.b64encode(key + crc).decode()}:"


def encode_dhchap(key: bytes, hmac_id: int) -> str:
    """nvme-cli's DH-HMAC-CHAP secret representation: base64 of the key followed by its
    CRC-32 (little endian), framed as ``DHHC-1:<hh>:...:``."""
    return _framed(f"DHHC-1:{hmac_id:02d}", key)


def encode_tls_psk(key: bytes) -> str:
    """NVMe TLS PSK interchange format with SHA-256 (01): same framing as DH-HMAC-CHAP."""
    return _framed("NVMeTLSkey-1:01", key)
