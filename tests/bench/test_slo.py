"""SLOs from the spec/plan and from thresholds files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufabric.bench import slo
from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError
from gpufabric.results.records import Direction
from gpufabric.spec import load_spec
from gpufabric.spec.plan_file import load_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def spec():
    return load_spec(EXAMPLES / "llama3-70b-1k.yaml").spec


def by_key(slos):
    return {(s.test, s.metric): s for s in slos}


def test_checkpoint_bandwidth_for_async_and_sync(spec):
    slos = by_key(slo.from_spec(spec, fabric="ib-ndr", storage="nvmeof-rdma"))
    ckpt = 70e9 * 14  # params x bytes/param (spec default 14)
    # async: the write only has to finish within the 30 min interval, per node of 128
    assert slos[("fio.checkpoint_write", "write_bw_gbps")].minimum == pytest.approx(ckpt / 128 / 1800 / 1e9)
    sync = spec.model_copy(
        update={
            "workload": spec.workload.model_copy(
                update={"checkpoint": spec.workload.checkpoint.model_copy(update={"mode": "sync"})}
            )
        }
    )
    sync_slos = by_key(slo.from_spec(sync, fabric="ib-ndr", storage="nvmeof-rdma"))
    # sync: within 2 % of 30 min = 36 s
    assert sync_slos[("fio.checkpoint_write", "write_bw_gbps")].minimum == pytest.approx(ckpt / 128 / 36 / 1e9)
    restore = slos[("fio.checkpoint_restore", "read_bw_gbps")]
    assert restore.minimum == pytest.approx(ckpt / 128 / 600 / 1e9)


def test_latency_bounds_follow_the_fabric(spec):
    catalog = load_catalog()
    ib = by_key(slo.from_spec(spec, fabric="ib-ndr", storage="local-nvme", catalog=catalog))
    fab = catalog.fabrics["ib-ndr"]
    p99 = ib[("perftest.ib_write_lat", "lat_p99_us")]
    assert p99.maximum == pytest.approx(fab.rdma_write_lat_us + 3 * fab.jitter_us)
    assert p99.direction == Direction.lower
    assert ("sockperf.udp", "lat_p99_us") not in ib
    assert ("iperf3.tcp", "throughput_gbit_s") not in ib
    tcp = by_key(slo.from_spec(spec, fabric="tcp-100g", storage="local-nvme", catalog=catalog))
    assert ("sockperf.udp", "lat_p99_us") in tcp
    line = catalog.fabrics["tcp-100g"].nic_line_gbps * 8
    assert tcp[("iperf3.tcp", "throughput_gbit_s")].expected == pytest.approx(line * 1448 / 1538)


def test_dataset_slo_needs_a_step_time(spec):
    assert ("fio.dataset_read", "read_bw_gbps") not in by_key(slo.from_spec(spec))
    with_step = by_key(slo.from_spec(spec, step_time_s=2.0))
    need = 4194304 / 2.0 * spec.workload.dataset.bytes_per_token / 128
    assert with_step[("fio.dataset_read", "read_bw_gbps")].minimum == pytest.approx(need / 1e9)


def test_from_plan_uses_recommended_candidate(spec, tmp_path):
    plan = {
        "schema_version": 1,
        "recommended": "b",
        "candidates": [
            {"id": "a", "fabric": "ib-ndr", "storage": "nfs", "step_time_s": 3.0},
            {"id": "b", "fabric": "tcp-100g", "storage": "local-nvme", "step_time_s": 4.0},
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    slos = by_key(slo.from_plan(load_plan(path), spec, path=str(path)))
    assert ("iperf3.tcp", "throughput_gbit_s") in slos  # tcp-100g chosen
    assert "candidate b" in slos[("fio.checkpoint_write", "write_bw_gbps")].source


def test_recommended_must_be_a_candidate():
    with pytest.raises(InputError, match=r"p\.json: recommended candidate 'zz' is not among candidates"):
        slo.from_plan(
            {"recommended": "zz", "candidates": [{"id": "a", "fabric": "ib-ndr", "storage": "nfs"}]},
            None,
            path="p.json",
        )


def test_thresholds_file(tmp_path):
    path = tmp_path / "h100.yaml"
    path.write_text(
        "hardware: h100-node\n"
        "tests:\n"
        "  iperf3.tcp:\n"
        "    throughput_gbit_s: {target: 90, tolerance: 0.1, min_pass: 2}\n"
        "  sockperf.udp:\n"
        "    lat_p99_us: {max: 60}\n"
        "    lat_p50_us: {target: 20, direction: lower}\n"
    )
    slos = by_key(slo.load_thresholds(path))
    tput = slos[("iperf3.tcp", "throughput_gbit_s")]
    assert (tput.expected, tput.tolerance, tput.min_pass, tput.direction) == (90, 0.1, 2, Direction.higher)
    assert slos[("sockperf.udp", "lat_p99_us")].maximum == 60
    assert slos[("sockperf.udp", "lat_p99_us")].direction == Direction.lower
    assert tput.source == "thresholds:h100.yaml (h100-node)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tests:\n  a.b:\n    m: {maxx: 3}\n", r"tests\.a\.b\.m\.maxx: Extra inputs"),
        ("tests:\n  a.b:\n    m: {}\n", "give target, min or max"),
        ("tests: [1, 2\n", "not valid YAML"),
        ("hardware: x\n", "tests: Field required"),
    ],
)
def test_bad_thresholds_file(tmp_path, text, message):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        slo.load_thresholds(path)


def test_direction_heuristic():
    assert slo.direction_of("lat_p99_us") == Direction.lower
    assert slo.direction_of("time_us@1024B") == Direction.lower
    assert slo.direction_of("retransmits") == Direction.lower
    assert slo.direction_of("busbw_gbps") == Direction.higher
    assert slo.direction_of("read_iops") == Direction.higher


def test_from_plan_without_spec_has_only_hardware_slos():
    plan = {"recommended": "x", "candidates": [{"id": "x", "fabric": "ib-ndr", "storage": "nfs"}]}
    slos = by_key(slo.from_plan(plan, None))
    assert set(slos) == {
        ("fio.small_file_commit", "fsync_lat_p99_us"),
        ("perftest.ib_write_lat", "lat_p50_us"),
        ("perftest.ib_write_lat", "lat_p99_us"),
        ("perftest.ib_write_bw", "bw_avg_gbps"),  # the NIC rate bought
    }
    # NDR: 400 Gbit/s = 50 GB/s less the IB headers of a 4 KiB packet (26 bytes): 49.7 GB/s.
    assert slos[("perftest.ib_write_bw", "bw_avg_gbps")].expected == pytest.approx(50 * 4096 / 4122)


def test_storage_slos_are_the_larger_of_need_and_purchase():
    """Issue 23 bar: the 1,024-GPU example's restore and dataset SLOs are at least half the
    designed per-node storage bandwidth (the need alone is 0.0128 and 3e-5 GB/s)."""
    from pathlib import Path

    from gpufabric.catalog import load_catalog
    from gpufabric.jsonable import to_jsonable
    from gpufabric.plan import make_plan
    from gpufabric.spec import load_spec
    from gpufabric.spec.plan_file import plan_to_dict

    spec = load_spec(Path(__file__).resolve().parents[2] / "examples" / "llama3-70b-1k.yaml").spec
    result = make_plan(spec, load_catalog())
    doc = to_jsonable(plan_to_dict(result, result.candidates, catalog_files=[], overrides=[]))
    best = next(c for c in doc["candidates"] if c["id"] == doc["recommended"])
    share = best["storage_read_gbps"] / spec.cluster.nodes
    slos = by_key(slo.from_plan(doc, spec))
    for key in (("fio.checkpoint_restore", "read_bw_gbps"), ("fio.dataset_read", "read_bw_gbps")):
        s = slos[key]
        assert s.minimum >= 0.5 * share, key
        assert s.expected == pytest.approx(share)
        assert "purchased" in s.source and "need" in s.source
    # The workload's need still wins where it is the larger: a restart budget of 6 s.
    tight = spec.model_copy(update={"reliability": spec.reliability.model_copy(update={"restart_min": 0.1})})
    restore = by_key(slo.from_plan(doc, tight))[("fio.checkpoint_restore", "read_bw_gbps")]
    need = spec.workload.model.params * spec.workload.checkpoint.bytes_per_param / spec.cluster.nodes / 6 / 1e9
    assert restore.minimum == pytest.approx(need) and need > share
    with pytest.raises(InputError, match="unknown fabric id 'warp'"):
        slo.from_plan({"recommended": "x", "candidates": [{"id": "x", "fabric": "warp", "storage": "nfs"}]}, None)


def test_bitwise_spec_expects_ring_not_nvls(spec):
    """Issue 16: the busbw SLO was an NVLS figure while the bundle disables NVLS for bitwise runs."""
    cat = load_catalog()
    bitwise = spec.model_copy(
        update={"requirements": spec.requirements.model_copy(update={"reproducibility": "bitwise"})}
    )
    loose = spec.model_copy(update={"requirements": spec.requirements.model_copy(update={"reproducibility": "none"})})
    b = by_key(slo.from_spec(bitwise, fabric="ib-ndr", storage="nvmeof-rdma", catalog=cat))[
        ("nccl.all_reduce", "busbw_gbps")
    ]
    n = by_key(slo.from_spec(loose, fabric="ib-ndr", storage="nvmeof-rdma", catalog=cat))[
        ("nccl.all_reduce", "busbw_gbps")
    ]
    assert "nvls" not in b.source and "bitwise" in b.source and b.tolerance == 0.15
    if cat.gpu(spec.cluster.gpu).nvls:
        assert "nvls" in n.source and n.expected > b.expected


def test_checkpoint_slo_expects_the_planned_per_node_share(spec):
    ckpt = spec.workload.model.params * spec.workload.checkpoint.bytes_per_param
    s = by_key(slo.from_spec(spec, fabric="ib-ndr", storage="nvmeof-rdma", checkpoint_write_s=30.0))
    w = s[("fio.checkpoint_write", "write_bw_gbps")]
    assert w.expected == pytest.approx(ckpt / spec.cluster.nodes / 30.0 / 1e9) and w.tolerance == 0.2
    assert w.minimum is not None and "per node" in w.source
    # Without the modelled write time only the requirement floor applies.
    assert (
        by_key(slo.from_spec(spec, fabric="ib-ndr", storage="nvmeof-rdma"))[
            ("fio.checkpoint_write", "write_bw_gbps")
        ].expected
        is None
    )


def _fingerprint(gpus, speed, rdma):
    return {
        "gpus": gpus or "unavailable",
        "rdma": rdma or "unavailable",
        "nics": {"lo": {"speed_mbps": None, "operstate": "unknown"}, "eth0": {"speed_mbps": speed, "operstate": "up"}},
    }


def test_planned_hardware_fingerprint(spec):
    from gpufabric.bench.planned import mismatches, planned_hardware

    plan = {"recommended": "a", "candidates": [{"id": "a", "fabric": "ib-ndr", "storage": "nvmeof-rdma"}]}
    hw = planned_hardware(plan, spec)
    assert hw.gpu == spec.cluster.gpu and hw.nic_gbit_s == 400 and hw.rdma
    h100 = [{"name": "NVIDIA H100 80GB HBM3"}] * spec.cluster.gpus_per_node
    assert mismatches(hw, _fingerprint(h100, 400_000, [{"name": "mlx5_0"}])) == ()
    vm = mismatches(hw, _fingerprint(None, None, None))  # this machine: no GPU, virtio NIC, no RDMA
    assert len(vm) == 3 and vm[0].startswith("no GPU found") and "no link speed" in vm[1] and "RDMA" in vm[2]
    a100 = mismatches(hw, _fingerprint([{"name": "NVIDIA A100-SXM4-80GB"}] * 8, 200_000, [{"name": "mlx5_0"}]))
    assert "is not the planned h100-sxm" in a100[0] and "200 Gbit/s, planned 400" in a100[1]
    assert mismatches(hw, _fingerprint(h100[:4], 400_000, [{"name": "mlx5_0"}])) == (
        f"4 GPUs, planned {spec.cluster.gpus_per_node} per node",
    )
    tcp = planned_hardware({"recommended": "a", "candidates": [{"id": "a", "fabric": "tcp-100g", "storage": "nfs"}]})
    assert tcp.gpu is None and not tcp.rdma
    assert mismatches(tcp, _fingerprint(h100, 100_000, None)) == ()


def test_not_planned_hardware_relabels_verdicts_and_fails_the_run():
    from gpufabric.bench.planned import mark_not_planned
    from gpufabric.bench.suite import run_status
    from gpufabric.results.records import Outcome, Verdict

    v = Verdict(
        test="fio.checkpoint_write",
        metric="write_bw_gbps",
        host="vm",
        outcome=Outcome.passed,
        measured=0.8,
        expected=0.004,
        direction=Direction.higher,
        margin=199.0,
        reason="within",
    )
    marked = mark_not_planned([v], ("no GPU found",))
    assert marked[0].outcome == Outcome.not_planned and marked[0].measured == 0.8
    assert marked[0].reason == "not the planned hardware: no GPU found (would have passed: within)"
    assert run_status([], marked) == "failed" and run_status([], [v]) == "passed"
    assert mark_not_planned([v], ()) == [v]


def test_thresholds_calibrated_from_a_run_pass_that_run_and_fail_a_slower_one(tmp_path):
    from gpufabric.results.records import Metric, RunRecord, Status, TestResult
    from gpufabric.results.verdicts import evaluate

    def result(gbps, p99):
        return TestResult(
            name="fio.small_file_commit",
            tool="fio",
            host="vm",
            status=Status.ok,
            metrics=(
                Metric(name="write_bw_gbps", value=gbps, unit="GB/s"),
                Metric(name="fsync_lat_p99_us", value=p99, unit="us", direction=Direction.lower),
                Metric(name="fsync_count", value=100.0, unit="count"),
            ),
        )

    def run(scale, p99_scale=1.0):
        return RunRecord(
            id=7,
            kind="bench",
            status="passed",
            started_at=0,
            finished_at=1,
            argv=(),
            fingerprint={"host": "vm"},
            results=tuple(result(g * scale, p * p99_scale) for g, p in ((1.0, 8000), (1.1, 9000), (0.9, 7000))),
        )

    golden = run(1.0)
    path = tmp_path / "t.yaml"
    path.write_text(slo.thresholds_from_run(golden, hardware="vm"))
    slos = by_key(slo.load_thresholds(path))
    bw, p99 = slos[("fio.small_file_commit", "write_bw_gbps")], slos[("fio.small_file_commit", "fsync_lat_p99_us")]
    assert bw.expected == 1.0 and bw.tolerance == pytest.approx(0.3) and "vm" in bw.source  # 3 x CV 10 %
    assert p99.expected == 8000 and p99.tolerance == 1.0  # a tail: at least 2x golden
    assert ("fio.small_file_commit", "fsync_count") not in slos  # counts are not calibrated
    assert all(v.outcome.value == "passed" for v in evaluate(golden.results, list(slos.values())))
    slower = evaluate(run(0.5, p99_scale=1.5).results, list(slos.values()))
    assert {v.metric: v.outcome.value for v in slower} == {"write_bw_gbps": "failed", "fsync_lat_p99_us": "passed"}


def test_thresholds_alias_bomb_is_refused(tmp_path):
    from tests.spec.test_types import BOMB

    path = tmp_path / "t.yaml"
    path.write_text(BOMB)
    with pytest.raises(InputError, match="alias expansion exceeds"):
        slo.load_thresholds(path)
