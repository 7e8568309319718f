"""The Slurm launcher against a real one-node cluster started by the test."""

from __future__ import annotations

import json

import pytest

from gpufabric.results.store import Store


@pytest.mark.slow
def test_srun_launch_and_script_kept_with_run(cli, slurm_cluster, tmp_path):
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench",
        "collectives",
        "--launcher",
        "slurm",
        "--gpus-per-node",
        "2",
        "--backend",
        "gloo",  # a CPU-only cluster: under Slurm `auto` means NCCL with GPUs requested
        "--ops",
        "all_reduce,all_gather",
        "--sizes",
        "32K",
        "--iters",
        "2",
        "--master-port",
        "29552",
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 0, err + out
    doc = json.loads(out)
    assert [(r["op"], r["num_ranks"], r["wrong_elements"]) for r in doc["results"]] == [
        ("all_reduce", 2, 0),
        ("all_gather", 2, 0),
    ]
    with Store.open(db) as store:
        run = store.get_run(doc["run_id"])
    assert (
        "MASTER_PORT=29552" in run.artifacts["launch_commands"]
        and "MASTER_ADDR=1" not in run.artifacts["launch_commands"]
    )
    assert "srun --nodes=1 --ntasks=2" in run.artifacts["launch_commands"]
    assert "#SBATCH --ntasks-per-node=2" in run.artifacts["sbatch_script"]


@pytest.mark.slow
def test_sbatch_mode_runs_the_generated_script(cli, slurm_cluster, tmp_path):
    code, out, err = cli(
        "bench",
        "collectives",
        "--launcher",
        "slurm",
        "--slurm-mode",
        "sbatch",
        "--gpus-per-node",
        "2",
        "--backend",
        "gloo",  # a CPU-only cluster: under Slurm `auto` means NCCL with GPUs requested
        "--ops",
        "broadcast",
        "--sizes",
        "8K",
        "--iters",
        "2",
        "--master-port",
        "29553",
        "--db",
        tmp_path / "r.db",
        "--format",
        "json",
    )
    assert code == 0, err + out
    doc = json.loads(out)
    assert [(r["op"], r["num_ranks"], r["wrong_elements"]) for r in doc["results"]] == [("broadcast", 2, 0)]
    with Store.open(tmp_path / "r.db") as store:
        run = store.get_run(doc["run_id"])
    assert "gpufabric.exec.launch sbatch-wait" in run.artifacts["launch_commands"]
    assert "#SBATCH --ntasks-per-node=2" in run.artifacts["sbatch_script"]
