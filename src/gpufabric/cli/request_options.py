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
from collections.abc import Callable
from dataclasses import Field, fields
from typing import Any

import typer

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
        every = [k for part in knobs.layout(record) for k in part]
        own, last = ([k for k in part if not only or k[0].name in only] for part in knobs.layout(record))
        added = [_param(f, kind) for f, kind in own], [_param(f, kind) for f, kind in last]
        new = [*params[:at], *added[0], *params[at + 1 :], *added[1]]
        for moved, after in (place or {}).items():
            param = next(p for p in new if p.name == moved)
            new.remove(param)
            new.insert(next(i for i, p in enumerate(new) if p.name == after) + 1, param)

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            values = {f.name: knobs.default_of(f) for f, _ in every} | {
                f.name: kwargs.pop(f.name) for f, _ in (*own, *last)
            }
            for f, _ in (*own, *last):
                if f.metadata["cap"] is not None:
                    knobs.check_max(f.metadata["flag"], values[f.name], f.metadata["cap"])
            built = knobs.build(record, values)
            for why, flags in knobs.unused(built, launcher=values.get("launcher", "")):
                refuse_unused(True, flags, why)
            return func(**{name: built}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=new)  # type: ignore[attr-defined]  # read by inspect.signature
        wrapper.__annotations__ = {p.name: p.annotation for p in new} | {"return": signature.return_annotation}
        return wrapper

    return decorate


def _param(f: Field[Any], kind: Any) -> inspect.Parameter:
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
