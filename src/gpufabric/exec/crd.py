"""Check a manifest against a CustomResourceDefinition's structural schema, offline.

The API server validates a custom resource against the CRD's ``openAPIV3Schema`` and
*prunes* fields the schema does not declare (Kubernetes docs, "Extend the Kubernetes API
with CustomResourceDefinitions": structural schemas, pruning; as_of 1.31). A pruned field is
a silent loss (an IPC_LOCK that never reaches the pod), so here it is an error like a wrong
type. The subset implemented is what structural schemas may use for these checks: type,
properties, required, items, additionalProperties, enum, minimum/maximum, pattern,
x-kubernetes-int-or-string and x-kubernetes-preserve-unknown-fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpufabric.errors import InputError

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def crd_schema(crd: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``version`` in a CRD document."""
    for entry in crd.get("spec", {}).get("versions", []):
        if entry.get("name") == version:
            return dict(entry["schema"]["openAPIV3Schema"])
    raise InputError(f"CRD {crd.get('metadata', {}).get('name')!r} has no version {version!r}")


def problems(doc: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every place where ``doc`` breaks ``schema`` or would be pruned, as ``path: what``."""
    where = path or "."
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(doc, str) or (isinstance(doc, int) and not isinstance(doc, bool))
        return [] if ok else [f"{where}: {doc!r} is not an integer or string"]
    kind = schema.get("type")
    if kind:
        allowed = _TYPES[kind]
        if not isinstance(doc, allowed) or (kind in ("integer", "number") and isinstance(doc, bool)):
            return [f"{where}: {type(doc).__name__} where the schema has {kind}"]
    out: list[str] = []
    if "enum" in schema and doc not in schema["enum"]:
        out.append(f"{where}: {doc!r} not in {schema['enum']}")
    if isinstance(doc, int | float) and not isinstance(doc, bool):
        if "minimum" in schema and doc < schema["minimum"]:
            out.append(f"{where}: {doc} below the minimum {schema['minimum']}")
        if "maximum" in schema and doc > schema["maximum"]:
            out.append(f"{where}: {doc} above the maximum {schema['maximum']}")
    if isinstance(doc, str) and "pattern" in schema and not re.search(schema["pattern"], doc):
        out.append(f"{where}: {doc!r} does not match {schema['pattern']!r}")
    if isinstance(doc, dict):
        props = dict(schema.get("properties", {}))
        if not path:
            # The object's own metadata is ObjectMeta, which the API server checks natively (a
            # CRD schema may only say `type: object` there); labels and annotations are strings.
            props["metadata"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            out += _string_maps(doc.get("metadata", {}))
        extra = schema.get("additionalProperties")
        for key in schema.get("required", []):
            if key not in doc:
                out.append(f"{path}.{key}".lstrip(".") + ": required")
        for key, value in doc.items():
            sub = f"{path}.{key}" if path else key
            if key in props:
                out += problems(value, props[key], sub)
            elif isinstance(extra, Mapping):
                out += problems(value, extra, sub)
            elif not (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")):
                out.append(f"{sub}: unknown to the schema (the API server would prune it)")
    if isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            out += problems(item, schema["items"], f"{path}[{i}]")
    return out


def _string_maps(meta: Any) -> list[str]:
    out = []
    if isinstance(meta, Mapping):
        for key in ("labels", "annotations"):
            for k, v in (meta.get(key) or {}).items():
                if not isinstance(v, str):
                    out.append(f"metadata.{key}.{k}: {type(v).__name__} where ObjectMeta has string")
    return out
