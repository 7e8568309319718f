"""Issue 24, boundaries of the results store: names that are not stores, a damaged
schema version, read-only databases for reading commands, environment failures exit 1."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from gpufabric.errors import InputError
from gpufabric.results.store import Store, StoreDamaged, StoreFailure
from tests.results.factories import make_run


@pytest.mark.parametrize("name", [":memory:", "file:x?mode=memory", "file:/tmp/x.db", ""])
def test_names_that_keep_nothing_are_refused(tmp_path, name, monkeypatch, cli):
    with pytest.raises(InputError, match="not a results file"):
        Store.open(name)
    monkeypatch.setenv("GPUFABRIC_DB", name)
    if name:  # GPUFABRIC_DB="" is refused too (a private temporary database)
        with pytest.raises(InputError, match="GPUFABRIC_DB"):
            Store.open()
    code, _out, err = cli("runs", "--db", name or ":memory:")
    assert code == 2 and "not a results file" in err and "Traceback" not in err


def test_ingest_into_memory_is_refused_not_reported_stored(tmp_path, cli):
    log = Path(__file__).resolve().parents[1] / "data" / "fio" / "psync_read.json"
    code, out, err = cli("ingest", str(log), "--tool", "fio", "--db", ":memory:")
    assert code == 2 and "stored" not in out and "not a results file" in err


def test_a_damaged_schema_version_is_one_line_exit_1(tmp_path, cli):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        make_run(store)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value='abc' WHERE key='schema_version'")
    with pytest.raises(StoreDamaged, match="table meta, column value"):
        Store.open(db)
    code, _out, err = cli("runs", "--db", db)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "schema_version" in err and "Traceback" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files; the mount test below covers root")
def test_a_read_only_database_lists(tmp_path, cli):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        make_run(store)
    os.chmod(db, 0o444)
    code, out, err = cli("runs", "--db", db)
    assert code == 0, err
    assert out.strip()


def test_a_read_only_mount_lists_and_refuses_writes(tmp_path, cli):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    import shutil
    import subprocess

    if shutil.which("unshare") is None:
        pytest.skip("unshare missing")
    db_dir = tmp_path / "ro"
    db_dir.mkdir()
    with Store.open(db_dir / "r.db") as store:
        make_run(store)
    # a private mount namespace: bind the directory read-only and list the runs in it
    script = (
        f"mount --bind {db_dir} {db_dir} && mount -o remount,bind,ro {db_dir} && "
        f"{os.sys.executable} -m gpufabric runs --db {db_dir / 'r.db'} --format json; echo rc=$?; "
        f"{os.sys.executable} -m gpufabric ingest {db_dir / 'r.db'} --db {db_dir / 'r.db'} >/dev/null 2>&1; echo rc=$?"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in os.sys.path if p)}
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert "rc=0" in done.stdout.splitlines()[-2], done.stdout + done.stderr
    assert '"runs"' in done.stdout or '"id"' in done.stdout
    assert done.stdout.splitlines()[-1] in ("rc=1", "rc=2")  # never a traceback; writing is refused


def test_open_failures_of_the_machine_exit_1(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError):  # a path through a file: the user's path is wrong (exit 2)
        Store.open(blocker / "r.db")
    with pytest.raises(InputError, match="is a directory"):
        Store.open(tmp_path)
    os.mkfifo(tmp_path / "fifo.db")
    for special in (tmp_path / "fifo.db", "/dev/null"):  # sqlite would read a FIFO, "migrate" /dev/null
        with pytest.raises(InputError, match="not a regular file"):
            Store.open(special, create=False)
    assert issubclass(StoreFailure, Exception) and not issubclass(StoreFailure, InputError)


def test_a_full_disk_exits_1_not_2(tmp_path):
    """A 64 KiB tmpfs filled up, in a private mount namespace: opening a store there is
    an environment failure (exit 1), not a bad input (2)."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a tmpfs")
    mnt = tmp_path / "full"
    mnt.mkdir()
    sample = Path(__file__).resolve().parents[1] / "data" / "fio" / "psync_read.json"
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {mnt} && dd if=/dev/zero of={mnt}/fill bs=4k count=100 2>/dev/null;"
        f" {os.sys.executable} -m gpufabric ingest {sample} --tool fio --db {mnt}/r.db; echo rc=$?"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in os.sys.path if p)}
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.stdout.strip().splitlines()[-1] == "rc=1", done.stdout + done.stderr
    assert "disk is full" in done.stderr and "Traceback" not in done.stderr
