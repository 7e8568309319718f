"""The one envelope of every JSON document a command writes: ``schema_version`` and the tool
version first, then the outcome's own keys (loaders check the version
with :func:`gpufabric.jsonable.schema_version`)."""

from __future__ import annotations

import json
from typing import Any

from gpufabric import SCHEMA_VERSION, __version__
from gpufabric.jsonable import to_jsonable


def versioned(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` prefixed with ``schema_version`` and ``gpufabric_version``."""
    return {"schema_version": SCHEMA_VERSION, "gpufabric_version": __version__, **payload}


def dumps(payload: dict[str, Any]) -> str:
    """The enveloped document as the commands print it (indent 2, a final newline)."""
    return json.dumps(to_jsonable(versioned(payload)), indent=2) + "\n"


def dumps_line(payload: dict[str, Any]) -> str:
    """The enveloped document as one compact JSON line (``--stream``'s JSON lines)."""
    return json.dumps(to_jsonable(versioned(payload)), separators=(",", ":")) + "\n"
