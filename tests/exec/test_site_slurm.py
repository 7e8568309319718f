"""Slurm site options and the backend decided where the ranks run (issue 29, Bars 1 and 2 of Deliver)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from gpufabric.errors import InputError
from gpufabric.exec import launch, launchers
from gpufabric.exec.site import SiteOptions

MOD = "gpufabric.bench.probes.collectives"
SITE = [
    "--partition",
    "gpu",
    "--account",
    "proj1",
    "--qos",
    "high",
    "--container-image",
    "nvcr.io#nvidia/pytorch:24.09-py3",
]


def _dry(cli, *argv):
    code, out, err = cli("bench", "collectives", *argv, "--dry-run", "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_two_by_eight_gpu_slurm_dry_run_from_a_gpu_less_host(cli, tmp_path, monkeypatch):
    """Bar: requests 8 GPUs per node, NCCL, partition, account, qos, exclusive and the image."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here, whatever this machine has
    for mode in ("srun", "sbatch"):
        doc = _dry(
            cli,
            "--launcher",
            "slurm",
            "--slurm-mode",
            mode,
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            *SITE,
            "--run-dir",
            tmp_path / "run",
        )
        assert doc["config"]["backend"] == "nccl"
        script = doc["sbatch_script"]
        for line in (
            "#SBATCH --nodes=2",
            "#SBATCH --ntasks-per-node=8",
            "#SBATCH --gpus-per-node=8",
            "#SBATCH --partition=gpu",
            "#SBATCH --account=proj1",
            "#SBATCH --qos=high",
            "#SBATCH --exclusive",
        ):
            assert line in script.splitlines(), line
        # the image runs the ranks: on the script's srun step, with the run directory mounted
        (step,) = [s for s in script.splitlines() if s.startswith("srun ")]
        assert "'--container-image=nvcr.io#nvidia/pytorch:24.09-py3'" in step
        assert f"--container-mounts={tmp_path / 'run'}:{tmp_path / 'run'}" in step
        assert "gpufabric-rank python3 -m" in step  # the container's python, not this machine's
        if mode == "srun":
            (line,) = doc["commands"]
            for flag in ("--gpus-per-node=8", "--partition=gpu", "--account=proj1", "--qos=high", "--exclusive"):
                assert f" {flag} " in line, flag
            assert "--container-image=nvcr.io#nvidia/pytorch:24.09-py3" in line
            # scontrol may be missing in the image: gpufabric expands the node list itself then
            assert "python3 -m gpufabric.exec.hostlist first" in line


def test_auto_stays_gloo_for_ranks_on_this_host(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _dry(cli, "--launcher", "local")["config"]["backend"] == "gloo"
    hosts = "netns:a@10.0.0.1,netns:b@10.0.0.2"
    assert _dry(cli, "--launcher", "torchrun", "--nodes", "2", "--hosts", hosts)["config"]["backend"] == "gloo"
    # ssh hosts are other machines: they get NCCL (and the GPUs they have), not this host's answer
    doc = _dry(cli, "--launcher", "torchrun", "--nodes", "2", "--hosts", "a,b", "--run-dir", tmp_path / "r")
    assert doc["config"]["backend"] == "nccl"
    # an explicit backend is obeyed: gloo requests no GPUs
    doc = _dry(cli, "--launcher", "slurm", "--backend", "gloo", "--gpus-per-node", "4")
    assert doc["config"]["backend"] == "gloo" and "--gpus-per-node=" not in doc["commands"][0]


def test_gpus_here_do_not_decide_for_slurm():
    # a login node with GPUs and one without give the same Slurm plan
    for have in (True, False):
        assert launchers.resolve_backend("auto", launcher="slurm", hosts=[], have_gpu=have) == "nccl"
        assert launchers.resolve_backend("auto", launcher="k8s", hosts=[], have_gpu=have) == "nccl"
    assert launchers.resolve_backend("auto", launcher="local", hosts=[], have_gpu=True) == "nccl"
    assert launchers.resolve_backend("auto", launcher="local", hosts=[], have_gpu=False) == "gloo"
    with pytest.raises(InputError, match="--backend"):
        launchers.resolve_backend("mpi", launcher="local", hosts=[], have_gpu=False)


def test_site_options_reach_srun_and_the_script():
    site = SiteOptions(
        partition="gpu,gpu-long",
        reservation="maint",
        constraint="h100&ib",
        time="1-00:00:00",
        cpu_bind="cores",
        gpu_bind="closest",
        exclusive=False,
    )
    plan = launchers.build(
        "slurm", module=MOD, args=["c.json"], nodes=2, nproc=4, gpus_per_node=4, python="py", site=site
    )
    argv = plan.commands[0].argv
    for flag in (
        "--partition=gpu,gpu-long",
        "--reservation=maint",
        "--constraint=h100&ib",
        "--time=1-00:00:00",
        "--cpu-bind=cores",
        "--gpu-bind=closest",
    ):
        assert flag in argv, flag
    assert "--exclusive" not in argv and "#SBATCH --exclusive" not in plan.script
    assert "#SBATCH --constraint=h100&ib" in plan.script and "#SBATCH --time=1-00:00:00" in plan.script
    assert "srun --kill-on-bad-exit=1 --cpu-bind=cores --gpu-bind=closest bash" in plan.script
    with pytest.raises(InputError, match="no GPUs are requested"):
        launchers.build("slurm", module=MOD, args=[], nodes=1, nproc=1, site=SiteOptions(gpu_bind="closest"))


def test_a_given_port_is_kept_and_a_default_one_is_per_job():
    plan = launchers.build("slurm", module=MOD, args=[], nodes=1, nproc=1, master_port=29611, python="py")
    assert plan.commands[0].env["MASTER_PORT"] == "29611" and "SLURM_JOB_ID %" not in plan.script
    plan = launchers.build("slurm", module=MOD, args=[], nodes=1, nproc=1, python="py")
    assert "MASTER_PORT" not in plan.commands[0].env and "MASTER_PORT=$((29500 + SLURM_JOB_ID % 500))" in plan.script
    # two local launches never share a fixed port (each asks the kernel for a free one)
    ports = {
        launchers.build("local", module=MOD, args=[], nodes=1, nproc=1).commands[0].env["MASTER_PORT"] for _ in range(5)
    }
    assert len(ports) > 1 and "29500" not in ports


def test_per_job_port_is_computed_by_the_shell():
    """The job's port really comes out of the shell line the ranks run (bash, as srun does)."""
    done = subprocess.run(
        ["bash", "-c", launch.SLURM_MASTER_PORT + '; echo "$MASTER_PORT"'],
        env={**os.environ, "SLURM_JOB_ID": "123456"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout.strip() == str(29500 + 123456 % 500)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("partition", "gpu;id"),
        ("account", "-x"),
        ("qos", "a b"),
        ("constraint", "h100\n#SBATCH --uid=0"),
        ("time", "forever"),
        ("time", "1:2:3:4"),
        ("container_image", "img$(id)"),
        ("cpu_bind", "all"),
        ("gpu_bind", "nearest"),
        ("k8s_kind", "job"),
        ("k8s_queue", "Team_A"),
    ],
)
def test_site_values_are_checked_against_the_engines_syntax(field, value):
    with pytest.raises(InputError, match=re.escape(f"--{field.replace('_', '-')} ")):
        SiteOptions(**{field: value})


def test_cli_refuses_bad_site_values_and_unused_options(cli):
    code, _, err = cli("bench", "collectives", "--launcher", "slurm", "--time", "forever", "--dry-run")
    assert code == 2 and "--time 'forever'" in err and "Traceback" not in err
    code, _, err = cli("bench", "train", "--launcher", "torchrun", "--partition", "gpu", "--dry-run")
    assert code == 2 and "--partition has no effect without --launcher slurm" in err


# ---- sbatch --test-only: the real Slurm parses what we generate ---------------------------------


@pytest.fixture
def slurm_site(tmp_path, monkeypatch):
    from tests.bench.probes.conftest import one_node_slurm

    with one_node_slurm(tmp_path, cluster="gfsite", ctld_port=16956, slurmd_port=16957) as (conf, env):
        monkeypatch.setenv("SLURM_CONF", str(conf))
        yield env


@pytest.mark.root
def test_sbatch_test_only_accepts_the_site_script(slurm_site, tmp_path):
    site = SiteOptions(partition="debug", time="0:10:00", cpu_bind="cores", constraint="", exclusive=True)
    plan = launchers.build(
        "slurm",
        module=MOD,
        args=[str(tmp_path / "c.json")],
        nodes=1,
        nproc=2,
        python="python3",
        out_dir=str(tmp_path),
        slurm_mode="sbatch",
        site=site,
    )
    script = tmp_path / "job.sbatch"
    script.write_text(plan.script)
    done = subprocess.run(
        ["sbatch", "--test-only", str(script)], env=slurm_site, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "to start at" in done.stderr and "#SBATCH --exclusive" in plan.script
    # the same script with a partition the cluster lacks is refused: the directives are really read
    script.write_text(plan.script.replace("--partition=debug", "--partition=nosuch"))
    bad = subprocess.run(
        ["sbatch", "--test-only", str(script)], env=slurm_site, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0 and "partition" in bad.stderr.lower()
    # srun's own parser takes the step's binding and the job's site flags (--test-only: nothing runs)
    srun = launchers.build("slurm", module=MOD, args=["c"], nodes=1, nproc=2, python="python3", site=site).commands[0]
    flags = [a for a in srun.argv if a.startswith("--") and not a.startswith("--container")][:12]
    done = subprocess.run(
        ["srun", "--test-only", *flags, "true"], env=slurm_site, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "--exclusive" in flags and "--cpu-bind=cores" in flags and "--partition=debug" in flags


@pytest.mark.root
@pytest.mark.slow
def test_site_options_and_per_job_port_on_a_real_srun(cli, slurm_site, tmp_path):
    """A real 2-rank job with partition, --exclusive, --time and no --master-port: the port comes
    from SLURM_JOB_ID on the allocation, and the job runs."""
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench",
        "collectives",
        "--launcher",
        "slurm",
        "--backend",
        "gloo",
        "--gpus-per-node",
        "2",
        "--partition",
        "debug",
        "--time",
        "0:05:00",
        "--ops",
        "all_reduce",
        "--sizes",
        "8K",
        "--iters",
        "2",
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 0, err + out
    doc = json.loads(out)
    assert [(r["op"], r["num_ranks"], r["wrong_elements"]) for r in doc["results"]] == [("all_reduce", 2, 0)]
    from gpufabric.results.store import Store

    with Store.open(db) as store:
        commands = store.get_run(doc["run_id"]).artifacts["launch_commands"]
    assert "--partition=debug" in commands and "--exclusive" in commands and "--time=0:05:00" in commands
    assert "SLURM_JOB_ID % 500" in commands and "MASTER_PORT=" not in commands.split("srun", 1)[0]
