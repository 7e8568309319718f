"""Range checks for integers and floats parsed from the command line.

Python integers are unbounded: ``--ranks 10**30`` parses fine and then overflows numpy,
SQLite or the models. Every numeric flag a command passes on is checked here first, so
the user gets one line naming the flag and its range (exit 2), never a traceback or a
nonsense answer. Lower bounds stay with each command where it already explains them.
"""

from __future__ import annotations

import math

from gpufabric.errors import InputError


def check_range(flag: str, value: float | None, low: float, high: float) -> None:
    """InputError unless ``low <= value <= high`` (None: the flag was not given)."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{flag} must be a finite number, got {value}")
    if not low <= value <= high:
        raise InputError(f"{flag} must be between {low:,} and {high:,}, got {value:,}")


def check_max(flag: str, value: float | None, high: float) -> None:
    """InputError when ``value`` exceeds ``high`` or is not finite."""
    check_range(flag, value, -math.inf, high)
