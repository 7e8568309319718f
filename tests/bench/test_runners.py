"""Runners on the real tools: fio on tmp_path, iperf3 and sockperf on loopback; fake hung tools."""

from __future__ import annotations

from pathlib import Path

from gpufabric.bench.profiles import MIB, FioProfile, Iperf3Profile, SockperfProfile
from gpufabric.bench.runners import LocalExecutor, PlannedTest
from gpufabric.bench.runners import fio as fio_runner
from gpufabric.bench.runners import iperf3 as iperf3_runner
from gpufabric.bench.runners import nccl_tests as nccl_runner
from gpufabric.bench.runners import perftest as perftest_runner
from gpufabric.bench.runners import sockperf as sockperf_runner
from gpufabric.results.records import Status
from tests.conftest import finishes, group_gone, marked_pids, needs_tool, wait_until

DATA = Path(__file__).resolve().parents[1] / "data"


@needs_tool("fio")
def test_fio_checkpoint_write_then_restore_on_tmp_path(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    write = FioProfile(
        name="checkpoint_write",
        rw="write",
        bs_bytes=MIB,
        size_bytes=4 * MIB,
        numjobs=2,
        fsync_every=2,
        end_fsync=True,
        subdir="checkpoint",
    )
    restore = FioProfile(
        name="checkpoint_restore",
        rw="read",
        bs_bytes=MIB,
        size_bytes=4 * MIB,
        numjobs=2,
        direct=True,
        subdir="checkpoint",
    )
    run = LocalExecutor()
    wrote = run(fio_runner.plan(write, scratch=scratch, timeout_s=60))
    assert wrote.status == Status.ok, wrote.reason
    assert wrote.metric("write_bw_gbps").value > 0
    # group_reporting sums both jobs' fsyncs; fio 3.33 counts one per job here (after write
    # 2; the one due after the last write is not counted), measured with and without it.
    assert wrote.metric("fsync_count").value == 2
    assert wrote.metric("fsync_lat_p50_us").value > 0  # psync: sane and kept
    assert wrote.params["tool_ioengine"] == "psync"
    files = sorted(p.name for p in (scratch / "checkpoint").iterdir())
    assert files == ["shard.0.0", "shard.1.0"]
    restored = run(fio_runner.plan(restore, scratch=scratch, timeout_s=60))
    assert restored.status == Status.ok, restored.reason
    assert restored.metric("read_iops").value > 0
    # Everything fio wrote is inside the scratch directory.
    assert [p.name for p in tmp_path.iterdir()] == ["scratch"]


@needs_tool("iperf3")
def test_iperf3_on_loopback_and_server_stopped(tmp_path, process_mark):
    profile = Iperf3Profile(name="tcp", duration_s=1, streams=2, port=5203)
    result = LocalExecutor()(iperf3_runner.plan(profile, scratch=tmp_path, timeout_s=20))
    assert result.status == Status.ok, result.reason
    assert result.metric("throughput_gbit_s").value > 0.1
    assert result.params["tool_streams"] == "2"
    assert marked_pids(process_mark) == []  # the server this test started is stopped


@needs_tool("iperf3")
def test_iperf3_without_server_is_failed_not_ok(tmp_path):
    profile = Iperf3Profile(name="tcp", duration_s=1, port=5204)
    test = iperf3_runner.plan(profile, scratch=tmp_path, timeout_s=20, server_addr="127.0.0.1")
    result = LocalExecutor()(test)
    assert result.status == Status.failed
    assert "unable to connect" in result.reason


@needs_tool("sockperf")
def test_sockperf_udp_on_loopback_with_full_log(tmp_path, process_mark):
    profile = SockperfProfile(name="udp", duration_s=1, port=11121)
    test = sockperf_runner.plan(profile, scratch=tmp_path, timeout_s=20)
    result = LocalExecutor()(test)
    assert result.status == Status.ok, result.reason
    p50 = result.metric("lat_p50_us")
    assert 0 < p50.value < 10_000
    assert len(p50.samples) == result.metric("observations").value
    assert Path(test.log_file).parent == tmp_path
    assert marked_pids(process_mark) == []  # the server this test started is stopped


@needs_tool("sockperf")
def test_sockperf_tcp_on_loopback(tmp_path):
    profile = SockperfProfile(name="tcp", duration_s=1, tcp=True, port=11122, full_log=False)
    result = LocalExecutor()(sockperf_runner.plan(profile, scratch=tmp_path, timeout_s=20))
    assert result.status == Status.ok, result.reason
    assert result.metric("lat_p99_us").value >= result.metric("lat_p50_us").value


def test_missing_tool_is_skipped_with_reason(tmp_path):
    test = PlannedTest(name="fio.x", tool="fio", argv=("gpufabric-no-such-fio", "--x"), timeout_s=5, cwd=str(tmp_path))
    result = LocalExecutor()(test)
    assert result.status == Status.skipped
    assert result.reason == "skipped: gpufabric-no-such-fio not installed"


def test_hung_tool_is_killed_at_timeout_and_recorded(tmp_path, fake_tool_dir):
    make, env = fake_tool_dir
    pidfile = tmp_path / "pid"
    # The fake tool sleeps far past the hang guard: only a kill at the timeout ends it.
    make("fio", f"echo started; echo $$ > {pidfile}; sleep 600")
    profile = FioProfile(name="checkpoint_write", rw="write", bs_bytes=MIB, size_bytes=MIB)
    result = finishes(lambda: LocalExecutor(env=env)(fio_runner.plan(profile, scratch=tmp_path, timeout_s=1.0)))
    assert result.status == Status.timeout
    assert "timed out after 1 s" in result.reason
    assert result.raw_output.startswith("started")
    # The tool led its own process group (it is the shell whose pid it wrote): all of it is gone.
    wait_until(lambda: group_gone(int(pidfile.read_text())), what="the hung tool's process group gone")


def test_garbage_output_is_failed_with_the_text(tmp_path, fake_tool_dir):
    make, env = fake_tool_dir
    make("fio", "echo 'fio: engine psync not loadable'; exit 1")
    profile = FioProfile(name="dataset_read", rw="read", bs_bytes=MIB, size_bytes=MIB)
    result = LocalExecutor(env=env)(fio_runner.plan(profile, scratch=tmp_path, timeout_s=5))
    assert result.status == Status.failed
    assert "exited 1" in result.reason and "unparseable output" in result.reason
    assert "engine psync not loadable" in result.raw_output


def test_nonzero_exit_with_parseable_output_is_failed_with_stderr_tail(tmp_path, fake_tool_dir):
    make, env = fake_tool_dir
    make("fio", f"cat {DATA / 'fio' / 'psync_read.json'}; echo 'fio: io_u error on file x' >&2; exit 1")
    profile = FioProfile(name="dataset_read", rw="read", bs_bytes=MIB, size_bytes=MIB)
    result = LocalExecutor(env=env)(fio_runner.plan(profile, scratch=tmp_path, timeout_s=5))
    assert result.status == Status.failed
    assert result.reason == "fio exited 1: fio: io_u error on file x"
    assert result.metric("read_bw_gbps").value > 0  # what was measured is kept
    assert result.params["tool_version"] == "fio-3.33" and result.params["repeat"] == "1"


def test_perftest_skipped_without_rdma_device(tmp_path, fake_tool_dir, monkeypatch):
    make, env = fake_tool_dir
    # What ibv_devices printed (perror, on stderr) on the development machine, which has no RDMA stack.
    make("ibv_devices", f"cat {DATA / 'perftest' / 'ibv_devices_no_kernel.txt'} >&2; exit 1")
    make("ib_write_lat", "exit 1")
    monkeypatch.setenv("PATH", env["PATH"])
    devices, reason = perftest_runner.rdma_devices()
    assert devices == []
    assert reason == "skipped: no RDMA device (ibv_devices: Failed to get IB devices list: Function not implemented)"
    test = perftest_runner.plan(
        "ib_write_lat", scratch=tmp_path, timeout_s=10, devices=devices, no_device_reason=reason
    )
    result = LocalExecutor()(test)
    assert result.status == Status.skipped and result.reason == reason


def test_perftest_device_listed(fake_tool_dir, monkeypatch):
    make, env = fake_tool_dir
    # ibv_devices layout (rdma-core libibverbs/examples/devices.c)
    make(
        "ibv_devices",
        "printf '    device          \\t   node GUID\\n    ------          \\t----------------\\n"
        "    mlx5_0          \\t1070fd0300ab12cd\\n'",
    )
    monkeypatch.setenv("PATH", env["PATH"])
    assert perftest_runner.rdma_devices() == (["mlx5_0"], "")


def test_nccl_tests_skipped_when_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCCL_TESTS_DIR", raising=False)
    test = nccl_runner.plan("all_reduce_perf", scratch=tmp_path, timeout_s=10)
    assert test.skip_reason == "skipped: nccl-tests not installed"
    assert LocalExecutor()(test).status == Status.skipped


def test_nccl_tests_fake_binary_output_parsed(tmp_path, fake_tool_dir, monkeypatch):
    make, env = fake_tool_dir
    make("all_reduce_perf", f"cat {DATA / 'nccl-tests' / 'all_reduce_8gpu_wrong.txt'}")
    monkeypatch.setattr(nccl_runner, "gpu_count", lambda: 8)
    monkeypatch.setenv("PATH", env["PATH"])
    test = nccl_runner.plan("all_reduce_perf", scratch=tmp_path, timeout_s=10)
    assert "-g" in test.argv and test.argv[test.argv.index("-g") + 1] == "8"
    result = LocalExecutor()(test)
    assert result.status == Status.failed
    assert "3 wrong elements" in result.reason
    assert result.metric("busbw_gbps").value == 176.62


@needs_tool("iperf3")
def test_two_benches_at_once_use_their_own_servers(tmp_path):
    """Two suites on one host plan the same default port; each must still measure its own server."""
    import threading

    profile = Iperf3Profile(name="tcp", duration_s=1, streams=1)  # the default, fixed port
    tests = [iperf3_runner.plan(profile, scratch=tmp_path, timeout_s=20, repeat=r) for r in (1, 2)]
    results = [None, None]

    def run(i: int) -> None:
        results[i] = LocalExecutor()(tests[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r.status for r in results] == [Status.ok, Status.ok], [r.reason for r in results]
    ports = {r.params["port"] for r in results}
    assert len(ports) == 2 and str(profile.port) not in ports
    for r in results:  # the client connected to the port its own server was moved to
        assert r.argv[r.argv.index("-p") + 1] == r.params["port"]


def test_suite_and_ingest_share_one_conversion_of_impossible_values():
    """Issue 23: the suite stored a negative bandwidth as ok where ingest called it invalid."""
    from gpufabric.bench.parsers import Parsed
    from gpufabric.bench.runners import PlannedTest, to_result
    from gpufabric.results.records import Direction, Metric, Status

    parsed = Parsed(
        tool="fio",
        case="seq",
        metrics=(Metric(name="write_bw_gbps", value=-1.0, unit="GB/s", direction=Direction.higher),),
    )
    test = PlannedTest(name="fio.seq", tool="fio", argv=("fio",), timeout_s=1.0)
    result = to_result(test, [parsed], host="h", returncode=0, stderr="", started_at=0.0, duration_s=1.0, raw="")
    assert result.status == Status.failed
    assert "invalid data: impossible values write_bw_gbps=-1" in result.reason
    assert result.params["invalid"].startswith("impossible values")
    exited = to_result(test, [parsed], host="h", returncode=3, stderr="boom", started_at=0, duration_s=1, raw="")
    assert "fio exited 3: boom" in exited.reason and "invalid data" in exited.reason
