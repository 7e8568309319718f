"""gpufabric calibrate: alpha/beta recovered from a sweep, override accepted by plan."""

from __future__ import annotations

import json

import pytest
import yaml

from gpufabric.model.collectives import busbw_factor
from gpufabric.results.records import Direction, Metric, Status, TestResult
from gpufabric.results.store import Store
from tests.conftest import EXAMPLES

ALPHA_US, BETA_GBPS = 500.0, 0.1


def _result(op: str, size: int, hosts: dict[str, str]) -> TestResult:
    n = len(hosts)
    f = float(busbw_factor(op, n))
    t_us = ALPHA_US + f * size / (BETA_GBPS * 1e3)
    busbw = size / (t_us * 1e-6) / 1e9 * f
    return TestResult(name=f"torch.{op}", tool="torch", host="cluster", status=Status.ok,
                      metrics=(Metric(name="time_p50_us", value=t_us, unit="us", direction=Direction.lower),
                               Metric(name="busbw_gbps", value=busbw, unit="GB/s")),
                      params={"op": op, "size_bytes": str(size), "num_ranks": str(n), "rank_hosts": json.dumps(hosts)})


@pytest.fixture
def db_with_sweep(tmp_path):
    """A run whose times follow t = alpha + f*S/beta exactly, across two hosts (inter-node)."""
    db = tmp_path / "r.db"
    hosts = {"0": "h1", "1": "h2"}
    with Store.open(db) as store:
        run_id = store.begin_run(kind="bench.collectives", argv=["test"], fingerprint={})
        for op in ("all_reduce", "all_gather"):
            for k in range(12, 23, 2):
                store.add_result(run_id, _result(op, 1 << k, hosts))
        store.finish_run(run_id, "passed")
    return db, run_id


def test_fit_recovers_alpha_beta(db_with_sweep):
    from gpufabric.plan.calibrate import fit_alpha_beta, points_from_run

    db, run_id = db_with_sweep
    with Store.open(db) as store:
        points = points_from_run(store.get_run(run_id))
    fit = fit_alpha_beta(points, "inter")
    assert fit.alpha_us == pytest.approx(ALPHA_US, rel=1e-6)
    assert fit.beta_gbps == pytest.approx(BETA_GBPS, rel=1e-6)
    assert fit.points == 12 and fit.rms_rel_error < 1e-9


def test_cli_writes_override_that_plan_accepts(cli, db_with_sweep, tmp_path):
    db, run_id = db_with_sweep
    out = tmp_path / "calibrated.yaml"
    code, stdout, err = cli("calibrate", str(run_id), "--fabric", "tcp-25g", "--db", db, "--out", out, "--format", "json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["after"]["inter"]["median_abs_error_pct"] < doc["before"]["inter"]["median_abs_error_pct"]
    assert doc["after"]["inter"]["median_abs_error_pct"] < 25
    override = yaml.safe_load(out.read_text())
    entry = override["fabrics"]["tcp-25g"]
    assert entry["source"] == f"measured, run {run_id}"
    # busbw asymptote 0.1 GB/s on a 3.125 GB/s line: efficiency about 0.1/3.125 (the model's ring keeps ~all of it)
    assert 0.02 < entry["nic_efficiency"] < 0.05
    code, plan_out, err = cli("plan", EXAMPLES / "lab-2node.yaml", "--catalog", out, "--format", "json")
    assert code == 0, err
    assert json.loads(plan_out)["candidates"]


def test_unknown_fabric_and_empty_run(cli, tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        run_id = store.begin_run(kind="bench", argv=["x"], fingerprint={})
        store.finish_run(run_id, "passed")
    code, _, err = cli("calibrate", str(run_id), "--fabric", "tcp-25g", "--db", db, "--dry-run")
    assert code == 2 and "no collective sweep" in err
    code, _, err = cli("calibrate", str(run_id), "--fabric", "tcp-9g", "--db", db, "--dry-run")
    assert code == 2 and "unknown fabric" in err
