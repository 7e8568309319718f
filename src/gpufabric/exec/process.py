"""The one process wrapper: every external tool gpufabric runs goes through here.

Rules (STYLE.md "One process wrapper"): argv lists only (never a shell), stdin is
/dev/null so a tool that prompts cannot hang the suite, and every child gets its own
session (``start_new_session=True``) so that a timeout or an exit kills the child *and*
everything it spawned (mpirun ranks, iperf3 workers, a shell's grandchildren) by
signalling the process group. Output is drained by threads so a timeout still returns
what the tool printed before it was killed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpufabric.errors import CommandFailed, CommandTimeout, InputError, ToolNotFound


def _load_prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux/glibc: no parent-death signal
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: get SIGKILL when gpufabric dies, even by kill -9.

    Tools run in their own session (so a timeout can kill their group), which also means
    a killed ``gpufabric bench`` would orphan a running server forever; the parent-death
    signal closes that hole.
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


#: Grace between SIGTERM and SIGKILL of a process group: long enough for iperf3 and
#: sockperf servers to close their sockets, short enough not to stall a suite.
TERM_GRACE_S = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed:
    """A finished command and everything it printed."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float


def _resolve(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    if not argv:
        raise InputError("empty command")
    argv = [str(a) for a in argv]
    path = (env or os.environ).get("PATH", os.defpath)
    exe = shutil.which(argv[0], path=path)
    if exe is None:
        raise ToolNotFound(Path(argv[0]).name)
    return argv


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL it if anything is left; reaps the child.

    The group id is the child's pid (new session). The group is signalled even when the
    leader has already exited, because grandchildren may still hold it. After each signal
    it waits up to ``grace_s`` for the whole group, so nothing it started outlives the call.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _group_alive(proc.pid):
                proc.wait()
                return
            time.sleep(0.02)
    proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed user (setuid tool): still alive
        pass
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    """A process gpufabric started and must be able to stop later, by what the kernel knows of it.

    A pid alone names whatever process holds that number now: a lab's noisy neighbour that
    exited long ago, its pid reused by someone's editor, or whatever a hand-edited state file
    says. ``start_ticks`` (``/proc/PID/stat`` field 22, clock ticks after boot) and
    ``boot_id`` make the pair unique for the life of the machine; ``argv`` is what was
    started, to check the command too.
    """

    pid: int
    start_ticks: int
    boot_id: str
    argv: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "start_ticks": self.start_ticks, "boot_id": self.boot_id, "argv": list(self.argv)}

    @classmethod
    def from_dict(cls, data: object) -> Started | None:
        """A ticket read back from a state file; None for anything that is not one (never a pid <= 1)."""
        if not isinstance(data, dict):
            return None
        pid, ticks, boot, argv = data.get("pid"), data.get("start_ticks"), data.get("boot_id"), data.get("argv")
        if not (isinstance(pid, int) and not isinstance(pid, bool) and 1 < pid < 1 << 22):
            return None
        if not (isinstance(ticks, int) and ticks >= 0 and isinstance(boot, str) and isinstance(argv, list)):
            return None
        if not argv or not all(isinstance(a, str) for a in argv):
            return None
        return cls(pid=pid, start_ticks=ticks, boot_id=boot, argv=tuple(argv))


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group id, start ticks) of ``pid``, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the command name may hold spaces and ')'
    try:
        return int(fields[2]), int(fields[19])  # fields 5 (pgrp) and 22 (starttime) of proc(5)
    except (IndexError, ValueError):
        return None


def _cmdline(pid: int) -> tuple[str, ...]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(raw.decode("utf-8", "replace").split("\0")[:-1]) if raw else ()


def identify(pid: int, argv: Sequence[str]) -> Started | None:
    """The ticket of ``pid`` as it is now (None when it is gone, or pid <= 1)."""
    if pid <= 1:
        return None
    stat = _proc_stat(pid)
    if stat is None:
        return None
    return Started(pid=pid, start_ticks=stat[1], boot_id=_boot_id(), argv=tuple(argv))


def not_ours(ticket: Started) -> str:
    """Why ``ticket`` no longer names the process gpufabric started ('' when it still does).

    The same boot and start time, the process still leading its own group (it was started
    in a new session), and a command that is what was started: the launcher's argv, or the
    program it exec'd (``ip netns exec NS iperf3 ...`` becomes ``iperf3 ...``).
    """
    if ticket.pid <= 1:
        return f"pid {ticket.pid} is never one gpufabric started"
    stat = _proc_stat(ticket.pid)
    if stat is None:
        return f"pid {ticket.pid} has exited"
    pgrp, ticks = stat
    if ticket.boot_id != _boot_id() or ticks != ticket.start_ticks:
        return f"pid {ticket.pid} is another process now (started at another time)"
    if pgrp != ticket.pid:
        return f"pid {ticket.pid} no longer leads its own process group"
    current = _cmdline(ticket.pid)
    if current:
        name = Path(current[0]).name
        if name not in " ".join(ticket.argv) and Path(ticket.argv[0]).name != name:
            return f"pid {ticket.pid} runs {name!r}, not what gpufabric started"
    return ""


def spawn_detached(argv: Sequence[str], *, log: Path, env: Mapping[str, str] | None = None) -> Started:
    """Start a process that must outlive this command (the lab's noisy neighbour, its daemons).

    Own session (its pid is its process-group id), no stdin, stdout and stderr appended to
    ``log``, the complete environment ``env`` (default: this process's), and no parent-death
    signal, because it is stopped later by another command with :func:`stop_started`.
    Returns its ticket (to keep in a state file).
    """
    argv = _resolve(argv, env)
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    ticket = identify(proc.pid, argv)
    # A child that exited at once is a zombie until reaped, and its /proc entry still reads.
    return ticket or Started(pid=proc.pid, start_ticks=-1, boot_id=_boot_id(), argv=tuple(argv))


def stop_started(ticket: Started, grace_s: float = TERM_GRACE_S) -> str:
    """Stop the process group of ``ticket`` if it is still the one gpufabric started.

    Returns '' when it was signalled (or was already gone), else why it was left alone:
    a reused pid, or one a state file names that gpufabric never started, is never signalled.
    """
    why = not_ours(ticket)
    if why:
        return "" if why.endswith("has exited") else why
    kill_pgid(ticket.pid, grace_s)
    return ""


def kill_pgid(pgid: int, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM, then SIGKILL, a process group started earlier by :func:`spawn_detached`.

    Reaps the leader when it is our child; returns once the group is gone or SIGKILL was
    sent and ``grace_s`` passed. A group that no longer exists is not an error. A pgid <= 1
    is refused (``killpg(0)`` is the caller's own group, 1 is init's): callers check
    :func:`not_ours` first (:func:`stop_started`).
    """
    if pgid <= 1:
        raise ValueError(f"process group {pgid}: never signalled (0 is the caller's own group, 1 is init's)")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pgid, os.WNOHANG)
            if not _group_alive(pgid):
                return
            time.sleep(0.02)


class _Drain:
    """Read a pipe to EOF on a thread, keeping everything read so far."""

    def __init__(self, pipe) -> None:
        self._chunks: list[bytes] = []
        self._pipe = pipe
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for chunk in iter(lambda: self._pipe.read1(65536), b""):
            self._chunks.append(chunk)
        self._pipe.close()

    def so_far(self) -> str:
        return b"".join(self._chunks).decode("utf-8", errors="replace")

    def text(self, join_timeout_s: float = 1.0) -> str:
        """Everything, once the pipe closes (or after ``join_timeout_s``)."""
        # A grandchild that escaped the group could keep the pipe open; never wait forever.
        self._thread.join(join_timeout_s)
        return self.so_far()


def _spawn(argv: list[str], cwd: str | Path | None, env: Mapping[str, str] | None) -> subprocess.Popen:
    """Start a tool in its own process group (so a timeout can kill all of it), no stdin."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def run(
    argv: Sequence[str],
    *,
    timeout_s: float,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = False,
) -> Completed:
    """Run ``argv`` to completion and return its output.

    Args:
        argv: the command as a list; argv[0] is looked up on PATH (of ``env`` if given).
        timeout_s: wall-clock limit; past it the whole process group is killed.
        cwd: working directory.
        env: the complete environment of the child (default: this process's).
        check: raise CommandFailed when the exit status is not 0.

    The child is SIGKILLed if the thread that started it dies (parent-death signal), so
    call this from a thread that outlives the command (normally the main thread).

    Raises:
        ToolNotFound: argv[0] is not installed.
        CommandTimeout: the timeout expired; carries the partial stdout/stderr.
        CommandFailed: ``check`` is set and the tool exited non-zero.
    """
    argv = _resolve(argv, env)
    start = time.monotonic()
    try:
        proc = _spawn(argv, cwd, env)
    except FileNotFoundError as exc:  # raced with an uninstall, or cwd is missing
        if cwd is not None and not Path(cwd).is_dir():
            raise InputError(f"working directory {cwd} does not exist") from exc
        raise ToolNotFound(Path(argv[0]).name) from exc
    except PermissionError as exc:
        raise ToolNotFound(f"{argv[0]} (not executable)") from exc
    out, err = _Drain(proc.stdout), _Drain(proc.stderr)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise CommandTimeout(argv, timeout_s, out.text(), err.text()) from None
    except BaseException:  # Ctrl-C while waiting: leave nothing behind
        kill_group(proc)
        raise
    # The leader exited; reap anything it left running in its group (a daemonised
    # grandchild would otherwise outlive the suite).
    if _group_alive(proc.pid):
        kill_group(proc, grace_s=0.1)
    completed = Completed(
        argv=tuple(argv),
        returncode=proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        duration_s=time.monotonic() - start,
    )
    if check and completed.returncode != 0:
        raise CommandFailed(argv, completed.returncode, completed.stdout, completed.stderr)
    return completed


@contextmanager
def interrupt_once() -> Iterator[list[int]]:
    """While active, the first SIGINT or SIGTERM raises as usual and later ones are held.

    The first one starts a cleanup (every rank's process group killed, what finished
    stored); a second Ctrl-C, or SIGTERM then SIGINT from a CI runner, would otherwise cut
    that cleanup short and leave ranks running. Held signals are listed in the yielded list
    (the first included) and dropped on exit: the command is ending with the first one's
    code already. Only handlers set from Python are wrapped (``default_int_handler``,
    ``errors.raise_terminated``; an ignored or default signal is left as it is); outside the
    main thread nothing changes.
    """
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous: dict[int, Callable[..., object]] = {}

    def wrap(inner: Callable[..., object]) -> Callable[[int, object], None]:
        def handler(signum: int, frame: object) -> None:
            first = not seen
            seen.append(signum)
            if first:
                inner(signum, frame)  # raises KeyboardInterrupt / Terminated

        return handler

    for num in (int(signal.SIGINT), int(signal.SIGTERM)):
        current = signal.getsignal(num)
        if callable(current):
            previous[num] = current
            signal.signal(num, wrap(current))
    try:
        yield seen
    finally:
        for num, handler in previous.items():
            signal.signal(num, handler)


def free_port(host: str = "127.0.0.1", *, attempts: int = 20) -> int:
    """A port that is free for both TCP and UDP on ``host`` right now, chosen by the kernel.

    Benchmark servers bind ports chosen at run time, not fixed ones: two suites on one
    host (two users, or a retry while a killed run's server lingers) would otherwise
    start servers on the same port and measure each other's. Free for both protocols so
    one choice serves iperf3 (TCP and UDP tests), sockperf and perftest's TCP side.
    """
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind((host, 0))
            port = tcp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind((host, port))
                except OSError:
                    continue
        return port
    raise CommandFailed(["bind", host], 1, "", f"no port free for both TCP and UDP on {host} after {attempts} tries")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def _proc_net_has(tables: tuple[str, ...], port: int, state: str | None) -> bool:
    wanted = f":{port:04X}"
    for table in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[1].endswith(wanted) and (state is None or fields[3] == state):
                return True
    return False


def tcp_listening(port: int) -> bool:
    """True when a local socket listens on TCP ``port``.

    Read from /proc/net/tcp rather than by connecting: a probe connection would be
    taken as a client by one-shot servers (``iperf3 -s -1``) and end their test.
    """
    return _proc_net_has(("/proc/net/tcp", "/proc/net/tcp6"), port, "0A")  # 0A = TCP_LISTEN


def udp_port_bound(port: int) -> bool:
    """True when a local UDP socket is bound to ``port`` (read from /proc/net/udp)."""
    return _proc_net_has(("/proc/net/udp", "/proc/net/udp6"), port, None)


@dataclass(slots=True)
class Server:
    """A background server started by :func:`start_server`."""

    argv: tuple[str, ...]
    proc: subprocess.Popen[bytes]
    _out: _Drain
    _err: _Drain

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> tuple[str, str]:
        """stdout and stderr so far (complete once the server is stopped)."""
        return self._out.so_far(), self._err.so_far()


@contextmanager
def start_server(
    argv: Sequence[str],
    *,
    ready: Callable[[], bool] | int,
    timeout_s: float = 10.0,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[Server]:
    """Start a background server, wait until it is ready, and always kill its group on exit.

    Args:
        argv: the server command.
        ready: a TCP port that must be listening (checked without connecting), or a
            callable returning True when the server is ready.
        timeout_s: how long to wait for readiness.

    Raises:
        ToolNotFound: argv[0] is not installed.
        CommandFailed: the server exited before it became ready.
        CommandTimeout: it did not become ready within ``timeout_s`` (it is killed).
    """
    argv = _resolve(argv, env)
    check_ready: Callable[[], bool] = (lambda: tcp_listening(ready)) if isinstance(ready, int) else ready
    if isinstance(ready, int) and tcp_listening(ready):
        # Someone else's server: "ready" would be true at once and we would measure it.
        raise CommandFailed(argv, 1, "", f"port {ready} is already in use by another process")
    proc = _spawn(argv, cwd, env)
    server = Server(tuple(argv), proc, _Drain(proc.stdout), _Drain(proc.stderr))
    try:
        deadline = time.monotonic() + timeout_s
        while not check_ready():
            if proc.poll() is not None:
                out, err = server.output()
                raise CommandFailed(argv, proc.returncode, out, err)
            if time.monotonic() > deadline:
                out, err = server.output()
                raise CommandTimeout(argv, timeout_s, out, err)
            time.sleep(0.02)
        yield server
    finally:
        kill_group(proc)
