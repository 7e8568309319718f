"""Runners: build a tool's argv from a profile, run it through ``process``, parse, return a TestResult.

Planning and running are separate so that ``--dry-run`` prints exactly what would run
and so that suites take an *executor* (STYLE.md "An executor seam"): the real
:class:`LocalExecutor` here, or a fake in tests. Nothing a tool does can crash a suite:
a missing tool becomes a skipped result ("skipped: <tool> not installed"), a hung one a
timeout result with its partial output, unparseable output a failed result quoting it.
"""

from __future__ import annotations

import shlex
import socket
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpufabric.bench import parsers
from gpufabric.bench.parsers import Parsed, parser_for
from gpufabric.errors import CommandFailed, CommandTimeout, ParseError, ToolNotFound
from gpufabric.exec import process
from gpufabric.results.records import Status, TestResult

#: Keep at most this much of a tool's output with each result (the store keeps it for
#: provenance; a sockperf full log can be megabytes and is summarised into samples).
RAW_OUTPUT_LIMIT = 200_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSpec:
    """A background server a test needs (iperf3 -s, sockperf server, perftest server side)."""

    argv: tuple[str, ...]
    port: int
    protocol: str = "tcp"  # how readiness is checked: a listening TCP port or a bound UDP port


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedTest:
    """One tool invocation a suite will make."""

    name: str  # result name, e.g. "fio.checkpoint_write"
    tool: str  # parser key: fio, iperf3, sockperf, perftest, nccl-tests
    argv: tuple[str, ...]
    timeout_s: float
    server: ServerSpec | None = None
    cwd: str | None = None
    log_file: str | None = None  # a file the tool writes that is parsed with its stdout
    mkdirs: tuple[str, ...] = ()  # directories (inside the scratch dir) to create first
    params: dict[str, str] = field(default_factory=dict)
    skip_reason: str = ""  # known before running (no RDMA device, binary absent)
    repeat: int = 1

    def with_server_port(self, port: int) -> PlannedTest:
        """This test with its local server (and the client's ``-p``) moved to ``port``."""
        if self.server is None:
            return self
        old = str(self.server.port)

        def move(argv: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(str(port) if i and argv[i - 1] == "-p" and a == old else a for i, a in enumerate(argv))

        server = replace(self.server, argv=move(self.server.argv), port=port)
        return replace(self, server=server, argv=move(self.argv), params={**self.params, "port": str(port)})

    def command_lines(self) -> list[str]:
        lines = []
        if self.server is not None:
            lines.append(shlex.join(self.server.argv) + " &")
        lines.append(shlex.join(self.argv))
        return lines


Executor = Callable[[PlannedTest], TestResult]


def _parse(test: PlannedTest, stdout: str, log_text: str | None) -> list[Parsed]:
    parse = parser_for(test.tool)
    if test.tool == "sockperf":  # the per-packet log adds raw samples to the summary on stdout
        return parse(stdout, source=test.name, full_log=log_text)
    if test.tool == "perftest" and log_text is not None:  # --out_json_file holds the results
        return parse(log_text, source=test.name)
    return parse(stdout, source=test.name)


def skipped(test: PlannedTest, reason: str, host: str) -> TestResult:
    return TestResult(
        name=test.name,
        tool=test.tool,
        host=host,
        status=Status.skipped,
        reason=reason,
        argv=test.argv,
        started_at=time.time(),
        params={**test.params, "repeat": str(test.repeat)},
    )


def to_result(
    test: PlannedTest,
    parsed: list[Parsed],
    *,
    host: str,
    returncode: int,
    stderr: str,
    started_at: float,
    duration_s: float,
    raw: str,
) -> TestResult:
    """Turn parsed output into a TestResult (``parsers.to_result``, as ingest does): failed when
    the tool said so, exited non-zero, or printed values that cannot be true."""
    failure = ""
    if returncode != 0 and not parsed[0].error:
        tail = (stderr.strip().splitlines() or [""])[-1]
        failure = f"{test.argv[0]} exited {returncode}: {tail[:200]}".rstrip(": ")
    result = parsers.to_result(
        parsed[0],
        name=test.name,
        host=host,
        failure=failure,
        argv=test.argv,
        started_at=started_at,
        duration_s=duration_s,
        raw_output=raw[:RAW_OUTPUT_LIMIT],
        params={**test.params, "repeat": str(test.repeat)},
    )
    # The suite's result carries its planned tool name (the parser key), as before.
    return result if result.tool == test.tool else replace(result, tool=test.tool)


class LocalExecutor:
    """Runs planned tests on this host, one at a time."""

    def __init__(self, *, env: Mapping[str, str] | None = None, host: str | None = None) -> None:
        self.env = dict(env) if env is not None else None
        self.host = host or socket.gethostname()

    def __call__(self, test: PlannedTest) -> TestResult:
        if test.skip_reason:
            return skipped(test, test.skip_reason, self.host)
        if test.server is not None:
            # A loopback server gets a port the kernel says is free now (process.free_port),
            # so a second bench on this host never meets or measures this one's servers.
            test = test.with_server_port(process.free_port())
        for directory in test.mkdirs:
            Path(directory).mkdir(parents=True, exist_ok=True)
        started_at = time.time()
        start = time.monotonic()
        params = {**test.params, "repeat": str(test.repeat)}

        def failed(status: Status, reason: str, duration_s: float, raw: str) -> TestResult:
            return TestResult(
                name=test.name,
                tool=test.tool,
                host=self.host,
                status=status,
                reason=reason,
                argv=test.argv,
                started_at=started_at,
                duration_s=duration_s,
                raw_output=raw[:RAW_OUTPUT_LIMIT],
                params=params,
            )

        try:
            server = test.server
            context = (
                process.start_server(server.argv, ready=_ready(server), timeout_s=10, cwd=test.cwd, env=self.env)
                if server is not None
                else nullcontext()
            )
            with context:
                done = process.run(test.argv, timeout_s=test.timeout_s, cwd=test.cwd, env=self.env)
        except ToolNotFound as exc:
            return skipped(test, f"skipped: {exc.tool} not installed", self.host)
        except CommandTimeout as exc:
            raw = exc.stdout + ("\n--- stderr ---\n" + exc.stderr if exc.stderr else "")
            return failed(Status.timeout, str(exc), time.monotonic() - start, raw)
        except CommandFailed as exc:  # the server died before it was ready
            return failed(Status.failed, f"server: {exc}", time.monotonic() - start, exc.stderr or exc.stdout)
        duration_s = time.monotonic() - start
        log_text = None
        if test.log_file and Path(test.log_file).is_file():
            log_text = Path(test.log_file).read_text(errors="replace")
        raw = done.stdout + ("\n--- stderr ---\n" + done.stderr if done.stderr.strip() else "")
        try:
            parsed = _parse(test, done.stdout, log_text)
        except ParseError as exc:
            reason = f"exited {done.returncode}; " if done.returncode else ""
            return failed(Status.failed, f"{reason}unparseable output: {exc}", duration_s, raw)
        return to_result(
            test,
            parsed,
            host=self.host,
            returncode=done.returncode,
            stderr=done.stderr,
            started_at=started_at,
            duration_s=duration_s,
            raw=raw,
        )


def _ready(server: ServerSpec):
    if server.protocol == "udp":
        return lambda: process.udp_port_bound(server.port)
    return server.port
