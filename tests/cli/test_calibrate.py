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
    return TestResult(
        name=f"torch.{op}",
        tool="torch",
        host="cluster",
        status=Status.ok,
        metrics=(
            Metric(name="time_p50_us", value=t_us, unit="us", direction=Direction.lower),
            Metric(name="busbw_gbps", value=busbw, unit="GB/s"),
        ),
        params={"op": op, "size_bytes": str(size), "num_ranks": str(n), "rank_hosts": json.dumps(hosts)},
    )


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
    code, stdout, err = cli(
        "calibrate", str(run_id), "--fabric", "tcp-25g", "--db", db, "--out", out, "--format", "json"
    )
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


# ------------------------------------------------------- calibrate from ingested public tables

DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "nccl-tests"


def _ingest(cli, db, name):
    code, out, err = cli("ingest", "--tool", "auto", DATA / name, "--db", db, "--format", "json")
    assert code == 0, err
    return json.loads(out)["run_id"]


def test_calibrate_ingested_log_reads_gpu_and_ranks_from_the_header(cli, tmp_path):
    db = tmp_path / "r.db"
    run_id = _ingest(cli, db, "public_h100_dgx_1node_llmb.txt")
    code, out, err = cli("calibrate", "latest", "--db", db, "--out", tmp_path / "c.yaml", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["run_id"] == run_id and doc["gpu"] == "h100-sxm"
    assert "GPU h100-sxm read from the run" in doc["notes"]
    assert {p["ranks"] for p in doc["points"]} == {8} and {p["nodes"] for p in doc["points"]} == {1}
    # 32 sizes, out-of-place and in-place rows as two repeats of each
    assert len(doc["points"]) == 32 and {p["repeats"] for p in doc["points"]} == {2}
    row = next(p for p in doc["points"] if p["size_bytes"] == 17179869184)
    assert row["measured_time_us"] == pytest.approx((62648 + 62636) / 2)
    gpu = yaml.safe_load((tmp_path / "c.yaml").read_text())["gpus"]["h100-sxm"]
    assert gpu["nvls_busbw_gbps"] == pytest.approx(480, rel=0.02)  # the table's top busbw, 479.9-480.2
    # the latency-dominated rows take 13-17 us; the graph-mode model gives 10.2 us of that
    assert 1 < gpu["eager_launch_us"] < 12


def test_multi_node_log_needs_fabric_and_unidentifiable_alpha_is_refused(cli, tmp_path):
    db = tmp_path / "r.db"
    _ingest(cli, db, "public_h100_ndr_2node_issue309.txt")
    code, _, err = cli("calibrate", "latest", "--db", db, "--dry-run")
    assert code == 2 and "spans 2 nodes: name the fabric it ran over with --fabric" in err
    code, out, err = cli("calibrate", "latest", "--db", db, "--dry-run", "--fabric", "ib-ndr", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["override"]["fabrics"]["ib-ndr"]["source"].startswith("measured")
    db2 = tmp_path / "r2.db"
    _ingest(cli, db2, "public_h100_2node_srun_issue290.txt")  # sizes start at 8 MiB
    code, _, err = cli("calibrate", "latest", "--db", db2, "--dry-run", "--fabric", "ib-ndr")
    assert code == 2 and "cannot identify alpha" in err and "add small sizes" in err and "Traceback" not in err


def _two_size_run(name):
    from types import SimpleNamespace

    from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests

    (p,) = parse_nccl_tests((DATA / name).read_text(), source=name)
    sizes = sorted(int(m.name.split("@")[1][:-1]) for m in p.metrics if m.name.startswith("time_us@"))
    keep = {sizes[0], int(p.info["max_size_bytes"])}
    ends = tuple(m for m in p.metrics if "@" not in m.name or int(m.name.split("@")[1][:-1]) in keep)
    make = lambda metrics: TestResult(
        name="nccl.all_reduce", tool="nccl-tests", host="x", status=Status.ok, metrics=metrics, params=p.params()
    )
    return SimpleNamespace(id=1, results=(make(ends),)), SimpleNamespace(id=2, results=(make(p.metrics),)), keep


@pytest.mark.parametrize(
    ("name", "fabric", "bound"),
    [
        ("public_h100_dgx_1node_llmb.txt", None, 10),
        ("public_h100_ndr_2node_issue309.txt", "ib-ndr", 10),
        ("public_h100_4node_issue309.txt", "ib-ndr", 10),
        ("public_a3mega_h100_2node.txt", "ib-ndr", 10),
        # Fabric not stated: 4.6x below NDR bandwidth, and its time doubles from 32 to 64 KiB,
        # a step no NCCL protocol switch on InfiniBand makes (docs/accuracy.md): 13%.
        ("public_h100_2node_mpirun_g8.txt", "ib-ndr", 15),
    ],
)
def test_calibrating_on_smallest_and_largest_predicts_mid_sizes(tmp_path, name, fabric, bound):
    """Issue 13 bar: calibrated on the smallest and largest size, the mid sizes come out
    within 10% (median). The #309 tables start with a warm-up row (8 B out of place 68.5 us,
    in place 24.7 us): the fit drops the disturbed repeat."""
    import statistics

    from gpufabric.catalog import load_catalog
    from gpufabric.plan.calibrate import _predict, calibrate, points_from_run

    ends, full, keep = _two_size_run(name)
    cal = calibrate(ends, fabric=fabric)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cal.override))
    cat, base = load_catalog([path]), load_catalog()
    mid = [p for p in points_from_run(full) if p.size_bytes not in keep]
    after = statistics.median(abs(_predict(p, cat, cal.gpu, cal.fabric).time_us / p.time_us - 1) for p in mid) * 100
    before = statistics.median(abs(_predict(p, base, cal.gpu, cal.fabric).time_us / p.time_us - 1) for p in mid) * 100
    assert after <= bound
    if before > 30:  # a cluster unlike the catalog: calibration must fix most of it
        assert after < before / 3


def test_a_disturbed_repeat_is_dropped_before_the_fit_but_kept_in_the_measurement():
    from gpufabric.plan.calibrate import points_from_run

    ends, _, _ = _two_size_run("public_h100_ndr_2node_issue309.txt")

    def small(pts):
        return next(p for p in pts if p.size_bytes == 8)

    # 8 B: 68.52 us out of place (the warm-up), 24.70 us in place.
    assert small(points_from_run(ends)).time_us == pytest.approx((68.52 + 24.70) / 2)
    assert small(points_from_run(ends, reduce="robust")).time_us == pytest.approx(24.70)


# ------------------------------------------------------------- fair calibration (issue 25)


def test_a_fit_that_worsens_its_own_points_is_refused_unless_forced(cli, tmp_path, monkeypatch):
    """The 2 x 8 H100 NDR table of #309 calibrated as roce-400g: the fit leaves the table's
    own points where they were (median 4.54% -> 4.54%; with the tuner's LL cap since issue 25
    no public table in tests/data comes out worse after its fit). With the tolerance set to
    demand a 0.5-point improvement, that fit counts as worsening and the refusal path runs."""
    from gpufabric.plan import calibrate as calibrate_module

    monkeypatch.setattr(calibrate_module, "WORSEN_TOLERANCE_PCT", -0.5)
    db = tmp_path / "r.db"
    _ingest(cli, db, "public_h100_ndr_2node_issue309.txt")
    out = tmp_path / "c.yaml"
    code, stdout, err = cli("calibrate", "latest", "--db", db, "--fabric", "roce-400g", "--out", out)
    assert code == 1, err
    assert "refused" in stdout and "--force" in stdout and not out.exists()
    code, stdout, err = cli(
        "calibrate", "latest", "--db", db, "--fabric", "roce-400g", "--out", out, "--format", "json"
    )
    doc = json.loads(stdout)
    assert code == 1 and doc["refused"] is True and doc["worsened"] == ["inter"] and doc["out"] is None
    after, before = doc["after"]["inter"]["median_abs_error_pct"], doc["before"]["inter"]["median_abs_error_pct"]
    assert after > before - 0.5  # not the demanded improvement
    code, stdout, err = cli("calibrate", "latest", "--db", db, "--fabric", "roce-400g", "--out", out, "--force")
    assert code == 0, err
    assert out.exists() and "--force: kept a fit that worsens inter" in stdout


def test_calibrating_on_a_healthy_table_does_not_worsen_it(tmp_path):
    """Fitted on the whole sweep, the model is matched on the same sizes as each anchor:
    healthy NDR tables keep (or improve) their own error and NDR's efficiency stays ~0.93."""
    from types import SimpleNamespace

    from gpufabric.bench.parsers.nccl_tests import parse_nccl_tests
    from gpufabric.plan.calibrate import calibrate

    for name in ("public_h100_ndr_2node_issue309.txt", "public_h100_4node_issue309.txt"):
        (p,) = parse_nccl_tests((DATA / name).read_text(), source=name)
        run = SimpleNamespace(
            id=1,
            results=(
                TestResult(
                    name="nccl.all_reduce",
                    tool="nccl-tests",
                    host="x",
                    status=Status.ok,
                    metrics=p.metrics,
                    params=p.params(),
                ),
            ),
        )
        cal = calibrate(run, fabric="ib-ndr")
        assert not cal.worsened, (name, cal.before, cal.after)
        assert 0.9 < cal.override["fabrics"]["ib-ndr"]["nic_efficiency"] <= 0.95, name


def _plan(cli, *extra):
    code, out, err = cli("plan", EXAMPLES / "llama3-70b-1k.yaml", *extra, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_calibrating_ndr_on_a_healthy_table_does_not_silently_flip_the_1k_plan(cli, tmp_path):
    """Issue 25 bar: the 1,024-GPU example keeps ib-ndr after ib-ndr is calibrated on a
    healthy NDR table, and the recommendation says which compared fabrics are uncalibrated."""
    db = tmp_path / "r.db"
    _ingest(cli, db, "public_h100_4node_issue309.txt")
    out = tmp_path / "ndr.yaml"
    code, _, err = cli("calibrate", "latest", "--db", db, "--fabric", "ib-ndr", "--out", out)
    assert code == 0, err
    base, calibrated = _plan(cli), _plan(cli, "--catalog", out)
    fabric = lambda plan: next(c["fabric"] for c in plan["candidates"] if c["id"] == plan["recommended"])  # noqa: E731
    assert fabric(base) == fabric(calibrated) == "ib-ndr"
    assert "uncalibrated: roce-400g, tcp-100g" in calibrated["rationale"]
    assert "uncalibrated" not in base["rationale"]


def test_a_flip_caused_only_by_calibration_is_stated(cli, tmp_path):
    """A degraded table (GCP A3 Mega TCPXO, 4.6x below NDR) calibrated as ib-ndr makes
    roce-400g win: the rationale says the choice flips only because ib-ndr is calibrated."""
    db = tmp_path / "r.db"
    _ingest(cli, db, "public_a3mega_h100_2node.txt")
    out = tmp_path / "slow.yaml"
    code, _, err = cli("calibrate", "latest", "--db", db, "--fabric", "ib-ndr", "--out", out)
    assert code == 0, err
    plan = _plan(cli, "--catalog", out)
    assert plan["recommended"].startswith("roce-400g/")
    assert (
        "The choice flips from ib-ndr (shipped figures) to roce-400g only because ib-ndr is calibrated"
        " and roce-400g is not" in plan["rationale"]
    )


def test_a_price_override_is_not_a_calibration(cli, tmp_path):
    """Only the fields calibrate fits mark a fabric calibrated; a user's NIC price does not."""
    out = tmp_path / "price.yaml"
    out.write_text(
        yaml.safe_dump({"fabrics": {"roce-400g": {"source": "quote", "as_of": "2026", "tag": "user", "nic_usd": 1900}}})
    )
    assert "uncalibrated" not in _plan(cli, "--catalog", out)["rationale"]


def test_the_harness_of_a_single_process_run_is_modelled_not_fitted(cli, tmp_path):
    """A 2 x `-g 8` table calibrated as single-process: the eight-launch cost is the model's
    (SINGLE_PROCESS_US per extra GPU), so the fitted proxy cost is that much smaller."""
    db = tmp_path / "r.db"
    _ingest(cli, db, "public_h100_2node_mpirun_g8.txt")
    fits = {}
    for harness in ("per-gpu", "single-process"):
        code, out, err = cli(
            "calibrate",
            "latest",
            "--db",
            db,
            "--fabric",
            "roce-400g",
            "--harness",
            harness,
            "--dry-run",
            "--format",
            "json",
        )
        assert code == 0, err
        fits[harness] = json.loads(out)["override"]["fabrics"]["roce-400g"]["proxy_us"]
    from gpufabric.model.collectives import SINGLE_PROCESS_US

    assert fits["per-gpu"] - fits["single-process"] == pytest.approx(7 * SINGLE_PROCESS_US, rel=0.2)
    code, _, err = cli("calibrate", "latest", "--db", db, "--fabric", "roce-400g", "--harness", "mpi", "--dry-run")
    assert code == 2 and "unknown harness 'mpi'" in err
