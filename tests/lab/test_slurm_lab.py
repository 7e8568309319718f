"""A real two-node Slurm cluster in the lab: srun, sbatch and the generated train.sbatch.

slurmctld runs in the lab's login namespace, one slurmd per host namespace; every client
command (the bench CLI, sbatch) runs on the login node as a user would. Each rank records
its host, so "ran across both nodes" is read from the ranks' own records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric.bench.probes.results import read_ranks
from tests.conftest import needs_root, needs_tool

pytestmark = [needs_root, needs_tool("slurmctld"), needs_tool("slurmd"), needs_tool("nsenter"), pytest.mark.slow]

SRC = Path(__file__).resolve().parents[2] / "src"
SPEC = """name: ln-slurm-lab
cluster: {nodes: 2, gpus_per_node: 1, gpu: h100-sxm}
workload:
  # 1B: a 7B model needs ZeRO-3 to fit one GPU, and ZeRO-3 gathers the weights for every
  # microbatch (planner memory/traffic model): over tcp-100g no throughput figure could hold.
  model: {params: 1e9, layers: 16, hidden: 2048, seq_len: 4096}
  parallelism: {tp: 1, pp: 1, dp: 2}
  recompute: full
  global_batch_tokens: 1048576
  precision: bf16
  mfu: 0.40
  total_tokens: 20e9
  checkpoint: {interval_min: 30, mode: sync}
  dataset: {size_tb: 0.1, pattern: sequential}
reliability: {gpu_mttf_hours: 50000, restart_min: 5}
requirements:
  max_step_time_cv: 0.05
  max_checkpoint_stall_fraction: 0.05
  max_time_to_train_days: 14
  budget_usd: 1.5e6
  reproducibility: bitwise
options: {fabrics: [tcp-100g], storage: [local-nvme], oversubscription: [1]}
security:
  planes:
    - {name: bmc, kind: management, cidr: 10.209.0.0/24, interface: bmc0}
    - {name: ctl, kind: control, cidr: 10.210.0.0/24, interface: mgmt0}
    - {name: data, kind: compute-data, cidr: 10.210.1.0/24, interface: data0}
    - {name: stor, kind: storage, cidr: 10.210.2.0/24, interface: stor0}
  roles:
    - {name: compute, kind: compute, count: 2}
    - {name: login, kind: login, count: 1}
"""


def _env(lab, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        **lab.env(),
        "PYTHONPATH": str(SRC),
        "OMP_NUM_THREADS": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **extra,
    }


def on_login(
    lab, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    from gpufabric.lab import slurm

    return subprocess.run(
        [*slurm.login_argv(lab), *argv],
        env=env or _env(lab),
        cwd=cwd,
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def gpufabric(lab, *argv: str, **kw) -> subprocess.CompletedProcess[str]:
    return on_login(lab, sys.executable, "-m", "gpufabric", *argv, **kw)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """The artefacts `gpufabric config` renders for a spec whose control plane is the lab's mgmt0."""
    d = tmp_path_factory.mktemp("cfg")
    (d / "spec.yaml").write_text(SPEC)
    done = subprocess.run(
        [sys.executable, "-m", "gpufabric", "config", str(d / "spec.yaml"), "--out", str(d / "b")],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return d / "b" / "roles"


@pytest.fixture(scope="module")
def lab(bundle):
    from gpufabric.lab import net, slurm

    name = f"ln{os.getpid() % 10000}"
    # The compute role's /usr/local/bin (gpufabric-torchrun) is "installed" on both nodes.
    cluster = slurm.up(
        name, hosts=2, gpus_per_node=1, binds={"/usr/local/bin": str(bundle / "compute" / "usr" / "local" / "bin")}
    )
    try:
        yield cluster
    finally:
        slurm.down(name)
        assert net.existing_namespaces(name) == []
        assert not Path(cluster.conf).exists()


def _hosts_of(run_dir: Path, ranks: int) -> dict[int, str]:
    logs = read_ranks(run_dir, ranks)
    assert all(log.of("done") for log in logs.values()), {r: log.records[-1:] for r, log in logs.items()}
    return {rank: log.host for rank, log in logs.items()}


def test_cluster_has_two_idle_nodes(lab):
    from gpufabric.lab import slurm

    doc = slurm.status(lab.name)
    assert doc["up"] and [(n["name"], n["addr"], n["state"]) for n in doc["nodes"]] == [
        (lab.nodes[0], "10.210.0.1", "idle"),
        (lab.nodes[1], "10.210.0.2", "idle"),
    ]


def test_srun_collectives_across_both_nodes(lab, tmp_path):
    run_dir = tmp_path / "run"
    common = [
        "bench",
        "collectives",
        "--launcher",
        "slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--backend",
        "gloo",
        "--ops",
        "all_reduce,all_gather",
        "--sizes",
        "64K",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--master-port",
        "29611",
        "--run-dir",
        str(run_dir),
        "--data-ifname",
        "data0",
        "--format",
        "json",
    ]
    dry = gpufabric(lab, *common, "--dry-run")  # --db has no effect with --dry-run (refused)
    assert dry.returncode == 0, dry.stderr
    line = json.loads(dry.stdout)["commands"][0]
    assert "127.0.0.1" not in line and "MASTER_ADDR=" not in line.split("srun")[0]
    done = gpufabric(lab, *common, "--db", str(tmp_path / "r.db"))
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert [(r["op"], r["num_ranks"], r["wrong_elements"]) for r in doc["results"]] == [
        ("all_reduce", 2, 0),
        ("all_gather", 2, 0),
    ]
    assert _hosts_of(run_dir, 2) == {0: lab.nodes[0], 1: lab.nodes[1]}
    assert not list(run_dir.glob(".gpufabric-visible-*"))


def test_sbatch_train_across_both_nodes(lab, tmp_path):
    """--control-ifname names the rendezvous interface; stor0 (not NodeAddr's mgmt0) shows it is obeyed."""
    run_dir = tmp_path / "run"
    done = gpufabric(
        lab,
        "bench",
        "train",
        "--launcher",
        "slurm",
        "--slurm-mode",
        "sbatch",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--backend",
        "gloo",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--master-port",
        "29612",
        "--run-dir",
        str(run_dir),
        "--data-ifname",
        "data0",
        "--control-ifname",
        "stor0",
        "--db",
        str(tmp_path / "r.db"),
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr + done.stdout
    (result,) = json.loads(done.stdout)["results"]
    assert result["num_ranks"] == 2 and result["rank_hosts"] == {"0": lab.nodes[0], "1": lab.nodes[1]}
    script = (run_dir / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "scontrol show hostnames" in script
    (published,) = run_dir.glob(".master-addr-*")
    assert published.read_text().strip() == "10.210.2.1"  # rank 0's (node 1's) stor0 address


def test_generated_train_sbatch_runs_across_both_nodes(lab, bundle, tmp_path):
    """`gpufabric config`'s train.sbatch + gpufabric-torchrun, unmodified, with the train probe as the script."""
    run_dir = tmp_path / "run"
    prep = gpufabric(
        lab,
        "bench",
        "train",
        "--launcher",
        "slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--backend",
        "gloo",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--run-dir",
        str(run_dir),
        "--dry-run",
        "--format",
        "json",
    )
    assert prep.returncode == 0, prep.stderr
    assert not run_dir.exists()  # a dry run writes nothing into --run-dir (issue 24)
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(json.loads(prep.stdout)["config"]))  # the rank config it showed
    sbatch = bundle / "login" / "etc" / "gpufabric" / "train.sbatch"
    env = _env(lab, GPUFABRIC_NCCL_ENV=str(bundle / "compute" / "etc" / "gpufabric" / "nccl.env"))
    done = on_login(
        lab,
        sys.executable,
        "-m",
        "gpufabric.exec.launch",
        "sbatch-wait",
        str(sbatch),
        "-m",
        "gpufabric.bench.probes.train",
        str(run_dir / "config.json"),
        cwd=run_dir,
        env=env,
    )
    out = "".join(p.read_text() for p in run_dir.glob("slurm-*.out"))
    assert done.returncode == 0, done.stdout + done.stderr + out[-2000:]
    assert "COMPLETED exit 0:0" in done.stdout
    assert _hosts_of(run_dir, 2) == {0: lab.nodes[0], 1: lab.nodes[1]}
    assert (run_dir / "params.npy").exists()


def test_run_dir_the_nodes_cannot_see_is_refused(lab, tmp_path):
    """A tmpfs mounted only on the login node: the visibility check must catch it before launch."""
    private = tmp_path / "private"
    private.mkdir()
    argv = [
        sys.executable,
        "-m",
        "gpufabric",
        "bench",
        "collectives",
        "--launcher",
        "slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--backend",
        "gloo",
        "--ops",
        "all_reduce",
        "--sizes",
        "4K",
        "--iters",
        "1",
        "--run-dir",
        str(private / "run"),
        "--db",
        str(tmp_path / "r.db"),
    ]
    script = f'mount -t tmpfs lnprivate {private} && exec "$@"'
    done = on_login(lab, "sh", "-c", script, "sh", *argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not visible from every node (0 of 2" in done.stderr and "Traceback" not in done.stderr


def test_munge_authenticated_cluster_runs_on_both_nodes(tmp_path):
    """The munge path: munged on the login node, every daemon and client authenticating through it."""
    from gpufabric.lab import slurm

    if shutil.which("munged") is None:
        pytest.skip("needs munge (scripts/install-deps.sh)")
    name = f"ln{(os.getpid() + 5000) % 10000}"  # distinct from the module's lab
    cluster = slurm.up(name, hosts=2, auth="munge")
    try:
        assert cluster.auth == "auth/munge"
        done = on_login(cluster, "srun", "--nodes=2", "--ntasks=2", "bash", "-c", 'echo "$SLURMD_NODENAME"', timeout=60)
        assert done.returncode == 0, done.stderr
        assert sorted(done.stdout.split()) == sorted(cluster.nodes)
    finally:
        slurm.down(name)


def test_mpirun_inside_an_allocation_uses_both_nodes(lab, tmp_path):
    """No --hosts: mpirun reads SLURM_JOB_NODELIST (NAME-h[1-2]) inside the batch job, Open MPI
    starts its daemons with srun, and each rank records its own node (the kernel hostname is shared)."""
    run_dir = tmp_path / "run"
    probe = [
        sys.executable,
        "-m",
        "gpufabric",
        "bench",
        "collectives",
        "--launcher",
        "mpirun",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--backend",
        "gloo",
        "--ops",
        "all_reduce",
        "--sizes",
        "4K",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--run-dir",
        str(run_dir),
        "--data-ifname",
        "data0",
        "--db",
        str(tmp_path / "r.db"),
        "--format",
        "json",
    ]
    script = tmp_path / "mpi.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"
        f"#SBATCH --output={tmp_path}/slurm-%j.out\n" + " ".join(probe) + "\n"
    )
    done = on_login(lab, sys.executable, "-m", "gpufabric.exec.launch", "sbatch-wait", str(script), cwd=tmp_path)
    out = "".join(p.read_text() for p in tmp_path.glob("slurm-*.out"))
    assert done.returncode == 0, done.stdout + done.stderr + out[-3000:]
    doc = json.loads(out[out.index("{") :])
    assert [(r["op"], r["num_ranks"], r["wrong_elements"]) for r in doc["results"]] == [("all_reduce", 2, 0)]
    assert _hosts_of(run_dir, 2) == {0: lab.nodes[0], 1: lab.nodes[1]}


def test_sigterm_during_srun_keeps_finished_sizes_and_leaves_no_rank(lab, tmp_path):
    """Issue 23 bar with the Slurm launcher: SIGTERM (what scancel and CI send) after four sizes."""
    import signal
    import time

    from gpufabric.lab import slurm
    from gpufabric.results.store import Store
    from tests.conftest import MARK_VAR, marked_pids, wait_until

    mark = f"slurm-sigterm-{os.getpid()}"
    db = tmp_path / "r.db"
    argv = [
        *slurm.login_argv(lab),
        sys.executable,
        "-m",
        "gpufabric",
        "bench",
        "collectives",
        "--launcher",
        "slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--backend",
        "gloo",
        "--ops",
        "all_reduce",
        "--sizes",
        "1K:16M",
        "--iters",
        "30",
        "--warmup",
        "1",
        "--master-port",
        "29612",
        "--run-dir",
        str(tmp_path / "run"),
        "--data-ifname",
        "data0",
        "--db",
        str(db),
        "--format",
        "json",
        "--stream",
    ]
    proc = subprocess.Popen(
        argv, env=_env(lab, **{MARK_VAR: mark}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        rows = [json.loads(proc.stdout.readline()) for _ in range(4)]
        assert [r["size_bytes"] for r in rows] == [1024, 2048, 4096, 8192]
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)  # ip netns exec execs python: this is gpufabric itself
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    wait_until(lambda: marked_pids(mark) == [], what="no rank left on either Slurm node")
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.status == "interrupted"
    assert [int(r.params["size_bytes"]) for r in run.results][:4] == [1024, 2048, 4096, 8192]
