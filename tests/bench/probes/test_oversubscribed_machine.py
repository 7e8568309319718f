"""Lab namespaces share one machine's CPUs: oversubscription is judged per machine, not per host label."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from gpufabric.bench.probes.results import collective_results, read_ranks
from gpufabric.bench.probes.worker import machine_id


def _write(tmp_path, rank, host, machine, cpus=2):
    recs = [
        {"type": "start", "cpus": cpus, "machine": machine},
        {
            "type": "size",
            "op": "all_reduce",
            "dtype": "float32",
            "size_bytes": 1024,
            "count": 256,
            "elem_bytes": 4,
            "times_us": [100.0, 300.0 if rank == 3 else 100.0],
            "wrong": 0,
        },
        {"type": "done"},
    ]
    (tmp_path / f"rank{rank}.jsonl").write_text(
        "".join(json.dumps({"rank": rank, "host": host, **r}) + "\n" for r in recs)
    )


def test_two_namespaces_of_one_two_cpu_machine_are_oversubscribed(tmp_path):
    for rank, host in enumerate(["h1", "h1", "h2", "h2"]):
        _write(tmp_path, rank, host, "boot-a")
    (r,) = collective_results(read_ranks(tmp_path, 4))
    assert r.ranks is not None
    assert r.ranks.oversubscribed == "4 ranks on one machine (h1, h2: namespaces sharing its CPUs) with 2 CPUs"


def test_two_real_machines_with_two_ranks_each_are_not(tmp_path):
    for rank, (host, machine) in enumerate([("h1", "a"), ("h1", "a"), ("h2", "b"), ("h2", "b")]):
        _write(tmp_path, rank, host, machine)
    (r,) = collective_results(read_ranks(tmp_path, 4))
    assert r.ranks is not None and r.ranks.oversubscribed == ""


def test_records_without_a_machine_fall_back_to_the_host(tmp_path):
    for rank, host in enumerate(["vm", "vm", "vm"]):
        _write(tmp_path, rank, host, "")
    (r,) = collective_results(read_ranks(tmp_path, 3))
    assert r.ranks is not None and r.ranks.oversubscribed == "3 ranks on vm with 2 CPUs"


def test_a_network_namespace_reports_the_same_machine():
    """The boot id is not namespaced: a rank in a lab namespace names this machine."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and util-linux unshare")
    inside = subprocess.run(
        ["unshare", "--net", "cat", "/proc/sys/kernel/random/boot_id"], capture_output=True, text=True, timeout=30
    )
    assert inside.returncode == 0, inside.stderr
    assert machine_id() and inside.stdout.strip() == machine_id()
