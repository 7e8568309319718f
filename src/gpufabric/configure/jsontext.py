"""JSON artefacts laid out for people and written fast.

``json.dumps(indent=2)`` runs the pure-Python encoder (CPython uses its C encoder only
without ``indent``), which dominated ``config`` on 2,048 hosts. This layout indents
objects and short lists like ``indent=2`` and puts each element of a long list on one
compact line (C encoder), so a 2,048-host nvmet config stays editable line by line.
"""

from __future__ import annotations

import json
from typing import Any

#: Lists longer than this get one compact line per element.
LONG_LIST = 8
_compact = json.JSONEncoder(separators=(", ", ": "), allow_nan=False).encode


def json_text(obj: Any) -> str:
    """``obj`` as JSON text ending in a newline (NaN/inf refused, like every artefact)."""
    return _render(obj, "") + "\n"


def _render(obj: Any, indent: str) -> str:
    inner = indent + "  "
    if isinstance(obj, dict) and obj:
        items = (f"{inner}{_compact(str(k))}: {_render(v, inner)}" for k, v in obj.items())
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, list) and obj:
        render = _compact if len(obj) > LONG_LIST else (lambda v: _render(v, inner))
        return "[\n" + ",\n".join(inner + render(v) for v in obj) + "\n" + indent + "]"
    return _compact(obj)
