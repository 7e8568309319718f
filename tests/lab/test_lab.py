"""The namespace lab: up/status/down, tbf caps, noisy neighbour, and gloo across lab hosts."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import needs_root, needs_tool

pytestmark = [needs_root, needs_tool("iperf3")]


@pytest.fixture
def lab_name():
    from gpufabric.lab import net

    name = f"t{os.getpid() % 99999}"
    net.down(name)
    yield name
    net.down(name)
    assert net.existing_namespaces(name) == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_up_status_noise_down_idempotent(cli, lab_name):
    code, out, err = cli(
        "lab", "up", lab_name, "--hosts", "3", "--rate", "data=1gbit", "--noise", "storage", "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert [h["netns"] for h in doc["hosts"]] == [f"gfl-{lab_name}-h{i}" for i in (1, 2, 3)]
    h2 = doc["hosts"][1]["planes"]
    assert h2["data"]["addr"] == "10.210.1.2" and "tbf" in h2["data"]["qdisc"] and "rate 1Gbit" in h2["data"]["qdisc"]
    assert "tbf" not in h2["storage"]["qdisc"]
    noise = doc["noise"]
    assert noise["plane"] == "storage" and len(noise["alive"]) == 2
    code, out, _ = cli("lab", "noise", lab_name, "--plane", "none")
    assert code == 0 and not any(_alive(p) for p in noise["pids"])
    code, out, _ = cli("lab", "status", lab_name, "--format", "json")
    assert code == 0 and json.loads(out)["noise"]["plane"] is None
    assert cli("lab", "down", lab_name)[0] == 0
    code, out, _ = cli("lab", "down", lab_name, "--format", "json")
    assert code == 0 and json.loads(out)["removed"] == []
    assert cli("lab", "status", lab_name)[0] == 1


def test_bad_lab_input(cli):
    for argv, message in (
        (("Bad_Name",), "lab name 'Bad_Name'"),
        (("x1", "--rate", "fabric=1gbit"), "unknown plane 'fabric'"),
        (("x1", "--rate", "data"), "use PLANE=RATE"),
    ):
        code, _, err = cli("lab", "up", *argv)
        assert code == 2 and message in err, err


@pytest.mark.slow
def test_gloo_across_lab_hosts_follows_the_tbf_cap(cli, lab_name, tmp_path):
    """One rank per lab host; GLOO_SOCKET_IFNAME pins data to the chosen plane. With data
    capped at 1 Gbit/s (0.125 GB/s) the large all_reduce cannot exceed the cap, while the
    uncapped storage plane runs several times faster."""
    assert cli("lab", "up", lab_name, "--rate", "data=1gbit")[0] == 0
    busbw = {}
    for plane, port in (("data", 29550), ("storage", 29551)):
        code, out, err = cli(
            "bench",
            "collectives",
            "--lab",
            lab_name,
            "--plane",
            plane,
            "--gpus-per-node",
            "1",
            "--ops",
            "all_reduce",
            "--sizes",
            "4M",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--master-port",
            str(port),
            "--db",
            tmp_path / "r.db",
            "--format",
            "json",
        )
        assert code == 0, err + out
        row = json.loads(out)["results"][0]
        assert row["wrong_elements"] == 0 and row["num_ranks"] == 2
        busbw[plane] = row["busbw_gbps"]
    assert busbw["data"] < 0.125 * 1.05
    assert busbw["storage"] > 2 * busbw["data"]


@pytest.mark.slow
def test_torchrun_across_lab_hosts_rendezvous_on_the_management_plane(cli, tmp_path):
    """torchrun per host: static rendezvous at host 1's mgmt address, each agent's --local-addr its own."""
    from gpufabric.lab import net

    lab_name = f"ln{os.getpid() % 10000}"
    assert cli("lab", "up", lab_name)[0] == 0
    try:
        _torchrun_on(cli, lab_name, tmp_path)
    finally:
        net.down(lab_name)


def _torchrun_on(cli, lab_name, tmp_path):
    argv = (
        "bench",
        "collectives",
        "--launcher",
        "torchrun",
        "--lab",
        lab_name,
        "--gpus-per-node",
        "1",
        "--ops",
        "all_reduce",
        "--sizes",
        "64K",
        "--iters",
        "2",
        "--master-port",
        "29632",
        "--run-dir",
        tmp_path / "run",
        "--format",
        "json",
    )
    code, out, err = cli(*argv, "--dry-run")  # --db has no effect with --dry-run (refused)
    commands = json.loads(out)["commands"]
    assert code == 0 and "--rdzv-endpoint=10.210.0.1:29632" in commands[1] and "--local-addr=10.210.0.2" in commands[1]
    code, out, err = cli(*argv, "--db", tmp_path / "r.db")
    assert code == 0, err + out
    assert json.loads(out)["results"][0]["num_ranks"] == 2
    from gpufabric.bench.probes.results import read_ranks

    assert {r: log.host for r, log in read_ranks(tmp_path / "run", 2).items()} == {0: "h1", 1: "h2"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hosts", "40"], "2 to 16 hosts"),
        (["--hosts", "1"], "2 to 16 hosts"),
        (["--rate", "data=fast"], "tc rate"),
        (["--rate", "nope=1gbit"], "unknown plane"),
        (["--noise", "nope"], "unknown plane"),
        (["Bad_Name"], "lowercase letters"),
    ],
)
def test_dry_run_validates_exactly_as_up(cli, args, message):
    """`lab up --dry-run` refuses what `lab up` refuses, with the same message (no root needed)."""
    from gpufabric.errors import InputError
    from gpufabric.lab import net

    code, out, err = cli("lab", "up", *args, "--dry-run")
    assert code == 2 and message in err and out == ""
    name = next((a for a in args if not a.startswith("-") and "=" not in a and not a.isdigit()), "lab")
    opts = dict(zip(args[::2], args[1::2])) if args[0].startswith("-") else {}
    with pytest.raises(InputError, match=message):
        net.up(
            name if name in args else "lab",
            hosts=int(opts.get("--hosts", 2)),
            rates=dict([opts["--rate"].split("=")]) if "--rate" in opts else None,
            noise=opts.get("--noise", ""),
        )
