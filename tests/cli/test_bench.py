"""``gpufabric bench``: dry run, safety, a real quick suite on loopback, hung tools, kill -9."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpufabric.errors import InputError
from gpufabric.results.store import Store
from tests.conftest import MARK_VAR, marked_pids, needs_tool, wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_prints_every_command_and_runs_nothing(cli, tmp_path, monkeypatch):
    target = tmp_path / "target"
    db = tmp_path / "r.db"
    monkeypatch.setenv("GPUFABRIC_DB", str(db))
    code, out, err = cli("bench", "--suite", "quick", "--dry-run", "--repeats", "1", "--target-dir", target)
    assert code == 0, err
    for command in (
        "fio --name=checkpoint_write",
        "fio --name=small_file_commit",
        "iperf3 -s -B 127.0.0.1 -p 5201 &",
        "iperf3 -c 127.0.0.1 -p 5201",
        "sockperf server -i 127.0.0.1 -p 11111 &",
        "sockperf ping-pong -i 127.0.0.1 -p 11111",
        "ib_write_lat",
        "all_reduce_perf",
    ):
        assert command in out
    assert "# 8 tests; no SLOs" in out
    assert not target.exists() and not db.exists()


def test_dry_run_json_with_spec_slos(cli, tmp_path):
    code, out, err = cli(
        "bench",
        "--suite",
        "full",
        "--dry-run",
        "--repeats",
        "2",
        "--format",
        "json",
        "--spec",
        ROOT / "examples" / "llama3-70b-1k.yaml",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] >= 1 and doc["dry_run"] is True
    names = [t["name"] for t in doc["tests"]]
    assert names.count("iperf3.tcp_reverse") == 2 and "nccl.alltoall" in names
    assert {(s["test"], s["metric"]) for s in doc["slos"]} >= {
        ("fio.checkpoint_write", "write_bw_gbps"),
        ("perftest.ib_write_lat", "lat_p99_us"),
    }


def test_refuses_non_empty_target_without_force(cli, tmp_path):
    (tmp_path / "data.bin").write_text("keep me")
    code, out, err = cli("bench", "--suite", "quick", "--target-dir", tmp_path, "--db", tmp_path / "r.db")
    assert code == 2
    assert "is not empty; pass --force" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin"]


@pytest.mark.parametrize("device", ["/dev/vda", "/dev/loop0", "/dev/null"])
def test_refuses_device_target_even_with_force(cli, device):
    if not Path(device).exists():
        pytest.skip(f"{device} does not exist here")
    for extra in ((), ("--force",)):
        code, _, err = cli("bench", "--suite", "quick", "--target-dir", device, *extra)
        assert code == 2 and "is a device; gpufabric writes files only" in err


def test_needs_a_suite(cli):
    code, _, err = cli("bench")
    assert code == 2 and "--suite quick|full" in err


def test_unknown_suite(cli):
    code, _, err = cli("bench", "--suite", "huge", "--dry-run")
    assert code == 2 and "choose quick or full" in err


def test_plan_without_spec_gives_hardware_slos_only(cli, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"recommended": "a", "candidates": [{"id": "a", "fabric": "tcp-100g", "storage": "nfs"}]})
    )
    code, out, err = cli("bench", "--suite", "quick", "--dry-run", "--plan", plan, "--format", "json")
    assert code == 0, err
    assert "without --spec" in err
    keys = {(s["test"], s["metric"]) for s in json.loads(out)["slos"]}
    assert ("sockperf.udp", "lat_p99_us") in keys and ("iperf3.tcp", "throughput_gbit_s") in keys
    assert not any(test == "fio.checkpoint_write" for test, _ in keys)


def test_bad_plan_file(cli, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text("{not json")
    code, _, err = cli("bench", "--suite", "quick", "--dry-run", "--plan", plan)
    assert code == 2 and "not a plan JSON file" in err


@needs_tool("fio")
@needs_tool("iperf3")
@needs_tool("sockperf")
@pytest.mark.slow
def test_real_quick_suite_on_loopback_stores_results_and_verdicts(cli, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    db = tmp_path / "r.db"
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text(
        "hardware: test\ntests:\n"
        "  iperf3.tcp:\n    throughput_gbit_s: {min: 0.001}\n"
        "  sockperf.udp:\n    lat_p50_us: {max: 0.001}\n"
    )
    code, out, err = cli(
        "bench",
        "--suite",
        "quick",
        "--repeats",
        "1",
        "--target-dir",
        target,
        "--db",
        db,
        "--thresholds",
        thresholds,
        "--format",
        "json",
    )
    assert code == 1, err  # the impossible sockperf bound fails
    doc = json.loads(out)
    status = {r["name"]: r["status"] for r in doc["results"]}
    # perftest and nccl-tests run only where an RDMA device / GPU exists; elsewhere they are skipped.
    assert status.pop("perftest.ib_write_lat") in ("ok", "skipped")
    assert status.pop("nccl.all_reduce") in ("ok", "skipped")
    assert status == {
        "fio.checkpoint_write": "ok",
        "fio.checkpoint_restore": "ok",
        "fio.dataset_read": "ok",
        "fio.small_file_commit": "ok",
        "iperf3.tcp": "ok",
        "sockperf.udp": "ok",
    }
    outcomes = {(v["test"], v["outcome"]) for v in doc["verdicts"]}
    assert outcomes == {("iperf3.tcp", "passed"), ("sockperf.udp", "failed")}
    # Nothing left in the target directory, nothing written beside it.
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("r.db")) == ["t.yaml", "target"]
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.kind == "bench" and run.status == "failed"
    assert len(run.results) == 8
    # The environment fingerprint is stored with the run (what can change results).
    assert run.fingerprint["host"] and run.fingerprint["tools"]["fio"]
    assert "iperf3 -c 127.0.0.1" in run.artifacts["commands"]
    sock = next(r for r in run.results if r.name == "sockperf.udp")
    assert len(sock.metric("lat_p50_us").samples) == sock.metric("observations").value


def test_hung_tool_is_killed_recorded_and_the_suite_continues(cli, tmp_path, monkeypatch, process_mark):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fio = bindir / "fio"
    fio.write_text("#!/bin/sh\necho 'fake fio hangs'\nexec /bin/sleep 60\n")
    fio.chmod(0o755)
    # Only the fake fio is on PATH: iperf3, sockperf, ibv_devices and nccl-tests are "not installed".
    monkeypatch.setenv("PATH", str(bindir))
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench", "--suite", "quick", "--repeats", "1", "--timeout", "0.5", "--db", db, "--format", "json"
    )
    assert code == 1
    doc = json.loads(out)
    by_name = {r["name"]: r for r in doc["results"]}
    assert by_name["fio.checkpoint_write"]["status"] == "timeout"
    assert "timed out after 0.5 s" in by_name["fio.checkpoint_write"]["reason"]
    assert by_name["iperf3.tcp"]["status"] == "skipped"
    assert by_name["iperf3.tcp"]["reason"] == "skipped: iperf3 not installed"
    assert by_name["sockperf.udp"]["reason"] == "skipped: sockperf not installed"
    assert len(doc["results"]) == 8  # the suite went on after every hang
    assert marked_pids(process_mark) == []  # each hung fio was killed, not left sleeping
    with Store.open(db) as store:
        stored = store.get_run("latest").results
    timeout = next(r for r in stored if r.name == "fio.small_file_commit")
    assert timeout.status.value == "timeout" and timeout.raw_output.startswith("fake fio hangs")


def _wait_for_results(proc: subprocess.Popen, db: Path, count: int) -> None:
    """Poll the store of a running ``gpufabric bench`` until its run holds ``count`` results."""
    deadline = time.monotonic() + 60
    finished = 0
    while finished < count:
        assert proc.poll() is None, "bench ended before it could be interrupted"
        assert time.monotonic() < deadline, "bench made no progress"
        time.sleep(0.2)
        if db.exists():
            try:
                with Store.open(db) as store:
                    runs = store.list_runs(limit=1)
                finished = runs[0].result_count if runs else 0
            except (sqlite3.OperationalError, InputError):  # the schema is still being created
                finished = 0


def _quick_suite_process(tmp_path: Path, db: Path, output: int, mark: str) -> subprocess.Popen:
    """`gpufabric bench --suite quick` as a separate process (its own group), to interrupt.

    ``mark`` goes into its environment, so every process the suite starts (servers, tools)
    can be found by it afterwards, whatever else runs on the machine."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpufabric",
            "bench",
            "--suite",
            "quick",
            "--repeats",
            "1",
            "--db",
            str(db),
            "--target-dir",
            str(tmp_path / "target"),
        ],
        stdout=output,
        stderr=output,
        start_new_session=True,
        # The tree under test first (src/), then the repository root (tests/ helpers).
        env=dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}", **{MARK_VAR: mark}),
    )


@needs_tool("fio")
@needs_tool("iperf3")
@needs_tool("sockperf")
@pytest.mark.slow
def test_kill_9_mid_suite_keeps_finished_results_and_an_intact_db(tmp_path, process_mark):
    db = tmp_path / "r.db"
    proc = _quick_suite_process(tmp_path, db, subprocess.DEVNULL, process_mark)
    try:
        _wait_for_results(proc, db, 5)  # kill while sockperf runs: fio x4 and iperf3 are done
        time.sleep(1.0)  # let sockperf get going
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.status == "running"  # never finished: shown as interrupted by `gpufabric runs`
    assert len(run.results) >= 5
    assert [r.name for r in run.results[:5]] == [
        "fio.checkpoint_write",
        "fio.checkpoint_restore",
        "fio.dataset_read",
        "fio.small_file_commit",
        "iperf3.tcp",
    ]
    # The sockperf server and client died with their parent (no orphans of this suite).
    wait_until(lambda: marked_pids(process_mark) == [], what="every process of the killed suite gone")


@needs_tool("fio")
@needs_tool("iperf3")
@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_mid_suite_exits_130_and_marks_run_interrupted(tmp_path, process_mark, signum, code):
    """Ctrl-C (SIGINT) and SIGTERM (timeout, CI runners, scancel) alike: finished results kept."""
    db = tmp_path / "r.db"
    proc = _quick_suite_process(tmp_path, db, subprocess.PIPE, process_mark)
    try:
        _wait_for_results(proc, db, 4)  # the fio tests are done; iperf3 (3 s) is running
        os.kill(proc.pid, signum)  # what Ctrl-C sends to the foreground process, or `timeout`
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == code, err
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.status == "interrupted"
    assert [r.name for r in run.results][:4] == [
        "fio.checkpoint_write",
        "fio.checkpoint_restore",
        "fio.dataset_read",
        "fio.small_file_commit",
    ]
    assert len(run.results) <= 5
    assert not (tmp_path / "target").exists()  # the scratch directory was cleaned up
    # No server or tool of the suite outlived it. Polled, not read once: a tool SIGKILLed as
    # the suite exits can still be in the kernel's exit path for a moment on a loaded
    # machine (seen once); one that was left running stays and fails the guard.
    wait_until(lambda: marked_pids(process_mark) == [], what="no process of the interrupted suite left")


def _has_h100() -> bool:
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    return bool(smi) and "H100" in subprocess.run([smi, "-L"], capture_output=True, text=True).stdout


@needs_tool("sockperf")
@pytest.mark.slow
@pytest.mark.skipif(_has_h100(), reason="this test needs hardware that is NOT the planned H100 nodes")
def test_plan_for_h100_nodes_is_not_the_planned_hardware_here(cli, tmp_path):
    """Issue 16 bar: on this machine a plan for H100 nodes must not pass its SLOs by orders of magnitude."""
    spec = Path(__file__).resolve().parents[2] / "examples" / "llama3-70b-1k.yaml"
    code, out, err = cli("plan", spec, "--format", "json")
    assert code == 0, err
    plan = tmp_path / "plan.json"
    plan.write_text(out)
    code, out, err = cli(
        "bench",
        "--suite",
        "quick",
        "--repeats",
        "1",
        "--plan",
        plan,
        "--spec",
        spec,
        "--db",
        tmp_path / "r.db",
        "--format",
        "json",
    )
    assert code == 1, err
    assert "not the planned hardware: no GPU found (planned 8 x h100-sxm per node)" in err
    # Live output: each test on stderr as it finishes; no progress bar when not at a terminal.
    assert "[1/" in err and "fio.checkpoint_write" in err and "\u2501" not in err
    verdicts = json.loads(out)["verdicts"]
    assert verdicts and {v["outcome"] for v in verdicts} == {"not_planned_hardware"}
    ckpt = next(v for v in verdicts if v["test"] == "fio.checkpoint_write")
    assert ckpt["measured"] > 0 and "would have" in ckpt["reason"]


def test_bench_thresholds_writes_a_file_bench_can_read(cli, tmp_path):
    from gpufabric.bench.slo import load_thresholds
    from tests.results.factories import make_db

    db = make_db(tmp_path / "r.db")
    out = tmp_path / "golden.yaml"
    code, text, err = cli("bench", "thresholds", "latest", "--out", out, "--db", db)
    assert code == 0, err
    slos = {(s.test, s.metric): s for s in load_thresholds(out)}
    assert slos[("iperf3.data", "throughput_gbps")].expected == 9.4  # the stored run's median
    assert "(node1)" in slos[("iperf3.data", "throughput_gbps")].source
    code, _, err = cli("bench", "thresholds", "99", "--out", out, "--db", db)
    assert code == 2 and "no run 99" in err
