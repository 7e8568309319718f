"""Typed identifiers and the strict base model of every user-facing pydantic model.

Every free-form string that reaches a generated artefact or a file path is one of these
types: a pattern and a length limit at the boundary, so a newline, a quote, a ``$(...)``
or a ``../`` is a located spec error, never text in a script or a path. Renderers still
quote what they write (defence in depth); these types make most hostile values
unrepresentable in the first place.

:class:`StrictModel` is the base of spec and catalog models: no unknown keys, no NaN or
infinity in any float (``allow_inf_nan=False``), and booleans are not numbers (pydantic's
lax mode turns ``true`` into 1) nor numbers booleans (``1`` into ``true``).
"""

from __future__ import annotations

import ast
import inspect
import ipaddress
import sys
import types
import typing
from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

# ---- patterns (each one is quoted in the error a user sees) ---------------------------------

#: Spec ``name``: a slug usable as a file name, an nft table suffix and a job name.
SLUG = r"^[a-z0-9][a-z0-9._-]{0,62}$"
#: Catalog ids (gpu, fabric, storage, ...): lower-case slugs.
CATALOG_ID = r"^[a-z0-9][a-z0-9._-]{0,62}$"
#: Role and plane names: they become parts of host names, interface hints and nft set names.
NAME = r"^[a-z][a-z0-9_-]{0,30}$"
#: A host name: dot-separated RFC 1123 labels (letters, digits, inner hyphens, 1-63 each),
#: 253 characters in all. No label is empty, so neither ``..`` nor a leading ``/`` fits.
HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = rf"^{HOST_LABEL}(?:\.{HOST_LABEL})*$"
#: A Linux interface name: kernel dev_valid_name() forbids '/', ':' and whitespace and
#: needs fewer than IFNAMSIZ (16) bytes; we also keep to characters nft and shells read
#: literally, and no leading '-' (ip, ethtool, nvme --host-iface would read it as an
#: option). "." and ".." are refused separately.
IFNAME = r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,14}$"
#: An RDMA device with an optional port: mlx5_0 or mlx5_0:1 (IB_DEVICE_NAME_MAX is 64);
#: no leading '-' either (mlnx_qos -d, ibv_devinfo -d take it as an argument).
HCA = r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,62}(?::[0-9]{1,3})?$"
#: Free text that lands in a comment (a flow's purpose becomes an nft rule comment, at
#: most 128 bytes): one line of printable ASCII without double quotes, backslash, $ or backtick
#: (a ' is allowed; the nft renderer neutralises it, configure.quoting.nft_comment).
COMMENT = r"^[A-Za-z0-9 _.,:;/()+<>=#@%&*!?'\[\]-]{0,128}$"
#: Longer free text (the spec's description, catalog names and sources): one line without
#: control, format (bidi overrides, BOM), private-use or line/paragraph-separator characters.
DESCRIPTION = r"^[^\p{C}\p{Zl}\p{Zp}]*$"
DESCRIPTION_MAX = 500
#: NVMe base spec 4.5 / libnvme NVMF_NQN_SIZE: at most 223 bytes, printable ASCII.
NQN = r"^nqn\.[0-9]{4}-(?:0[1-9]|1[0-2])\.[\x21-\x7e]{1,204}$"


def _not_dot(value: str) -> str:
    if value in (".", ".."):
        raise ValueError(f"{value!r} is not a usable name")
    return value


def _hca_port(value: str) -> str:
    if ":" in value and not 1 <= int(value.rsplit(":", 1)[1]) <= 255:
        raise ValueError(f"HCA {value!r}: the port after ':' must be 1-255")
    return value


def _cidr(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"not an IPv4 network with host bits zero: {exc}") from None
    return str(net)


Slug = Annotated[str, StringConstraints(pattern=SLUG)]
CatalogId = Annotated[str, StringConstraints(pattern=CATALOG_ID)]
Name = Annotated[str, StringConstraints(pattern=NAME)]
HostName = Annotated[str, StringConstraints(pattern=HOSTNAME, max_length=253)]
IfName = Annotated[str, StringConstraints(pattern=IFNAME), AfterValidator(_not_dot)]
Hca = Annotated[str, StringConstraints(pattern=HCA), AfterValidator(_hca_port)]
Comment = Annotated[str, StringConstraints(pattern=COMMENT)]
Description = Annotated[str, StringConstraints(pattern=DESCRIPTION, max_length=DESCRIPTION_MAX)]
Nqn = Annotated[str, StringConstraints(pattern=NQN, max_length=223)]
Cidr = Annotated[str, StringConstraints(max_length=18), AfterValidator(_cidr)]
VlanId = Annotated[int, Field(ge=1, le=4094)]
Port = Annotated[int, Field(ge=1, le=65535)]

#: Human-readable names of the patterns, for error messages ("allowed: ...").
PATTERN_HELP: dict[str, str] = {
    SLUG: "lower-case letters, digits, '.', '_', '-'; starts with a letter or digit; at most 63 characters",
    NAME: "lower-case letters, digits, '_', '-'; starts with a letter; at most 31 characters",
    HOSTNAME: "RFC 1123 host name: letters, digits and inner '-' in dot-separated labels of 1-63 characters",
    IFNAME: "Linux interface name: 1-15 of letters, digits, '_', '.', '-', not starting with '-' (no '/', ':' or spaces)",
    HCA: "RDMA device[:port], for example mlx5_0:1 (not starting with '-')",
    DESCRIPTION: "one line of printable text (no newline, tab or other control or format character)",
    COMMENT: "one line of at most 128 printable ASCII characters without '\"', backslash, '$' or '`'",
    NQN: "nqn.yyyy-mm.<reverse domain>[:...] of printable ASCII, at most 223 bytes",
}


def pattern_help(pattern: str) -> str:
    """What ``pattern`` allows, in words (the regex itself when it has no description)."""
    return PATTERN_HELP.get(pattern, f"must match {pattern}")


# ---- strict base model ----------------------------------------------------------------------


@cache
def _accepts(annotation: Any, kind: type) -> bool:
    """True when ``annotation`` (or an arm of its union, or its list items) is ``kind``."""
    if annotation is kind:
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _accepts(typing.get_args(annotation)[0], kind)
    if origin in (typing.Union, types.UnionType, list, tuple, typing.Literal):
        if origin is typing.Literal:
            return any(type(a) is kind for a in typing.get_args(annotation))
        return any(_accepts(a, kind) for a in typing.get_args(annotation) if a is not Ellipsis)
    return False


def _numeric(annotation: Any) -> bool:
    return _accepts(annotation, int) or _accepts(annotation, float)


class StrictModel(BaseModel):
    """Frozen, no unknown keys, finite floats, and booleans kept apart from numbers."""

    # defer_build: a class costs its validators only when a command validates with it (or
    # start-up builds it, build_models); a training plan never builds the inference spec.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    #: Field docstrings become field descriptions (--help, JSON Schema, annotated example).
    #: Ours, not pydantic's use_attribute_docstrings: pydantic finds each class's source
    #: with inspect and tokenize (~0.1 s CPU at every start for the spec models); this
    #: parses each module once (field_docstrings). Set before any schema is built:
    #: defer_build leaves the build to build_models or the first validation.
    __gf_docstrings__: ClassVar[bool] = False
    # Filled per subclass by __pydantic_init_subclass__; class data, never model fields.
    __gf_numeric__: ClassVar[frozenset[str]] = frozenset()
    __gf_boolean__: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__gf_docstrings__:
            docs = field_docstrings(cls.__module__).get(cls.__qualname__, {})
            for name, info in cls.__pydantic_fields__.items():
                if info.description is None and name in docs:
                    info.description = docs[name]
        # Which fields take numbers but not booleans, and which booleans but not numbers:
        # computed once per class so the check below is one dict walk per document.
        numeric, boolean = set(), set()
        for name, field in cls.model_fields.items():
            # Any: a type form is hashable at run time, but mypy's TypeForm does not say so
            # and _accepts is cached on it.
            annotation: Any = field.annotation
            wants_bool, wants_number = _accepts(annotation, bool), _numeric(annotation)
            if wants_number and not wants_bool:
                numeric.add(name)
            elif wants_bool and not wants_number:
                boolean.add(name)
        cls.__gf_numeric__ = frozenset(numeric)
        cls.__gf_boolean__ = frozenset(boolean)

    @model_validator(mode="before")
    @classmethod
    def _bools_are_not_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        numeric, boolean = cls.__gf_numeric__, cls.__gf_boolean__
        for key, value in data.items():
            if key in numeric:
                items = value if isinstance(value, list) else (value,)
                for n, item in enumerate(items):
                    if isinstance(item, bool):
                        where = f"{key}[{n}]" if isinstance(value, list) else key
                        raise FieldsError(f"expected a number, got the boolean {str(item).lower()}", fields=(where,))
            elif key in boolean and value is not None:
                items = value if isinstance(value, list) else (value,)  # `bool | list[bool]` fields too
                for n, item in enumerate(items):
                    if not isinstance(item, bool):
                        where = f"{key}[{n}]" if isinstance(value, list) else key
                        raise FieldsError(f"expected true or false, got {bounded_repr(item)}", fields=(where,))
        return data


def bounded_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: errors quote what was wrong, never a whole document."""
    if isinstance(value, (dict, list)) and len(value) > 3:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class FieldsError(ValueError):
    """A check spanning several fields: names them so the error points at the first and lists all."""

    def __init__(self, message: str, *, fields: tuple[str, ...]) -> None:
        self.fields = fields
        super().__init__(message)


@cache
def field_docstrings(module: str) -> dict[str, dict[str, str]]:
    """Per class (qualified name) of ``module``, each field's docstring: the string literal
    right after an annotated assignment, cleaned as pydantic's use_attribute_docstrings
    cleans it (inspect.cleandoc). One ``ast.parse`` of the module's source per content:
    the result is kept in the user's cache (spec/cache.py), since parsing spec/models.py
    and spec/security.py was ~0.015 s of every `plan` (issue 32, docs/performance.md)."""
    path = getattr(sys.modules[module], "__file__", None)
    try:
        with open(path or "", "rb") as handle:
            source = handle.read()
        with open(__file__, "rb") as handle:  # this extraction's own code is part of the key
            extractor = handle.read()
    except OSError:  # no source shipped: descriptions stay empty, as pydantic's
        return {}
    import hashlib

    from gpufabric.spec import cache

    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode() + extractor + b"\0" + source)
    where = cache.cache_path(f"fields.{module}", digest.hexdigest()[:32])
    kept = cache.read(where)
    if isinstance(kept, dict):
        return kept
    docs = _parse_docstrings(source)
    if docs:
        cache.write(where, docs)
    return docs


def _parse_docstrings(source: bytes) -> dict[str, dict[str, str]]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, dict[str, str]] = {}

    def visit(body: Iterable[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                qualname = f"{prefix}{node.name}"
                out[qualname] = _class_docstrings(node.body)
                visit(node.body, f"{qualname}.")

    visit(tree.body, "")
    return out


def _class_docstrings(body: list[ast.stmt]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for before, node in zip(body, body[1:], strict=False):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[before.target.id] = inspect.cleandoc(node.value.value)
    return docs


def build_models(module: str) -> None:
    """Build the validators of every model class ``module`` defines (defer_build left them
    unbuilt): called at start-up for the modules a command declares, while Ctrl-C still
    exits quietly, since pydantic-core writes off a KeyboardInterrupt raised while it builds
    ("Exception ignored") and the command would go on."""
    namespace = vars(sys.modules[module])
    for value in list(namespace.values()):
        if (
            isinstance(value, type)
            and issubclass(value, BaseModel)
            and value.__module__ == module
            and not value.__pydantic_complete__
        ):
            value.model_rebuild()
