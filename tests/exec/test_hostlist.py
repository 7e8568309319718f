"""Allocation host lists expanded as Slurm does, PBS node files, Open MPI hostfiles."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpufabric.errors import InputError
from gpufabric.exec import hostlist


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("gpu[07-08]", ["gpu07", "gpu08"]),
        ("a[1-3,5],b01", ["a1", "a2", "a3", "a5", "b01"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),  # padding is the lower bound's width
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("node1", ["node1"]),
        ("x[1-2],x1", ["x1", "x2", "x1"]),  # duplicates stay, as scontrol prints them
        ("rack-a[9-10].ib", ["rack-a9.ib", "rack-a10.ib"]),
    ],
)
def test_expands_like_slurm(text, want):
    assert hostlist.expand_hostlist(text) == want


@pytest.mark.parametrize("text", ["gpu[07-08]", "a[1-3,5],b01", "n[098-101]", "r[1-2]n[1-2]", "x[1-2],x1"])
def test_matches_scontrol_show_hostnames(text, tmp_path):
    """The real Slurm client is the reference where it is installed (it reads a config, contacts no daemon)."""
    if shutil.which("scontrol") is None:
        pytest.skip("needs slurm-wlm's scontrol")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=hl\nSlurmctldHost=localhost\nNodeName=localhost\nPartitionName=p Nodes=localhost\n")
    done = subprocess.run(
        ["scontrol", "show", "hostnames", text],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": str(conf)},
    )
    if done.returncode:
        pytest.skip(f"scontrol cannot run here: {done.stderr.strip()[:100]}")
    assert hostlist.expand_hostlist(text) == done.stdout.split()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("gpu[07-08", "without"),
        ("gpu07-08]", "without"),
        ("gpu[8-7]", "backwards"),
        ("gpu[a-b]", "not N or LO-HI"),
        ("n[0-99999999]", "more than"),
        ("-oProxyCommand=x", "not a host name"),
        ("a[[1]]", "nested"),
        ("", "empty"),
    ],
)
def test_hostile_or_broken_lists_are_refused(text, match):
    with pytest.raises(InputError, match=match):
        hostlist.expand_hostlist(text)


def test_allocation_from_slurm_or_pbs(tmp_path):
    alloc = hostlist.allocation({"SLURM_JOB_NODELIST": "gpu[07-08]"})
    assert alloc is not None and alloc.hosts == ("gpu07", "gpu08") and "gpu[07-08]" in alloc.source
    nodefile = tmp_path / "nodes"
    nodefile.write_text("cn1\ncn1\ncn2\ncn2\n")  # one line per slot, as PBS writes it
    alloc = hostlist.allocation({"PBS_NODEFILE": str(nodefile)})
    assert alloc is not None and alloc.hosts == ("cn1", "cn2")
    assert hostlist.allocation({"HOME": "/root"}) is None


def test_hostfile(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# rack 1\nn1 slots=8\nn2 slots=8 max_slots=8\n\nn3\n")
    assert hostlist.read_hostfile(path) == ["n1", "n2", "n3"]
    path.write_text("n1 slots=8\nn2 cpus=4\n")
    with pytest.raises(InputError, match=r"hosts:2: 'cpus=4'"):
        hostlist.read_hostfile(path)
    path.write_text("n1\n-oProxyCommand=x\n")
    with pytest.raises(InputError, match=r"hosts:2: '-oProxyCommand=x' is not a host name"):
        hostlist.read_hostfile(path)
    with pytest.raises(InputError, match="cannot read"):
        hostlist.read_hostfile(tmp_path / "absent")
