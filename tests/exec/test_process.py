"""process.run / start_server: timeouts kill the whole group, partial output is kept."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpufabric.errors import CommandFailed, CommandTimeout, InputError, ToolNotFound
from gpufabric.exec import process
from gpufabric.exec.process import port_open, run, start_server
from tests.conftest import finishes, group_gone, wait_until

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_run_returns_output_and_status():
    done = run([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], timeout_s=10)
    assert done.returncode == 3
    assert done.stdout == "out\n"
    assert done.stderr == "err\n"
    assert done.duration_s > 0


def test_stdin_is_devnull():
    done = run([PY, "-c", "import sys; print(repr(sys.stdin.read()))"], timeout_s=10)
    assert done.stdout.strip() == "''"


def test_check_raises_command_failed_with_output():
    with pytest.raises(CommandFailed, match="exited 2: boom") as info:
        run([PY, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(2)"], timeout_s=10, check=True)
    assert info.value.returncode == 2
    assert "boom" in info.value.stderr


def test_missing_tool_is_tool_not_found():
    with pytest.raises(ToolNotFound, match="no-such-tool-gpufabric not installed"):
        run(["no-such-tool-gpufabric", "--x"], timeout_s=5)


def test_empty_argv_is_input_error():
    with pytest.raises(InputError):
        run([], timeout_s=5)


def test_timeout_kills_group_keeps_partial_output_and_grandchild(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    leader = tmp_path / "leader.pid"
    # The child prints, spawns a grandchild that sleeps (same process group, holding the
    # pipes), then hangs. Both sleep far past the hang guard: run() returns only if it
    # kills the group instead of waiting for the output pipes to close.
    script = (
        "import os, subprocess, sys, time\n"
        f"open({str(leader)!r}, 'w').write(str(os.getpid()))\n"
        "print('partial line', flush=True)\n"
        "print('to stderr', file=sys.stderr, flush=True)\n"
        f"g = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(g.pid))\n"
        "time.sleep(600)\n"
    )

    def call():
        with pytest.raises(CommandTimeout) as info:
            run([PY, "-c", script], timeout_s=1.5)
        return info

    info = finishes(call)
    assert info.value.stdout == "partial line\n"
    assert "to stderr" in info.value.stderr
    assert info.value.timeout_s == 1.5
    grandchild = int(pidfile.read_text())
    wait_until(lambda: not _alive(grandchild), what=f"grandchild {grandchild} gone")
    # The child led its own group (start_new_session): nothing of that group is left.
    wait_until(lambda: group_gone(int(leader.read_text())), what="process group gone")


def test_grandchild_left_running_after_normal_exit_is_reaped(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys\n"
        f"g = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(600)'],"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pidfile)!r}, 'w').write(str(g.pid))\n"
        "print('done')\n"
    )
    done = run([PY, "-c", script], timeout_s=10)
    assert done.returncode == 0 and done.stdout == "done\n"
    grandchild = int(pidfile.read_text())
    wait_until(lambda: not _alive(grandchild), what=f"grandchild {grandchild} gone")


def test_timeout_ignores_sigterm_then_sigkill(tmp_path):
    leader = tmp_path / "leader.pid"
    script = (
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(leader)!r}, 'w').write(str(os.getpid()))\n"
        "print('x', flush=True)\ntime.sleep(600)\n"
    )

    def call():
        with pytest.raises(CommandTimeout) as info:
            run([PY, "-c", script], timeout_s=0.8)
        return info

    # Only SIGKILL ends a child that ignores SIGTERM and sleeps past the hang guard.
    info = finishes(call)
    assert info.value.stdout == "x\n"
    assert group_gone(int(leader.read_text()))


PORT = 5297  # inside the bench tests' loopback range 5201-5299


def test_start_server_waits_for_port_and_kills_on_exit():
    script = (
        "import socket, time\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {PORT})); s.listen()\n"
        "time.sleep(60)\n"
    )
    with start_server([PY, "-c", script], ready=PORT, timeout_s=10) as server:
        assert port_open(PORT)
        pid = server.pid
    assert not _alive(pid)
    assert not port_open(PORT)


def test_start_server_that_dies_is_command_failed():
    with pytest.raises(CommandFailed, match="exited 4"):
        with start_server([PY, "-c", "import sys; print('bad flag', file=sys.stderr); sys.exit(4)"], ready=PORT):
            pass


def test_start_server_never_ready_is_timeout_and_killed(tmp_path):
    pidfile = tmp_path / "pid"
    script = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    with pytest.raises(CommandTimeout), start_server([PY, "-c", script], ready=lambda: False, timeout_s=0.7):
        pass
    assert not _alive(int(pidfile.read_text()))


def test_start_server_kills_on_exception_in_body():
    script = f"import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', {PORT})); s.listen(); time.sleep(60)\n"
    with pytest.raises(RuntimeError), start_server([PY, "-c", script], ready=PORT) as server:
        pid = server.pid
        raise RuntimeError("body failed")
    assert not _alive(pid)


def test_server_dies_with_a_killed_parent(tmp_path):
    """kill -9 of gpufabric must not orphan a background server (parent-death signal)."""
    import signal
    import subprocess

    pidfile = tmp_path / "server.pid"
    parent = (
        "import time\n"
        "from gpufabric.exec.process import start_server\n"
        f"with start_server([{PY!r}, '-c', 'import time; time.sleep(600)'], ready=lambda: True) as s:\n"
        f"    open({str(pidfile)!r}, 'w').write(str(s.pid))\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([PY, "-c", parent], start_new_session=True)
    try:
        wait_until(lambda: pidfile.exists() and pidfile.read_text() != "", what="parent started its server")
        server_pid = int(pidfile.read_text())
        assert _alive(server_pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_until(lambda: not _alive(server_pid), what=f"server {server_pid} gone after its parent died")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_started_process_is_stopped_only_while_its_ticket_matches(tmp_path):
    """Issue 24: a reused pid, an edited state file or `noise_pids: [0]` never gets a signal."""
    ticket = process.spawn_detached(["sleep", "30"], log=tmp_path / "log")
    assert ticket.pid > 1 and process.not_ours(ticket) == ""
    # The same pid under another start time is another process: left alone.
    reused = process.Started(
        pid=ticket.pid, start_ticks=ticket.start_ticks + 1, boot_id=ticket.boot_id, argv=ticket.argv
    )
    assert "another process" in process.stop_started(reused)
    assert process.not_ours(ticket) == ""  # still running
    # A ticket naming a process gpufabric did not start (this test's own) is refused.
    mine = process.identify(os.getpid(), ["sleep", "30"])
    assert mine is not None and process.stop_started(mine) != ""  # not a group leader / not sleep
    assert process.identify(1, ["x"]) is None and process.identify(0, ["x"]) is None
    assert process.Started.from_dict({"pid": 0, "start_ticks": 0, "boot_id": "", "argv": ["x"]}) is None
    assert process.Started.from_dict({"pid": "1234", "start_ticks": 0, "boot_id": "", "argv": ["x"]}) is None
    with pytest.raises(ValueError, match="never signalled"):
        process.kill_pgid(0)  # killpg(0) would be the caller's own group
    assert process.stop_started(ticket) == ""
    assert process.not_ours(ticket).endswith("has exited")
    assert process.Started.from_dict(ticket.to_dict()) == ticket
