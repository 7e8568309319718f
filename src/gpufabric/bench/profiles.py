"""Benchmark profiles for the ``quick`` and ``full`` suites, derived from the spec.

A profile is the shape of one measurement (what a checkpoint or data loader does to the
storage, what the fabric must carry), turned into a tool command by ``argv()``. Sizes are
the spec's, capped to what a scratch directory on one node can hold in a few seconds
(the cap is recorded in ``params`` so reports show both).

Storage profiles (fio, always ``ioengine=psync``: fio 3.33 reports garbage fsync
latencies with asynchronous engines, reference/this-machine.md item 1a):

* checkpoint_write: one job per writer (a rank writes its own shard), large sequential
  writes, an fsync every quarter of the shard and at the end (checkpoints are durable
  only after fsync; MLPerf Storage enforces it, bench-tools.md section 5).
* checkpoint_restore: the same files read back with O_DIRECT so the page cache that
  just absorbed the write cannot answer (MLPerf Storage clears caches between write and
  read; dropping caches would write outside the scratch directory).
* dataset_read: sequential 1 MiB reads or random 128 KiB reads, per the spec's
  ``dataset.pattern``, O_DIRECT.
* small_file_commit: per shard, create (``create_on_open``), write, fsync (``fsync`` =
  blocks per file). fio cannot rename; the rename step of a commit is not measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpufabric.units import format_size

MIB = 1024 * 1024

#: Per-suite knobs: how big, how long, how many writers at most.
SUITES: dict[str, dict[str, float]] = {
    "quick": {
        "shard_cap": 32 * MIB,
        "writers_cap": 2,
        "dataset_bytes": 64 * MIB,
        "commit_files": 32,
        "iperf3_s": 3,
        "sockperf_s": 2,
        "repeats": 3,
    },
    "full": {
        "shard_cap": 256 * MIB,
        "writers_cap": 8,
        "dataset_bytes": 512 * MIB,
        "commit_files": 256,
        "iperf3_s": 10,
        "sockperf_s": 10,
        "repeats": 5,
    },
}

#: Loopback ports this tool uses (servers are started and stopped per test).
IPERF3_PORT = 5201
SOCKPERF_PORT = 11111


@dataclass(frozen=True, slots=True, kw_only=True)
class FioProfile:
    """One fio job group (``group_reporting``: one result for all its jobs)."""

    name: str
    rw: str
    bs_bytes: int
    size_bytes: int  # per job (per file when nrfiles > 1: filesize)
    numjobs: int = 1
    direct: bool = False
    fsync_every: int = 0  # fsync after this many writes (0: never)
    end_fsync: bool = False
    nrfiles: int = 1
    create_on_open: bool = False
    subdir: str = ""  # files live in <scratch>/<subdir>; restore reuses the write's
    params: dict[str, str] = field(default_factory=dict)

    @property
    def directory_name(self) -> str:
        return self.subdir or self.name

    def argv(self, scratch: Path) -> list[str]:
        argv = [
            "fio",
            f"--name={self.name}",
            f"--directory={scratch / self.directory_name}",
            # Fixed names so checkpoint_restore finds what checkpoint_write wrote.
            "--filename_format=shard.$jobnum.$filenum",
            f"--rw={self.rw}",
            f"--bs={self.bs_bytes}",
            "--ioengine=psync",
            f"--numjobs={self.numjobs}",
            "--group_reporting=1",
            f"--direct={int(self.direct)}",
            "--output-format=json+",
        ]
        if self.nrfiles > 1:
            argv += [
                f"--nrfiles={self.nrfiles}",
                f"--filesize={self.size_bytes}",
                "--openfiles=1",
                "--file_service_type=sequential",
            ]
        else:
            argv.append(f"--size={self.size_bytes}")
        if self.fsync_every:
            argv.append(f"--fsync={self.fsync_every}")
        if self.end_fsync:
            argv.append("--end_fsync=1")
        if self.create_on_open:
            argv.append("--create_on_open=1")
        return argv


@dataclass(frozen=True, slots=True, kw_only=True)
class Iperf3Profile:
    name: str
    duration_s: float
    streams: int = 2
    udp: bool = False
    bitrate: str = ""  # UDP target rate, e.g. "1G"
    reverse: bool = False
    port: int = IPERF3_PORT

    def server_argv(self) -> list[str]:
        return ["iperf3", "-s", "-B", "127.0.0.1", "-p", str(self.port)]

    def argv(self, server: str = "127.0.0.1") -> list[str]:
        argv = [
            "iperf3",
            "-c",
            server,
            "-p",
            str(self.port),
            "-t",
            f"{self.duration_s:g}",
            "-P",
            str(self.streams),
            "-J",
        ]
        if self.udp:
            argv += ["-u", "-b", self.bitrate or "1G"]
        if self.reverse:
            argv.append("-R")
        return argv


@dataclass(frozen=True, slots=True, kw_only=True)
class SockperfProfile:
    name: str
    duration_s: int
    tcp: bool = False
    msg_size: int = 14  # sockperf's default payload, bytes
    port: int = SOCKPERF_PORT
    full_log: bool = True

    def server_argv(self) -> list[str]:
        return ["sockperf", "server", "-i", "127.0.0.1", "-p", str(self.port)] + (["--tcp"] if self.tcp else [])

    def argv(self, server: str = "127.0.0.1", log_path: Path | None = None) -> list[str]:
        argv = [
            "sockperf",
            "ping-pong",
            "-i",
            server,
            "-p",
            str(self.port),
            "-t",
            str(self.duration_s),
            "-m",
            str(self.msg_size),
        ]
        if self.tcp:
            argv.append("--tcp")
        if log_path is not None:
            argv += ["--full-log", str(log_path)]
        return argv


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteProfiles:
    suite: str
    repeats: int
    fio: tuple[FioProfile, ...]
    iperf3: tuple[Iperf3Profile, ...]
    sockperf: tuple[SockperfProfile, ...]
    perftest: tuple[str, ...]  # perftest binaries
    nccl: tuple[str, ...]  # nccl-tests binaries


def build(suite: str, spec=None) -> SuiteProfiles:
    """The profiles of ``suite`` ('quick' or 'full'), shaped by ``spec`` when given."""
    knobs = SUITES[suite]
    writers = int(min(spec.cluster.gpus_per_node if spec else 8, knobs["writers_cap"]))
    shard = int(knobs["shard_cap"])
    shard_note = "default"
    if spec is not None:
        ckpt_bytes = spec.workload.model.params * spec.workload.checkpoint.bytes_per_param
        per_rank = ckpt_bytes / spec.num_gpus
        shard_note = f"spec shard {format_size(per_rank)} per rank"
        shard = int(min(per_rank, shard))
    shard = max(MIB, shard // MIB * MIB)
    pattern = spec.workload.dataset.pattern if spec is not None and spec.workload.dataset else "sequential"
    ckpt_params = {
        "writers": str(writers),
        "shard_bytes": str(shard),
        "shard_source": shard_note,
        "writers_source": f"gpus_per_node capped at {int(knobs['writers_cap'])}",
    }
    blocks = shard // MIB
    fio = (
        FioProfile(
            name="checkpoint_write",
            rw="write",
            bs_bytes=MIB,
            size_bytes=shard,
            numjobs=writers,
            fsync_every=max(1, blocks // 4),
            end_fsync=True,
            subdir="checkpoint",
            params=ckpt_params,
        ),
        FioProfile(
            name="checkpoint_restore",
            rw="read",
            bs_bytes=MIB,
            size_bytes=shard,
            numjobs=writers,
            direct=True,
            subdir="checkpoint",
            params=ckpt_params,
        ),
        FioProfile(
            name="dataset_read",
            rw="read" if pattern == "sequential" else "randread",
            bs_bytes=MIB if pattern == "sequential" else 128 * 1024,
            size_bytes=int(knobs["dataset_bytes"]),
            numjobs=2,
            direct=True,
            params={"pattern": pattern},
        ),
        FioProfile(
            name="small_file_commit",
            rw="write",
            bs_bytes=64 * 1024,
            size_bytes=256 * 1024,
            nrfiles=int(knobs["commit_files"]),
            create_on_open=True,
            fsync_every=4,
            params={
                "files": str(int(knobs["commit_files"])),
                "file_bytes": str(256 * 1024),
                "note": "create + write + fsync per shard; fio cannot rename",
            },
        ),
    )
    iperf3 = [Iperf3Profile(name="tcp", duration_s=knobs["iperf3_s"], streams=2)]
    sockperf = [SockperfProfile(name="udp", duration_s=int(knobs["sockperf_s"]))]
    if suite == "full":
        iperf3 += [
            Iperf3Profile(name="tcp_reverse", duration_s=knobs["iperf3_s"], streams=2, reverse=True),
            Iperf3Profile(name="udp", duration_s=knobs["iperf3_s"], streams=1, udp=True, bitrate="1G"),
        ]
        sockperf.append(
            SockperfProfile(name="tcp", duration_s=int(knobs["sockperf_s"]), tcp=True, port=SOCKPERF_PORT + 1)
        )
        perftest: tuple[str, ...] = ("ib_write_lat", "ib_send_lat", "ib_read_lat", "ib_write_bw")
        nccl: tuple[str, ...] = ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")
    else:
        perftest = ("ib_write_lat",)
        nccl = ("all_reduce_perf",)
    return SuiteProfiles(
        suite=suite,
        repeats=int(knobs["repeats"]),
        fio=fio,
        iperf3=tuple(iperf3),
        sockperf=tuple(sockperf),
        perftest=perftest,
        nccl=nccl,
    )
