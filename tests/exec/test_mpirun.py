"""mpirun inside allocations: hosts from --hosts, --hostfile, SLURM_JOB_NODELIST or PBS_NODEFILE."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from gpufabric.errors import InputError
from gpufabric.exec import launch, launchers
from gpufabric.exec.site import SiteOptions

MOD = "gpufabric.bench.probes.collectives"


def _mpi(nodes=2, nproc=2, hosts=None, environ=None, **site):
    return launchers.build(
        "mpirun",
        module=MOD,
        args=["c.json"],
        nodes=nodes,
        nproc=nproc,
        hosts=hosts,
        python="py",
        environ=environ or {},
        site=SiteOptions(**site),
    )


def test_two_nodes_without_hosts_are_refused_naming_them(cli, monkeypatch):
    """Bar: no silent 16 ranks on this machine."""
    for key in ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "PBS_NODEFILE"):
        monkeypatch.delenv(key, raising=False)
    code, _, err = cli("bench", "collectives", "--launcher", "mpirun", "--nodes", "2", "--dry-run")
    assert code == 2 and "Traceback" not in err
    assert "no hosts for nodes 1-2" in err and "--hosts" in err and "SLURM_JOB_NODELIST" in err
    with pytest.raises(InputError, match="no host for node 3"):
        _mpi(nodes=3, environ={"SLURM_JOB_NODELIST": "gpu[07-08]"})


def test_inside_an_allocation_both_nodes_are_used(cli, monkeypatch, tmp_path):
    """Bar: inside `gpu[07-08]` the ranks go to gpu07 and gpu08."""
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
    code, out, err = cli(
        "bench",
        "collectives",
        "--launcher",
        "mpirun",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--run-dir",
        tmp_path,
        "--dry-run",
        "--format",
        "json",
    )
    assert code == 0, err
    (line,) = json.loads(out)["commands"]
    assert "-np 16" in line and "--host gpu07:8,gpu08:8" in line and "127.0.0.1" not in line
    assert "gpufabric-rank gpu07 gpu08 " in line  # the prologue's rank -> host table


def test_pbs_nodefile_and_hostfile(tmp_path):
    nodefile = tmp_path / "pbs"
    nodefile.write_text("cn1\ncn1\ncn2\ncn2\n")
    argv = _mpi(environ={"PBS_NODEFILE": str(nodefile)}).commands[0].argv
    assert "cn1:2,cn2:2" in argv
    hostfile = tmp_path / "hosts"
    hostfile.write_text("h1 slots=2\nh2 slots=2\n")
    # --hostfile wins over the allocation; --hosts and --hostfile together are ambiguous
    argv = _mpi(environ={"PBS_NODEFILE": str(nodefile)}, hostfile=str(hostfile)).commands[0].argv
    assert "h1:2,h2:2" in argv
    with pytest.raises(InputError, match="give one"):
        _mpi(hosts=launch.parse_hosts("a,b"), hostfile=str(hostfile))
    assert "--host" not in _mpi(nodes=1).commands[0].argv  # one node, no hosts: this machine


def test_binding_follows_cpu_bind():
    assert "--bind-to" not in _mpi(hosts=launch.parse_hosts("a,b")).commands[0].argv
    argv = _mpi(hosts=launch.parse_hosts("a,b"), cpu_bind="ldoms").commands[0].argv
    assert argv[argv.index("--bind-to") + 1] == "numa"
    with pytest.raises(InputError, match="mpirun binds to one of"):
        _mpi(hosts=launch.parse_hosts("a,b"), cpu_bind="map_cpu:0,1")


@pytest.mark.parametrize(
    ("rank", "slurmd", "want"), [(0, "", "gpu07"), (1, "", "gpu07"), (3, "", "gpu08"), (2, "n9", "n9")]
)
def test_each_rank_is_labelled_with_its_own_host(rank, slurmd, want):
    """The per-rank prologue, run by bash with Open MPI's rank variable: rank r is on host r // nproc."""
    cmd = _mpi(hosts=launch.parse_hosts("gpu07,gpu08")).commands[0]
    start = cmd.argv.index("bash")
    task = list(cmd.argv[start:])
    task[task.index("py") :] = ["bash", "-c", 'echo "$GPUFABRIC_HOST"']
    env = {"PATH": os.environ["PATH"], "OMPI_COMM_WORLD_RANK": str(rank)}
    if slurmd:
        env["SLURMD_NODENAME"] = slurmd  # orted started by srun: Slurm's node name wins
    done = subprocess.run(task, env=env, capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == want, done.stderr


def test_real_mpirun_runs_the_prologue():
    """Open MPI itself sets OMPI_COMM_WORLD_RANK for the prologue (one host, two ranks)."""
    if shutil.which("mpirun") is None:
        pytest.skip("needs Open MPI")
    cmd = _mpi(nodes=1, nproc=2).commands[0]
    argv = list(cmd.argv)
    argv[argv.index("py") :] = ["bash", "-c", 'echo "$OMPI_COMM_WORLD_RANK=$GPUFABRIC_HOST"']
    done = subprocess.run(argv, env={**os.environ, **cmd.env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == [f"0={os.uname().nodename}", f"1={os.uname().nodename}"]


def test_rendezvous_is_the_first_nodes_nodeaddr(tmp_path, monkeypatch):
    """Node names need not resolve: inside a Slurm allocation MASTER_ADDR is the first node's NodeAddr."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(
        '#!/bin/sh\n[ "$4" = gpu07 ] && echo "NodeName=gpu07 Arch=x86_64 NodeAddr=10.1.2.7 NodeHostName=gpu07"\n'
    )
    (fake / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    cmd = _mpi(environ={"SLURM_JOB_NODELIST": "gpu[07-08]"}).commands[0]
    assert cmd.env["MASTER_ADDR"] == "10.1.2.7" and "gpu07:2,gpu08:2" in cmd.argv
    (fake / "scontrol").write_text("#!/bin/sh\nexit 1\n")  # no controller: the name stays
    assert _mpi(environ={"SLURM_JOB_NODELIST": "gpu[07-08]"}).commands[0].env["MASTER_ADDR"] == "gpu07"


def test_run_dir_is_checked_through_mpirun(tmp_path):
    """Inside an allocation there may be no sshd: the visibility check goes the way mpirun does."""
    plan = _mpi(hosts=launch.parse_hosts("a,b"))
    (cmd,) = launchers.visibility_commands(plan, str(tmp_path / "m"))
    assert cmd.argv[:1] == ("mpirun",) and "a:1,b:1" in cmd.argv and cmd.argv[-2:] == ("cat", str(tmp_path / "m"))


def test_backend_of_mpirun_ranks_elsewhere_is_not_decided_here(tmp_path):
    """salloc's shell runs on the (GPU-less) login node: the allocation's ranks still get NCCL."""
    here = {"SLURM_JOB_NODELIST": os.uname().nodename}
    for environ, hostfile, want in (
        ({}, "", "gloo"),  # one node, no hosts: this machine
        ({"SLURM_JOB_NODELIST": "gpu[07-08]"}, "", "nccl"),
        (here, "", "gloo"),  # an allocation of this very node
        ({}, str(tmp_path / "hosts"), "nccl"),
    ):
        got = launchers.resolve_backend(
            "auto", launcher="mpirun", hosts=[], have_gpu=False, hostfile=hostfile, environ=environ
        )
        assert got == want, (environ, hostfile)


def test_multi_node_mpirun_needs_a_shared_run_dir(monkeypatch):
    from gpufabric.bench.probes import run as probe_run

    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
    with pytest.raises(InputError, match="--run-dir"):
        probe_run.prepare("collectives", {}, probe_run.LaunchOptions(launcher="mpirun", nodes=2))
