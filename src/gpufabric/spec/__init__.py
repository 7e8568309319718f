"""The spec: pydantic models and YAML loading with located errors.

Names are imported on first use (PEP 562): the catalog and ``predict`` use
``spec.types`` and the YAML reader, and building the spec models (``Spec`` and its
security models, with field docstrings read from source) took a third of ``gpufabric
predict``'s CPU (docs/performance.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpufabric.spec.loader import LoadedSpec, Located, load_spec, parse_yaml, validate_model
    from gpufabric.spec.models import Spec

__all__ = ["Located", "LoadedSpec", "Spec", "load_spec", "parse_yaml", "validate_model"]
_HOMES = {name: "gpufabric.spec.loader" for name in __all__ if name != "Spec"} | {"Spec": "gpufabric.spec.models"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
