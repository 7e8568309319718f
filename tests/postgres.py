"""A real, private PostgreSQL server for the fleet-store tests (Debian's postgresql package).

``initdb`` into a temporary directory, ``postgres`` listening on a Unix socket only (no TCP:
nothing leaves the machine), stopped by PID when the session ends. PostgreSQL refuses to
run as root, so under root the server runs as the package's ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PORT = 54329  # a Unix-socket "port": it only names the socket file, no TCP port is opened


def binaries() -> Path | None:
    """The newest installed server's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _as_server_user() -> tuple[list[str], int | None]:
    """argv prefix and uid to run the server with (runuser to 'postgres' when we are root)."""
    if os.geteuid() != 0:
        return [], None
    return ["runuser", "-u", "postgres", "--"], pwd.getpwnam("postgres").pw_uid


@contextmanager
def server() -> Iterator[str]:
    """Start a throwaway server; yields a ``postgresql://`` URL for a database ``gpufabric``."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server installed (apt-get install postgresql)")
    prefix, uid = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="gpufabric-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if uid is not None:
        os.chown(root, uid, -1)
        os.chown(sock, uid, -1)
    proc = None
    try:
        subprocess.run(
            [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        proc = subprocess.Popen(
            [
                *prefix,
                str(bin_dir / "postgres"),
                "-D",
                str(data),
                "-p",
                str(PORT),
                "-k",
                str(sock),
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",  # a test server: durability is SQLite's concern here, speed is ours
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while subprocess.run(
            [str(bin_dir / "pg_isready"), "-h", str(sock), "-p", str(PORT)], capture_output=True
        ).returncode:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"postgres did not start: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"
                )
            time.sleep(0.1)
        subprocess.run(
            [*prefix, str(bin_dir / "createdb"), "-h", str(sock), "-p", str(PORT), "-U", "postgres", "gpufabric"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        yield f"postgresql://postgres@/gpufabric?host={sock}&port={PORT}"
    finally:
        if proc is not None and proc.poll() is None:
            # The postmaster's PID (runuser execs it in place): SIGINT is PostgreSQL's "fast shutdown".
            pids = (data / "postmaster.pid").read_text().split()[:1] if (data / "postmaster.pid").exists() else []
            for pid in pids:
                os.kill(int(pid), signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
