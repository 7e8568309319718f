"""The ``gpufabric`` command: builds the typer app and maps errors to exit codes.

Exit codes (DESIGN.md command contract): 0 success, 1 a check/SLO failed or a tool or
host failed, 2 bad input or usage, 130 Ctrl-C. User errors print one line, never a
traceback.

This module is also the one boundary for errors the operating system raises from
anywhere in a command (:func:`os_error_exit`): every one becomes one line on stderr:

========================================  =====  ==========================================
error                                     exit   why
========================================  =====  ==========================================
ENOENT, ENOTDIR, EISDIR, ENAMETOOLONG     2      a path the user gave is wrong
EACCES, EPERM, EROFS, ENOSPC, EDQUOT, ...  1      the machine refused (permissions, disk)
EPIPE (stdout closed, ``| head``)         1      nothing more can be written; no message
UnicodeDecodeError                        2      an input file is not UTF-8 text
OverflowError                             2      a number too large for the computation
sqlite3.Error                             1      the results database failed
MemoryError                               1      the machine ran out of memory
KeyboardInterrupt (also during start-up)  130    Ctrl-C
Terminated (SIGTERM)                      143    timeout(1), a CI runner, scancel: as Ctrl-C
========================================  =====  ==========================================
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import keyword
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

import typer

from gpufabric import __version__, errors
from gpufabric.cli.options import PLAIN_HELP, SPEC_MODELS
from gpufabric.cli.output import set_command_line
from gpufabric.errors import EnvironmentFailure, UserError, interrupt_exit_code, raise_terminated

#: errno values that mean "the path you gave is wrong" (exit 2); every other OSError is
#: the machine refusing (exit 1).
_USER_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP})

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
    "export",
    "import",
)


def command_module(name: str) -> str:
    """The module of command ``name``: its own name, with a trailing underscore for a Python
    keyword (``import`` -> ``import_``, PEP 8)."""
    return f"gpufabric.cli.{name}_" if keyword.iskeyword(name) else f"gpufabric.cli.{name}"


#: Every module that defines pydantic models (the catalog first; spec.models brings
#: spec.security and spec.types): what a command builds at start-up unless its module
#: declares ``MODELS``, the ones it builds (tests/cli/test_boundary.py checks the list is
#: complete). Built before Ctrl-C is handed back to Python (_end_startup): pydantic-core
#: builds validators in callbacks that write a KeyboardInterrupt off as "Exception ignored",
#: and the command would go on. The models are defined with defer_build (spec/types.py),
#: so a module costs its validators only where a command declares it: `predict` builds the
#: catalog's alone, a third of its CPU (docs/performance.md).
ALL_MODEL_MODULES = (*SPEC_MODELS, "gpufabric.bench.slo")


def model_modules(named: str | None, args: Sequence[str] = ()) -> tuple[str, ...]:
    """The model modules command ``named`` builds: none for --help, --version or a typo
    (nothing is validated), what its module's ``models_for(args)`` returns or its ``MODELS``
    where it declares them, else all."""
    if named is None:
        return ()
    module = importlib.import_module(command_module(named))
    if (choose := getattr(module, "models_for", None)) is not None:
        chosen: tuple[str, ...] = choose(args)
        return chosen
    declared: tuple[str, ...] = getattr(module, "MODELS", ALL_MODEL_MODULES)
    return declared


#: The variables OpenBLAS takes its thread count from, in its order (OpenBLAS
#: driver/others/openblas_env.c): one set by the user is left to decide.
_BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _import_numpy_serial(named: str | None) -> None:
    """Import numpy with OpenBLAS on one thread for a command whose module declares
    ``SERIAL_BLAS`` (no BLAS call big enough to be split): at load OpenBLAS starts a worker
    per core that spins before it sleeps, ~0.03 s of CPU on every `plan` (issue 32,
    docs/performance.md). The variable is removed again once numpy is loaded (OpenBLAS reads
    it then only), so no child process inherits it; a program that imported numpy already,
    or a user who set a thread count, is left alone."""
    if named is None or "numpy" in sys.modules or any(v in os.environ for v in _BLAS_THREAD_VARS):
        return
    if not getattr(importlib.import_module(command_module(named)), "SERIAL_BLAS", False):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401  # loads OpenBLAS while the variable is set
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


def _build_models(modules: Sequence[str], args: Sequence[str]) -> None:
    """Import and build ``modules``. For the catalog's, the shipped catalog is loaded: from
    its cache (catalog/loader.py), building the catalog models only on a miss or when the
    command line names a user catalog file to validate."""
    if not modules:  # --help, --version, a typo: not even pydantic
        return
    from gpufabric.spec.types import build_models

    for module in modules:
        importlib.import_module(module)
        if module != "gpufabric.catalog.schema":
            build_models(module)
            continue
        _shipped_ids()
        if any(arg == "--catalog" or arg.startswith("--catalog=") for arg in args):
            build_models(module)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpufabric {__version__}")
        raise typer.Exit(0)


def build_app(only: Sequence[str] = COMMAND_MODULES) -> typer.Typer:
    """The typer app with the subcommands ``only`` registered (default: every one). Each
    module registers the command of its own name (tests/cli/test_app.py checks)."""
    app = typer.Typer(
        name="gpufabric",
        help="Plan, simulate, configure, secure and validate GPU-cluster fabrics and storage for AI training.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain click help, in every group (PLAIN_HELP): rich markup ate help text in square
        # brackets (netns:NS[@ADDR]), drew non-ASCII boxes, and its import (rich.markdown,
        # pygments) was half of `gpufabric --help` (benchmarks/bench_cli_help.py).
        rich_markup_mode=PLAIN_HELP,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """gpufabric: from 'what fabric should we buy?' to 'here is the proof it is fast, secure and reproducible'."""

    for name in only:
        importlib.import_module(command_module(name)).register(app)
    return app


def os_error_message(exc: OSError) -> tuple[str, int]:
    """One line and an exit code for an OSError from anywhere in a command."""
    where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno == errno.ENOSPC:
        what += " (free some space, or point the output elsewhere)"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        what += " (check the file's permissions)"
    elif exc.errno == errno.EROFS:
        what += " (choose a writable location)"
    code = 2 if exc.errno in _USER_ERRNOS else 1
    return f"{where}{what}", code


def _sqlite_message(exc: BaseException) -> str:
    text = str(exc)
    if "database or disk is full" in text:
        return f"results database: no space left on device ({text})"
    return f"results database: {text}"


def _flush_stdout() -> None:
    # Output is buffered: a full disk or closed pipe shows up only at the flush, which
    # must happen inside the error boundary rather than at interpreter exit.
    sys.stdout.flush()


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None, *, collector_paused: bool = False) -> int:
    """Run the CLI with ``argv`` (default: sys.argv[1:]) and return the exit code.

    ``collector_paused``: the entry switched the garbage collector off for the imports
    (``gpufabric.__main__.pause_collector``); it is switched back on once they are done.
    """
    try:
        with _sigterm_restored():
            return _main(argv, collector_paused)
    except KeyboardInterrupt as exc:  # a signal between the handler swap and _main's own try
        return _fail_interrupted(exc)


def _end_startup() -> None:
    """Hand Ctrl-C back to Python (KeyboardInterrupt, caught below) once imports are done.

    Until then the quiet exit installed by the entry (``gpufabric.__main__``) stays: a KeyboardInterrupt
    raised inside an import-lock callback is dropped by Python ("Exception ignored"), and
    the command would go on as if Ctrl-C had not been pressed.
    """
    if getattr(signal.getsignal(signal.SIGINT), "gpufabric_startup", False):  # gpufabric.__main__'s
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # SIGTERM (timeout, CI runners, scancel) takes the Ctrl-C path from here on: as the
    # default action it ended the process on the spot, rank groups left running for
    # seconds, finished measurements unstored, the run `running` and scratch left behind.
    # Until here (imports) the default action is right: nothing has started yet.
    if _own_sigterm():
        signal.signal(signal.SIGTERM, raise_terminated)


def _own_sigterm() -> bool:
    """Whether this command may handle SIGTERM: the main thread, and no handler set by an
    embedding program (only the default action, which would end the process on the spot)."""
    return threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
        signal.SIG_DFL,
        raise_terminated,
    )


@contextlib.contextmanager
def _sigterm_restored() -> Iterator[None]:
    """Put SIGTERM's handler back after the command (tests call main in-process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail_interrupted(exc: BaseException | None = None) -> int:
    code = interrupt_exit_code(exc)
    with contextlib.suppress(OSError):
        print("gpufabric: terminated" if code == 143 else "gpufabric: interrupted", file=sys.stderr)
    return code


def _shipped_ids() -> dict[str, set[str]]:
    from gpufabric.catalog import load_catalog

    return load_catalog().known_ids()


def _resume_collector(paused: bool) -> None:
    """Switch the garbage collector back on after start-up (``gpufabric.__main__.pause_collector``).

    What start-up made (modules, classes, validators, the catalog) lives until the process
    exits; ``gc.freeze`` moves it to the permanent generation so that the command's own
    collections do not walk it again (CPython docs, gc.freeze: "to avoid ... collections
    of objects that are not going to be freed").
    """
    if paused:
        import gc

        gc.freeze()
        gc.enable()


def _main(argv: Sequence[str] | None, collector_paused: bool = False) -> int:
    from gpufabric.boundary import set_default_ids

    # Every command checks catalog ids in specs and saved plans (a command with --catalog
    # passes its merged catalog's ids instead).
    set_default_ids(_shipped_ids)
    set_command_line([str(a) for a in argv] if argv is not None else None)  # stored with any run it records
    terminations = errors.terminations
    try:
        from gpufabric.cli.options import rewrite_renamed

        args = rewrite_renamed(list(argv) if argv is not None else sys.argv[1:])
        # A command line that names a subcommand gets an app with that one alone: importing
        # and building the other fifteen was a fifth of `gpufabric predict`'s CPU
        # (docs/performance.md). Anything else (--help, --version, a typo) gets all of them.
        named = args[0] if args and args[0] in COMMAND_MODULES else None
        command = typer.main.get_command(build_app((named,) if named else COMMAND_MODULES))
        _import_numpy_serial(named)
        _build_models(model_modules(named, args), args)  # inside the quiet window: see ALL_MODEL_MODULES
        _end_startup()
        _resume_collector(collector_paused)
        result = command.main(args=args, prog_name="gpufabric", standalone_mode=False)
        _flush_stdout()
    except typer.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Terminated (SIGTERM) included: 143
        return _fail_interrupted(exc)
    except typer.Abort as exc:  # click turns KeyboardInterrupt (and Terminated) into Abort from it
        return _fail_interrupted(exc.__cause__)
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
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    except SystemExit as exc:  # typer exits 1 itself on EPIPE, even in non-standalone mode
        return exc.code if isinstance(exc.code, int) else 1
    except OSError as exc:
        message, code = os_error_message(exc)
        return _fail(message, code)
    except UnicodeDecodeError as exc:
        return _fail(f"input is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})", 2)
    except OverflowError as exc:
        return _fail(f"a number is too large: {exc}", 2)
    except MemoryError:
        return _fail("out of memory: choose a smaller size", 1)
    except Exception as exc:
        # sqlite3.Error, without importing sqlite3 at every start (~2-5 ms, issue 32): the
        # module is loaded wherever one was raised.
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is None or not isinstance(exc, sqlite3.Error):
            raise
        return _fail(_sqlite_message(exc), 1)
    if result == 130 and errors.terminations > terminations:
        # typer turned the Terminated a SIGTERM raised into exit 130 (typer.core._main) itself.
        return _fail_interrupted(errors.Terminated())
    return result if isinstance(result, int) else 0


def _fail(message: str, code: int) -> int:
    with contextlib.suppress(OSError):  # stderr itself may be the full disk or closed pipe
        print(f"gpufabric: {'error' if code == 2 else 'failed'}: {message}", file=sys.stderr)
    return code


def run(*, collector_paused: bool = False) -> None:
    """Console-script entry point (``gpufabric.__main__.main``; ``collector_paused``: see :func:`main`)."""
    try:
        code = main(collector_paused=collector_paused)
    except KeyboardInterrupt as exc:  # between the signal handler swap and main's own try
        code = interrupt_exit_code(exc)
    if code in (130, 143):
        # The command has ended with the first signal's code: one more Ctrl-C or SIGTERM
        # while the interpreter shuts down must not replace it (killed by the signal, or a
        # traceback from a handler that runs during shutdown).
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(code)
