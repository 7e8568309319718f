"""A Slurm cluster across lab hosts: one slurmd per host namespace, slurmctld on the login node.

Layout for lab NAME (on top of lab/net.py's namespaces and bridges)::

    netns gfl-NAME-sw   login + controller node: 10.210.0.254 on br-mgmt, slurmctld;
                        srun/sbatch/squeue run here (login_argv())
    netns gfl-NAME-hI   slurmd -N NAME-hI, NodeAddr 10.210.0.I (management plane);
                        spool, log and pid files per node (slurm.conf %n)

Every daemon reads one slurm.conf, as on a real cluster. Authentication is auth/none +
cred/none (the plugins ship in slurm-wlm 22.05, reference/this-machine.md item 8) when the
build has them, else munge with a key made for the lab (munged in the login namespace; its
socket is a path on the shared filesystem, so every node reaches it). ``binds`` mounts
directories over paths inside the nodes' private mount namespaces (``ip netns exec`` gives
each daemon its own), which is how a generated bundle is "installed" on the nodes without
touching this machine's /usr/local/bin.

The namespaces share this machine's filesystem, so any directory is storage every node sees.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpufabric.errors import EnvironmentFailure, InputError, ToolNotFound
from gpufabric.exec.process import Started, run, spawn_detached, stop_started
from gpufabric.lab import net

#: Address of the login/controller node on the management plane (net.py hands out .1-.16).
LOGIN_HOST = 254
#: Ports live inside the lab's own namespaces, so they cannot collide with other clusters.
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SRUN_PORT_RANGE = "60001-60100"
#: Where slurm-wlm 22.05 (Debian 12) keeps its plugins.
PLUGIN_DIRS = (
    Path("/usr/lib/x86_64-linux-gnu/slurm-wlm"),
    Path("/usr/lib/aarch64-linux-gnu/slurm-wlm"),
    Path("/usr/lib64/slurm"),
    Path("/usr/lib/slurm"),
)
_START_TIMEOUT_S = 30.0
_CMD_TIMEOUT_S = 10.0

CONF = """# slurm.conf for gpufabric lab {name}, written by gpufabric.lab.slurm.
ClusterName=gfl{name}
SlurmctldHost={ctl_host}({ctl_addr})
SlurmUser=root
SlurmdUser=root
{auth}
SlurmctldPort={ctl_port}
SlurmdPort={d_port}
SrunPortRange={srun_ports}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
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
{gres_types}
{nodes}
PartitionName=lab Nodes={node_list} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class SlurmLab:
    """A running lab cluster: what clients need (conf, login namespace) and what ``down`` stops."""

    name: str
    conf: str  # slurm.conf path; SLURM_CONF for clients
    login_netns: str  # run srun/sbatch here
    login_addr: str
    nodes: tuple[str, ...]  # Slurm NodeNames, in lab host order
    node_addrs: tuple[str, ...]
    auth: str  # auth/none or auth/munge
    gpus_per_node: int = 0  # gres/gpu count per node (count only: no devices)
    procs: dict[str, Started] = field(default_factory=dict)  # daemon -> its ticket (pgid: own session)

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": self.conf}


def node_name(name: str, i: int) -> str:
    return f"{name}-h{i}"


def _dir(name: str) -> Path:
    return net.STATE_DIR / f"{name}-slurm"


def _state_path(name: str) -> Path:
    return _dir(name) / "lab.json"


def login_argv(lab: SlurmLab) -> list[str]:
    """Prefix that runs a command on the login node (``ip netns exec``)."""
    return ["ip", "netns", "exec", lab.login_netns]


def has_plugin(plugin: str) -> bool:
    return any((d / f"{plugin}.so").exists() for d in PLUGIN_DIRS)


def up(
    name: str, *, hosts: int = 2, gpus_per_node: int = 0, binds: Mapping[str, str] | None = None, auth: str = "auto"
) -> SlurmLab:
    """Create the namespace lab NAME and start slurmctld + one slurmd per host; wait until idle."""
    net.check_name(name)
    if not 0 <= gpus_per_node <= 16:
        raise InputError(f"--gpus-per-node {gpus_per_node}: use 0 to 16")
    if auth not in ("auto", "none", "munge"):
        raise InputError(f"--auth {auth!r}: use auto, none or munge")
    for tool in ("slurmctld", "slurmd", "sinfo"):
        if shutil.which(tool) is None:
            raise ToolNotFound(tool)
    binds = dict(binds or {})
    for target, source in binds.items():
        if not (Path(target).is_absolute() and Path(target).is_dir() and Path(source).is_dir()):
            raise InputError(f"bind {source} -> {target}: both must be existing directories, target absolute")
    if auth == "auto":
        auth = "none" if has_plugin("auth_none") and has_plugin("cred_none") else "munge"
    down(name)
    net.up(name, hosts=hosts)
    d = _dir(name)
    try:
        for sub in ("state", "spool", "log", "run", "munge"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        login_ns = net.ns_switch(name)
        login_addr = f"10.210.0.{LOGIN_HOST}"
        run(
            ["ip", "-n", login_ns, "addr", "add", f"{login_addr}/24", "dev", net.BRIDGES["mgmt"]],
            timeout_s=_CMD_TIMEOUT_S,
            check=True,
        )
        nodes = tuple(node_name(name, i) for i in range(1, hosts + 1))
        addrs = tuple(net.addr("mgmt", i) for i in range(1, hosts + 1))
        procs: dict[str, Started] = {}
        auth_lines = _start_munge(d, login_ns, procs) if auth == "munge" else "AuthType=auth/none\nCredType=cred/none"
        gres = f" Gres=gpu:{gpus_per_node}" if gpus_per_node else ""
        node_lines = "\n".join(
            f"NodeName={n} NodeAddr={a} CPUs={os.cpu_count() or 1} RealMemory=1000{gres} State=UNKNOWN"
            for n, a in zip(nodes, addrs, strict=True)
        )
        conf = d / "slurm.conf"
        conf.write_text(
            CONF.format(
                name=name,
                ctl_host=socket.gethostname(),
                ctl_addr=login_addr,
                auth=auth_lines,
                ctl_port=SLURMCTLD_PORT,
                d_port=SLURMD_PORT,
                srun_ports=SRUN_PORT_RANGE,
                d=d,
                gres_types="GresTypes=gpu" if gpus_per_node else "",
                nodes=node_lines,
                node_list=",".join(nodes),
            ),
            encoding="utf-8",
        )
        if gpus_per_node:
            # Placeholder GPUs: slurmd 22.05 counts a gpu gres only through File= lines (a count-only
            # line registers 0 and drains the node), so each GPU is an empty file in the lab dir.
            (d / "dev").mkdir(exist_ok=True)
            files = [d / "dev" / f"nvidia{i}" for i in range(gpus_per_node)]
            for f in files:
                f.touch()
            (d / "gres.conf").write_text(
                "AutoDetect=off\n" + "".join(f"Name=gpu File={f}\n" for f in files), encoding="utf-8"
            )
        env = {**os.environ, "SLURM_CONF": str(conf)}
        procs["slurmctld"] = _spawn(login_ns, ["slurmctld", "-D", "-f", str(conf)], env, d / "log" / "slurmctld.out")
        for i, node in enumerate(nodes, start=1):
            (d / "spool" / node).mkdir(exist_ok=True)
            procs[node] = _spawn(
                net.ns_host(name, i),
                ["slurmd", "-D", "-N", node, "-f", str(conf)],
                env,
                d / "log" / f"slurmd-{node}.out",
                binds=binds,
            )
        lab = SlurmLab(
            name=name,
            conf=str(conf),
            login_netns=login_ns,
            login_addr=login_addr,
            nodes=nodes,
            node_addrs=addrs,
            auth=f"auth/{auth}",
            gpus_per_node=gpus_per_node,
            procs=procs,
        )
        _state_path(name).write_text(json.dumps({"version": 2, **asdict(lab)}, indent=1), encoding="utf-8")
        _wait_idle(lab)
    except BaseException:
        down(name)
        raise
    return lab


def _start_munge(d: Path, login_ns: str, procs: dict[str, Started]) -> str:
    """munged with a fresh key; its socket directory must be 0755 (this-machine.md item 8)."""
    for tool in ("munged", "mungekey"):
        if shutil.which(tool) is None:
            raise ToolNotFound(tool)
    m = d / "munge"
    m.chmod(0o755)
    key = m / "munge.key"
    run(["mungekey", "-c", "-k", str(key)], timeout_s=_CMD_TIMEOUT_S, check=True)
    key.chmod(0o400)
    sock = m / "munge.socket"
    procs["munged"] = _spawn(
        login_ns,
        [
            "munged",
            "-F",
            f"--key-file={key}",
            f"--socket={sock}",
            f"--pid-file={m / 'munged.pid'}",
            f"--log-file={m / 'munged.log'}",
            f"--seed-file={m / 'munged.seed'}",
        ],
        dict(os.environ),
        m / "munged.out",
    )
    deadline = time.monotonic() + 5
    while not sock.exists():
        if time.monotonic() > deadline:
            raise EnvironmentFailure(f"munged did not create {sock}; see {m / 'munged.log'}")
        time.sleep(0.05)
    return f"AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge"


def _spawn(
    ns: str, argv: list[str], env: Mapping[str, str], log: Path, *, binds: Mapping[str, str] | None = None
) -> Started:
    """Start a daemon in netns ``ns`` in its own session; binds are mounted in its mount namespace first.

    nsenter, not ``ip netns exec``: the latter remounts /sys, which hides /sys/fs/cgroup, and
    slurmd 22.05 will not start without its cgroup plugin even under proctrack/pgid.
    """
    if binds:
        # A private mount namespace (slave of the host's), so the binds are seen only by the
        # daemon and the job steps it starts.
        mounts = " && ".join(f"mount --bind {shlex.quote(src)} {shlex.quote(dst)}" for dst, src in binds.items())
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "slave",
            "sh",
            "-c",
            f'{mounts} && exec "$@"',
            "gpufabric-node",
            *argv,
        ]
    return spawn_detached(["nsenter", f"--net=/run/netns/{ns}", *argv], log=log, env=env)


def _wait_idle(lab: SlurmLab) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        done = run(
            [*login_argv(lab), "sinfo", "-h", "-N", "-o", "%N %T"],
            timeout_s=_CMD_TIMEOUT_S,
            env={**os.environ, **lab.env()},
        )
        states = dict(line.split(None, 1) for line in done.stdout.splitlines() if len(line.split()) == 2)
        if all(states.get(n) == "idle" for n in lab.nodes):
            return
        time.sleep(0.2)
    log = Path(lab.conf).parent / "log" / "slurmctld.log"
    tail = log.read_text(errors="replace")[-400:] if log.exists() else ""
    raise EnvironmentFailure(f"lab {lab.name}: Slurm nodes not idle after {_START_TIMEOUT_S:g} s ({states}); {tail}")


def load(name: str) -> SlurmLab | None:
    """The lab cluster's state, or None when there is none usable (missing, damaged, another
    version, edited): ``lab slurm down`` then still removes the namespaces and files, and
    signals no daemon it cannot identify (``exec.process.Started``)."""
    net.check_name(name)
    path = _state_path(name)
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:  # never block on a FIFO
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return _from_dict(name, data)


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _from_dict(name: str, data: Any) -> SlurmLab | None:
    if not isinstance(data, dict) or data.get("name") != name:
        return None
    text = {k: data.get(k) for k in ("conf", "login_netns", "login_addr", "auth")}
    nodes, addrs = _strings(data.get("nodes")), _strings(data.get("node_addrs"))
    if not all(isinstance(v, str) for v in text.values()) or nodes is None or addrs is None or len(nodes) != len(addrs):
        return None
    if not str(text["login_netns"]).startswith(f"{net.PREFIX}{name}-"):  # only ever one of this lab's namespaces
        return None
    gpus = data.get("gpus_per_node", 0)
    raw = data.get("procs")
    procs = {str(k): t for k, v in raw.items() if (t := Started.from_dict(v))} if isinstance(raw, dict) else {}
    return SlurmLab(
        name=name,
        conf=str(text["conf"]),
        login_netns=str(text["login_netns"]),
        login_addr=str(text["login_addr"]),
        nodes=nodes,
        node_addrs=addrs,
        auth=str(text["auth"]),
        gpus_per_node=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and 0 <= gpus <= 16 else 0,
        procs=procs,
    )


def down(name: str) -> list[str]:
    """Stop the daemons (SIGTERM, then SIGKILL), remove the namespaces and the lab's files. Idempotent."""
    net.check_name(name)
    lab = load(name)
    if lab is not None:
        # Daemons first, so slurmd does not see its controller vanish mid-shutdown.
        for daemon in sorted(lab.procs, key=lambda k: k in ("slurmctld", "munged")):
            stop_started(lab.procs[daemon], grace_s=5.0)  # slurmd drains its steps on SIGTERM
    removed = net.down(name)
    shutil.rmtree(_dir(name), ignore_errors=True)
    return removed


def status(name: str) -> dict[str, Any]:
    """JSON-able state: nodes and their Slurm state as slurmctld reports it."""
    lab = load(name)
    if lab is None:
        return {"name": name, "up": False}
    done = run(
        [*login_argv(lab), "sinfo", "-h", "-N", "-o", "%N %T"],
        timeout_s=_CMD_TIMEOUT_S,
        env={**os.environ, **lab.env()},
    )
    states = dict(line.split(None, 1) for line in done.stdout.splitlines() if len(line.split()) == 2)
    return {
        "name": name,
        "up": bool(states) and all(states.get(n) in ("idle", "mixed", "allocated") for n in lab.nodes),
        "conf": lab.conf,
        "login_netns": lab.login_netns,
        "login_addr": lab.login_addr,
        "auth": lab.auth,
        "gpus_per_node": lab.gpus_per_node,
        "nodes": [
            {"name": n, "addr": a, "state": states.get(n, "unknown")}
            for n, a in zip(lab.nodes, lab.node_addrs, strict=True)
        ],
    }
