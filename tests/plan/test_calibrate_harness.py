"""calibrate predicts each point under the harness its result was measured with (issue 25)."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from gpufabric.errors import InputError
from gpufabric.plan.calibrate import Point, _stored_harness, _with_harness
from tests.conftest import DATA

G8 = DATA / "nccl-tests" / "public_h100_2node_mpirun_g8.txt"  # 2 x `-g 8`: nThread 1 nGpus 8


def _calibrate(cli, db, *extra):
    code, out, err = cli(
        "calibrate", "latest", "--db", db, "--fabric", "roce-400g", "--dry-run", "--format", "json", *extra
    )
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def g8_db(cli, tmp_path):
    db = tmp_path / "r.db"
    code, _, err = cli("ingest", "--tool", "auto", G8, "--db", db, "--format", "json")
    assert code == 0, err
    return db


def test_a_stored_single_process_harness_is_used_without_being_named(cli, g8_db):
    """The ingested `-g 8` table stores its harness: calibrating it without --harness fits
    what --harness single-process fits, not the per-GPU fit (7 x SINGLE_PROCESS_US of
    launch cost more in the proxy)."""
    stored = _calibrate(cli, g8_db)
    named = _calibrate(cli, g8_db, "--harness", "single-process")
    per_gpu = _calibrate(cli, g8_db, "--harness", "per-gpu")
    fab = {k: d["override"]["fabrics"]["roce-400g"] for k, d in (("s", stored), ("n", named), ("p", per_gpu))}
    assert fab["s"] == fab["n"]
    assert fab["p"]["proxy_us"] > fab["s"]["proxy_us"] + 20
    assert {row["harness"] for row in stored["points"]} == {"single-process"}
    assert any("harness read from the run: single-process" in n for n in stored["notes"])


def test_stored_harness_reads_the_parser_keys():
    assert _stored_harness({"tool_harness": "single-process"}) == "single-process"
    assert _stored_harness({"tool_gpus_per_process": "8"}) == "single-process"
    assert _stored_harness({"tool_gpus_per_process": "1"}) == "per-gpu"
    assert _stored_harness({}) == "per-gpu"


def _pt(harness: str) -> Point:
    return Point(
        op="all_reduce",
        size_bytes=8,
        time_us=30.0,
        num_ranks=16,
        nodes=2,
        gpus_per_node=8,
        busbw_gbps=0.0,
        harness=harness,
    )


def test_a_named_harness_overrides_every_point_and_an_unknown_one_is_refused():
    pts = [_pt("single-process"), _pt("per-gpu")]
    assert [p.harness for p in _with_harness(pts, None)] == ["single-process", "per-gpu"]
    assert {p.harness for p in _with_harness(pts, "torch")} == {"torch"}
    with pytest.raises(InputError, match="unknown harness 'mpi'"):
        _with_harness(pts, "mpi")
    with pytest.raises(InputError, match="unknown harness 'threads'"):
        _with_harness([_pt("threads")], None)


def test_repeats_of_one_size_under_two_harnesses_are_not_merged():
    from gpufabric.plan.calibrate import points_from_run

    def result(per_process: str, t: float) -> SimpleNamespace:
        metric = SimpleNamespace(name="time_us@1024B", samples=(t,), value=t)
        return SimpleNamespace(
            status=SimpleNamespace(value="ok"),
            tool="nccl-tests",
            params={
                "tool_op": "all_reduce",
                "tool_ranks": "16",
                "tool_nodes": "2",
                "tool_gpus_per_process": per_process,
            },
            metrics=(metric,),
            metric=lambda name: None,
        )

    run = SimpleNamespace(results=[result("1", 30.0), result("8", 60.0)])
    got = {p.harness: p.time_us for p in points_from_run(run)}
    assert got == {"per-gpu": 30.0, "single-process": 60.0}


def test_points_keep_the_nccl_release_their_header_named():
    """The release sets the p2p channel rule a send/recv point is predicted under."""
    from gpufabric.plan.calibrate import _stored_nccl_version

    assert _stored_nccl_version({"tool_nccl_version": "2.26.2+cuda12.8"}) == "2.26.2"
    assert _stored_nccl_version({"tool_nccl_version": "unknown"}) is None
    assert _stored_nccl_version({}) is None


def test_a_stored_release_changes_a_cross_node_send_recv_prediction():
    from gpufabric.catalog import load_catalog
    from gpufabric.plan.calibrate import _predict

    cat = load_catalog()
    pt = Point(op="send_recv", size_bytes=1 << 30, time_us=1.0, num_ranks=16, nodes=2, gpus_per_node=8, busbw_gbps=0.0)
    newest = _predict(replace(pt, nccl_version="2.29.2"), cat, "h100-sxm", "ib-ndr").busbw_gbps
    old = _predict(replace(pt, nccl_version="2.21.5"), cat, "h100-sxm", "ib-ndr").busbw_gbps
    assert old < 0.7 * newest
