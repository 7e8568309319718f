"""Suite orchestration with a fake executor: order, storage as results arrive, Ctrl-C, verdicts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from gpufabric.bench.runners import PlannedTest
from gpufabric.bench.suite import plan_suite, run_status, run_suite
from gpufabric.results.recorder import Recorder
from gpufabric.results.records import (
    Direction,
    Metric,
    Outcome,
    Slo,
    Status,
    TestResult,
)


def fake_result(test: PlannedTest, value: float, status: Status = Status.ok) -> TestResult:
    return TestResult(
        name=test.name,
        tool=test.tool,
        host="h1",
        status=status,
        duration_s=0.5,
        metrics=(Metric(name="throughput_gbit_s", value=value, unit="Gbit/s"),),
        params={"repeat": str(test.repeat)},
    )


def test_plan_quick_has_every_tool_and_repeats(tmp_path):
    tests = plan_suite("quick", scratch=tmp_path, repeats=2, detect=False)
    names = [t.name for t in tests]
    assert names.count("fio.checkpoint_write") == 2
    assert names.count("iperf3.tcp") == 2 and names.count("sockperf.udp") == 2
    # restore follows the write it reads back, in every repeat
    assert names.index("fio.checkpoint_restore") == names.index("fio.checkpoint_write") + 1
    assert {t.tool for t in tests} == {"fio", "iperf3", "sockperf", "perftest", "nccl-tests"}
    for t in tests:
        assert t.cwd == str(tmp_path)
        # Every path a tool is given to write to lies inside the scratch directory.
        for arg in t.argv[1:] + (t.server.argv[1:] if t.server else ()):
            value = arg.split("=", 1)[-1]
            if value.startswith("/"):
                assert value.startswith(str(tmp_path)), (t.name, arg)


def test_plan_ports_stay_in_range(tmp_path):
    for t in plan_suite("full", scratch=tmp_path, repeats=1, detect=False):
        if t.server:
            port = t.server.port
            assert 5201 <= port <= 5299 or 11111 <= port <= 11199, (t.name, port)


def test_spec_shapes_checkpoint_writers(tmp_path):
    from gpufabric.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "examples" / "llama3-70b-1k.yaml").spec
    tests = plan_suite("full", scratch=tmp_path, spec=spec, repeats=1, detect=False)
    write = next(t for t in tests if t.name == "fio.checkpoint_write")
    assert f"--numjobs={min(spec.cluster.gpus_per_node, 8)}" in write.argv
    assert "shard" in write.params["shard_source"]
    dataset = next(t for t in tests if t.name == "fio.dataset_read")
    pattern = spec.workload.dataset.pattern if spec.workload.dataset else "sequential"
    assert ("--rw=read" if pattern == "sequential" else "--rw=randread") in dataset.argv


def test_run_stores_each_result_as_it_arrives_and_judges_k_of_n(memory_store):
    tests = [PlannedTest(name="iperf3.tcp", tool="iperf3", argv=("iperf3",), timeout_s=1, repeat=r) for r in (1, 2, 3)]
    values = iter([9.0, 20.0, 21.0])  # one noisy repeat out of three
    seen_before_call: list[int] = []

    def executor(test: PlannedTest) -> TestResult:
        seen_before_call.append(len(memory_store.results))
        return fake_result(test, next(values))

    events = []
    slo = Slo(test="iperf3.tcp", metric="throughput_gbit_s", direction=Direction.higher, minimum=10)
    outcome = run_suite(
        tests, executor=executor, recorder=Recorder(memory_store, 1), slos=[slo], progress=events.append
    )
    assert seen_before_call == [0, 1, 2]  # stored before the next test starts
    assert len(events) == 6 and events[0].result is None and events[1].result is not None
    (verdict,) = outcome.verdicts
    assert verdict.outcome == Outcome.passed  # 2 of 3 pass
    assert outcome.status == "passed" == memory_store.status
    assert memory_store.verdicts == [verdict]
    assert outcome.tool_s == pytest.approx(1.5)


def test_failing_slo_fails_the_run(memory_store):
    tests = [PlannedTest(name="iperf3.tcp", tool="iperf3", argv=("iperf3",), timeout_s=1, repeat=r) for r in (1, 2)]
    slo = Slo(test="iperf3.tcp", metric="throughput_gbit_s", direction=Direction.higher, minimum=100)
    outcome = run_suite(tests, executor=lambda t: fake_result(t, 20.0), recorder=Recorder(memory_store, 1), slos=[slo])
    assert outcome.status == "failed"
    assert outcome.verdicts[0].outcome == Outcome.failed


def test_ctrl_c_keeps_finished_results_and_marks_interrupted(memory_store):
    tests = [PlannedTest(name=f"t{i}", tool="fio", argv=("fio",), timeout_s=1) for i in range(4)]

    def executor(test: PlannedTest) -> TestResult:
        if test.name == "t2":
            raise KeyboardInterrupt
        return fake_result(test, 1.0)

    outcome = run_suite(tests, executor=executor, recorder=Recorder(memory_store, 7))
    assert outcome.status == "interrupted" == memory_store.status
    assert [r.name for r in memory_store.results] == ["t0", "t1"]


def test_swallowed_ctrl_c_still_stops_the_suite_after_the_current_test(memory_store):
    """Python drops a KeyboardInterrupt raised inside an at-fork hook; the suite must not."""
    tests = [PlannedTest(name=f"t{i}", tool="fio", argv=("fio",), timeout_s=1) for i in range(4)]

    def executor(test: PlannedTest) -> TestResult:
        if test.name == "t1":
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler raises here
            except KeyboardInterrupt:
                pass  # swallowed, as in logging's at-fork hook
        return fake_result(test, 1.0)

    outcome = run_suite(tests, executor=executor, recorder=Recorder(memory_store, 7))
    assert outcome.status == "interrupted" == memory_store.status
    assert [r.name for r in memory_store.results] == ["t0", "t1"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_run_status_rules():
    t = PlannedTest(name="x", tool="fio", argv=("fio",), timeout_s=1)
    ok = fake_result(t, 1)
    assert run_status([ok, fake_result(t, 1, Status.skipped)], []) == "passed"
    assert run_status([ok, fake_result(t, 1, Status.timeout)], []) == "failed"
    assert run_status([ok, fake_result(t, 1, Status.failed)], []) == "failed"
