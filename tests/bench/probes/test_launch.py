"""Launchers: exact argv per launcher, host parsing, and process-group cleanup on failure/timeout."""

from __future__ import annotations

import os
import sys

import pytest

from gpufabric.errors import InputError
from gpufabric.exec import launch, launchers
from tests.conftest import finishes

W = ["cfg.json"]
MOD = "gpufabric.bench.probes.collectives"


def test_local_sets_rank_env_per_process():
    plan = launchers.build("local", module=MOD, args=W, nodes=1, nproc=3, master_port=29555, python="py")
    assert plan.num_ranks == 3 and len(plan.commands) == 3
    assert [c.env["RANK"] for c in plan.commands] == ["0", "1", "2"]
    assert all(c.env["WORLD_SIZE"] == "3" and c.env["MASTER_PORT"] == "29555" for c in plan.commands)
    assert plan.commands[0].argv == ("py", "-m", MOD, "cfg.json")


def test_torchrun_binds_rendezvous_to_control_plane_and_data_ifname():
    hosts = launch.parse_hosts("netns:gfl-a-h1@10.210.0.1%data0,netns:gfl-a-h2@10.210.0.2%data0")
    plan = launchers.build(
        "torchrun", module=MOD, args=W, nodes=2, nproc=2, hosts=hosts, master_port=29501, python="py"
    )
    first, second = plan.commands
    assert first.argv[:5] == ("ip", "netns", "exec", "gfl-a-h1", "py")
    assert "--rdzv-endpoint=10.210.0.1:29501" in second.argv and "--node-rank=1" in second.argv
    assert "--local-addr=10.210.0.2" in second.argv and "--local-addr=10.210.0.1" in first.argv
    assert "--nnodes=2" in first.argv and "--nproc-per-node=2" in first.argv and "--max-restarts=0" in first.argv
    assert second.env["GLOO_SOCKET_IFNAME"] == "data0" and second.env["GPUFABRIC_HOST"] == "gfl-a-h2"
    assert plan.num_ranks == 4


def test_mpirun_and_slurm_argv():
    hosts = launch.parse_hosts("n1,n2")
    mpi = launchers.build("mpirun", module=MOD, args=W, nodes=2, nproc=4, hosts=hosts, python="py")
    argv = mpi.commands[0].argv
    # binding is Open MPI's default unless --cpu-bind says otherwise (tests/exec/test_mpirun.py)
    assert argv[:7] == ("mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "8", "--map-by", "slot")
    assert "--bind-to" not in argv
    assert "--host" in argv and "n1:4,n2:4" in argv and "MASTER_ADDR" in argv
    slurm = launchers.build("slurm", module=MOD, args=W, nodes=2, nproc=4, hosts=hosts, python="py", job_name="j")
    s = slurm.commands[0].argv
    assert s[:5] == ("srun", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--kill-on-bad-exit=1")
    assert s[-4:] == ("py", "-m", "gpufabric.bench.probes.collectives", "cfg.json")
    assert "#SBATCH --nodes=2" in slurm.script and "#SBATCH --ntasks-per-node=4" in slurm.script
    assert "gpufabric-rank py -m gpufabric.bench.probes.collectives cfg.json" in slurm.script
    with pytest.raises(InputError, match="network namespaces"):
        launchers.build("mpirun", module=MOD, args=W, nodes=1, nproc=1, hosts=launch.parse_hosts("netns:x"))


def test_bad_launch_input():
    with pytest.raises(InputError, match="unknown launcher"):
        launchers.build("ssh", module=MOD, args=W, nodes=1, nproc=1)
    with pytest.raises(InputError, match="only 1 host"):
        launchers.build("local", module=MOD, args=W, nodes=2, nproc=1, hosts=launch.parse_hosts("a"))


@pytest.mark.parametrize(
    "entry",
    ["-oProxyCommand=touch /tmp/x", "netns:-x", "netns:..", "h1@-oProxyCommand=x", "h1%eth0;id", "h1@a b", "a/b"],
)
def test_hosts_entries_that_could_become_options_or_shell_are_refused(entry):
    # ssh and `ip netns exec` take the name as an argument: a leading '-' is an option to them
    with pytest.raises(InputError, match="--hosts entry"):
        launch.parse_hosts(entry)
    assert [h.ssh for h in launch.parse_hosts("n1.example.org@10.0.0.1%eth1,n2@fd00::2")] == ["n1.example.org", "n2"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


def _plan(*scripts: str) -> launch.LaunchPlan:
    cmds = tuple(launch.Command(argv=(sys.executable, "-c", s)) for s in scripts)
    return launch.LaunchPlan(launcher="local", commands=cmds, num_ranks=len(cmds), hosts=())


def test_failed_peer_stops_the_others_and_kills_children(tmp_path):
    # command 1 spawns a grandchild and hangs far past the hang guard; command 0 fails ->
    # all killed after the grace (execute returns only if it stops the hung peer itself).
    hang = (
        "import subprocess,time,sys; p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(600)']);"
        f"open({str(tmp_path / 'pid')!r},'w').write(str(p.pid)); time.sleep(600)"
    )
    out = finishes(
        lambda: launch.execute(
            _plan("import sys,time; time.sleep(0.5); sys.exit(7)", hang),
            timeout_s=300,
            log_dir=tmp_path,
            peer_grace_s=1.0,
        )
    )
    assert out.returncodes == (7, None) and not out.timed_out
    assert not _alive(int((tmp_path / "pid").read_text()))


def test_timeout_kills_everything(tmp_path):
    out = launch.execute(
        _plan("import time; print('partial', flush=True); time.sleep(60)"), timeout_s=1.0, log_dir=tmp_path
    )
    assert out.timed_out and out.returncodes == (None,)
    assert "partial" in out.logs[0]


def test_sbatch_mode_submits_the_script(tmp_path):
    plan = launchers.build(
        "slurm", module=MOD, args=W, nodes=1, nproc=2, python="py", out_dir=str(tmp_path), slurm_mode="sbatch"
    )
    assert plan.commands[0].argv == ("py", "-m", "gpufabric.exec.launch", "sbatch-wait", str(tmp_path / "job.sbatch"))
    assert plan.script_path == str(tmp_path / "job.sbatch") and plan.script.startswith("#!/bin/bash")
    with pytest.raises(InputError, match="slurm-mode"):
        launchers.build("slurm", module=MOD, args=W, nodes=1, nproc=2, slurm_mode="salloc")


def _run_shell(text: str, env: dict[str, str]) -> str:
    import subprocess

    return subprocess.run(["bash", "-c", text], env=env, capture_output=True, text=True, check=True).stdout


def test_multi_node_srun_derives_master_addr_on_the_allocation(tmp_path):
    plan = launchers.build(
        "slurm",
        module=MOD,
        args=W,
        nodes=2,
        nproc=2,
        python="py",
        master_port=29600,
        gpus_per_node=2,
        data_ifname="data0",
    )
    cmd = plan.commands[0]
    line = cmd.shell()
    # Nothing from the launching host names the rendezvous: no loopback, no MASTER_ADDR=<addr> export.
    assert "127.0.0.1" not in line and "localhost" not in line and "MASTER_ADDR" not in cmd.env
    assert cmd.env["MASTER_PORT"] == "29600" and cmd.env["GLOO_SOCKET_IFNAME"] == "data0"
    assert "--gpus-per-node=2" in cmd.argv
    assert "#SBATCH --gpus-per-node=2" in plan.script
    # The prologue, run as a Slurm task would run it, with scontrol answering like slurmctld does.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(
        "#!/bin/bash\n"
        'if [ "$1" = show ]; then printf "ln1-h1\\nln1-h2\\n"; exit 0; fi\n'
        'echo "NodeName=$4 Arch=x86_64 NodeAddr=10.210.0.1 NodeHostName=vm Port=0"\n'
    )
    (fake / "scontrol").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "ln1-h[1-2]", "SLURMD_NODENAME": "ln1-h2"}
    task = cmd.argv[cmd.argv.index("bash") :]
    bash_c = task[2]
    out = _run_shell(bash_c.replace('exec "$@"', 'echo "$MASTER_ADDR $GPUFABRIC_HOST"'), env)
    assert out.split() == ["10.210.0.1", "ln1-h2"]
    # Without a NodeAddr the node name itself is the rendezvous.
    (fake / "scontrol").write_text(
        '#!/bin/bash\nif [ "$1" = show ]; then printf "ln1-h1\\nln1-h2\\n"; exit 0; fi\nexit 1\n'
    )
    assert _run_shell(bash_c.replace('exec "$@"', 'echo "$MASTER_ADDR"'), env).split() == ["ln1-h1"]


def test_gpus_requested_only_for_nccl():
    from gpufabric.bench.probes import run as probe_run

    for backend, want in (("nccl", True), ("gloo", False)):
        opts = probe_run.LaunchOptions(launcher="slurm", nodes=1, nproc=4, backend=backend)
        prep = probe_run.prepare("collectives", {}, opts)
        try:
            assert ("--gpus-per-node=4" in prep.plan.commands[0].argv) is want
        finally:
            probe_run.cleanup(prep)


def test_multi_node_needs_a_run_dir_and_checks_it_from_every_node(tmp_path, monkeypatch):
    from gpufabric.bench.probes import run as probe_run

    with pytest.raises(InputError, match="--run-dir"):
        probe_run.prepare("collectives", {}, probe_run.LaunchOptions(launcher="slurm", nodes=2))
    plan = launchers.build("slurm", module=MOD, args=W, nodes=2, nproc=1, python="py")
    fake = tmp_path / "bin"
    fake.mkdir()
    # An srun whose second node sees a different directory: prints the file once, then nothing.
    (fake / "srun").write_text(
        '#!/bin/bash\ncat "${@: -1}"\necho "srun: error: ln1-h2: cat: No such file" >&2\nexit 1\n'
    )
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    with pytest.raises(InputError, match="not visible from every node .1 of 2"):
        launchers.check_run_dir(plan, tmp_path)
    (fake / "srun").write_text('#!/bin/bash\ncat "${@: -1}"; cat "${@: -1}"\n')
    launchers.check_run_dir(plan, tmp_path)
    assert not list(tmp_path.glob(".gpufabric-visible-*"))


def test_mpirun_pins_control_and_data_interfaces():
    hosts = launch.parse_hosts("n1@10.0.0.1%eth1,n2@10.0.0.2%eth1")
    plan = launchers.build(
        "mpirun", module=MOD, args=W, nodes=2, nproc=2, hosts=hosts, python="py", control_ifname="eth0"
    )
    argv = plan.commands[0].argv
    assert argv[argv.index("btl_tcp_if_include") - 1 :][:3] == ("--mca", "btl_tcp_if_include", "eth0")
    assert "oob_tcp_if_include" in argv and "GLOO_SOCKET_IFNAME" in argv
    assert plan.commands[0].env["MASTER_ADDR"] == "10.0.0.1" and plan.commands[0].env["GLOO_SOCKET_IFNAME"] == "eth1"
    with pytest.raises(InputError, match="interface name"):
        launchers.build("mpirun", module=MOD, args=W, nodes=1, nproc=1, control_ifname="eth0;rm -rf /")


def test_control_ifname_rendezvous_is_rank0s_address_on_it(tmp_path):
    import subprocess

    prologue = launch.slurm_task("ctl0", str(tmp_path)).replace('exec "$@"', 'echo "$MASTER_ADDR"')
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ip").write_text(
        '#!/bin/bash\n[ "$6" = ctl0 ] && echo "3: ctl0    inet 10.20.0.7/16 brd 10.20.255.255 scope global ctl0"\n'
    )
    (fake / "ip").chmod(0o755)
    base = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "42"}
    rank0 = subprocess.run(
        ["bash", "-c", prologue], env={**base, "SLURM_PROCID": "0"}, capture_output=True, text=True, check=False
    )
    assert rank0.stdout.split() == ["10.20.0.7"] and (tmp_path / ".master-addr-42").read_text() == "10.20.0.7\n"
    rank1 = subprocess.run(
        ["bash", "-c", prologue], env={**base, "SLURM_PROCID": "1"}, capture_output=True, text=True, check=False
    )
    assert rank1.stdout.split() == ["10.20.0.7"]
    # No address on the interface: rank 0 stops with a message instead of starting a rank that cannot meet.
    other = launch.slurm_task("ctl9", str(tmp_path))
    bad = subprocess.run(
        ["bash", "-c", other],
        env={**base, "SLURM_PROCID": "0", "SLURM_JOB_ID": "43"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "no IPv4 address on ctl9" in bad.stderr
