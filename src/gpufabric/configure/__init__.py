"""Setup guides as code: render every artefact of a design, per node role.

Entry points: :func:`render_bundle` (pure) and :func:`write_bundle` (files with modes).
"""

from gpufabric.configure.bundle import Artefact, Bundle, render_bundle, write_bundle
from gpufabric.configure.design import (
    Design,
    design_from_plan,
    design_from_spec,
    effective_policy,
)
from gpufabric.configure.keys import KeySource

__all__ = [
    "Artefact",
    "Bundle",
    "Design",
    "KeySource",
    "design_from_plan",
    "design_from_spec",
    "effective_policy",
    "render_bundle",
    "write_bundle",
]
