"""Options shared by several commands: one spelling, one help text, one parser each.

Commands declare them with the factories below (``db: Path | None = db_option()``) so
``--db`` means the same thing, with the same words in ``--help``, everywhere. Old
spellings stay accepted through :data:`RENAMED`: :func:`rewrite_renamed` maps them to the
new ones before parsing and prints one deprecation line on stderr, so scripts keep
working. :func:`refuse_unused` turns an option that would have no effect into a usage
error (exit 2) instead of silently ignoring it.

Imported by every command module at start-up, so it imports nothing heavy (``gpufabric
--help`` is measured in benchmarks/bench_cli_help.py).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Sequence
from typing import Any

import typer

from gpufabric.cli.output import Format
from gpufabric.errors import InputError

# The knobs' help texts are declared with the records (exec.knobs); commands without a record share them.
from gpufabric.exec.knobs import DB_HELP, GPUS_PER_NODE_HELP
from gpufabric.exec.knobs import DURATION_SYNTAX as DURATION_SYNTAX  # shared help texts (tests pin them)
from gpufabric.exec.knobs import HOSTS_HELP as HOSTS_HELP

#: The pydantic model modules of a spec and its catalog: what a command that reads a spec
#: builds at start-up (its ``MODELS``; cli/app.py ALL_MODEL_MODULES).
SPEC_MODELS = (
    "gpufabric.catalog.schema",
    "gpufabric.spec.models",
    "gpufabric.spec.security",
    "gpufabric.spec.inference",
)

#: ``rich_markup_mode`` of every typer group: plain click help (see cli/app.py build_app).
PLAIN_HELP = None


def db_option() -> Any:
    """``--db PATH``: the results database."""
    return typer.Option(None, "--db", help=DB_HELP)


def format_option(default: enum.Enum = Format.text) -> Any:
    """``--format``: the choices are the members of ``type(default)``; text is the default everywhere."""
    choices = [m.value for m in type(default)]
    return typer.Option(default, "--format", help=f"Output format: {', '.join(choices)}.")


def gpus_per_node_option(default: int, help_text: str = GPUS_PER_NODE_HELP) -> Any:
    return typer.Option(default, "--gpus-per-node", help=help_text)


def num_hosts_option(default: int, what: str = "hosts") -> Any:
    return typer.Option(default, "--num-hosts", help=f"Number of {what} (2-16).")


def quiet_option(what: str) -> Any:
    return typer.Option(False, "--quiet", "-q", help=f"Quiet: {what}.")


#: Renamed spellings, per command path: old flag -> new flag. Matched on the leading command
#: words, so ``bench --format json collectives --nproc 8`` is found too.
RENAMED: dict[tuple[str, ...], dict[str, str]] = {
    ("bench", "collectives"): {"--nproc": "--gpus-per-node"},
    ("bench", "train"): {"--nproc": "--gpus-per-node"},
    ("bench", "checkpoint"): {"--nproc": "--gpus-per-node", "--size": "--bytes"},
    ("bench", "inference"): {"--nproc": "--gpus-per-node"},
    ("simulate",): {"--ranks-per-node": "--gpus-per-node"},
    ("lab", "up"): {"--hosts": "--num-hosts"},
    ("lab", "slurm", "up"): {"--hosts": "--num-hosts"},
}


def _command_path(argv: Sequence[str]) -> tuple[str, ...] | None:
    """The longest key of RENAMED whose words appear, in order, before any ``--``."""
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    best: tuple[str, ...] | None = None
    for path in RENAMED:
        if not words or words[0] != path[0]:
            continue
        pos, ok = 1, True
        for word in path[1:]:
            try:
                pos = words.index(word, pos) + 1
            except ValueError:
                ok = False
                break
        if ok and (best is None or len(path) > len(best)):
            best = path
    return best


def rewrite_renamed(argv: Sequence[str], warn: Callable[[str], None] | None = None) -> list[str]:
    """``argv`` with every old spelling replaced by the new one, one note per old flag on stderr."""
    out = list(argv)
    path = _command_path(out)
    if path is None:
        return out
    renamed = RENAMED[path]
    end = out.index("--") if "--" in out else len(out)
    noted: set[str] = set()
    for i, arg in enumerate(out[:end]):
        flag, eq, value = arg.partition("=")
        new = renamed.get(flag)
        if new is None:
            continue
        out[i] = new + eq + value
        if flag not in noted:
            noted.add(flag)
            note = f"gpufabric: warning: {' '.join(path)} {flag} is deprecated; use {new} (same meaning)"
            (warn or _stderr)(note)
    return out


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def given(name: str) -> bool:
    """Whether parameter ``name`` of the running command was given on the command line."""
    # typer >= 0.22 vendors click as typer._click; older ones depend on click itself.
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer; click is absent where typer vendors it
        from click import get_current_context  # type: ignore[import-not-found,no-redef]  # absent beside a vendoring typer

    ctx = get_current_context(silent=True)
    if ctx is None:  # called as a plain function (tests): nothing was typed
        return False
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def refuse_unused(condition: bool, names: dict[str, str], why: str) -> None:
    """Exit 2 when ``condition`` holds and any of ``names`` (param name -> flag) was given: it would do nothing."""
    if not condition:
        return
    used = [flag for name, flag in names.items() if given(name)]
    if used:
        raise InputError(
            f"{', '.join(used)} {'has' if len(used) == 1 else 'have'} no effect {why}; drop "
            f"{'it' if len(used) == 1 else 'them'}"
        )


def refuse_group_options(ctx: Any) -> None:
    """Exit 2 when a group's own options were given before a subcommand: they would not reach it."""
    used = [param.opts[0] for param in ctx.command.params if param.name and given(param.name)]
    if used:
        group = ctx.command_path.removeprefix("gpufabric ")
        raise InputError(
            f"{', '.join(used)} before '{ctx.invoked_subcommand}' belong(s) to `{group}` itself and would"
            f" not reach the subcommand; put {'it' if len(used) == 1 else 'them'} after it:"
            f" gpufabric {group} {ctx.invoked_subcommand} {used[0]} ..."
        )
