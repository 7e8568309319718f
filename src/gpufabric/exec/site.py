"""What a real site asks of a launch: Slurm placement and accounting, containers, binding, k8s extras.

One record, :class:`SiteOptions`, declares every knob once: its field metadata (flag, help,
the launchers it applies to) is what ``cli/request_options.py`` turns into command-line options, and
:func:`slurm_args` / :func:`mpirun_binding` turn it into the engines' own flags. Values reach
srun, sbatch and mpirun as argv elements or ``#SBATCH`` lines (never a shell), so each is
checked against the syntax the engine documents before it gets there.

Sources (as_of 2026-12): Slurm srun(1)/sbatch(1) man pages, slurm-wlm 22.05
(https://slurm.schedmd.com/srun.html: --partition, --account, --qos, --reservation,
--constraint, --exclusive, --time, --cpu-bind, --gpu-bind); NVIDIA pyxis README
(https://github.com/NVIDIA/pyxis: --container-image, --container-mounts); Open MPI 4.1
mpirun(1) (--bind-to, --map-by).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from gpufabric.errors import InputError
from gpufabric.exec.knobs import knob

SLURM = ("slurm",)
K8S = ("k8s",)


# Slurm object names (partition, account, QOS, reservation): letters, digits, '_', '.', '-';
# never a leading '-' or '.'.
_SLURM_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}"
_PATTERNS: dict[str, tuple[re.Pattern[str], str]] = {
    "partition": (re.compile(rf"{_SLURM_NAME}(,{_SLURM_NAME})*"), "a partition name or a comma list (gpu,gpu-long)"),
    "account": (re.compile(_SLURM_NAME), "an account name"),
    "qos": (re.compile(_SLURM_NAME), "a QOS name"),
    "reservation": (re.compile(rf"{_SLURM_NAME}(,{_SLURM_NAME})*"), "a reservation name"),
    # Node features with Slurm's operators: a&b, a|b, [rack1*2&rack2*2], (a|b)&c.
    "constraint": (re.compile(r"[A-Za-z0-9_.:=&|*\[\]()-]{1,256}"), "node features such as h100&ib or [r1*2&r2*2]"),
    # MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED (srun --time).
    "time": (
        re.compile(
            r"\d{1,7}|\d{1,7}:\d{1,2}|\d{1,5}:\d{1,2}:\d{1,2}|\d{1,4}-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE"
        ),
        "Slurm's time format: MINUTES, HH:MM:SS or D-HH:MM:SS",
    ),
    # pyxis/enroot: [USER@][REGISTRY#]IMAGE[:TAG|@DIGEST], or a squashfs file by absolute path.
    "container_image": (
        re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@#+-]{0,254}|/[A-Za-z0-9._/+-]{1,4095}"),
        "an image such as nvcr.io#nvidia/pytorch:24.09-py3 or /shared/images/torch.sqsh",
    ),
    "cpu_bind": (
        re.compile(
            r"(verbose,)?(none|rank|cores|sockets|threads|ldoms|rank_ldom|(map|mask)_(cpu|ldom):[0-9A-Fa-fx,*]+)"
        ),
        "none, cores, sockets, threads, ldoms, rank, map_cpu:LIST or mask_cpu:LIST",
    ),
    "gpu_bind": (
        re.compile(r"(verbose,)?(none|closest|single:\d{1,3}|(map|mask)_gpu:[0-9A-Fa-fx,*]+)"),
        "none, closest, single:N, map_gpu:LIST or mask_gpu:LIST",
    ),
    "hostfile": (re.compile(r"[^\x00-\x1f]{1,4096}"), "a path"),
    "k8s_kind": (re.compile(r"trainjob|pytorchjob|mpijob"), "trainjob, pytorchjob or mpijob"),
    # A NetworkAttachmentDefinition, [NAMESPACE/]NAME[@IFNAME] (multus annotation syntax), comma list.
    "k8s_network": (
        re.compile(
            r"([a-z0-9-]{1,63}/)?[a-z0-9.-]{1,253}(@[A-Za-z0-9_.-]{1,15})?(,([a-z0-9-]{1,63}/)?[a-z0-9.-]{1,253}(@[A-Za-z0-9_.-]{1,15})?)*"
        ),
        "NAME, NAMESPACE/NAME or NAME@IFNAME of a NetworkAttachmentDefinition, comma-separated",
    ),
    "k8s_queue": (re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?"), "a Kueue LocalQueue name (DNS-1123)"),
}

#: Slurm --cpu-bind values and the Open MPI --bind-to object they mean.
MPI_BIND_TO = {"none": "none", "cores": "core", "sockets": "socket", "threads": "hwthread", "ldoms": "numa"}


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteOptions:
    """Site knobs of a launch; empty means the site's own default (the engine is not told)."""

    partition: str = knob("", "--partition", "Slurm partition (srun/sbatch -p).", SLURM)
    account: str = knob("", "--account", "Slurm account to charge (-A).", SLURM)
    qos: str = knob("", "--qos", "Slurm quality of service (-q).", SLURM)
    reservation: str = knob("", "--reservation", "Slurm reservation to run in.", SLURM)
    constraint: str = knob("", "--constraint", "Slurm node features, e.g. 'h100&ib' or '[r1*2&r2*2]' (-C).", SLURM)
    exclusive: bool = knob(
        True,
        "--exclusive",
        "Whole nodes for the job (default: a benchmark shares no node); --shared lets Slurm pack other jobs.",
        SLURM,
        off="--shared",
    )
    time: str = knob("", "--time", "Slurm time limit (MINUTES, HH:MM:SS, D-HH:MM:SS; default: from --timeout).", SLURM)
    container_image: str = knob(
        "",
        "--container-image",
        "Run the ranks in this image (pyxis/enroot, e.g. nvcr.io#nvidia/pytorch:24.09-py3); the run directory is mounted.",
        SLURM,
    )
    cpu_bind: str = knob(
        "",
        "--cpu-bind",
        "CPU binding per rank: Slurm --cpu-bind (cores, sockets, ldoms, none, map_cpu:...); mpirun --bind-to.",
        ("slurm", "mpirun"),
    )
    gpu_bind: str = knob(
        "", "--gpu-bind", "GPU binding per rank (Slurm --gpu-bind: closest, single:1, map_gpu:...).", SLURM
    )
    hostfile: str = knob(
        "",
        "--hostfile",
        "mpirun hosts from an Open MPI hostfile (else --hosts, else the Slurm/PBS allocation).",
        ("mpirun",),
    )
    k8s_kind: str = knob(
        "trainjob",
        "--k8s-kind",
        "k8s job kind: trainjob (Kubeflow Trainer v2), pytorchjob (training-operator v1), mpijob.",
        K8S,
    )
    k8s_network: str = knob(
        "",
        "--k8s-network",
        "Multus network(s) for RDMA, NAME[@IFNAME] of a NetworkAttachmentDefinition (k8s.v1.cni.cncf.io/networks).",
        K8S,
    )
    k8s_queue: str = knob("", "--k8s-queue", "Kueue LocalQueue (label kueue.x-k8s.io/queue-name).", K8S)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value or f.name not in _PATTERNS:
                continue
            pattern, expected = _PATTERNS[f.name]
            if not pattern.fullmatch(value):
                raise InputError(f"{f.metadata['flag']} {value!r}: give {expected}")


def slurm_args(site: SiteOptions, *, run_dir: str) -> list[str]:
    """srun/sbatch flags for the job (the same list becomes ``#SBATCH`` lines)."""
    out = [
        f"--{name.replace('_', '-')}={getattr(site, name)}"
        for name in ("partition", "account", "qos", "reservation", "constraint")
        if getattr(site, name)
    ]
    if site.exclusive:
        out.append("--exclusive")
    if site.container_image:
        # pyxis: the ranks read their config and write records in the run directory, at the same path.
        out += [f"--container-image={site.container_image}", f"--container-mounts={run_dir}:{run_dir}"]
    return out


def step_args(site: SiteOptions, *, gpus_per_node: int) -> list[str]:
    """Per-rank binding flags of the job step (srun, in both srun and sbatch mode)."""
    out = []
    if site.cpu_bind:
        out.append(f"--cpu-bind={site.cpu_bind}")
    if site.gpu_bind:
        if not gpus_per_node:
            raise InputError(f"--gpu-bind {site.gpu_bind}: no GPUs are requested (--backend gloo)")
        out.append(f"--gpu-bind={site.gpu_bind}")
    return out


def mpirun_binding(site: SiteOptions) -> list[str]:
    """Open MPI's --bind-to for ``--cpu-bind``; nothing when unset (Open MPI's default: cores for
    up to 2 ranks, sockets beyond, none when oversubscribed)."""
    if not site.cpu_bind:
        return []
    value = site.cpu_bind.removeprefix("verbose,")
    if value not in MPI_BIND_TO:
        raise InputError(f"--cpu-bind {site.cpu_bind!r}: mpirun binds to one of {', '.join(MPI_BIND_TO)}")
    return ["--bind-to", MPI_BIND_TO[value], *(["--report-bindings"] if site.cpu_bind.startswith("verbose,") else [])]
