"""Packages that load their public names on first use (PEP 562 ``__getattr__``).

A package whose ``__init__`` imported every submodule made each command pay for all of
them at start-up (issue 32: a serving plan imported the training planner and Monte Carlo).
Such a package lists where each name lives and binds ``__getattr__ = lazy_names(...)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: name -> ``package.<homes[name]>.name``,
    imported on first use and kept in ``namespace`` (the package's globals) so that later
    lookups are plain attribute reads."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__
