"""Command-line options derived from a request record: each knob declared once (``exec.knobs.knob``).

A command declares ``request: Record``; typer sees the record's knobs instead, each with the
flag, help, bounds and metavar of its metadata, and the command receives the record built
from them. A knob given where it has no effect (another launcher, ``--plane`` without
``--lab``, another mode of ``simulate``) is refused (exit 2) rather than ignored, and a
value above its ``cap`` gets one line naming the flag. A new knob is a field.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from gpufabric.cli.options import refuse_unused
from gpufabric.exec import knobs


def request_options(
    record: type, name: str = "request", place: dict[str, str] | None = None, only: tuple[str, ...] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command one option (or argument) per knob of ``record`` in place of its parameter ``name``.

    The knobs take that parameter's place (``knobs.layout``: a record nested two deep goes
    last). ``place`` lists a parameter right after another (name -> the one it follows),
    where ``--help`` has always listed it. ``only``: the knobs the command offers (default:
    all); the others keep their defaults.
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func, eval_str=True)
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in signature.parameters.values()]
        at = [p.name for p in params].index(name)
        own, last = ([k for k in part if not only or k[0].name in only] for part in knobs.layout(record))
        added = [_param(f, kind) for f, kind in own], [_param(f, kind) for f, kind in last]
        new = [*params[:at], *added[0], *params[at + 1 :], *added[1]]
        for moved, after in (place or {}).items():
            param = next(p for p in new if p.name == moved)
            new.remove(param)
            new.insert(next(i for i, p in enumerate(new) if p.name == after) + 1, param)

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            built = build_request(record, {f.name: kwargs.pop(f.name) for f, _ in (*own, *last)})
            return func(**{name: built}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=new)  # type: ignore[attr-defined]  # read by inspect.signature
        wrapper.__annotations__ = {p.name: p.annotation for p in new} | {"return": signature.return_annotation}
        return wrapper

    return decorate


def build_request(record: type, offered: Mapping[str, Any]) -> Any:
    """``record`` from the values of the knobs a command offers (``offered``, by field name;
    the others keep their defaults), each checked against its ``cap``; a knob typed where it
    does nothing is refused (exit 2)."""
    every = [k for part in knobs.layout(record) for k in part]
    values = {f.name: knobs.default_of(f) for f, _ in every} | dict(offered)
    for f, _ in every:
        if f.name in offered and f.metadata["cap"] is not None:
            knobs.check_max(f.metadata["flag"], values[f.name], f.metadata["cap"])
    built = knobs.build(record, values)
    for why, flags in knobs.unused(built, launcher=values.get("launcher", "")):
        refuse_unused(True, flags, why)
    return built


def plain_values(
    record: type, words: Sequence[str], extra: Mapping[str, tuple[str, Callable[[str], Any]]]
) -> dict[str, Any] | None:
    """The values of ``words`` (a command's arguments after its name) by parameter name (a
    knob not given keeps its default), where typer would read ``words`` the same way; None
    for anything else, left to typer (``--help``, a typo, ``--``, a value that starts with
    ``-``, one typer would convert or refuse differently).

    Read: the record's argument once; its options ``--flag VALUE`` or ``--flag=VALUE``, each
    once, a ``list`` knob as often as given; knobs of type ``Path``, ``list[Path]`` or
    ``int | None`` with a ``min`` only. ``extra``: further options, by flag, as (parameter
    name, converter; a ValueError leaves ``words`` to typer).
    """
    own, last = knobs.layout(record)
    readers = {f.metadata["flag"]: (f.name, _reader(kind, f.metadata), kind == _MANY) for f, kind in (*own, *last)}
    if not all(reader for _, reader, _ in readers.values()):
        return None
    readers |= {flag: (name, convert, False) for flag, (name, convert) in extra.items()}
    typed: dict[str, Any] = {}
    rest = list(words)
    while rest:
        word = rest.pop(0)
        flag, eq, value = word.partition("=") if word.startswith("--") else (None, "", word)
        if flag is not None and not eq:
            value = rest.pop(0) if rest else ""
        if flag not in readers or not value or value.startswith("-") or "\0" in value:
            return None
        name, read, many = readers[flag]
        try:
            converted = read(value)  # type: ignore[misc]  # None readers were refused above
        except ValueError:
            return None
        if many:
            typed.setdefault(name, []).append(converted)
        elif name in typed:
            return None
        else:
            typed[name] = converted
    if None not in readers or readers[None][0] not in typed:  # the argument is required
        return None
    return typed


#: The one knob type ``plain_values`` reads as often as given.
_MANY = list[Path]


def _reader(kind: Any, meta: Mapping[str, Any]) -> Callable[[str], Any] | None:
    """How ``plain_values`` reads a knob of ``kind``, or None (left to typer)."""
    if meta["off"] or meta["also"]:
        return None
    if kind is Path or kind == _MANY:
        return _path if not meta["limits"] else None
    if kind == (int | None) and set(meta["limits"]) == {"min"}:
        low = int(meta["limits"]["min"])
        return lambda value: _int(value, low)
    return None


def _path(value: str) -> Path:
    """typer's reading of a ``Path``: it refuses an existing path that cannot be read
    (typer/_param_types.py, ``readable``), which is left to typer to say."""
    if os.path.exists(value) and not os.access(value, os.R_OK):
        raise ValueError(value)
    return Path(value)


def _int(value: str, low: int) -> int:
    """Plain decimal digits at or above ``low``; anything else (a sign, ``_``, a leading 0,
    below the range) is left to typer's own message."""
    if not value.isascii() or not value.isdigit() or value.startswith("0") or int(value) < low:
        raise ValueError(value)
    return int(value)


def _param(f: Field[Any], kind: Any) -> inspect.Parameter:
    import typer  # here, not at import: `plan` can run without typer (cli/app.py _fast_path)

    meta, default = f.metadata, knobs.default_of(f)
    if meta["flag"] is None:
        info = typer.Argument(default, help=meta["help"], metavar=meta["metavar"])
    else:
        flags = [f"{meta['flag']}/{meta['off']}"] if meta["off"] else [meta["flag"], *meta["also"]]
        info = typer.Option(
            default, *flags, help=meta["help"] or None, hidden=meta["hidden"], metavar=meta["metavar"], **meta["limits"]
        )
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


def defaults(record: type) -> dict[str, Any]:
    """The typer parameter (``typer.Option``) of each of ``record``'s own knobs, by field name."""
    return {f.name: _param(f, kind).default for f, kind in knobs.layout(record)[0]}


def refuse_other_modes(record: type, mode: str, why: str) -> None:
    """Exit 2 when an option that ``mode`` does not read was given: it would be silently ignored (issue 10)."""
    modes = {f.name: f.metadata for f in fields(record) if f.metadata["flag"] and f.metadata["modes"] is not None}
    refuse_unused(True, {name: m["flag"] for name, m in modes.items() if mode not in m["modes"]}, why)
