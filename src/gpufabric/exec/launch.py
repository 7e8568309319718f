"""What the launchers build with, and how a launch runs: hosts, commands, the Slurm shell, execute.

The launchers themselves (local | torchrun | slurm | mpirun | k8s) are classes in the
registry of ``exec/launchers.py``; their ``build`` turns a job into the exact commands to
run, from the pieces here. ``execute()`` starts them, each in its own process group, and
bounds the whole launch by a timeout.
The distributed engines are the real ones (torchrun's static c10d rendezvous, srun,
mpirun); gpufabric only builds their argv.

Hosts are ``local`` (this machine), ``netns:NAME`` (a network namespace, as the lab
makes) or a hostname reached with ``ssh``. The rendezvous (``MASTER_ADDR``) binds to the
first host's control-plane address; ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` pin
the data traffic to the data-plane interface of each host.

Under Slurm the launching host does not know the allocation, so ``MASTER_ADDR`` is
evaluated on it: the first host of ``scontrol show hostnames "$SLURM_JOB_NODELIST"``,
translated to that node's ``NodeAddr`` (the address slurmctld reaches it on, the control
plane). Ranks on several machines read their config and write their records in a run
directory every node sees; ``launchers.check_run_dir`` checks that before the launch.

Where ranks run decides what ``--backend auto`` means (``launchers.resolve_backend``): on this
machine (local ranks, lab namespaces) it looks here; under Slurm, k8s and ssh hosts the
ranks run elsewhere, so ``auto`` is NCCL with ``--gpus-per-node`` GPUs requested from the
scheduler, whatever the submitting (login) node has. The rendezvous port is per job unless
``--master-port`` names one: under Slurm it is derived from ``SLURM_JOB_ID`` on the
allocation (two jobs sharing a node never collide), elsewhere a port free right now.
mpirun takes its hosts from ``--hosts``, ``--hostfile`` or the allocation it runs in
(exec/hostlist.py) and refuses to put several nodes' ranks on this machine.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpufabric.errors import CommandTimeout, InputError, ToolNotFound
from gpufabric.exec import hostlist
from gpufabric.exec.process import kill_group, run

#: Linux interface names: IFNAMSIZ 16 including the NUL (include/uapi/linux/if.h).
IFNAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,15}")
ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: --hosts names reach ssh and `ip netns exec` as arguments: a leading '-' would be read as
#: an option (ssh -oProxyCommand=...), so names are RFC 1123 host names (spec.types.HOSTNAME,
#: kept here so the launcher does not import pydantic) or plain netns names.
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")
_NETNS = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")

#: Seconds a surviving rank gets to notice a dead peer before its group is killed.
PEER_FAILURE_GRACE_S = 10.0
#: Per-job rendezvous ports: BASE + job id mod SPAN. 29500 is torchrun's default; the bundle's
#: firewall admits BASE..BASE+SPAN-1 on the control plane (spec.security.TORCH_STATIC_RANGE);
#: the span keeps the range below Linux's ephemeral range (32768-60999), so a listening
#: rendezvous never meets an outgoing socket.
RENDEZVOUS_PORT_BASE = 29500
RENDEZVOUS_PORT_SPAN = 500
#: The python that runs the ranks inside a container image (not this machine's interpreter).
CONTAINER_PYTHON = "python3"


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """Where ranks run and which addresses they use."""

    name: str  # label in results (rank -> host map)
    netns: str = ""  # run inside this network namespace (lab hosts)
    ssh: str = ""  # run through ssh on this host
    control_addr: str = "127.0.0.1"  # rendezvous (MASTER_ADDR) when this is the first host
    data_ifname: str = ""  # GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME on this host


def parse_hosts(text: str) -> list[Host]:
    """``h1,h2`` (ssh), ``local`` or ``netns:NAME[@ADDR][%IFNAME]`` entries, comma-separated."""
    hosts = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        if item == "local":
            hosts.append(Host(name=os.uname().nodename))
            continue
        kind, _, rest = item.partition(":") if item.startswith("netns:") else ("ssh", "", item)
        rest, _, ifname = rest.partition("%")
        target, _, addr = rest.partition("@")
        if not target:
            raise InputError(f"--hosts entry {item!r}: expected NAME, local or netns:NAME[@ADDR][%IFNAME]")
        if not (_NETNS if kind == "netns" else _HOSTNAME).fullmatch(target) or len(target) > 253:
            raise InputError(f"--hosts entry {item!r}: {target!r} is not a host or namespace name")
        if addr and not _is_address(addr):
            raise InputError(f"--hosts entry {item!r}: {addr!r} is not an IP address or host name")
        if ifname and not IFNAME_RE.fullmatch(ifname):
            raise InputError(f"--hosts entry {item!r}: interface {ifname!r}: 1-15 of letters, digits, '.', '_', '-'")
        if kind == "netns":
            hosts.append(Host(name=target, netns=target, control_addr=addr or "127.0.0.1", data_ifname=ifname))
        else:
            hosts.append(Host(name=target, ssh=target, control_addr=addr or target, data_ifname=ifname))
    if not hosts:
        raise InputError("--hosts is empty")
    return hosts


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return bool(_HOSTNAME.fullmatch(text)) and len(text) <= 253
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # added to the parent's environment
    host: str = ""

    def shell(self) -> str:
        """The command as one copy-pasteable shell line (for --dry-run and artifacts)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.argv)


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchPlan:
    launcher: str
    commands: tuple[Command, ...]
    num_ranks: int
    hosts: tuple[Host, ...]
    script: str = ""  # generated sbatch script (slurm), kept with the run
    script_path: str = ""  # where execute() writes it when the launch is `sbatch --wait`


def _wrap(host: Host, argv: list[str], env: Mapping[str, str]) -> Command:
    """Run argv on host: inside its netns, or through ssh with the env on the remote side."""
    if host.netns:
        return Command(argv=("ip", "netns", "exec", host.netns, *argv), env=dict(env), host=host.name)
    if host.ssh:
        remote = ["env", *(f"{k}={v}" for k, v in sorted(env.items())), *argv]
        return Command(argv=("ssh", "-o", "BatchMode=yes", host.ssh, shlex.join(remote)), host=host.name)
    return Command(argv=tuple(argv), env=dict(env), host=host.name)


def _host_env(host: Host) -> dict[str, str]:
    env = {"GPUFABRIC_HOST": host.name}
    if host.data_ifname:
        env["GLOO_SOCKET_IFNAME"] = host.data_ifname
        env["NCCL_SOCKET_IFNAME"] = host.data_ifname
    return env


#: Shell that sets MASTER_ADDR on the allocation: the first node, as the address slurmctld
#: reaches it on (NodeAddr; the node name when NodeAddr is unset or unreadable).
SLURM_MASTER_ADDR = (
    'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1); '
    'addr=$(scontrol -o show node "$head" 2>/dev/null | sed -n "s/.* NodeAddr=\\([^ ]*\\).*/\\1/p" || true); '
    "MASTER_ADDR=${addr:-$head}; export MASTER_ADDR"
)
#: Shell that sets the job's own rendezvous port on the allocation (--master-port not given).
SLURM_MASTER_PORT = (
    f"MASTER_PORT=$(({RENDEZVOUS_PORT_BASE} + SLURM_JOB_ID % {RENDEZVOUS_PORT_SPAN})); export MASTER_PORT"
)


def slurm_rendezvous(master_port: int, python: str = "") -> str:
    """Shell run on the allocation: MASTER_ADDR, and MASTER_PORT from the job id when ``master_port`` is 0.

    With ``python`` (the ranks' interpreter) the first node is expanded by gpufabric itself when
    scontrol is missing, as inside a pyxis container that carries no Slurm clients.
    """
    addr = SLURM_MASTER_ADDR
    if python:
        fallback = (
            f'[ -n "$head" ] || head=$({shlex.quote(python)} -m gpufabric.exec.hostlist first "$SLURM_JOB_NODELIST"); '
        )
        addr = addr.replace("; addr=", "; " + fallback + "addr=", 1)
    return addr + ("" if master_port else "; " + SLURM_MASTER_PORT)


#: Per-task prologue: the Slurm node name labels the rank's host (lab nodes share a hostname).
SLURM_TASK = 'export GPUFABRIC_HOST="${SLURMD_NODENAME:-$(hostname)}"; exec "$@"'
#: Seconds a task waits for rank 0 to publish its control-plane address (0.1 s polls).
CONTROL_ADDR_WAIT_S = 60


def slurm_task(control_ifname: str = "", run_dir: str = "") -> str:
    """The per-task prologue; with ``control_ifname`` the rendezvous is rank 0's address on it.

    Only rank 0 can read that address, so it publishes it in the run directory (checked to
    be visible from every node) and the other tasks wait for the file.
    """
    if not control_ifname:
        return SLURM_TASK
    path = shlex.quote(f"{run_dir}/.master-addr-") + '"$SLURM_JOB_ID"'
    ifname = shlex.quote(control_ifname)
    fail = f'{{ echo "gpufabric: no IPv4 address on {control_ifname} from rank 0" >&2; exit 2; }}'
    return (
        f"f={path}; "
        'if [ "$SLURM_PROCID" = 0 ]; then '
        f"a=$(ip -4 -o addr show dev {ifname} | awk '{{split($4, x, \"/\"); print x[1]; exit}}'); "
        f'[ -n "$a" ] || {fail}; echo "$a" > "$f.tmp" && mv "$f.tmp" "$f"; fi; '
        f'i=0; while [ ! -s "$f" ] && [ $i -lt {CONTROL_ADDR_WAIT_S * 10} ]; do sleep 0.1; i=$((i+1)); done; '
        f'[ -s "$f" ] || {fail}; MASTER_ADDR=$(cat "$f"); export MASTER_ADDR; ' + SLURM_TASK
    )


def mpirun_hosts(
    hosts: Sequence[Host] | None,
    *,
    nodes: int,
    hostfile: str,
    environ: Mapping[str, str],
    node_addr: bool = True,
) -> tuple[list[Host], str]:
    """mpirun's hosts and where they came from: --hosts, --hostfile, then the allocation.

    One node with none of them runs here. More nodes without hosts is refused: mpirun would
    start every rank on this machine and exit 0 (or hang for the rendezvous inside salloc).
    """
    if hosts and hostfile:
        raise InputError("--hosts and --hostfile both name mpirun's hosts; give one")
    if hosts:
        return list(hosts), "--hosts"
    found: hostlist.Allocation | None
    if hostfile:
        found = hostlist.Allocation(
            hosts=tuple(hostlist.read_hostfile(Path(hostfile))), source=f"--hostfile {hostfile}"
        )
    else:
        found = hostlist.allocation(environ)
    if found is None:
        if nodes > 1:
            raise InputError(
                f"mpirun on {nodes} nodes: no hosts for nodes 1-{nodes} (none from --hosts, --hostfile,"
                " SLURM_JOB_NODELIST or PBS_NODEFILE); pass --hosts NODE1,NODE2,... or --hostfile FILE,"
                " or run inside the allocation (salloc/sbatch, qsub)"
            )
        return [Host(name=os.uname().nodename)], "this host"
    names = list(found.hosts)
    if len(names) < nodes:
        missing = ", ".join(f"node {i + 1}" for i in range(len(names), nodes))
        raise InputError(
            f"mpirun on {nodes} nodes but {found.source} has {len(names)} host(s) ({', '.join(names)}):"
            f" no host for {missing}; lower --nodes or allocate more nodes"
        )
    hosts_out = [Host(name=n, ssh=n, control_addr=n) for n in names]
    if node_addr and found.source.startswith("SLURM_JOB_NODELIST"):
        # Node names need not resolve (the lab's do not); slurmctld reaches the first node at its
        # NodeAddr, as the Slurm launcher's rendezvous does. One scontrol call, on this node.
        hosts_out[0] = replace(hosts_out[0], control_addr=slurm_node_addr(names[0], environ))
    return hosts_out, found.source


def slurm_node_addr(node: str, environ: Mapping[str, str]) -> str:
    """``NodeAddr`` of a Slurm node (``scontrol -o show node``), or the name when unknown."""
    try:
        done = run(["scontrol", "-o", "show", "node", node], timeout_s=30, env={**os.environ, **environ})
    except (ToolNotFound, CommandTimeout):
        return node
    found = re.search(r"\bNodeAddr=(\S+)", done.stdout) if done.returncode == 0 else None
    addr = found.group(1) if found else node
    return addr if _is_address(addr) else node


def sbatch_script(
    *,
    worker: Sequence[str],
    nodes: int,
    nproc: int,
    env: Mapping[str, str],
    time_limit: str,
    job_name: str,
    out_dir: str,
    job_args: Sequence[str] = (),
    step_args: Sequence[str] = (),
    nodelist: Sequence[str] = (),
    task_prologue: str = SLURM_TASK,
    master_port: int = 0,
) -> str:
    """An sbatch script equivalent to the srun launch; the rendezvous is the job's first node.

    ``job_args`` (GPUs, partition, account, QOS, container, ...) become ``#SBATCH`` lines;
    ``step_args`` (binding) go on the script's srun.
    """
    for key in env:
        if not ENV_KEY_RE.fullmatch(key):
            raise InputError(f"environment name {key!r}: use letters, digits and '_'")
    # The container runs the ranks (the srun step), not the batch script: its scontrol calls
    # and the rendezvous shell run on the node itself, where Slurm's clients are.
    batch = [a for a in job_args if not a.startswith("--container-")]
    container = [a for a in job_args if a.startswith("--container-")]
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={nproc}",
        *(f"#SBATCH {a}" for a in batch),
        *([f"#SBATCH --nodelist={','.join(nodelist)}"] if nodelist else []),
        f"#SBATCH --time={time_limit}",
        f"#SBATCH --output={out_dir}/slurm-%j.out",
        "set -euo pipefail",
        slurm_rendezvous(master_port),
        *(f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())),
        shlex.join(["srun", "--kill-on-bad-exit=1", *step_args, *container])
        + " "
        + shlex.join(["bash", "-c", task_prologue, "gpufabric-rank", *worker]),
        "",
    ]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    returncodes: tuple[int | None, ...]  # None: killed by us
    duration_s: float
    timed_out: bool
    logs: tuple[str, ...]  # combined stdout+stderr per command (tail)


def execute(
    plan: LaunchPlan,
    *,
    timeout_s: float,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    peer_grace_s: float = PEER_FAILURE_GRACE_S,
) -> Outcome:
    """Run every command of ``plan`` concurrently; never leaves a process behind.

    Ends when all commands exit, when ``timeout_s`` passes, or ``peer_grace_s`` after the
    first command fails (its peers should have noticed by then); whatever still runs is
    killed by process group (SIGTERM, then SIGKILL).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    if plan.script_path:
        Path(plan.script_path).write_text(plan.script, encoding="utf-8")
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    started = time.monotonic()
    try:
        for i, cmd in enumerate(plan.commands):
            log = log_dir / f"launch{i}.log"
            logs.append(log)
            with open(log, "wb") as fh:
                try:
                    procs.append(
                        subprocess.Popen(
                            cmd.argv,
                            stdin=subprocess.DEVNULL,
                            stdout=fh,
                            stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {}), **cmd.env},
                            start_new_session=True,
                        )
                    )
                except FileNotFoundError as exc:
                    raise ToolNotFound(cmd.argv[0]) from exc
        deadline = started + timeout_s
        timed_out = False
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if any(p.returncode not in (None, 0) for p in procs):
                deadline = min(deadline, now + peer_grace_s)
            if now > deadline:
                timed_out = not any(p.returncode not in (None, 0) for p in procs)
                break
            time.sleep(0.05)
    finally:
        killed = {i for i, p in enumerate(procs) if p.poll() is None}
        for p in procs:
            kill_group(p, grace_s=2.0)
    codes = tuple(None if i in killed else p.returncode for i, p in enumerate(procs))
    tails = tuple(_tail(log) for log in logs)
    if plan.script_path and killed:
        _scancel(tails)
    return Outcome(returncodes=codes, duration_s=time.monotonic() - started, timed_out=timed_out, logs=tails)


_TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


def sbatch_wait(script: str, *args: str, poll_s: float = 0.2) -> int:
    """Submit ``script args`` with sbatch, wait for the job, return its exit code; SIGTERM cancels it."""
    sub = subprocess.run(
        ["sbatch", "--parsable", script, *args], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if sub.returncode:
        sys.stderr.write(sub.stderr)
        return sub.returncode
    job = sub.stdout.strip().split(";")[0]
    print(f"Submitted batch job {job}", flush=True)

    def cancel(*_: object) -> None:
        subprocess.run(["scancel", job], capture_output=True, check=False, stdin=subprocess.DEVNULL)
        os._exit(143)

    signal.signal(signal.SIGTERM, cancel)
    while True:
        show = subprocess.run(
            ["scontrol", "-o", "show", "job", job],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        ).stdout
        state = re.search(r"JobState=(\S+)", show)
        if state and state.group(1) in _TERMINAL:
            code = re.search(r"ExitCode=(\d+):(\d+)", show)
            rc, sig = (int(code.group(1)), int(code.group(2))) if code else (1, 0)
            print(f"job {job} {state.group(1)} exit {rc}:{sig}", flush=True)
            return rc or (128 + sig if sig else (0 if state.group(1) == "COMPLETED" else 1))
        if not state and "Invalid job id" in show:
            return 1
        time.sleep(poll_s)


def _scancel(logs: Sequence[str]) -> None:
    """A killed launch can leave the batch job queued or running: cancel it by the id printed."""
    for text in logs:
        for job in re.findall(r"Submitted batch job (\d+)", text):
            subprocess.run(["scancel", job], stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "sbatch-wait":
        sys.exit(sbatch_wait(sys.argv[2], *sys.argv[3:]))
    sys.exit("usage: python -m gpufabric.exec.launch sbatch-wait SCRIPT [ARGS...]")
