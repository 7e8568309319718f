"""The one unit registry: parsing and formatting of sizes, durations and rates.

Every module that turns a unit name into a factor asks here (``seconds_per``,
``is_time_unit``); no other module keeps its own table (issue 10, item 5).

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

#: Seconds per time unit, for the units users type (``--timeout 600s``, ``empirical:FILE:us``).
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}

#: Time units users may type, in the order error messages list them.
DURATION_UNITS = tuple(_TIME_UNITS)

#: Other spellings of the same units that tools print and metrics carry (sockperf's
#: ``latency(usec)``, perftest's ``usec``); accepted on metric units, not on user input.
_TIME_ALIASES = {"usec": "us", "msec": "ms", "sec": "s"}

#: Units of rates, in bytes per second. GB/s is decimal (nccl-tests' busbw, fio's bw in
#: GB/s); Gbit/s and Gb/s are link rates in bits (iperf3, perftest --report_gbits).
_RATE_UNITS = {
    "b/s": 1.0,
    "kb/s": 1e3,
    "mb/s": 1e6,
    "gb/s": 1e9,
    "tb/s": 1e12,
    "mib/s": 1024.0**2,
    "gib/s": 1024.0**3,
    "kbit/s": 1e3 / 8,
    "mbit/s": 1e6 / 8,
    "gbit/s": 1e9 / 8,
    "tbit/s": 1e12 / 8,
}

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def seconds_per(unit: str) -> float | None:
    """Seconds in one ``unit`` (``us`` -> 1e-6; tool spellings such as ``usec`` too); None if not a time unit."""
    return _TIME_UNITS.get(_TIME_ALIASES.get(unit, unit))


def is_time_unit(unit: str) -> bool:
    """Whether a metric in ``unit`` is a duration (latency, step time, ...)."""
    return seconds_per(unit) is not None


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
        raise InputError(f"cannot read duration {text!r}: use a number with {', '.join(DURATION_UNITS)}")
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


def parse_rate_bps(text: str | int | float) -> float:
    """Parse ``25GB/s``, ``100Gbit/s``, ``400 Gb/s`` or a bare bytes/s count into bytes per second.

    ``Gb/s`` is read as gigabits (the link-rate spelling of perftest and NIC data sheets),
    ``GB/s`` as gigabytes: the case of the ``b`` decides, as in those tools' output.
    """
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        match = re.fullmatch(_NUMBER + r"\s*([A-Za-z]*/s|)", text.strip())
        if not match:
            raise InputError(f"cannot read rate {text!r}: use a number with GB/s, MB/s, Gbit/s or Gb/s")
        unit = match.group(2)
        key = unit.lower()
        if unit[:-2].endswith("b") and not unit[:-2].endswith("ib") and len(unit) > 2:
            key = key[:-3] + "bit/s"  # Gb/s, Mb/s: bits
        if unit and key not in _RATE_UNITS:
            raise InputError(f"cannot read rate {text!r}: use a number with GB/s, MB/s, Gbit/s or Gb/s")
        value = float(match.group(1)) * (_RATE_UNITS[key] if unit else 1.0)
    if not value >= 0 or value == float("inf"):
        raise InputError(f"rate must be finite and not negative, got {text!r}")
    return value


def format_rate(bytes_per_s: float) -> str:
    """Decimal bytes per second with 3 significant digits (``12.3 GB/s``), as nccl-tests reports busbw."""
    value = float(bytes_per_s)
    for unit in ("B/s", "KB/s", "MB/s", "GB/s"):
        if abs(value) < 1000:
            return f"{value:.3g} {unit}"
        value /= 1000
    return f"{value:.3g} TB/s"
