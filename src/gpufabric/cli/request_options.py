"""Command-line options derived from a request record (``gpufabric.app.requests``).

A knob is declared once, as a field of the request: its flag, help, bound and the modes
that read it come from the field's metadata, and the command receives the record.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from typing import Any

import typer

from gpufabric.cli.limits import check_max
from gpufabric.cli.options import refuse_unused


def _param(f: Field[Any], annotation: Any) -> inspect.Parameter:
    m = f.metadata
    default: Any = ...  # required
    if f.default is not MISSING:
        default = f.default
    elif f.default_factory is not MISSING:
        default = f.default_factory()
    extra = {"min": m["min"]} if m["min"] is not None else {}
    info = (
        typer.Argument(default, help=m["help"])
        if m["flag"] is None
        else typer.Option(default, m["flag"], help=m["help"], **extra)
    )
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def request_options(record: type[Any], *, own_after: str | None = None) -> Callable[[Callable[..., Any]], Any]:
    """Give a command one option (or the argument) per field of ``record``; it receives ``request``.

    The command's own parameters (rendering: ``--format``) go after the argument, or after
    field ``own_after``, so ``--help`` keeps its order. Each bounded field is checked first.
    """

    def decorate(func: Callable[..., Any]) -> Any:
        hints = typing.get_type_hints(record)
        declared = fields(record)
        added = [_param(f, hints[f.name]) for f in declared]
        signature = inspect.signature(func, eval_str=True)
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in signature.parameters.values() if p.name != "request"
        ]
        names = [f.name for f in declared]
        cut = names.index(own_after) + 1 if own_after else sum(1 for f in declared if f.metadata["flag"] is None)

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in names}
            for f in declared:
                if f.metadata["max"] is not None:
                    check_max(f.metadata["flag"], values[f.name], f.metadata["max"])
            return func(request=record(**values), **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*added[:cut], *own, *added[cut:]])  # type: ignore[attr-defined]  # read by inspect.signature
        wrapper.__annotations__ = {p.name: p.annotation for p in [*added, *own]} | {
            "return": signature.return_annotation
        }
        return wrapper

    return decorate


def refuse_other_modes(record: type[Any], mode: str, why: str) -> None:
    """Exit 2 when an option that ``mode`` does not read was given: it would be silently ignored (issue 10)."""
    flags = {
        f.name: f.metadata["flag"] for f in fields(record) if f.metadata["flag"] and mode not in f.metadata["modes"]
    }
    refuse_unused(True, flags, why)
