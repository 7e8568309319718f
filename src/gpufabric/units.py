"""Parsing and formatting of sizes, durations and rates given by users.

Sizes follow nccl-tests and fio conventions: a bare K/M/G/T suffix is binary
(1K = 1024 bytes), as in ``nccl-tests -b 8 -e 128M`` and ``fio --bs=1M``; explicit SI
suffixes (KB, MB, GB, TB) are decimal and KiB/MiB/GiB/TiB are binary. Rates in GB/s
are always decimal (1 GB/s = 1e9 bytes/s), matching nccl-tests' algbw/busbw.
"""

from __future__ import annotations

import re

from gpufabric.errors import InputError

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "m": 1024**2,
    "g": 1024**3,
    "t": 1024**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}

_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def parse_size(text: str | int | float) -> int:
    """Parse ``64K``, ``1G``, ``8GiB``, ``100MB`` or a plain byte count into bytes."""
    if isinstance(text, (int, float)):
        if text < 0:
            raise InputError(f"size must not be negative, got {text}")
        return int(text)
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-z]*)", text.strip())
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise InputError(f"cannot read size {text!r}: use a byte count or a suffix such as 64K, 1G, 8GiB, 100MB")
    return int(round(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]))


def parse_duration_s(text: str | int | float, *, default_unit: str = "s") -> float:
    """Parse ``2ms``, ``500us``, ``8s``, ``30min`` into seconds; a bare number uses ``default_unit``."""
    if isinstance(text, (int, float)):
        return float(text) * _TIME_UNITS[default_unit]
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-z]*)", text.strip())
    unit = match.group(2).lower() if match else None
    if not match or (unit and unit not in _TIME_UNITS):
        raise InputError(f"cannot read duration {text!r}: use a number with ns, us, ms, s, min or h")
    return float(match.group(1)) * _TIME_UNITS[unit or default_unit]


def format_size(num_bytes: float) -> str:
    """Binary-prefixed size, as nccl-tests and fio print them (``1 GiB``)."""
    if abs(num_bytes) < 1024:
        return f"{num_bytes:.0f} B"
    value = num_bytes / 1024
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            return f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} PiB"


def format_duration(seconds: float) -> str:
    """Human duration with a unit that keeps 3 significant digits."""
    s = abs(seconds)
    if s < 1e-6:
        return f"{seconds * 1e9:.3g} ns"
    if s < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if s < 1:
        return f"{seconds * 1e3:.3g} ms"
    if s < 120:
        return f"{seconds:.3g} s"
    if s < 7200:
        return f"{seconds / 60:.3g} min"
    if s < 3 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"
