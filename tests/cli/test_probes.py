"""bench collectives|train|checkpoint: real gloo ranks on loopback, results in a real store."""

from __future__ import annotations

import json
import shutil

import pytest

from gpufabric.model.collectives import busbw_factor
from gpufabric.results.store import Store
from tests.conftest import marked_pids, needs_tool

ALL_OPS = "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv"


def test_collectives_two_ranks_all_ops_exact_and_busbw_recomputable(cli, tmp_path):
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench",
        "collectives",
        "--ops",
        ALL_OPS,
        "--sizes",
        "4K,256K",
        "--iters",
        "4",
        "--warmup",
        "1",
        "--master-port",
        "29540",
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 0, err + out
    doc = json.loads(out)
    assert len(doc["results"]) == 12 and doc["error"] is None
    with Store.open(db) as store:
        run = store.get_run(doc["run_id"])
    assert run.kind == "bench.collectives" and run.status == "passed"
    assert {r.params["op"] for r in run.results} == set(ALL_OPS.split(","))
    assert [r["rank"] for r in run.fingerprint["run"]["ranks"]] == [0, 1]
    assert "launch_commands" in run.artifacts
    for r in run.results:
        size, n = int(r.params["size_bytes"]), int(r.params["num_ranks"])
        t = r.metric("time_p50_us").value * 1e-6
        assert r.metric("wrong_elements").value == 0
        assert r.metric("algbw_gbps").value == pytest.approx(size / t / 1e9, rel=1e-9)
        expected = size / t / 1e9 * busbw_factor(r.params["op"], n)
        assert r.metric("busbw_gbps").value == pytest.approx(expected, rel=1e-9)
        assert len(r.metric("time_p50_us").samples) == 4
        assert r.ranks is not None and [s.rank for s in r.ranks.ranks] == [0, 1]  # typed, read back from the store
        assert all(s.p50 is not None and s.p50 > 0 for s in r.ranks.ranks)
    factors = {r.params["op"]: r.metric("busbw_gbps").value / r.metric("algbw_gbps").value for r in run.results}
    assert factors["all_gather"] == pytest.approx(0.5) and factors["all_reduce"] == pytest.approx(1.0)


def test_collectives_four_ranks_torchrun(cli, tmp_path):
    code, out, err = cli(
        "bench",
        "collectives",
        "--launcher",
        "torchrun",
        "--gpus-per-node",
        "4",
        "--ops",
        "all_reduce,all_to_all,reduce_scatter",
        "--sizes",
        "64K",
        "--dtypes",
        "bfloat16",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--master-port",
        "29541",
        "--db",
        tmp_path / "r.db",
        "--format",
        "json",
    )
    assert code == 0, err + out
    rows = json.loads(out)["results"]
    assert [(r["op"], r["num_ranks"], r["wrong_elements"]) for r in rows] == [
        ("all_reduce", 4, 0),
        ("all_to_all", 4, 0),
        ("reduce_scatter", 4, 0),
    ]
    rs = rows[2]
    assert rs["busbw_gbps"] / rs["algbw_gbps"] == pytest.approx(3 / 4)


def test_corrupted_buffer_and_dying_rank(cli, tmp_path, process_mark):
    """Rank 1 corrupts its result (#wrong > 0) and is SIGKILLed after 8K: the run ends fast,
    names rank 1 and its host, keeps the finished sizes, and leaves no process behind."""
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench",
        "collectives",
        "--ops",
        "all_reduce",
        "--sizes",
        "1K:64K",
        "--iters",
        "3",
        "--warmup",
        "0",
        "--op-timeout",
        "5s",
        "--timeout",
        "60s",
        "--master-port",
        "29542",
        "--inject-corrupt-rank",
        "1",
        "--inject-die-rank",
        "1",
        "--inject-die-after",
        "8K",
        "--db",
        db,
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert code == 1
    # The run ended on the death (not the 60 s run timeout): the error says so.
    assert "rank 1 (" in doc["error"] and "died" in doc["error"] and "timed out" not in doc["error"]
    assert [r["size_bytes"] for r in doc["results"]] == [1024, 2048, 4096, 8192]
    assert all(r["wrong_elements"] == 1 for r in doc["results"])
    assert marked_pids(process_mark) == []  # no rank (or its children) of this run is left
    with Store.open(db) as store:
        run = store.get_run(doc["run_id"])
    assert run.status == "error" and len(run.results) == 4
    assert any(v.outcome.value == "failed" and v.metric == "wrong_elements" for v in run.verdicts)


@needs_tool("mpirun")
def test_mpirun_launcher(cli, tmp_path):
    code, out, err = cli(
        "bench",
        "collectives",
        "--launcher",
        "mpirun",
        "--ops",
        "broadcast,send_recv",
        "--sizes",
        "16K",
        "--iters",
        "2",
        "--master-port",
        "29543",
        "--db",
        tmp_path / "r.db",
        "--format",
        "json",
    )
    assert code == 0, err + out
    assert [(r["op"], r["wrong_elements"]) for r in json.loads(out)["results"]] == [("broadcast", 0), ("send_recv", 0)]


def test_dry_run_prints_every_command(cli, tmp_path):
    argv = (
        "bench",
        "collectives",
        "--launcher",
        "slurm",
        "--nodes",
        "2",
        "--hosts",
        "n1,n2",
        "--gpus-per-node",
        "4",
        "--dry-run",
    )
    code, _, err = cli(*argv)
    assert code == 2 and "--run-dir" in err  # a multi-node launch needs storage every node sees
    code, out, _ = cli(*argv, "--run-dir", tmp_path / "run")
    assert code == 0
    # MASTER_ADDR is derived on the allocation (scontrol), never exported from the launching host.
    # ... and so is MASTER_PORT: one per job (SLURM_JOB_ID), no fixed 29500 for two jobs to share
    assert out.startswith("srun --nodes=2 --ntasks=8") and "--nodelist=n1,n2" in out
    assert "MASTER_PORT=$((29500 + SLURM_JOB_ID % 500))" in out and "MASTER_PORT=29500" not in out
    assert "scontrol show hostnames" in out and "127.0.0.1" not in out
    assert "#SBATCH --nodes=2" in out
    code, out, _ = cli(
        "bench",
        "train",
        "--launcher",
        "torchrun",
        "--nodes",
        "2",
        "--hosts",
        "a,b",
        "--dry-run",
        "--run-dir",
        tmp_path / "run2",
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert code == 0 and len(doc["commands"]) == 2 and "ssh" in doc["commands"][1]
    assert doc["config"]["hidden"] == 128


def test_bad_input(cli):
    for argv, message in (
        (("collectives", "--ops", "all_reduce,gather"), "--ops: unknown gather"),
        (("collectives", "--sizes", "8K:1K"), "need 0 < start <= end"),
        (("collectives", "--launcher", "ssh"), "--launcher 'ssh'"),
        (("train", "--mode", "zero3"), "--mode 'zero3'"),
    ):
        code, _, err = cli("bench", *argv, "--dry-run")
        assert code == 2 and message in err, err


@pytest.mark.slow
def test_train_repeat_bitwise_then_different_rank_count(cli, tmp_path):
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench",
        "train",
        "--repeat",
        "2",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--master-port",
        "29544",
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 0, err + out
    doc = json.loads(out)
    assert doc["reproducibility"][0]["identical"] is True
    assert doc["results"][0]["sha256"] == doc["results"][1]["sha256"] != ""
    assert set(doc["results"][0]["rank_step_p50_s"]) == {"0", "1"}
    code, out, err = cli(
        "bench",
        "train",
        "--gpus-per-node",
        "1",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--master-port",
        "29545",
        "--against",
        str(doc["run_id"]),
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 1, err + out
    comp = json.loads(out)["reproducibility"][0]
    assert comp["identical"] is False and comp["max_abs_diff"] > 0 and comp["differing_elements"] > 0
    assert "num_ranks: 2 vs 1" in comp["differences"]
    code, out, err = cli(
        "bench",
        "train",
        "--mode",
        "fsdp",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--master-port",
        "29548",
        "--against",
        str(doc["run_id"]),
        "--db",
        db,
        "--format",
        "json",
    )
    fsdp = json.loads(out)
    assert fsdp["error"] is None and len(fsdp["results"][0]["sha256"]) == 64, err
    assert "mode: ddp vs fsdp" in fsdp["reproducibility"][0]["differences"]


def test_checkpoint_all_formats_verified(cli, tmp_path):
    target = tmp_path / "ckpt"
    code, out, err = cli(
        "bench",
        "checkpoint",
        "--dir",
        target,
        "--bytes",
        "8M",
        "--master-port",
        "29546",
        "--db",
        tmp_path / "r.db",
        "--format",
        "json",
    )
    assert code == 0, err + out
    rows = json.loads(out)["results"]
    assert [r["format"] for r in rows] == ["torch", "safetensors", "dcp"]
    for r in rows:
        assert r["wrong_tensors"] == 0 and r["bytes"] == 8 << 20
        # headline = total bytes / slowest rank's time; with 2 ranks it is at least twice the slowest rank's rate
        assert r["write_gbps"] == pytest.approx(r["bytes"] / r["write_duration_s"] / 1e9)
        assert r["read_gbps"] == pytest.approx(r["bytes"] / r["read_duration_s"] / 1e9)
        assert r["write_gbps"] >= 2 * r["write_min_rank_gbps"] * 0.999 and "write_aggregate_gbps" not in r
        # the commit path: write, fsync, rename, directory fsync, each timed, within the rank's total
        phases = [r["write_data_s"], r["fsync_s"], r["rename_s"], r["dir_fsync_s"]]
        assert all(p >= 0 for p in phases) and r["write_data_s"] > 0 and r["rename_s"] > 0
        assert max(phases) <= r["write_duration_s"]
    assert not any(target.iterdir())  # files removed unless --keep
    code, out, err = cli(
        "bench",
        "checkpoint",
        "--dir",
        target,
        "--bytes",
        "8M",
        "--master-port",
        "29546",
        "--keep",
        "--formats",
        "torch,dcp",
        "--db",
        tmp_path / "r.db",
    )
    assert code == 0, err + out
    assert "rank min" in out and "dirsync" in out
    # committed under the final names, no temporary left behind
    assert sorted(p.name for p in (target / "torch").iterdir()) == ["rank0.pt", "rank1.pt"]
    assert [p.name for p in (target / "dcp").iterdir()] == ["ckpt"]
    shutil.rmtree(target)


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _has_cuda(), reason="needs a GPU: nccl backend and CUDA-event timing")
def test_nccl_collectives_on_gpu(cli, tmp_path):
    code, out, err = cli(
        "bench",
        "collectives",
        "--backend",
        "nccl",
        "--gpus-per-node",
        "1",
        "--ops",
        "all_reduce,broadcast",
        "--sizes",
        "1M:64M",
        "--iters",
        "5",
        "--master-port",
        "29547",
        "--db",
        tmp_path / "r.db",
        "--format",
        "json",
    )
    assert code == 0, err + out
    rows = json.loads(out)["results"]
    assert rows and all(r["wrong_elements"] == 0 and r["busbw_gbps"] > 0 for r in rows)


def test_collectives_stream_sizes_as_json_lines_and_live_text(cli, tmp_path):
    code, out, err = cli(
        "bench",
        "collectives",
        "--ops",
        "all_reduce,broadcast",
        "--sizes",
        "1K,64K",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--master-port",
        "29549",
        "--db",
        tmp_path / "r.db",
        "--format",
        "json",
        "--stream",
    )
    assert code == 0, err + out
    lines = [json.loads(line) for line in out.splitlines()]
    sizes, report = lines[:-1], lines[-1]
    assert [(x["event"], x["op"], x["size_bytes"]) for x in sizes] == [
        ("size", "all_reduce", 1024),
        ("size", "all_reduce", 65536),
        ("size", "broadcast", 1024),
        ("size", "broadcast", 65536),
    ]
    assert all(x["busbw_gbps"] > 0 and x["wrong"] == 0 and "schema_version" in x for x in sizes)
    assert report["event"] == "report" and len(report["results"]) == 4
    code, out, err = cli(
        "bench",
        "collectives",
        "--ops",
        "all_reduce",
        "--sizes",
        "1K,4K",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--master-port",
        "29549",
        "--db",
        tmp_path / "r.db",
    )
    assert code == 0, err + out
    live = [line for line in err.splitlines() if line.startswith("  all_reduce")]
    assert len(live) == 2 and "rank 0's timings" in err
    code, out, err = cli(
        "bench",
        "collectives",
        "--ops",
        "all_reduce",
        "--sizes",
        "1K",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--master-port",
        "29549",
        "--db",
        tmp_path / "r.db",
        "--quiet",
    )
    assert code == 0 and "rank 0's timings" not in err and "all_reduce" in out


def test_dry_run_writes_nothing_into_the_run_dir(cli, tmp_path):
    """Issue 24: `--dry-run` printed the commands and left config.json in --run-dir."""
    run_dir = tmp_path / "shared"
    run_dir.mkdir()
    code, out, err = cli("bench", "collectives", "--run-dir", run_dir, "--dry-run")
    assert code == 0, err
    assert str(run_dir / "config.json") in out and list(run_dir.iterdir()) == []


def test_gpus_per_node_is_bounded_before_anything_starts(cli):
    code, _, err = cli("bench", "collectives", "--gpus-per-node", "100000000", "--dry-run")
    assert code == 2 and "--gpus-per-node must be between 1 and 1,024" in err


def test_plan_expectations_and_not_planned_hardware(cli, tmp_path):
    """--plan on a probe: SLOs of the plan's design at the probe's scale, with their provenance in
    --dry-run; on this VM (no H100, no RDMA) every plan verdict is not_planned_hardware."""
    from tests.conftest import EXAMPLES

    spec = EXAMPLES / "llama3-70b-1k.yaml"
    code, out, err = cli("plan", spec, "--format", "json")
    assert code == 0, err
    plan = tmp_path / "plan.json"
    plan.write_text(out)
    code, out, err = cli(
        "bench", "collectives", "--ops", "all_reduce", "--sizes", "1K,1M", "--plan", plan, "--spec", spec, "--dry-run"
    )
    assert code == 0, err
    slo_lines = [line for line in out.splitlines() if line.startswith("#   ")]
    assert len(slo_lines) == 1 and "torch.all_reduce[dtype=float32 size_bytes=1048576] busbw_gbps ~" in slo_lines[0]
    assert "predict_collective all_reduce 1048576 B on 1 x 2 ranks" in slo_lines[0]
    code, out, err = cli("bench", "checkpoint", "--dir", tmp_path / "c", "--plan", plan, "--dry-run")
    read = [line for line in out.splitlines() if "read_gbps" in line]
    assert code == 0 and len(read) == 1 and "share of the plan's storage read" in read[0]
    db = tmp_path / "r.db"
    code, out, err = cli(
        "bench",
        "collectives",
        "--ops",
        "all_reduce",
        "--sizes",
        "1K,1M",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--master-port",
        "29591",
        "--plan",
        plan,
        "--spec",
        spec,
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 1, err
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.status == "failed"
    planned = [v for v in run.verdicts if v.metric == "busbw_gbps"]
    assert len(planned) == 1 and planned[0].outcome == "not_planned_hardware"
    assert all(v.outcome == "passed" for v in run.verdicts if v.metric == "wrong_elements")  # exactness still judged


def test_a_usage_error_stores_no_run(cli, tmp_path):
    """Checks prepare makes run before the run is opened: exit 2 leaves no `error` run in history."""
    db = tmp_path / "r.db"
    code, _, err = cli("bench", "collectives", "--launcher", "slurm", "--nodes", "2", "--db", db)
    assert code == 2 and "--run-dir" in err
    if db.exists():
        with Store.open(db) as store:
            assert store.list_runs() == []
