"""The spec: pydantic models and YAML loading with located errors."""

from gpufabric.spec.loader import LoadedSpec, Located, load_spec, parse_yaml, validate_model
from gpufabric.spec.models import Spec

__all__ = ["Located", "LoadedSpec", "Spec", "load_spec", "parse_yaml", "validate_model"]
