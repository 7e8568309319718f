"""Load a YAML spec into a validated :class:`Spec`, with errors located in the file.

PyYAML's composer keeps the line and column of every node; we keep a map from field
path to position so that a pydantic error (which knows only the path) becomes
``file:line:col: field: what was expected (fix)``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpufabric.boundary import default_ids, read_capped
from gpufabric.errors import InputError, SpecError
from gpufabric.spec.types import FieldsError, bounded_repr, pattern_help

if TYPE_CHECKING:  # imported by load_spec: the catalog reads YAML through this module without the spec models
    from gpufabric.spec.models import Spec

Path_ = tuple[str | int, ...]
ModelT = TypeVar("ModelT", bound=BaseModel)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: YAML nodes after alias expansion. A 500-byte "billion laughs" document expands to 1e9
#: nodes; the largest real spec (a role listing 100k hosts) has ~1e5.
MAX_YAML_NODES = 1_000_000
#: Bytes read from a spec or catalog file: specs are kilobytes; this is a safety cap.
MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Located:
    """A parsed YAML document with the source position of every key and value."""

    file: str
    data: Any
    key_positions: Mapping[Path_, tuple[int, int]]
    value_positions: Mapping[Path_, tuple[int, int]]

    def position(self, path: Path_) -> tuple[int | None, int | None]:
        """Line and column (1-based) of ``path``'s key, else of its nearest located parent."""
        for end in range(len(path), -1, -1):
            prefix = tuple(path[:end])
            if prefix in self.key_positions:
                return self.key_positions[prefix]
            if prefix in self.value_positions:
                return self.value_positions[prefix]
        return None, None

    def error(self, path: Path_, message: str, fix: str = "") -> SpecError:
        """A :class:`SpecError` located at ``path``."""
        line, column = self.position(path)
        return SpecError(file=self.file, line=line, column=column, field=dotted(path), message=message, fix=fix)


def dotted(path: Path_) -> str:
    """``('options', 'fabrics', 1)`` -> ``options.fabrics[1]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def did_you_mean(word: object, known: Sequence[str], label: str = "known") -> str:
    """``did you mean 'x'?`` naming the closest of ``known``, else ``label: a, b, c``."""
    import difflib  # on an error only: start-up does not pay for it

    close = difflib.get_close_matches(str(word), known, n=1)
    return f"did you mean {close[0]!r}?" if close else f"{label}: {', '.join(known)}"


def parse_yaml(text: str, file: str) -> Located:
    """Parse YAML in one pass keeping positions; duplicate keys are an error (PyYAML keeps
    the last silently). libyaml's parser, where installed, keeps the same positions at a
    tenth of the pure-Python parser's cost."""
    loader = _LOADER(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            expanded_size(root, file)
        data = None if root is None else loader.construct_document(root)
    except RecursionError:
        raise SpecError(file=file, field="", message="YAML nested too deeply", fix="flatten the document") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            field="",
            message=f"not valid YAML: {problem}",
            fix="check indentation and quoting",
        ) from exc
    finally:
        loader.dispose()
    keys: dict[Path_, tuple[int, int]] = {}
    values: dict[Path_, tuple[int, int]] = {}

    def walk(node: yaml.Node, path: Path_) -> None:
        values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                key = key_node.value
                if key in seen:
                    raise SpecError(
                        file=file,
                        line=key_node.start_mark.line + 1,
                        column=key_node.start_mark.column + 1,
                        field=dotted((*path, key)),
                        message="duplicate key",
                        fix="remove one of the two",
                    )
                seen.add(key)
                keys[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                walk(value_node, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, (*path, index))

    if root is not None:
        walk(root, ())
    return Located(file=file, data=data, key_positions=keys, value_positions=values)


def expanded_size(root: yaml.Node, file: str, limit: int = MAX_YAML_NODES) -> int:
    """Nodes in the document with every alias expanded; a SpecError past ``limit`` or on a
    recursive alias. Iterative and memoised per node, so a bomb costs its size in bytes,
    not its expansion."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[key] > limit:
                mark = node.start_mark
                raise SpecError(
                    file=file,
                    line=mark.line + 1,
                    column=mark.column + 1,
                    field="",
                    message=f"alias expansion exceeds {limit:,} nodes",
                    fix="write the document out without nested aliases",
                )
            continue
        if key in sizes:
            continue
        if key in on_path:
            mark = node.start_mark
            raise SpecError(
                file=file,
                line=mark.line + 1,
                column=mark.column + 1,
                field="",
                message="recursive YAML alias",
                fix="an anchor cannot contain its own alias",
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def read_text(path: str | Path, what: str = "spec") -> str:
    """A UTF-8 file's text, capped at MAX_FILE_BYTES; SpecError (exit 2) when it cannot be read or decoded."""
    file = str(path)
    try:
        raw = read_capped(path, MAX_FILE_BYTES, what)
    except InputError as exc:
        raise SpecError(file=file, field="", message=str(exc).removeprefix(f"{file}: "), fix="check the path") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError(
            file=file,
            line=line,
            field="",
            message=f"not UTF-8 text (byte 0x{raw[exc.start]:02x})",
            fix="save the file as UTF-8",
        ) from None


def _model_at(model: type[BaseModel], path: Path_) -> type[BaseModel] | None:
    """The pydantic model class that owns the last key of ``path``, for did-you-mean hints."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        current = _unwrap(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/list wrappers down to a model class if there is one."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple):
        for arg in typing.get_args(annotation):
            inner = _unwrap(arg)
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return annotation


def validation_error(exc: ValidationError, located: Located, model: type[BaseModel]) -> SpecError:
    """Turn the first pydantic error into one located, actionable :class:`SpecError`."""
    err = exc.errors(include_url=False)[0]
    path: Path_ = tuple(err["loc"])
    kind = err["type"]
    message = err["msg"].removeprefix("Value error, ")
    fix = ""
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, FieldsError):
        # A check across fields: point at the first, name them all, never quote the section.
        fields = [path + parse_dotted(f) for f in cause.fields]
        names = ", ".join(dotted(f) for f in fields)
        return located.error(fields[0], message, f"fields: {names}" if len(fields) > 1 else "")
    if kind == "string_pattern_mismatch":
        pattern = (err.get("ctx") or {}).get("pattern", "")
        message = f"{bounded_repr(err.get('input'))} is not allowed"
        fix = f"allowed: {pattern_help(pattern)}; pattern {pattern}"
        return located.error(path, message, fix)
    if kind == "extra_forbidden":
        owner = _model_at(model, path[:-1])
        message = f"unknown key {path[-1]!r}"
        fix = did_you_mean(path[-1], sorted(owner.model_fields) if owner else [], "known keys")
    elif kind == "missing":
        message = "required field is missing"
        owner = _model_at(model, path[:-1]) if len(path) > 1 else model
        field = owner.model_fields.get(str(path[-1])) if owner else None
        fix = f"add it: {field.description}" if field and field.description else "add it"
    elif "input" in err and kind not in ("model_type", "dict_type") and not isinstance(err["input"], dict):
        message = f"{message}, got {bounded_repr(err['input'])}"
    return located.error(path, message, fix)


def parse_dotted(text: str) -> Path_:
    """``planes[2].interface`` -> ``('planes', 2, 'interface')`` (the inverse of :func:`dotted`)."""
    out: list[str | int] = []
    for part in text.split("."):
        name, *indices = part.split("[")
        if name:
            out.append(name)
        out.extend(int(i.rstrip("]")) for i in indices)
    return tuple(out)


def validate_model(located: Located, model: type[ModelT]) -> ModelT:
    """Validate parsed YAML against ``model``; errors are located :class:`SpecError`."""
    if not isinstance(located.data, dict):
        raise located.error(
            (), f"expected a mapping of {model.__name__} fields at the top level", "see `gpufabric init`"
        )
    try:
        return model.model_validate(located.data)
    except ValidationError as exc:
        raise validation_error(exc, located, model) from None


@dataclass(frozen=True, slots=True)
class LoadedSpec:
    """A validated spec together with where each field came from."""

    spec: Spec
    located: Located

    @property
    def file(self) -> str:
        return self.located.file


#: What takes a ``workload.kind: inference`` spec (the refusal of every other command says so).
INFERENCE_COMMANDS = (
    "inference specs work with plan, simulate, bench inference, schema and init --kind inference;"
    " config, sweep and bench --spec take training specs only"
)


def load_spec(path: str | Path, *, known_ids: Mapping[str, Collection[str]] | None = None) -> LoadedSpec:
    """Read and validate a spec file.

    Args:
        path: the YAML file.
        known_ids: catalog ids allowed per field path, for example
            ``{"cluster.gpu": {...}, "options.fabrics": {...}, "options.storage": {...}}``;
            an id not in the set is a located error with a did-you-mean. None (the
            default): the ids registered with ``boundary.set_default_ids`` (the CLI registers
            the shipped catalog's, so every command checks them; a command with
            ``--catalog`` passes its merged catalog's); ``{}`` skips the check.

    Raises:
        SpecError: the file is unreadable, not YAML, or not a valid spec.
    """
    file = str(path)
    located = parse_yaml(read_text(path), file)
    workload = located.data.get("workload") if isinstance(located.data, dict) else None
    if isinstance(workload, dict) and workload.get("kind") == "inference":
        # Commands that dispatch on the kind (plan, simulate, bench inference) never get
        # here; the rest take training specs only (docs/inference.md).
        raise located.error(
            ("workload", "kind"),
            f"this command takes training specs; {INFERENCE_COMMANDS}",
            "use a workload.kind: training spec here",
        )
    from gpufabric.spec.models import Spec

    spec = validate_model(located, Spec)
    if known_ids is None:
        known_ids = default_ids()
    if known_ids:
        check_ids(located, known_ids)
    return LoadedSpec(spec=spec, located=located)


def check_ids(located: Located, known_ids: Mapping[str, Collection[str]]) -> None:
    """Raise a located error for the first catalog id that is not known."""
    for dotted_path, known in known_ids.items():
        path: Path_ = tuple(dotted_path.split("."))
        value: Any = located.data
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        items = [(path, value)] if isinstance(value, str) else [((*path, i), v) for i, v in enumerate(value or [])]
        for item_path, item in items:
            if item not in known:
                raise located.error(item_path, f"unknown catalog id {item!r}", did_you_mean(item, sorted(known)))
