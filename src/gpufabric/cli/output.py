"""Shared output helpers for every command: formats, JSON encoding, consoles."""

from __future__ import annotations

import contextvars
import enum
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


class Format(enum.StrEnum):
    """Output format of a reporting command."""

    text = "text"
    json = "json"


class ReportFormat(enum.StrEnum):
    """Output format of a command that also renders Markdown."""

    text = "text"
    json = "json"
    markdown = "markdown"


#: The arguments of the command being run, as the user typed them (set by ``app.main``).
_ARGS: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("gpufabric_args", default=None)


def set_command_line(args: Sequence[str] | None) -> None:
    """Remember this invocation's arguments (``None``: the process's own, sys.argv[1:])."""
    _ARGS.set(tuple(args) if args is not None else None)


def command_line() -> list[str]:
    """The command line stored with a run: ``gpufabric`` and the arguments as typed, the one way every
    command records it."""
    args = _ARGS.get()
    return ["gpufabric", *(sys.argv[1:] if args is None else args)]


def stdout_console() -> Console:
    # Imported here (~50 ms): only the commands that print rich text pay for it.
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_json(payload: dict[str, Any]) -> None:
    """Write ``payload`` (enveloped: ``results.document``) as JSON on stdout."""
    from gpufabric.results import document  # with json: only where a command writes JSON

    sys.stdout.write(document.dumps(payload))
    sys.stdout.flush()


def print_lines(lines: Iterable[str]) -> None:
    """Text lines on stdout, as every command prints them (rich, markup off)."""
    console = stdout_console()
    for line in lines:
        console.print(line, markup=False)


def show(outcome: Any, fmt: enum.Enum) -> int:
    """Print an outcome that owns its JSON document (``to_json``) and its text (``text_lines``); its exit code."""
    if fmt == Format.json:
        sys.stdout.write(outcome.to_json())
        sys.stdout.flush()
    else:
        print_lines(outcome.text_lines())
    return int(outcome.exit_code)
