"""Merging rank records: finished sizes, the rank to blame, stragglers, oversubscription."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpufabric.bench.probes.results import collective_results, diagnose, read_ranks


def _write(tmp_path, rank, host, records, cpus=64):
    lines = [{"type": "start", "rank": rank, "host": host, "cpus": cpus}, *records]
    (tmp_path / f"rank{rank}.jsonl").write_text(
        "".join(json.dumps({"rank": rank, "host": host, **r}) + "\n" for r in lines)
    )


def _size(size, times, wrong=0):
    return {
        "type": "size",
        "op": "all_reduce",
        "dtype": "float32",
        "size_bytes": size,
        "count": size // 4,
        "elem_bytes": 4,
        "times_us": times,
        "wrong": wrong,
    }


def test_straggler_named_and_only_complete_sizes_kept(tmp_path):
    for rank in range(4):
        slow = 3.0 if rank == 3 else 1.0
        recs = [_size(1024, [100 * slow, 110 * slow, 105 * slow])]
        if rank != 2:
            recs.append(_size(2048, [200, 210, 205]))  # rank 2 never finished 2 KiB
        _write(tmp_path, rank, f"node{rank}", recs + ([{"type": "done"}] if rank != 2 else []))
    # cut line from a kill -9 must not break reading
    with open(tmp_path / "rank2.jsonl", "a") as fh:
        fh.write('{"type": "si')
    logs = read_ranks(tmp_path, 4)
    results = collective_results(logs)
    assert [r.params["size_bytes"] for r in results] == ["1024"]
    r = results[0]
    assert r.ranks is not None and r.ranks.stragglers == (3,) and "rank 3 (node3)" in r.reason
    assert r.ranks.oversubscribed == "" and r.ranks.host(3) == "node3" and r.ranks.unit == "us"
    assert "stragglers" not in r.params  # per-rank data is typed, not JSON text in params
    # per-iteration time is the mean over ranks; algbw uses its median
    assert r.metric("time_p50_us").samples == (150.0, 165.0, 157.5)
    assert r.metric("time_p50_us").value == pytest.approx(157.5)
    assert r.metric("time_p99_us").value == pytest.approx(157.5 + 0.98 * 7.5)  # linear interpolation, as numpy
    assert r.metric("time_cv").value == pytest.approx(np.std([150.0, 165.0, 157.5], ddof=1) / 157.5)
    assert (
        diagnose(logs)
        == "rank 2 (node2) died without an error record after all_reduce float32 1024 B; the other ranks stopped"
    )


def test_primary_error_is_not_the_peer_consequence(tmp_path):
    _write(tmp_path, 0, "a", [{"type": "error", "message": "RuntimeError: Connection closed by peer [10.0.0.2]"}])
    _write(tmp_path, 1, "b", [{"type": "error", "message": "RuntimeError: CUDA error: an illegal memory access"}])
    assert diagnose(read_ranks(tmp_path, 2)) == "rank 1 (b) failed: RuntimeError: CUDA error: an illegal memory access"


def test_oversubscribed_host_reported(tmp_path):
    for rank in range(3):
        _write(tmp_path, rank, "vm", [_size(1024, [100.0, 100.0]), {"type": "done"}], cpus=2)
    r = collective_results(read_ranks(tmp_path, 3))[0]
    assert r.ranks is not None and r.ranks.oversubscribed == "3 ranks on vm with 2 CPUs"
    assert diagnose(read_ranks(tmp_path, 3)) == ""
