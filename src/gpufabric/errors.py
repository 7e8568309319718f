"""The one exception tree of gpufabric.

::

    GpufabricError                      base; never raised directly
    |-- UserError                       bad input; the CLI exits 2
    |   |-- SpecError                   a spec or catalog file is invalid (file:line:col, field, fix)
    |   |-- CatalogError                a catalog id is unknown
    |   `-- InputError                  a bad flag value or input file
    |       `-- ParseError              a tool's output cannot be parsed
    `-- EnvironmentFailure              the world failed us; the CLI exits 1
        |-- ToolNotFound                an external tool is not installed
        |-- CommandFailed               a tool exited non-zero
        `-- CommandTimeout              a tool ran past its timeout and was killed

    KeyboardInterrupt                   Ctrl-C (SIGINT); the CLI exits 130
    `-- Terminated                      SIGTERM (timeout, CI runners, scancel); the CLI exits 143

The library raises these and never prints or exits; ``gpufabric.cli`` maps them to
exit codes (user errors 2, environment failures 1, Ctrl-C 130, SIGTERM 143). Third-party exceptions
are translated at the boundary with ``raise ... from``.
"""

from __future__ import annotations


class GpufabricError(Exception):
    """Base of every error gpufabric raises on purpose."""


class UserError(GpufabricError):
    """The user gave something invalid; the message says what, where and how to fix."""


class SpecError(UserError):
    """A spec (or catalog) file is invalid at a known place.

    Args:
        file: path of the offending file as the user named it.
        line: 1-based line, or None when the place is unknown (for example a missing key).
        column: 1-based column, or None.
        field: dotted field path such as ``workload.parallelism.tp``.
        message: what is wrong and what was expected.
        fix: how to fix it, when there is a useful hint.
    """

    def __init__(
        self,
        *,
        file: str,
        field: str,
        message: str,
        line: int | None = None,
        column: int | None = None,
        fix: str = "",
    ) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        self.message = message
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = f"{where}: {self.field or '<top level>'}: {self.message}"
        if self.fix:
            text += f" ({self.fix})"
        return text


class CatalogError(UserError):
    """A catalog id (GPU, fabric, storage backend) is unknown; the message suggests the closest."""


class InputError(UserError):
    """A bad command-line value or input file."""


class ParseError(InputError):
    """Tool output that cannot be parsed; the message quotes the offending text."""

    def __init__(self, message: str, *, source: str = "", excerpt: str = "") -> None:
        self.source = source
        self.excerpt = excerpt[:200]
        text = f"{source}: {message}" if source else message
        if self.excerpt:
            text += f" (near {self.excerpt!r})"
        super().__init__(text)


class EnvironmentFailure(GpufabricError):
    """Something outside gpufabric failed: a tool, a host, the network."""


class ToolNotFound(EnvironmentFailure):
    """An external tool is not on PATH."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        super().__init__(f"{tool} not installed")


class CommandFailed(EnvironmentFailure):
    """A tool exited non-zero; keeps what it printed."""

    def __init__(self, argv: list[str] | tuple[str, ...], returncode: int, stdout: str = "", stderr: str = "") -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        tail = (stderr or stdout).strip().splitlines()[-1:] or [""]
        super().__init__(f"{argv[0]} exited {returncode}: {tail[0][:200]}")


class CommandTimeout(EnvironmentFailure):
    """A tool ran past its timeout; its process group was killed, partial output kept."""

    def __init__(self, argv: list[str] | tuple[str, ...], timeout_s: float, stdout: str = "", stderr: str = "") -> None:
        self.argv = tuple(argv)
        self.timeout_s = timeout_s
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(f"{argv[0]} timed out after {timeout_s:g} s and was killed")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python raises KeyboardInterrupt for SIGINT (``cli.app`` installs it).

    A KeyboardInterrupt subclass on purpose: every cleanup written for Ctrl-C (process groups
    killed, finished results stored, the run marked ``interrupted``, scratch removed) runs for
    SIGTERM too, and only the exit code differs (``interrupt_exit_code``).
    """

    signum = 15


#: SIGTERMs delivered through ``raise_terminated`` in this process: typer turns any
#: KeyboardInterrupt into exit 130 before ``cli.app`` sees it, and this tells it was SIGTERM.
terminations = 0


def raise_terminated(signum: int, frame: object) -> None:
    """The SIGTERM handler ``cli.app`` installs: SIGTERM becomes ``Terminated``."""
    global terminations
    terminations += 1
    raise Terminated()


def interrupt_exit_code(exc: BaseException | None) -> int:
    """128 + the signal number, as a shell reports it: 143 for SIGTERM, 130 for Ctrl-C."""
    return 128 + Terminated.signum if isinstance(exc, Terminated) else 130
