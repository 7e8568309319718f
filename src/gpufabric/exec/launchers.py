"""The launcher registry: local, torchrun, slurm, mpirun and k8s behind one :class:`Launcher` protocol.

A launcher answers the questions a probe launch asks of it, so no caller compares launcher
names: :meth:`~Launcher.build` turns a :class:`Job` (nodes x nproc ranks of ``python -m
module args``) into a :class:`~gpufabric.exec.launch.LaunchPlan` (the exact commands, so
``--dry-run`` prints them and tests check them without running anything);
:meth:`~Launcher.runs_here` says whether every rank runs on this machine (what ``--backend
auto`` means, :func:`resolve_backend`); :meth:`~Launcher.spans_machines` whether a local
temporary run directory will do; :meth:`~Launcher.visibility` how to check that every node
sees the run directory (:func:`check_run_dir`). ``follows_job`` marks a launcher whose
ranks keep their records where they ran (k8s: the job is applied and followed, and its log
is the output). A new launcher is one class and one :data:`LAUNCHERS` entry.

The options of a launch are declared once, in :class:`LaunchRequest` (flags and help in
the field metadata, ``exec.knobs``); the CLI derives its options from it and
:meth:`LaunchRequest.resolve` checks the values and gives the typed
:class:`LaunchOptions` the probes run with. The engines' argv builders are in
``exec/launch.py`` (srun/sbatch shell, mpirun hosts) and ``exec/k8s.py`` (manifests).
"""

from __future__ import annotations

import os
import secrets
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

from gpufabric.errors import CommandTimeout, InputError
from gpufabric.exec import hostlist, k8s
from gpufabric.exec.knobs import (
    DURATION_SYNTAX,
    GPUS_PER_NODE_HELP,
    HOSTS_HELP,
    NODES_HELP,
    Refusal,
    check_range,
    duration_s,
    knob,
)
from gpufabric.exec.launch import (
    CONTAINER_PYTHON,
    IFNAME_RE,
    RENDEZVOUS_PORT_BASE,
    RENDEZVOUS_PORT_SPAN,
    Command,
    Host,
    LaunchPlan,
    _host_env,
    _wrap,
    mpirun_hosts,
    parse_hosts,
    sbatch_script,
    slurm_rendezvous,
    slurm_task,
)
from gpufabric.exec.process import free_port, run
from gpufabric.exec.site import SiteOptions, mpirun_binding, slurm_args, step_args

#: Ranks per node a probe may launch: the bound spec.models puts on cluster.gpus_per_node
#: (a 10**9-rank request must fail before any process starts).
MAX_RANKS_PER_NODE = 1024
#: Nodes a probe may launch: spec.models.MAX_RANKS (kept here: the launcher imports no pydantic).
MAX_NODES = 1 << 24


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """What to launch: ``nodes x nproc`` ranks of ``python -m module args``.

    ``slurm_mode`` "sbatch" submits the generated script with ``sbatch`` and waits for the
    job (``launch.sbatch_wait``) instead of calling srun directly. ``gpus_per_node`` > 0
    requests GPUs from the scheduler. ``control_ifname`` pins the rendezvous / MPI
    out-of-band traffic, ``data_ifname`` the collectives' traffic (for hosts that do not
    name their own data interface). ``master_port`` 0 is a per-job port. ``environ`` is the
    environment an allocation is read from (None: this process's). ``kind``, ``config``,
    ``backend`` and the ``k8s_*`` fields are for k8s, whose manifest carries the config.
    """

    module: str
    args: tuple[str, ...] = ()
    nodes: int = 1
    nproc: int = 1
    hosts: tuple[Host, ...] = ()
    master_port: int = 0
    python: str = sys.executable
    env: Mapping[str, str] = field(default_factory=dict)
    time_limit_min: int = 30
    job_name: str = "gpufabric"
    out_dir: str = "."
    slurm_mode: str = "srun"
    gpus_per_node: int = 0
    control_ifname: str = ""
    data_ifname: str = ""
    site: SiteOptions = field(default_factory=SiteOptions)
    environ: Mapping[str, str] | None = None
    kind: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    backend: str = "gloo"
    k8s_image: str = ""
    k8s_namespace: str = "default"
    k8s_rdma: str = ""

    @property
    def world(self) -> int:
        return self.nodes * self.nproc

    @property
    def worker(self) -> list[str]:
        return [self.python, "-m", self.module, *self.args]


class Launcher(Protocol):
    """One way of starting ranks (module docstring)."""

    name: ClassVar[str]  # the --launcher value
    follows_job: ClassVar[bool]  # the ranks' records stay where they ran; the job is followed

    def build(self, job: Job) -> LaunchPlan: ...

    def runs_here(self, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool: ...

    def spans_machines(
        self, nodes: int, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]
    ) -> bool: ...

    def visibility(self, plan: LaunchPlan, marker: str) -> tuple[list[Command], int]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class _Placed:
    """A job's hosts, rendezvous and environment, as every launcher but k8s starts from."""

    job: Job
    hosts: list[Host]
    master_port: int
    base_env: dict[str, str]


class _Direct:
    """Shared behaviour: ranks run where the hosts say (this machine, netns or ssh)."""

    name: ClassVar[str]
    follows_job: ClassVar[bool] = False
    #: The rendezvous port is chosen on the allocation (from the job id), not here.
    port_on_allocation: ClassVar[bool] = False

    def place(self, job: Job) -> _Placed:
        """Validate the job; its hosts (one per node), rendezvous port and base environment."""
        if job.nodes < 1 or job.nproc < 1:
            raise InputError(f"--nodes and --nproc must be >= 1, got {job.nodes} and {job.nproc}")
        if not 0 <= job.master_port <= 65535:
            raise InputError(f"--master-port {job.master_port}: not a port (0 = one per job)")
        hosts = self.hosts_for(job)
        if len(hosts) < job.nodes:
            raise InputError(f"--nodes {job.nodes} but only {len(hosts)} host(s) given in --hosts")
        hosts = hosts[: job.nodes]
        if job.data_ifname:
            hosts = [h if h.data_ifname else replace(h, data_ifname=job.data_ifname) for h in hosts]
        for name in (job.control_ifname, job.data_ifname):
            if name and not IFNAME_RE.fullmatch(name):
                raise InputError(f"interface name {name!r}: 1-15 characters of letters, digits, '.', '_' or '-'")
        if job.gpus_per_node < 0:
            raise InputError(f"gpus per node must be >= 0, got {job.gpus_per_node}")
        port = job.master_port
        if not self.port_on_allocation and not port:
            # Only this machine can be asked; a port free here is as good a guess as any for others.
            port = free_port() if not any(h.ssh or h.netns for h in hosts) else _job_port()
        env = {**job.env, "MASTER_ADDR": hosts[0].control_addr, "MASTER_PORT": str(port)}
        return _Placed(job=job, hosts=hosts, master_port=port, base_env=env)

    def hosts_for(self, job: Job) -> list[Host]:
        return list(job.hosts or [Host(name=os.uname().nodename)] * job.nodes)

    def plan(self, placed: _Placed, commands: list[Command], script: str = "", script_path: str = "") -> LaunchPlan:
        return LaunchPlan(
            launcher=self.name,
            commands=tuple(commands),
            num_ranks=placed.job.world,
            hosts=tuple(placed.hosts),
            script=script,
            script_path=script_path,
        )

    def runs_here(self, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool:
        return not any(h.ssh for h in hosts)  # ssh hosts are other machines by definition

    def spans_machines(self, nodes: int, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool:
        return any(h.ssh for h in hosts[:nodes])

    def visibility(self, plan: LaunchPlan, marker: str) -> tuple[list[Command], int]:
        return [_wrap(h, ["cat", marker], {}) for h in plan.hosts if h.netns or h.ssh], 1


class Local(_Direct):
    """One process per rank, with torch.distributed's environment variables."""

    name = "local"

    def build(self, job: Job) -> LaunchPlan:
        placed = self.place(job)
        commands = []
        for node, host in enumerate(placed.hosts):
            for local in range(job.nproc):
                rank_env = {
                    **placed.base_env,
                    **_host_env(host),
                    "RANK": str(node * job.nproc + local),
                    "WORLD_SIZE": str(job.world),
                    "LOCAL_RANK": str(local),
                    "LOCAL_WORLD_SIZE": str(job.nproc),
                }
                commands.append(_wrap(host, job.worker, rank_env))
        return self.plan(placed, commands)


class Torchrun(_Direct):
    """One torchrun agent per node, static rendezvous at the first host's control-plane address."""

    name = "torchrun"

    def build(self, job: Job) -> LaunchPlan:
        placed = self.place(job)
        endpoint = _hostport(placed.hosts[0].control_addr, placed.master_port)
        commands = []
        for node, host in enumerate(placed.hosts):
            # --local-addr makes each agent advertise its own control-plane address, not
            # whatever its hostname resolves to.
            argv = [
                job.python,
                "-m",
                "torch.distributed.run",
                f"--nnodes={job.nodes}",
                f"--nproc-per-node={job.nproc}",
                f"--node-rank={node}",
                "--rdzv-backend=static",
                f"--rdzv-endpoint={endpoint}",
                f"--local-addr={host.control_addr}",
                "--max-restarts=0",
                "--module",
                job.module,
                *job.args,
            ]
            commands.append(_wrap(host, argv, {**placed.base_env, **_host_env(host)}))
        return self.plan(placed, commands)


#: Per-rank prologue under mpirun: with ``--map-by slot`` and ``--host H:N`` rank r runs on
#: host r // N, which labels its records; SLURMD_NODENAME wins where orted came from srun.
MPI_TASK = (
    'h=("${{@:1:{n}}}"); shift {n}; '
    'export GPUFABRIC_HOST="${{SLURMD_NODENAME:-${{h[$((OMPI_COMM_WORLD_RANK / {nproc}))]}}}}"; exec "$@"'
)


class Mpirun(_Direct):
    """One mpirun for every rank; hosts from --hosts, --hostfile or the allocation it runs in."""

    name = "mpirun"

    def hosts_for(self, job: Job) -> list[Host]:
        environ = os.environ if job.environ is None else job.environ
        return mpirun_hosts(job.hosts or None, nodes=job.nodes, hostfile=job.site.hostfile, environ=environ)[0]

    def build(self, job: Job) -> LaunchPlan:
        placed = self.place(job)
        hosts, nproc = placed.hosts, job.nproc
        if any(h.netns for h in hosts):
            raise InputError("mpirun cannot enter network namespaces; use --launcher local or torchrun for lab hosts")
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(job.world), "--map-by", "slot"]
        argv += mpirun_binding(job.site)
        if any(h.ssh for h in hosts):
            argv += ["--host", ",".join(f"{h.ssh}:{nproc}" for h in hosts)]
        if job.control_ifname:
            # ORTE's daemons and MPI's own TCP traffic stay on the control plane (OpenMPI 4.1 MCA names).
            ifname = job.control_ifname
            argv += ["--mca", "oob_tcp_if_include", ifname, "--mca", "btl_tcp_if_include", ifname]
        full_env = dict(placed.base_env)
        if hosts[0].data_ifname:
            full_env.update(GLOO_SOCKET_IFNAME=hosts[0].data_ifname, NCCL_SOCKET_IFNAME=hosts[0].data_ifname)
        for key in sorted(full_env):
            argv += ["-x", key]
        names = [h.name for h in hosts]
        task = ["bash", "-c", MPI_TASK.format(n=len(names), nproc=nproc), "gpufabric-rank", *names, *job.worker]
        return self.plan(placed, [Command(argv=(*argv, *task), env=full_env, host=hosts[0].name)])

    def runs_here(self, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool:
        # Hosts from a hostfile or the allocation are other machines (``salloc`` runs its shell
        # on the login node) unless the allocation is this one node.
        if hosts:
            return super().runs_here(hosts, hostfile=hostfile, environ=environ)
        if hostfile:
            return False
        found = hostlist.allocation(environ)
        return found is None or list(found.hosts) == [os.uname().nodename]

    def spans_machines(self, nodes: int, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool:
        if nodes > 1:
            # Where the hosts come from is checked first: a launch without hosts is told which
            # hosts are missing before it is told about --run-dir.
            mpirun_hosts(hosts or None, nodes=nodes, hostfile=hostfile, environ=environ, node_addr=False)
            return True
        return super().spans_machines(nodes, hosts, hostfile=hostfile, environ=environ)

    def visibility(self, plan: LaunchPlan, marker: str) -> tuple[list[Command], int]:
        if not any(h.ssh for h in plan.hosts):
            return super().visibility(plan, marker)[0], len(plan.hosts)
        # mpirun reaches the nodes the way the launch will (ssh, or srun / tm inside an
        # allocation, where there may be no sshd at all): one cat per node.
        argv = ["mpirun", "--allow-run-as-root", "-np", str(len(plan.hosts)), "--map-by", "node"]
        argv += ["--host", ",".join(f"{h.ssh}:1" for h in plan.hosts), "cat", marker]
        return [Command(argv=tuple(argv), host=plan.hosts[0].name)], len(plan.hosts)


class Slurm(_Direct):
    """srun on the allocation, or ``sbatch --wait`` on the generated script (``--slurm-mode``)."""

    name = "slurm"
    port_on_allocation = True

    def build(self, job: Job) -> LaunchPlan:
        placed = self.place(job)
        hosts, site = placed.hosts, job.site
        if job.slurm_mode not in ("srun", "sbatch"):
            raise InputError(f"--slurm-mode {job.slurm_mode!r}: use srun or sbatch")
        worker = [CONTAINER_PYTHON, "-m", job.module, *job.args] if site.container_image else job.worker
        time_limit = site.time or str(job.time_limit_min)
        gpus = [f"--gpus-per-node={job.gpus_per_node}"] if job.gpus_per_node else []
        job_args = [*gpus, *slurm_args(site, run_dir=job.out_dir)]
        step = step_args(site, gpus_per_node=job.gpus_per_node)
        slurm_env = {**job.env, **({"MASTER_PORT": str(job.master_port)} if job.master_port else {})}
        if hosts[0].data_ifname:
            slurm_env.update(GLOO_SOCKET_IFNAME=hosts[0].data_ifname, NCCL_SOCKET_IFNAME=hosts[0].data_ifname)
        prologue = slurm_task(job.control_ifname, job.out_dir)
        script = sbatch_script(
            worker=worker,
            nodes=job.nodes,
            nproc=job.nproc,
            env=slurm_env,
            time_limit=time_limit,
            job_name=job.job_name,
            out_dir=job.out_dir,
            job_args=job_args,
            step_args=step,
            nodelist=[h.ssh for h in hosts if h.ssh],
            task_prologue=prologue,
            master_port=job.master_port,
        )
        if job.slurm_mode == "sbatch":
            script_path = str(Path(job.out_dir) / "job.sbatch")
            # `sbatch --wait` polls with growing intervals (10-40 s here); sbatch_wait polls every 0.2 s.
            wait = (job.python, "-m", "gpufabric.exec.launch", "sbatch-wait", script_path)
            return self.plan(placed, [Command(argv=wait, host=hosts[0].name)], script, script_path)
        srun = [
            "srun",
            f"--nodes={job.nodes}",
            f"--ntasks={job.world}",
            f"--ntasks-per-node={job.nproc}",
            "--kill-on-bad-exit=1",
            f"--job-name={job.job_name}",
            f"--time={time_limit}",
            *job_args,
            *step,
            *_nodelist(hosts),
        ]
        # MASTER_ADDR (and a per-job MASTER_PORT) are not exported from here: this host is not
        # part of the allocation, and the job id is known only there.
        rendezvous = slurm_rendezvous(job.master_port, worker[0] if site.container_image else "")
        task = ["bash", "-c", f"{rendezvous}; {prologue}", "gpufabric-rank", *worker]
        return self.plan(placed, [Command(argv=(*srun, *task), env=slurm_env, host=hosts[0].name)], script)

    def runs_here(self, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool:
        # The scheduler places ranks (even a one-node job may land on another machine); the
        # namespace lab's nodes are this machine.
        return all(h.netns for h in hosts) and bool(hosts)

    def spans_machines(self, nodes: int, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool:
        return nodes > 1

    def visibility(self, plan: LaunchPlan, marker: str) -> tuple[list[Command], int]:
        nodes = len(plan.hosts)
        argv = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--job-name=gpufabric-rundir"]
        argv += ["--time=2", *_nodelist(plan.hosts), "cat", marker]
        return [Command(argv=tuple(argv), host=plan.hosts[0].name)], nodes


class K8s(Slurm):
    """A Kubeflow TrainJob, PyTorchJob or MPIJob applied and followed (``exec/k8s.py``)."""

    name = "k8s"
    follows_job = True

    def build(self, job: Job) -> LaunchPlan:
        return k8s.plan(
            kind=job.kind,
            module=job.module,
            config=job.config,
            out_dir=Path(job.out_dir),
            nodes=job.nodes,
            nproc=job.nproc,
            backend=job.backend,
            image=job.k8s_image,
            namespace=job.k8s_namespace,
            rdma=job.k8s_rdma,
            env=job.env,
            control_ifname=job.control_ifname,
            data_ifname=job.data_ifname,
            python=job.python,
            site=job.site,
        )

    def spans_machines(self, nodes: int, hosts: Sequence[Host], *, hostfile: str, environ: Mapping[str, str]) -> bool:
        return False  # the records stay in the pods; nothing is read back through a run directory

    def visibility(self, plan: LaunchPlan, marker: str) -> tuple[list[Command], int]:
        return [], 0


#: The registry: ``--launcher NAME`` -> its launcher.
LAUNCHERS: dict[str, Launcher] = {c.name: c() for c in (Local, Torchrun, Slurm, Mpirun, K8s)}


def get(name: str) -> Launcher:
    """The launcher called ``name``; InputError (exit 2) naming the choices otherwise."""
    found = LAUNCHERS.get(name)
    if found is None:
        raise InputError(f"--launcher {name!r}: unknown launcher; use one of {', '.join(LAUNCHERS)}")
    return found


def build(launcher: str, **job: Any) -> LaunchPlan:
    """``get(launcher).build(Job(**job))`` (``hosts`` may be a list or None)."""
    hosts = job.pop("hosts", None) or ()
    return get(launcher).build(Job(hosts=tuple(hosts), args=tuple(job.pop("args", ())), **job))


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def ranks_run_here(
    launcher: str, hosts: Sequence[Host], *, hostfile: str = "", environ: Mapping[str, str] | None = None
) -> bool:
    """Whether every rank runs on this machine (its own processes or its network namespaces)."""
    return get(launcher).runs_here(hosts, hostfile=hostfile, environ=_environ(environ))


def resolve_backend(
    backend: str,
    *,
    launcher: str,
    hosts: Sequence[Host],
    have_gpu: bool,
    hostfile: str = "",
    environ: Mapping[str, str] | None = None,
) -> str:
    """``auto`` -> nccl or gloo, decided where the ranks run.

    ``have_gpu`` is this machine's answer, used only when the ranks run here. Elsewhere the
    ranks get the GPUs the launch requests (``--gpus-per-node``), so ``auto`` is NCCL; a CPU
    cluster says ``--backend gloo``.
    """
    if backend not in ("auto", "gloo", "nccl"):
        raise InputError(f"--backend {backend!r}: use auto, gloo or nccl")
    if backend != "auto":
        return backend
    if ranks_run_here(launcher, hosts, hostfile=hostfile, environ=environ):
        return "nccl" if have_gpu else "gloo"
    return "nccl"


def spans_machines(
    launcher: str, nodes: int, hosts: Sequence[Host], *, hostfile: str = "", environ: Mapping[str, str] | None = None
) -> bool:
    """Whether ranks may run on other machines (so a local temporary directory will not do)."""
    return get(launcher).spans_machines(nodes, hosts, hostfile=hostfile, environ=_environ(environ))


def visibility_commands(plan: LaunchPlan, marker: str) -> list[Command]:
    """Commands that print ``marker`` (a file in the run directory) once from every node.

    Each prints the file's content; :func:`check_run_dir` compares it with what was written,
    so a node that sees another directory of the same name does not pass.
    """
    return get(plan.launcher).visibility(plan, marker)[0]


def check_run_dir(
    plan: LaunchPlan, run_dir: Path, *, timeout_s: float = 60.0, env: Mapping[str, str] | None = None
) -> None:
    """Fail unless every node of ``plan`` reads back a fresh token written into ``run_dir``."""
    token = secrets.token_hex(8)
    marker = run_dir / f".gpufabric-visible-{token}"
    commands, expected = get(plan.launcher).visibility(plan, str(marker))
    if not commands:
        return
    marker.write_text(token + "\n", encoding="utf-8")
    try:
        for cmd in commands:
            try:
                done = run(cmd.argv, timeout_s=timeout_s, env={**os.environ, **(env or {}), **cmd.env})
            except CommandTimeout as exc:
                raise InputError(
                    f"run directory {run_dir}: the visibility check timed out on {cmd.host} ({shlex.join(cmd.argv)})"
                ) from exc
            seen = done.stdout.split().count(token)
            if done.returncode or seen != expected:
                detail = (done.stderr.strip().splitlines() or [""])[-1][:200]
                raise InputError(
                    f"run directory {run_dir} is not visible from every node ({seen} of {expected}"
                    f" read it back via {cmd.argv[0]}{': ' + detail if detail else ''}); pass"
                    " --run-dir on storage all nodes mount (NFS, Lustre, ...)"
                )
    finally:
        marker.unlink(missing_ok=True)


def _job_port() -> int:
    """A rendezvous port for a host this machine cannot probe (a namespace, an ssh host)."""
    return RENDEZVOUS_PORT_BASE + secrets.randbelow(RENDEZVOUS_PORT_SPAN)


def _nodelist(hosts: Sequence[Host]) -> list[str]:
    names = [h.ssh for h in hosts if h.ssh]
    return [f"--nodelist={','.join(names)}"] if names else []


def _hostport(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchOptions:
    """A checked launch: what the probes run with (:meth:`LaunchRequest.resolve`)."""

    launcher: str = "local"
    nodes: int = 1
    nproc: int = 2
    hosts: tuple[Host, ...] = ()
    master_port: int = 0  # 0: one per job (Launcher.build)
    timeout_s: float = 600.0
    init_timeout_s: float = 60.0
    op_timeout_s: float = 60.0
    backend: str = "gloo"
    work_dir: str = ""  # where ranks write records; must be shared across real hosts
    slurm_mode: str = "srun"  # slurm launcher: srun directly, or sbatch --wait on the generated script
    control_ifname: str = ""  # control-plane interface (rendezvous, MPI out-of-band)
    data_ifname: str = ""  # data-plane interface for GLOO/NCCL_SOCKET_IFNAME
    k8s_image: str = ""  # k8s launcher: container image with gpufabric and torch
    k8s_namespace: str = "default"
    k8s_rdma: str = ""  # k8s launcher: RESOURCE[=COUNT],... ('' = default for the backend)
    site: SiteOptions = field(default_factory=SiteOptions)  # partition, account, container, binding, k8s extras
    env: dict[str, str] = field(default_factory=dict)

    @property
    def runner(self) -> Launcher:
        return get(self.launcher)


def _no_lab(r: Any) -> bool:
    return not r.lab


def _lab(r: Any) -> bool:
    return bool(r.lab)


#: The lab's hosts on a plane (``lab.net.lab_hosts``, handed in by the caller: exec sits below lab).
LabHosts = Callable[[str, str], list[Host]]


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchRequest:
    """The launch options of a probe command, as typed (the one declaration of each, exec.knobs)."""

    launcher: str = knob("local", "--launcher", "local | torchrun | slurm | mpirun | k8s.")
    slurm_mode: str = knob(
        "srun", "--slurm-mode", "slurm launcher: srun, or sbatch --wait on the generated script.", ("slurm",)
    )
    nodes: int = knob(1, "--nodes", NODES_HELP, min=1)
    nproc: int = knob(2, "--gpus-per-node", GPUS_PER_NODE_HELP)
    hosts: str = knob("", "--hosts", HOSTS_HELP, refuse=Refusal(when=_lab, why="with --lab (the lab's hosts are used)"))
    lab: str = knob("", "--lab", "Run on the hosts of this gpufabric lab (see `gpufabric lab`).")
    plane: str = knob(
        "data",
        "--plane",
        "Lab plane carrying the ranks' data traffic.",
        refuse=Refusal(when=_no_lab, why="without --lab"),
    )
    backend: str = knob(
        "auto",
        "--backend",
        "auto, gloo or nccl. auto: ranks on this host use nccl with GPUs here, else gloo;"
        " slurm, k8s and ssh hosts use nccl with --gpus-per-node GPUs requested.",
    )
    master_port: int = knob(
        0, "--master-port", "Rendezvous port on the first host (default: one per job, e.g. from SLURM_JOB_ID)."
    )
    timeout: str = knob("600s", "--timeout", f"Limit for the whole launch: {DURATION_SYNTAX}.")
    init_timeout: str = knob(
        "60s", "--init-timeout", "Limit for rendezvous and process-group init (a duration, as --timeout)."
    )
    op_timeout: str = knob(
        "60s", "--op-timeout", "Limit for any single collective, step or write (a duration, as --timeout)."
    )
    work_dir: str = knob(
        "",
        "--run-dir",
        "Run directory for the rank config and records; on storage every node sees"
        " (checked before launch; required for multi-node slurm and ssh hosts).",
        also=("--work-dir",),
    )
    control_ifname: str = knob(
        "", "--control-ifname", "Control-plane interface: torchrun --local-addr, mpirun oob/btl_tcp_if_include."
    )
    data_ifname: str = knob("", "--data-ifname", "Data-plane interface for GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME.")
    k8s_image: str = knob("", "--k8s-image", "k8s launcher: container image with gpufabric and torch.", ("k8s",))
    k8s_namespace: str = knob("default", "--k8s-namespace", "k8s launcher: namespace of the TrainJob.", ("k8s",))
    k8s_rdma: str = knob(
        "",
        "--k8s-rdma",
        "k8s launcher: RDMA resources per node, RESOURCE[=COUNT],..."
        " (default rdma/rdma_shared_device_a=1 for nccl; none).",
        ("k8s",),
    )
    site: SiteOptions = field(default_factory=SiteOptions)

    def resolve(
        self, *, lab_hosts: LabHosts | None = None, have_gpu: Callable[[], bool] | None = None, **override: Any
    ) -> LaunchOptions:
        """The checked :class:`LaunchOptions` (InputError, exit 2, naming the flag otherwise).

        ``lab_hosts`` reads a lab's hosts (``--lab``); ``have_gpu`` says whether this machine
        has a GPU (asked only when the ranks run here; default: nvidia-smi on PATH).
        ``override`` replaces fields first (``backend="gloo"``).
        """
        req = replace(self, **override) if override else self
        get(req.launcher)  # an unknown launcher is the first thing to say
        if not 0 <= req.master_port <= 65535:
            raise InputError(f"--master-port {req.master_port}: not a port (0: one per job)")
        check_range("--gpus-per-node", req.nproc, 1, MAX_RANKS_PER_NODE)
        check_range("--nodes", req.nodes, 1, MAX_NODES)
        nodes, hosts = req.nodes, []
        if req.lab:
            if lab_hosts is None:
                raise InputError("--lab: this command does not run on a lab")
            hosts = lab_hosts(req.lab, req.plane)
            nodes = nodes if nodes > 1 else len(hosts)
        elif req.hosts:
            hosts = parse_hosts(req.hosts)
        backend = resolve_backend(
            req.backend,
            launcher=req.launcher,
            hosts=hosts,
            have_gpu=(have_gpu or _nvidia_smi)(),
            hostfile=req.site.hostfile,
        )
        return LaunchOptions(
            launcher=req.launcher,
            nodes=nodes,
            nproc=req.nproc,
            hosts=tuple(hosts),
            master_port=req.master_port,
            timeout_s=duration_s("--timeout", req.timeout),
            init_timeout_s=duration_s("--init-timeout", req.init_timeout),
            op_timeout_s=duration_s("--op-timeout", req.op_timeout),
            backend=backend,
            work_dir=req.work_dir,
            slurm_mode=req.slurm_mode,
            control_ifname=req.control_ifname,
            data_ifname=req.data_ifname,
            k8s_image=req.k8s_image,
            k8s_namespace=req.k8s_namespace,
            k8s_rdma=req.k8s_rdma,
            site=req.site,
        )


def _nvidia_smi() -> bool:
    """NCCL needs a GPU; nvidia-smi on PATH is the cheap test (only asked when the ranks run here)."""
    import shutil

    return shutil.which("nvidia-smi") is not None
