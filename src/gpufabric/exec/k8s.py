"""``--launcher k8s``: a Kubeflow TrainJob, PyTorchJob or MPIJob that runs a probe on N pods x nproc ranks.

The manifest targets Kubeflow Trainer v2 (``trainer.kubeflow.org/v1alpha1`` TrainJob,
https://www.kubeflow.org/docs/components/trainer/, as_of 2026-12) and its
``torch-distributed`` ClusterTrainingRuntime. That runtime starts one pod per node and
sets ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` and
``PET_MASTER_PORT``, which torchrun reads as the defaults of its own flags; the master is
node 0's pod behind the job's headless Service, i.e. on the pod network. The pod network
is the control plane here: the rendezvous binds to it (``--local-addr=$(POD_IP)``) and
NCCL's bootstrap is pinned to its interface; collectives use the RDMA devices the pod
requests (``--k8s-rdma``), as device plugins hand them out (for example the
k8s-rdma-shared-dev-plugin's ``rdma/rdma_shared_device_a``, EKS ``vpc.amazonaws.com/efa``).

Every pod that runs ranks is made RDMA-ready: the GPUs (``nvidia.com/gpu`` = ranks per
node) and RDMA resources as extended resources, ``IPC_LOCK`` (memory registration pins
pages), a memory-backed ``/dev/shm`` (NCCL's shared-memory transport outgrows the 64 MiB
container default), the multus ``k8s.v1.cni.cncf.io/networks`` annotation for a named
network (``--k8s-network``, e.g. the NVIDIA network operator's RDMA network) and the Kueue
``kueue.x-k8s.io/queue-name`` label (``--k8s-queue``). ``--k8s-kind`` picks the operator:
Kubeflow Trainer v2 TrainJob (the pod changes go in as a ``runtimePatches`` entry), the
training-operator v1 PyTorchJob, or the mpi-operator v2beta1 MPIJob. An NCCL job carries
nothing of gloo.

The probe config travels in the manifest (an env var written to a file before torchrun),
so nothing needs a shared volume; records stay in the pods and the job's logs are the
output. :func:`validate` checks the manifest against the operator's published API models
(PyPI ``kubeflow-trainer-api``), and also that they keep every field we wrote, because the
generated models silently drop unknown keys.
"""

from __future__ import annotations

import importlib.util
import json
import re
import secrets
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufabric.errors import InputError
from gpufabric.exec.launch import ENV_KEY_RE, IFNAME_RE, Command, LaunchPlan
from gpufabric.exec.site import SiteOptions

API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "torch-distributed"
GPU_RESOURCE = "nvidia.com/gpu"
#: Resource name of the Mellanox/NVIDIA k8s-rdma-shared-dev-plugin's default config
#: (https://github.com/Mellanox/k8s-rdma-shared-dev-plugin README, as_of 2026-12).
DEFAULT_RDMA_RESOURCE = "rdma/rdma_shared_device_a"
#: Pod-network interface inside a pod (the CNI's default name).
POD_IFNAME = "eth0"
CONFIG_PATH = "/tmp/gpufabric-config.json"
#: The torch-distributed runtime's replicated job and trainer container (kubeflow/trainer
#: manifests/base/runtimes/torch_distributed.yaml, as_of 2026-08).
TRAINER_JOB = "node"
TRAINER_CONTAINER = "node"
PATCH_MANAGER = "gpufabric.dev/launcher"
#: Pods have their own network namespaces: a fixed port inside one never meets another job's.
MPI_MASTER_PORT = 29500

# DNS-1123 subdomain (object names) and label (namespace), Kubernetes API conventions.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# Extended resource names: an optional DNS prefix and a name (k8s.io/apimachinery qualified name).
_RESOURCE = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")


def parse_resources(text: str) -> dict[str, int]:
    """``rdma/ib=1,vpc.amazonaws.com/efa=4`` -> {name: count}; ``none`` -> {}."""
    if text.strip() in ("", "none"):
        return {}
    out: dict[str, int] = {}
    for item in (t.strip() for t in text.split(",") if t.strip()):
        name, sep, count = item.partition("=")
        if not _RESOURCE.fullmatch(name) or (sep and not count.isdigit()):
            raise InputError(f"--k8s-rdma entry {item!r}: use RESOURCE[=COUNT], e.g. rdma/rdma_shared_device_a=1")
        value = int(count) if sep else 1
        if not 1 <= value <= 1024:
            raise InputError(f"--k8s-rdma entry {item!r}: count must be 1-1024")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """What every job kind runs: N pods x nproc ranks of ``python -m module`` with this config."""

    name: str
    namespace: str
    image: str
    module: str
    config: Mapping[str, Any]
    nodes: int
    nproc: int
    gpus_per_node: int
    rdma: Mapping[str, int]
    env: Mapping[str, str] = field(default_factory=dict)
    control_ifname: str = POD_IFNAME
    data_ifname: str = ""
    backend: str = ""  # '' = nccl when GPUs are requested, else gloo
    networks: str = ""  # multus NetworkAttachmentDefinitions (k8s.v1.cni.cncf.io/networks)
    queue: str = ""  # Kueue LocalQueue

    def __post_init__(self) -> None:
        for label, value in (("name", self.name), ("namespace", self.namespace)):
            if not _NAME.fullmatch(value):
                raise InputError(f"--k8s-{label} {value!r}: use lowercase letters, digits and '-' (DNS-1123)")
        if not _IMAGE.fullmatch(self.image):
            raise InputError(f"--k8s-image {self.image!r}: give an image reference such as ghcr.io/org/gpufabric:0.1")
        if self.nodes < 1 or self.nproc < 1:
            raise InputError(f"--nodes and --nproc must be >= 1, got {self.nodes} and {self.nproc}")
        for key in self.env:
            if not ENV_KEY_RE.fullmatch(key):
                raise InputError(f"environment name {key!r}: use letters, digits and '_'")
        for ifname in (self.control_ifname, self.data_ifname):
            if ifname and not IFNAME_RE.fullmatch(ifname):
                raise InputError(f"interface name {ifname!r}: 1-15 characters of letters, digits, '.', '_' or '-'")
        SiteOptions(k8s_network=self.networks, k8s_queue=self.queue)  # the same checks as the options

    @property
    def nccl(self) -> bool:
        return (self.backend or ("nccl" if self.gpus_per_node else "gloo")) == "nccl"

    def variables(self) -> dict[str, str]:
        """The ranks' environment (literal values)."""
        out: dict[str, str] = {
            **self.env,
            # Bootstrap and rendezvous on the pod network (the control plane); '=' means exact name.
            "NCCL_SOCKET_IFNAME": f"={self.control_ifname}",
            "NCCL_SOCKET_FAMILY": "AF_INET",
            "NCCL_IB_DISABLE": "0" if self.rdma else "1",
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "GPUFABRIC_PROBE_CONFIG": json.dumps(dict(self.config), sort_keys=True),
        }
        if not self.nccl:  # gloo's own transport; an NCCL job carries nothing of gloo
            out["GLOO_SOCKET_IFNAME"] = self.data_ifname or self.control_ifname
        return out

    def env_list(self) -> list[dict[str, Any]]:
        env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(self.variables().items())]
        # Each rank's host in the records is the Kubernetes node the pod landed on.
        return env + [
            {"name": "GPUFABRIC_HOST", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]

    def resources(self) -> dict[str, Any]:
        """GPUs and RDMA devices as extended resources (requests = limits, as the device plugins require)."""
        quantities = {
            **({GPU_RESOURCE: str(self.gpus_per_node)} if self.gpus_per_node else {}),
            **{k: str(v) for k, v in self.rdma.items()},
        }
        return {"requests": dict(quantities), "limits": dict(quantities)} if quantities else {}

    def labels(self) -> dict[str, str]:
        out = {"app.kubernetes.io/managed-by": "gpufabric", "gpufabric/probe": self.module.rsplit(".", 1)[-1]}
        if self.queue:
            out[KUEUE_QUEUE_LABEL] = self.queue
        return out

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "labels": self.labels()}

    def pod_annotations(self) -> dict[str, str]:
        return {MULTUS_ANNOTATION: self.networks} if self.networks else {}

    def security_context(self) -> dict[str, Any]:
        # Registering RDMA memory pins pages (ibv_reg_mr): beyond RLIMIT_MEMLOCK without IPC_LOCK.
        return {"capabilities": {"add": ["IPC_LOCK"]}} if self.rdma else {}

    def torchrun_script(self) -> str:
        """The shell that writes the config the ranks read and gives torchrun this pod's address."""
        return (
            f'printf %s "$GPUFABRIC_PROBE_CONFIG" > {CONFIG_PATH} && exec torchrun --local-addr="$POD_IP"'
            f" --max-restarts=0 --module {shlex.quote(self.module)} {CONFIG_PATH}"
        )


#: Memory-backed /dev/shm: a container's default is 64 MiB, too small for NCCL's shared-memory
#: transport and DataLoader workers (NCCL troubleshooting guide, "Docker": --shm-size).
SHM_VOLUME = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
SHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}
#: Multus: the pod's extra networks (https://github.com/k8snetworkplumbingwg/multus-cni,
#: docs/how-to-use.md, as_of 2026-12); NVIDIA network operator's RDMA networks attach this way.
MULTUS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
#: Kueue: the LocalQueue a job is admitted through (https://kueue.sigs.k8s.io/docs/, as_of 2026-12).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _container(job: JobSpec, name: str, *, command: list[str], devices: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": job.image, "command": command, "env": job.env_list()}
    if devices:
        if job.resources():
            out["resources"] = job.resources()
        if job.security_context():
            out["securityContext"] = job.security_context()
        out["volumeMounts"] = [dict(SHM_MOUNT)]
    return out


def _pod_template(job: JobSpec, containers: list[dict[str, Any]], *, devices: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if devices:
        spec["volumes"] = [json.loads(json.dumps(SHM_VOLUME))]
    out: dict[str, Any] = {"spec": spec}
    if devices and job.pod_annotations():
        out["metadata"] = {"annotations": job.pod_annotations()}
    return out


def train_job(*, runtime: str = RUNTIME, **kw: Any) -> dict[str, Any]:
    """The TrainJob (Kubeflow Trainer v2) as a dict; ``kw`` are :class:`JobSpec` fields.

    The runtime's trainer pods get IPC_LOCK, /dev/shm and the multus networks through a
    runtimePatch of its ``node`` replicated job and container (torch-distributed runtime).
    """
    if not _NAME.fullmatch(runtime):
        raise InputError(f"--k8s-runtime {runtime!r}: use lowercase letters, digits and '-' (DNS-1123)")
    job = JobSpec(**kw)
    trainer: dict[str, Any] = {
        "image": job.image,
        "command": ["/bin/sh", "-c", job.torchrun_script()],
        "numNodes": job.nodes,
        "numProcPerNode": job.nproc,
        "env": job.env_list(),
    }
    if job.resources():
        trainer["resourcesPerNode"] = job.resources()
    container: dict[str, Any] = {"name": TRAINER_CONTAINER, "volumeMounts": [dict(SHM_MOUNT)]}
    if job.security_context():
        container["securityContext"] = job.security_context()
    pod: dict[str, Any] = {"spec": {"containers": [container], "volumes": [json.loads(json.dumps(SHM_VOLUME))]}}
    if job.pod_annotations():
        pod["metadata"] = {"annotations": job.pod_annotations()}
    patch = {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {"spec": {"replicatedJobs": [{"name": TRAINER_JOB, "template": {"spec": {"template": pod}}}]}}
        },
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": job.metadata(),
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": runtime},
            "trainer": trainer,
            "runtimePatches": [patch],
        },
    }


def pytorch_job(**kw: Any) -> dict[str, Any]:
    """A training-operator v1 PyTorchJob: a Master and nodes-1 Workers, torchrun in each pod.

    The operator sets PET_NNODES, PET_NPROC_PER_NODE (from ``nprocPerNode``), PET_NODE_RANK and
    PET_MASTER_ADDR/PORT (the Master's Service), which torchrun reads as its defaults; the
    container must be named ``pytorch`` (training-operator docs, PyTorchJob, as_of v1.9).
    """
    job = JobSpec(**kw)
    command = ["/bin/sh", "-c", job.torchrun_script()]

    def replicas(count: int) -> dict[str, Any]:
        pod = _pod_template(job, [_container(job, "pytorch", command=command)])
        return {"replicas": count, "restartPolicy": "Never", "template": pod}

    specs = {"Master": replicas(1), **({"Worker": replicas(job.nodes - 1)} if job.nodes > 1 else {})}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": job.metadata(),
        "spec": {
            "nprocPerNode": str(job.nproc),
            "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": specs,
        },
    }


#: The mpi-operator's worker pods run sshd; the launcher's mpirun reaches them over ssh
#: (mpi-operator v2 README: the image needs openssh-server; as_of v0.6).
MPI_WORKER_COMMAND = ["/usr/sbin/sshd", "-De"]


def mpi_job(**kw: Any) -> dict[str, Any]:
    """A mpi-operator v2beta1 MPIJob: one launcher running mpirun over ``nodes`` worker pods.

    Ranks started over ssh see none of the worker pod's env, so mpirun forwards every
    variable (``-x``) from the launcher; rank 0's pod is the rendezvous, by the headless
    Service the operator creates (``NAME-worker``); a rank's host is its pod's hostname.
    """
    job = JobSpec(**kw)
    master = f"{job.name}-worker-0.{job.name}-worker.{job.namespace}.svc"
    variables = {**job.variables(), "MASTER_ADDR": master, "MASTER_PORT": str(MPI_MASTER_PORT)}
    rank = f'printf %s "$GPUFABRIC_PROBE_CONFIG" > {CONFIG_PATH} && exec python3 -m {shlex.quote(job.module)} {CONFIG_PATH}'
    mpirun = ["mpirun", "-np", str(job.nodes * job.nproc), "--map-by", "slot", "--bind-to", "none"]
    for key in sorted(variables):
        mpirun += ["-x", key]
    mpirun += ["/bin/sh", "-c", rank]
    launcher_env = [{"name": k, "value": v} for k, v in sorted(variables.items())]
    launcher = {"name": "launcher", "image": job.image, "command": mpirun, "env": launcher_env}
    worker = _container(job, "worker", command=list(MPI_WORKER_COMMAND))
    worker.pop("env")
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": job.metadata(),
        "spec": {
            "slotsPerWorker": job.nproc,
            "mpiImplementation": "OpenMPI",
            "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": _pod_template(job, [launcher], devices=False),
                },
                "Worker": {"replicas": job.nodes, "restartPolicy": "Never", "template": _pod_template(job, [worker])},
            },
        },
    }


#: Job kinds: --k8s-kind -> (builder, resource name for kubectl, label that selects its pods).
KINDS = {
    "trainjob": (train_job, "trainjob", "jobset.sigs.k8s.io/jobset-name"),
    "pytorchjob": (pytorch_job, "pytorchjob", "training.kubeflow.org/job-name"),
    "mpijob": (mpi_job, "mpijob", "training.kubeflow.org/job-name"),
}


class ManifestRejected(InputError):
    """The operator's API models refuse the manifest."""


def validate(doc: Mapping[str, Any]) -> None:
    """Raise :class:`ManifestRejected` unless kubeflow-trainer-api accepts ``doc`` and keeps all of it."""
    try:
        from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob  # type: ignore[import-untyped]  # it ships no py.typed
        from pydantic import ValidationError
    except ImportError as exc:
        raise InputError("validating a TrainJob needs kubeflow-trainer-api: pip install 'gpufabric[k8s]'") from exc
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "TrainJob":
        raise ManifestRejected(
            f"not a {API_VERSION} TrainJob: apiVersion={doc.get('apiVersion')!r} kind={doc.get('kind')!r}"
        )
    try:
        model = TrainerV1alpha1TrainJob.from_dict(dict(doc))
    except (ValidationError, ValueError, TypeError) as exc:
        raise ManifestRejected(f"TrainJob rejected by kubeflow-trainer-api: {_first_line(exc)}") from exc
    kept = _normalise(model.to_dict() if model is not None else {})
    lost = _diff(_normalise(doc), kept)
    if lost:
        raise ManifestRejected(f"TrainJob field(s) unknown to kubeflow-trainer-api: {', '.join(lost[:5])}")


def _normalise(value: Any) -> Any:
    """Quantities come back from the models as their one-of wrapper's instance; compare values."""
    if isinstance(value, Mapping):
        if set(value) >= {"actual_instance"}:
            return _normalise(value["actual_instance"])
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if hasattr(value, "actual_instance"):
        return _normalise(value.actual_instance)
    return value


def _diff(want: Any, got: Any, path: str = "") -> list[str]:
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping):
            return [path or "."]
        out = []
        for key, value in want.items():
            out += (
                _diff(value, got.get(key), f"{path}.{key}" if path else key)
                if key in got
                else [f"{path}.{key}".lstrip(".")]
            )
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [path]
        return [p for i, (w, g) in enumerate(zip(want, got, strict=True)) for p in _diff(w, g, f"{path}[{i}]")]
    return [] if want == got else [f"{path} ({want!r} became {got!r})"]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(text[:3])[:300]


def plan(
    *,
    kind: str,
    module: str,
    config: Mapping[str, Any],
    out_dir: Path,
    nodes: int,
    nproc: int,
    backend: str,
    image: str,
    namespace: str,
    rdma: str,
    env: Mapping[str, str] | None = None,
    control_ifname: str = "",
    data_ifname: str = "",
    python: str = sys.executable,
    site: SiteOptions | None = None,
) -> LaunchPlan:
    """A launch plan whose one command applies the job and follows it to the end.

    ``rdma`` is ``--k8s-rdma`` (RESOURCE[=COUNT],...; empty: the shared-device plugin's
    default resource when the backend is nccl, none for gloo). ``site`` picks the job kind
    (TrainJob, PyTorchJob, MPIJob), the multus networks and the Kueue queue. A TrainJob is
    validated here when kubeflow-trainer-api is installed, so ``--dry-run`` never prints a
    rejected one (the other kinds are checked against their operators' CRDs in the tests).
    """
    if not image:
        raise InputError("--launcher k8s needs --k8s-image (a container image with gpufabric and torch)")
    site = site or SiteOptions()
    resources = parse_resources(rdma) if rdma else ({DEFAULT_RDMA_RESOURCE: 1} if backend == "nccl" else {})
    name = f"gpufabric-{kind}-{secrets.token_hex(3)}"
    builder, resource, _ = KINDS[site.k8s_kind]
    doc = builder(
        name=name,
        namespace=namespace,
        image=image,
        module=module,
        config=config,
        nodes=nodes,
        nproc=nproc,
        gpus_per_node=nproc if backend == "nccl" else 0,
        rdma=resources,
        env=env,
        control_ifname=control_ifname or POD_IFNAME,
        data_ifname=data_ifname,
        backend=backend,
        networks=site.k8s_network,
        queue=site.k8s_queue,
    )
    if resource == "trainjob" and importlib.util.find_spec("kubeflow_trainer_api") is not None:
        validate(doc)
    manifest = str(out_dir / f"{resource}.yaml")
    follow = follow_argv(manifest, name=name, namespace=namespace, python=python, kind=site.k8s_kind)
    return LaunchPlan(
        launcher="k8s",
        commands=(Command(argv=tuple(follow), host="k8s"),),
        num_ranks=nodes * nproc,
        hosts=(),
        script=to_yaml(doc),
        script_path=manifest,
    )


def to_yaml(doc: Mapping[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(dict(doc), sort_keys=False, width=1000)


def follow_argv(manifest: str, *, name: str, namespace: str, python: str, kind: str = "trainjob") -> list[str]:
    """The command :func:`execute` runs: apply, wait for the job, print its logs."""
    return [python, "-m", "gpufabric.exec.k8s", "follow", manifest, name, namespace, kind]


def follow(
    manifest: str,
    name: str,
    namespace: str,
    *,
    kind: str = "trainjob",
    poll_s: float = 2.0,
    kubectl: Sequence[str] = ("kubectl",),
) -> int:
    """kubectl apply, then poll the job's conditions; stream its pods' logs; 0 when it completed."""
    import subprocess
    import time

    def k(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*kubectl, "-n", namespace, *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
            **kw,
        )

    applied = k("apply", "-f", manifest)
    sys.stdout.write(applied.stdout)
    if applied.returncode:
        sys.stderr.write(applied.stderr)
        return applied.returncode
    _, resource, label = KINDS[kind]
    selector = f"{label}={name}"
    logs = None
    try:
        while True:
            got = k("get", resource, name, "-o", "json", timeout=60)
            if got.returncode:
                sys.stderr.write(got.stderr)
                return 1
            state = _state(json.loads(got.stdout))
            if logs is None and state in ("Running", "Complete", "Failed"):
                logs = subprocess.Popen(
                    [*kubectl, "-n", namespace, "logs", "-f", "--prefix", "--max-log-requests=64", "-l", selector],
                    stdin=subprocess.DEVNULL,
                )
            if state in ("Complete", "Failed"):
                print(f"{resource} {name} {state}", flush=True)
                return 0 if state == "Complete" else 1
            time.sleep(poll_s)
    finally:
        if logs is not None:
            try:
                logs.wait(timeout=10)
            except subprocess.TimeoutExpired:
                logs.terminate()


def _state(doc: Mapping[str, Any]) -> str:
    """Complete / Failed from the job's conditions, else Running once its pods exist.

    TrainJob says Complete; the kubeflow.org v1 jobs and MPIJob say Succeeded (and Running).
    """
    status = doc.get("status", {})
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions", [])}
    if conditions.get("Complete") == "True" or conditions.get("Succeeded") == "True":
        return "Complete"
    if conditions.get("Failed") == "True":
        return "Failed"
    running = status.get("jobsStatus") or conditions.get("Running") == "True" or status.get("replicaStatuses")
    return "Running" if running else "Pending"


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "follow" and (sys.argv[5:] or ["trainjob"])[0] in KINDS:
        sys.exit(follow(sys.argv[2], sys.argv[3], sys.argv[4], kind=(sys.argv[5:] or ["trainjob"])[0]))
    sys.exit("usage: python -m gpufabric.exec.k8s follow MANIFEST NAME NAMESPACE [trainjob|pytorchjob|mpijob]")
