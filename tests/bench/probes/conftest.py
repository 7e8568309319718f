"""A real one-node Slurm cluster (auth/none, reference/this-machine.md item 8) for launcher tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SLURM_CONF = """ClusterName={cluster}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@contextmanager
def one_node_slurm(
    tmp_path: Path, *, cluster: str, ctld_port: int, slurmd_port: int, extra: str = ""
) -> Iterator[tuple[Path, dict[str, str]]]:
    """Start slurmctld + slurmd on ports of the caller's own, wait for the node to be idle,
    yield (slurm.conf, environment with SLURM_CONF), stop both by process group."""
    if shutil.which("slurmctld") is None or os.geteuid() != 0:
        pytest.skip("needs slurm-wlm and root")
    d = tmp_path / "slurm"
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir(parents=True)
    conf = d / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(
            cluster=cluster,
            ctld_port=ctld_port,
            slurmd_port=slurmd_port,
            host=socket.gethostname(),
            d=d,
            cpus=os.cpu_count(),
        )
        + extra
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs = [
        subprocess.Popen(
            [daemon, "-D", "-f", str(conf)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for daemon in ("slurmctld", "slurmd")
    ]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
            if out.strip() == "idle":
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"slurm did not become idle: {(d / 'log' / 'slurmctld.log').read_text()[-500:]}")
        yield conf, env
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def slurm_cluster(tmp_path, monkeypatch):
    """The launcher tests' one-node cluster; yields its slurm.conf."""
    with one_node_slurm(tmp_path, cluster="gfprobe", ctld_port=16910, slurmd_port=16911) as (conf, _):
        monkeypatch.setenv("SLURM_CONF", str(conf))
        yield conf
