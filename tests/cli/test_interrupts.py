"""Interruptions lose nothing (issue 23): SIGINT and SIGTERM on a running probe stop every
rank's process group, store every finished size with the run `interrupted`, remove the
scratch directory and exit 130 / 143. Real ranks (gloo on loopback), per launcher here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpufabric.results.store import Store
from tests.conftest import MARK_VAR, marked_pids, wait_until

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("torch")

#: Bounded stop: SIGTERM then SIGKILL of each launcher group (launch.execute, 2 s grace each)
#: plus storing what finished; far below the seconds the ranks ran on before (issue 23).
STOP_BUDGET_S = 15.0


def _collectives(db: Path, mark: str, launcher: str, port: int) -> subprocess.Popen[str]:
    """A long sweep (15 sizes of all_reduce, 30 iterations each) streaming one JSON line per size."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}", **{MARK_VAR: mark})
    env["TMPDIR"] = str(db.parent)  # the probe's own scratch directory lands here, to check it is removed
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpufabric",
            "bench",
            "collectives",
            "--ops",
            "all_reduce",
            "--sizes",
            "1K:16M",
            "--iters",
            "30",
            "--warmup",
            "1",
            "--launcher",
            launcher,
            "--master-port",
            str(port),
            "--db",
            str(db),
            "--format",
            "json",
            "--stream",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )


def _sizes_seen(proc: subprocess.Popen[str], count: int, timeout_s: float = 120.0) -> list[dict]:
    assert proc.stdout is not None
    rows: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while len(rows) < count:
        line = proc.stdout.readline()
        assert line, f"the sweep ended before {count} sizes: {proc.stderr.read() if proc.stderr else ''}"
        rows.append(json.loads(line))
        assert time.monotonic() < deadline, "sizes too slow"
    return rows


@pytest.mark.slow
@pytest.mark.parametrize(
    ("launcher", "signum", "code", "port"),
    [
        ("local", (signal.SIGTERM, signal.SIGINT, signal.SIGTERM), 143, 29576),  # a CI runner, then impatience
        ("local", signal.SIGTERM, 143, 29571),
        ("torchrun", signal.SIGTERM, 143, 29572),
        ("local", signal.SIGINT, 130, 29573),
        pytest.param(
            "mpirun",
            signal.SIGTERM,
            143,
            29574,
            marks=pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs mpirun (openmpi-bin)"),
        ),
    ],
)
def test_signal_after_four_sizes_keeps_them_and_leaves_no_rank(tmp_path, process_mark, launcher, signum, code, port):
    db = tmp_path / "r.db"
    proc = _collectives(db, process_mark, launcher, port)
    try:
        rows = _sizes_seen(proc, 4)
        assert [r["size_bytes"] for r in rows] == [1024, 2048, 4096, 8192]
        time.sleep(0.3)  # rank 1 writes its record of the fourth size just after rank 0
        sent = time.monotonic()
        for i, each in enumerate(signum if isinstance(signum, tuple) else (signum,)):
            if i:
                time.sleep(0.05)  # the later ones land while the first one's cleanup runs
            os.kill(proc.pid, each)  # what timeout(1), CI runners and scancel send (or Ctrl-C)
        out, err = proc.communicate(timeout=60)
        stopped_s = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == code, err
    assert stopped_s < STOP_BUDGET_S
    # Every rank's process group is gone (polled: a SIGKILLed rank may still be exiting).
    wait_until(lambda: marked_pids(process_mark) == [], what="no rank process left")
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.status == "interrupted" and run.kind == "bench.collectives"
    sizes = [int(r.params["size_bytes"]) for r in run.results]
    assert sizes[:4] == [1024, 2048, 4096, 8192] and len(sizes) < 15
    assert all(r.metric("wrong_elements").value == 0 for r in run.results)
    # The run says why it failed in every renderer: a failing verdict, with the signal.
    why = [v for v in run.verdicts if v.metric == "run"]
    first = signum[0] if isinstance(signum, tuple) else signum
    word = "SIGTERM" if first == signal.SIGTERM else "SIGINT"
    assert len(why) == 1 and why[0].outcome == "failed" and word in why[0].reason
    assert run.duration_s is not None and run.hosts
    # The probe's own scratch directory (config, rank records) was removed.
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("gpufabric-collectives-")]


@pytest.mark.slow
def test_sigterm_mid_checkpoint_write_removes_the_partial_files(tmp_path, process_mark):
    """Scratch is removed: the format a killed rank was writing does not stay in --dir."""
    db, target = tmp_path / "r.db", tmp_path / "storage"
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}", **{MARK_VAR: process_mark})
    argv = [sys.executable, "-m", "gpufabric", "bench", "checkpoint", "--dir", str(target), "--size", "768M"]
    argv += ["--formats", "torch", "--master-port", "29575", "--db", str(db)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(lambda: any((target / "torch").glob("*")), what="the ranks writing their shards")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    wait_until(lambda: marked_pids(process_mark) == [], what="no rank process left")
    assert list(target.iterdir()) == []
    with Store.open(db) as store:
        assert store.get_run("latest").status == "interrupted"
