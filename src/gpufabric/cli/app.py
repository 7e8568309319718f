"""The ``gpufabric`` command: builds the typer app and maps errors to exit codes.

Exit codes (DESIGN.md command contract): 0 success, 1 a check/SLO failed or a tool or
host failed, 2 bad input or usage, 130 Ctrl-C. User errors print one line, never a
traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import typer

from gpufabric import __version__
from gpufabric.cli.output import set_command_line
from gpufabric.errors import EnvironmentFailure, UserError

#: One module per subcommand; each exposes ``register(app)``.
COMMAND_MODULES = (
    "init",
    "schema",
    "plan",
    "sweep",
    "predict",
    "simulate",
    "config",
    "audit",
    "bench",
    "ingest",
    "runs",
    "report",
    "compare",
    "fingerprint",
    "lab",
    "calibrate",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpufabric {__version__}")
        raise typer.Exit(0)


def build_app() -> typer.Typer:
    """The typer app with every subcommand registered."""
    app = typer.Typer(
        name="gpufabric",
        help="Plan, simulate, configure, secure and validate GPU-cluster fabrics and storage for AI training.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """gpufabric: from 'what fabric should we buy?' to 'here is the proof it is fast, secure and reproducible'."""

    for name in COMMAND_MODULES:
        importlib.import_module(f"gpufabric.cli.{name}").register(app)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: sys.argv[1:]) and return the exit code."""
    command = typer.main.get_command(build_app())
    set_command_line([str(a) for a in argv] if argv is not None else None)  # stored with any run it records
    try:
        result = command.main(args=list(argv) if argv is not None else None, prog_name="gpufabric", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        print("gpufabric: interrupted", file=sys.stderr)
        return 130
    except UserError as exc:
        print(f"gpufabric: error: {exc}", file=sys.stderr)
        return 2
    except EnvironmentFailure as exc:
        print(f"gpufabric: failed: {exc}", file=sys.stderr)
        return 1
    except typer.TyperException as exc:
        show = getattr(exc, "show", None)
        if show:
            show()
        else:
            print(f"gpufabric: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return result if isinstance(result, int) else 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
