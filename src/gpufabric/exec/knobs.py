"""Knobs declared once: a record field's metadata is its command-line option.

Every request record (``app.requests``, ``exec.launchers.LaunchRequest``,
``exec.site.SiteOptions``, the probe requests in ``bench/probes/requests.py``, the suite's
``SuiteRequest``) declares each knob as a :func:`knob` field: its default, flag (or the
argument), help text and where it applies; ``cli/request_options.py`` turns the fields into
typer options and builds the record from what was typed. A new knob is one field. This is
the lowest layer all of them may import, and nothing here imports typer: the records stay
library types.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any

from gpufabric.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A knob that would do nothing: refused (exit 2) when ``when(record)`` holds and it was typed."""

    when: Callable[[Any], bool]
    why: str  # "without --lab", completes "--plane has no effect ..."


def knob(
    default: Any,
    flag: str | None,
    help_text: str,
    launchers: tuple[str, ...] = (),
    *,
    modes: frozenset[str] | None = None,
    off: str = "",
    also: tuple[str, ...] = (),
    hidden: bool = False,
    refuse: Refusal | None = None,
    metavar: str | None = None,
    cap: float | None = None,
    **limits: Any,
) -> Any:
    """A record field that is also a command-line option (``flag``) or the argument (``flag=None``).

    ``default``: ``...`` makes it required; a list is copied per record. ``launchers``: the
    launchers it applies to (given with another one, it is refused). ``modes``: the modes of
    the command that read it (None: all; ``refuse_other_modes`` in cli/request_options.py).
    ``off``: the negative flag of a boolean (``--shared`` for ``--exclusive``). ``also``:
    further spellings that stay accepted (``--work-dir`` beside ``--run-dir``). ``metavar``:
    the name ``--help`` shows for it. ``cap``: the largest value accepted, checked before the
    command runs with the one-line message of :func:`check_range`. ``limits``: typer's
    ``min``/``max`` (shown in ``--help`` as a range).
    """
    meta = {
        "flag": flag,
        "off": off,
        "help": help_text,
        "launchers": launchers,
        "modes": modes,
        "also": also,
        "hidden": hidden,
        "refuse": refuse,
        "metavar": metavar,
        "cap": cap,
        "limits": limits,
    }
    return _field(default, meta)


def like(record: type, name: str, default: Any) -> Any:
    """The knob ``name`` of ``record`` (same flag, help and rules) with another default."""
    return _field(default, dict(next(f.metadata for f in fields(record) if f.name == name)))


def _field(default: Any, meta: dict[str, Any]) -> Any:
    if default is ...:
        return field(metadata=meta)
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def is_record(annotation: Any) -> bool:
    """Whether a field's type is itself a record of knobs (expanded in place of the field)."""
    return isinstance(annotation, type) and is_dataclass(annotation)


def knob_fields(record: type) -> Iterator[tuple[Field[Any], Any]]:
    """``(field, type)`` of each knob of ``record``: a field with a flag, or a nested record of knobs."""
    hints = typing.get_type_hints(record)
    return ((f, hints[f.name]) for f in fields(record) if "flag" in f.metadata or is_record(hints[f.name]))


def default_of(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return ...  # required


def layout(record: type, depth: int = 0) -> tuple[list[tuple[Field[Any], Any]], list[tuple[Field[Any], Any]]]:
    """The knobs of ``record`` in the order a command lists them, and those that go last.

    A nested record's knobs take its field's place; a record nested two deep (the launch's
    ``site``) goes last.
    """
    own: list[tuple[Field[Any], Any]] = []
    last: list[tuple[Field[Any], Any]] = []
    for f, kind in knob_fields(record):
        if is_record(kind):
            inner, deeper = layout(kind, depth + 1)
            (last if depth else own).extend(inner)
            last.extend(deeper)
        else:
            own.append((f, kind))
    return own, last


def build(record: type, values: Mapping[str, Any]) -> Any:
    """``record`` (and its nested records) from knob values by field name."""
    return record(**{f.name: build(k, values) if is_record(k) else values[f.name] for f, k in knob_fields(record)})


def unused(built: Any, *, launcher: str) -> list[tuple[str, dict[str, str]]]:
    """``(why, {field name: flag})`` of the knobs of ``built`` (nested records too) that would do
    nothing with the others' values: another launcher's, ``--plane`` without ``--lab``, ...

    The caller refuses those that were typed (exit 2); ``launcher`` is the launch's.
    """
    out: dict[str, dict[str, str]] = {}
    for f, kind in knob_fields(type(built)):
        if is_record(kind):
            for why, names in unused(getattr(built, f.name), launcher=launcher):
                out.setdefault(why, {}).update(names)
            continue
        meta = f.metadata
        applies = meta.get("launchers") or ()
        if applies and launcher not in applies:
            out.setdefault(f"without --launcher {' or '.join(applies)}", {})[f.name] = meta["flag"]
        refusal = meta.get("refuse")
        if refusal is not None and refusal.when(built):
            out.setdefault(refusal.why, {})[f.name] = meta["flag"]
    return list(out.items())


#: The one duration syntax (gpufabric.units.parse_duration_s).
DURATION_SYNTAX = "a duration such as 600s, 10min, 1h or 500ms; a bare number is seconds"
#: The one size syntax (gpufabric.units.parse_size).
SIZE_SYNTAX = "64K, 1G, 8GiB, 100MB or a byte count."
HOSTS_HELP = "Comma-separated host list: NAME (ssh), local, netns:NS[@ADDR][%IFNAME]."
NODES_HELP = "Nodes (hosts) to use."
GPUS_PER_NODE_HELP = "GPUs (ranks) per node."
DB_HELP = (
    "Results store: a SQLite file or a postgresql://USER@HOST/DB URL"
    " (default: $GPUFABRIC_DB, else the user data directory's gpufabric/results.db)."
)


def duration_s(flag: str, text: str, *, low_s: float = 0.001, high_s: float = 7 * 86_400) -> float:
    """Seconds from a duration option, bounded (InputError naming ``flag`` otherwise)."""
    from gpufabric.units import parse_duration_s

    try:
        seconds = parse_duration_s(text)
    except InputError as exc:
        raise InputError(f"{flag}: {exc}") from exc
    if not low_s <= seconds <= high_s:  # also refuses nan and inf
        raise InputError(f"{flag} {text!r}: give {low_s:g}s to {high_s:g}s")
    return seconds


def check_range(flag: str, value: float | None, low: float, high: float) -> None:
    """InputError unless ``low <= value <= high`` (None: the flag was not given).

    Python integers are unbounded: ``--ranks 10**30`` parses fine and then overflows numpy,
    SQLite or the models, so every numeric flag a command passes on is checked first and the
    user gets one line naming the flag and its range (exit 2), never a traceback.
    """
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{flag} must be a finite number, got {value}")
    if not low <= value <= high:
        raise InputError(f"{flag} must be between {low:,} and {high:,}, got {value:,}")


def check_max(flag: str, value: float | None, high: float) -> None:
    """InputError when ``value`` exceeds ``high`` or is not finite."""
    check_range(flag, value, -math.inf, high)
