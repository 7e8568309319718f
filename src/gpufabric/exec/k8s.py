"""``--launcher k8s``: a Kubeflow Trainer TrainJob that runs a probe on N pods x nproc ranks.

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


def train_job(
    *,
    name: str,
    namespace: str,
    image: str,
    module: str,
    config: Mapping[str, Any],
    nodes: int,
    nproc: int,
    gpus_per_node: int,
    rdma: Mapping[str, int],
    env: Mapping[str, str] | None = None,
    control_ifname: str = POD_IFNAME,
    data_ifname: str = "",
    runtime: str = RUNTIME,
) -> dict[str, Any]:
    """The TrainJob as a dict (apply it as JSON or YAML)."""
    for label, value in (("name", name), ("namespace", namespace), ("runtime", runtime)):
        if not _NAME.fullmatch(value):
            raise InputError(f"--k8s-{label} {value!r}: use lowercase letters, digits and '-' (DNS-1123)")
    if not _IMAGE.fullmatch(image):
        raise InputError(f"--k8s-image {image!r}: give an image reference such as ghcr.io/org/gpufabric:0.1")
    if nodes < 1 or nproc < 1:
        raise InputError(f"--nodes and --nproc must be >= 1, got {nodes} and {nproc}")
    for key in env or {}:
        if not ENV_KEY_RE.fullmatch(key):
            raise InputError(f"environment name {key!r}: use letters, digits and '_'")
    for ifname in (control_ifname, data_ifname):
        if ifname and not IFNAME_RE.fullmatch(ifname):
            raise InputError(f"interface name {ifname!r}: 1-15 characters of letters, digits, '.', '_' or '-'")
    data_if = data_ifname or control_ifname
    variables: dict[str, str] = {
        **(env or {}),
        # Bootstrap and rendezvous on the pod network (the control plane); '=' means exact name.
        "NCCL_SOCKET_IFNAME": f"={control_ifname}",
        "NCCL_SOCKET_FAMILY": "AF_INET",
        "GLOO_SOCKET_IFNAME": data_if,
        "NCCL_IB_DISABLE": "0" if rdma else "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "GPUFABRIC_PROBE_CONFIG": json.dumps(dict(config), sort_keys=True),
    }
    env_list: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(variables.items())]
    # Each rank's host in the records is the Kubernetes node the pod landed on.
    env_list += [
        {"name": "GPUFABRIC_HOST", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    resources = {**({GPU_RESOURCE: gpus_per_node} if gpus_per_node else {}), **dict(rdma)}
    quantities = {k: str(v) for k, v in resources.items()}
    # The shell writes the config the ranks read and gives torchrun this pod's address.
    script = (
        f'printf %s "$GPUFABRIC_PROBE_CONFIG" > {CONFIG_PATH} && exec torchrun --local-addr="$POD_IP"'
        f" --max-restarts=0 --module {shlex.quote(module)} {CONFIG_PATH}"
    )
    trainer: dict[str, Any] = {
        "image": image,
        "command": ["/bin/sh", "-c", script],
        "numNodes": nodes,
        "numProcPerNode": nproc,
        "env": env_list,
    }
    if quantities:
        trainer["resourcesPerNode"] = {"requests": dict(quantities), "limits": dict(quantities)}
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpufabric", "gpufabric/probe": module.rsplit(".", 1)[-1]},
        },
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": runtime},
            "trainer": trainer,
        },
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
    """A launch plan whose one command applies the TrainJob and follows it to the end.

    ``rdma`` is ``--k8s-rdma`` (RESOURCE[=COUNT],...; empty: the shared-device plugin's
    default resource when the backend is nccl, none for gloo). The manifest is validated
    here when kubeflow-trainer-api is installed, so ``--dry-run`` never prints a rejected one.
    """
    if not image:
        raise InputError("--launcher k8s needs --k8s-image (a container image with gpufabric and torch)")
    resources = parse_resources(rdma) if rdma else ({DEFAULT_RDMA_RESOURCE: 1} if backend == "nccl" else {})
    name = f"gpufabric-{kind}-{secrets.token_hex(3)}"
    doc = train_job(
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
    )
    if importlib.util.find_spec("kubeflow_trainer_api") is not None:
        validate(doc)
    manifest = str(out_dir / "trainjob.yaml")
    return LaunchPlan(
        launcher="k8s",
        commands=(
            Command(argv=tuple(follow_argv(manifest, name=name, namespace=namespace, python=python)), host="k8s"),
        ),
        num_ranks=nodes * nproc,
        hosts=(),
        script=to_yaml(doc),
        script_path=manifest,
    )


def to_yaml(doc: Mapping[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(dict(doc), sort_keys=False, width=1000)


def follow_argv(manifest: str, *, name: str, namespace: str, python: str) -> list[str]:
    """The command :func:`execute` runs: apply, wait for the TrainJob, print its logs."""
    return [python, "-m", "gpufabric.exec.k8s", "follow", manifest, name, namespace]


def follow(
    manifest: str, name: str, namespace: str, *, poll_s: float = 2.0, kubectl: Sequence[str] = ("kubectl",)
) -> int:
    """kubectl apply, then poll the TrainJob's conditions; stream its pods' logs; 0 when Complete."""
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
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    logs = None
    try:
        while True:
            got = k("get", "trainjob", name, "-o", "json", timeout=60)
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
                print(f"trainjob {name} {state}", flush=True)
                return 0 if state == "Complete" else 1
            time.sleep(poll_s)
    finally:
        if logs is not None:
            try:
                logs.wait(timeout=10)
            except subprocess.TimeoutExpired:
                logs.terminate()


def _state(doc: Mapping[str, Any]) -> str:
    """Complete / Failed from the TrainJob's conditions, else Running once its JobSet exists."""
    conditions = {c.get("type"): c.get("status") for c in doc.get("status", {}).get("conditions", [])}
    for kind in ("Complete", "Failed"):
        if conditions.get(kind) == "True":
            return kind
    return "Running" if doc.get("status", {}).get("jobsStatus") else "Pending"


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "follow":
        sys.exit(follow(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.exit("usage: python -m gpufabric.exec.k8s follow MANIFEST NAME NAMESPACE")
