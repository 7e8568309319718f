"""The lab's state file is input (issue 24): another version, damage or an edit never crashes
`lab status/down`, and never gets a process signalled that gpufabric did not start."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from gpufabric.exec import process
from gpufabric.lab import net, slurm
from tests.conftest import needs_root


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(net, "STATE_DIR", tmp_path)
    return tmp_path


@pytest.fixture
def bystander():
    """A process of someone else's, in its own session: what a reused pid would name."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "s1", "hosts": 2, "noise_pids": [0], "noise_plane": "data"},  # v1, edited to pid 0
        {"version": 9, "name": "s1", "hosts": "two", "noise": "x"},  # a newer version
        {"name": "s1", "hosts": 2, "noise": [{"pid": 1, "start_ticks": 0, "boot_id": "", "argv": ["init"]}]},
        [1, 2, 3],
        "not an object",
    ],
)
def test_other_versions_and_edits_signal_nothing(state_dir, doc):
    (state_dir / "s1.json").write_text(json.dumps(doc))
    state = net.load_state("s1")
    assert state is None or state.noise == ()
    assert net.stop_noise("s1") == []  # nothing signalled: not even the caller (killpg(0))


def test_a_reused_pid_is_left_alone(state_dir, bystander):
    ticket = process.identify(bystander.pid, ["ip", "netns", "exec", "gfl-s1-h2", "iperf3", "-s"])
    assert ticket is not None
    # The noise process exited long ago and the pid now belongs to the bystander: another start time.
    stale = process.Started(
        pid=ticket.pid, start_ticks=ticket.start_ticks - 1, boot_id=ticket.boot_id, argv=ticket.argv
    )
    doc = {"version": 2, "name": "s1", "hosts": 2, "noise_plane": "data", "noise": [stale.to_dict()]}
    (state_dir / "s1.json").write_text(json.dumps(doc))
    left = net.stop_noise("s1")
    assert len(left) == 1 and "another process" in left[0]
    assert bystander.poll() is None  # still running
    # Same start time but a program gpufabric did not start (`sleep`, not iperf3): left alone too.
    (state_dir / "s1.json").write_text(json.dumps({**doc, "noise": [ticket.to_dict()]}))
    assert "runs 'sleep'" in net.stop_noise("s1")[0] and bystander.poll() is None


def test_state_names_are_never_paths(state_dir):
    for name in ("../x", "a/b", "..", ""):
        with pytest.raises(Exception, match="lab name"):
            net.load_state(name)
        with pytest.raises(Exception, match="lab name"):
            slurm.load(name)


def test_slurm_state_of_another_version_reads_as_none(state_dir):
    (state_dir / "s1-slurm").mkdir()
    (state_dir / "s1-slurm" / "lab.json").write_text(json.dumps({"name": "s1", "pids": {"slurmctld": 0}}))
    assert slurm.load("s1") is None
    edited = {
        "name": "s1",
        "conf": "/x",
        "login_netns": "gfl-s1-sw",
        "login_addr": "10.0.0.1",
        "nodes": ["s1-h1"],
        "node_addrs": ["10.0.0.2"],
        "auth": "auth/none",
        "procs": {"slurmctld": {"pid": 0, "start_ticks": 0, "boot_id": "", "argv": ["slurmctld"]}},
    }
    (state_dir / "s1-slurm" / "lab.json").write_text(json.dumps(edited))
    lab = slurm.load("s1")
    assert lab is not None and lab.procs == {}  # the pid-0 ticket is dropped, never signalled
    assert slurm.load("s1") == lab
    (state_dir / "s1-slurm" / "lab.json").write_text(json.dumps({**edited, "login_netns": "other-ns"}))
    assert slurm.load("s1") is None  # never run commands in a namespace that is not the lab's


@needs_root
def test_lab_cli_refuses_path_names_and_survives_damaged_state(cli, state_dir):
    code, _, err = cli("lab", "noise", "../x", "--plane", "data")
    assert code == 2 and "lab name" in err
    (state_dir / "s9.json").write_text('{"name": "s9", "hosts": [')  # damaged
    code, out, err = cli("lab", "status", "s9", "--format", "json")
    assert code == 1 and json.loads(out)["up"] is False and "Traceback" not in err
    assert cli("lab", "down", "s9")[0] == 0
    assert os.getpgrp() > 1 and signal.getsignal(signal.SIGTERM) is not None  # this process survived
