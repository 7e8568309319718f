"""--launcher k8s for RDMA: GPUs and RDMA devices, IPC_LOCK, /dev/shm, multus, Kueue; three job kinds.

Each manifest is checked against its operator's published CRD schema (tests/data/k8s, from the
real repositories) with gpufabric.exec.crd, and the TrainJob also against kubeflow-trainer-api.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml

from gpufabric.exec import crd, k8s

DATA = Path(__file__).parent.parent / "data" / "k8s"
CRDS = {
    "TrainJob": ("trainer.kubeflow.org_trainjobs.yaml.gz", "v1alpha1"),
    "PyTorchJob": ("kubeflow.org_pytorchjobs.yaml.gz", "v1"),
    "MPIJob": ("kubeflow.org_mpijobs.yaml.gz", "v2beta1"),
}
_SCHEMAS: dict[str, dict] = {}


def schema(kind: str) -> dict:
    if kind not in _SCHEMAS:
        name, version = CRDS[kind]
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are 0.3-0.7 MB of YAML
        _SCHEMAS[kind] = crd.crd_schema(yaml.load(gzip.decompress((DATA / name).read_bytes()), Loader=loader), version)
    return _SCHEMAS[kind]


def _manifest(cli, tmp_path, monkeypatch, kind: str, *extra: str) -> tuple[dict, str]:
    monkeypatch.setenv("PATH", str(tmp_path))  # a GPU-less submitting host
    code, out, err = cli(
        "bench",
        "collectives",
        "--launcher",
        "k8s",
        "--k8s-image",
        "ghcr.io/acme/gpufabric:0.1",
        "--k8s-kind",
        kind,
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        *extra,
        "--dry-run",
        "--format",
        "json",
    )
    assert code == 0, err
    text = json.loads(out)["sbatch_script"]
    return yaml.safe_load(text), text


def _env_values(node, name):
    """Every literal value of env var ``name`` anywhere in the manifest."""
    if isinstance(node, dict):
        if node.get("name") == name and "value" in node:
            yield node["value"]
        for value in node.values():
            yield from _env_values(value, name)
    elif isinstance(node, list):
        for item in node:
            yield from _env_values(item, name)


def _pods(doc: dict) -> list[dict]:
    """The pod templates that run ranks (TrainJob: the runtime patch of its 'node' job)."""
    if doc["kind"] == "TrainJob":
        (patch,) = doc["spec"]["runtimePatches"]
        (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        return [job["template"]["spec"]["template"]]
    if doc["kind"] == "PyTorchJob":
        return [r["template"] for r in doc["spec"]["pytorchReplicaSpecs"].values()]
    return [doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]]


@pytest.mark.parametrize("kind", ["trainjob", "pytorchjob", "mpijob"])
def test_manifest_requests_gpus_and_rdma_with_ipc_lock_and_shm_and_no_gloo(cli, tmp_path, monkeypatch, kind):
    """Bar: from a GPU-less host, GPUs and RDMA requested, IPC_LOCK, memory-backed /dev/shm, no gloo."""
    doc, text = _manifest(cli, tmp_path, monkeypatch, kind, "--k8s-network", "rdma-net@net1", "--k8s-queue", "team-a")
    assert crd.problems(doc, schema(doc["kind"])) == []
    if kind == "trainjob":
        pytest.importorskip("kubeflow_trainer_api.models")
        k8s.validate(doc)  # and the operator's own API models keep every field
        requests = doc["spec"]["trainer"]["resourcesPerNode"]["requests"]
        containers = [c for pod in _pods(doc) for c in pod["spec"]["containers"]]
    else:
        containers = [c for pod in _pods(doc) for c in pod["spec"]["containers"]]
        requests = containers[0]["resources"]["requests"]
    assert requests == {"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "1"}
    for container in containers:
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    for pod in _pods(doc):
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["spec"]["volumes"]
        assert pod["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "rdma-net@net1"}
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "gloo" not in text.lower() and '"backend": "nccl"' in text
    envs = list(_env_values(doc, "NCCL_IB_DISABLE"))
    assert envs and set(envs) == {"0"}  # NCCL uses the RDMA devices it was given


def test_pytorchjob_and_mpijob_shapes():
    common = {
        "name": "gf-x",
        "namespace": "train",
        "image": "img:1",
        "module": "gpufabric.bench.probes.train",
        "config": {"steps": 3},
        "nproc": 4,
        "gpus_per_node": 4,
        "rdma": {"rdma/ib": 2},
    }
    doc = k8s.pytorch_job(nodes=3, **common)
    specs = doc["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"], doc["spec"]["nprocPerNode"]) == (1, 2, "4")
    assert specs["Master"]["template"]["spec"]["containers"][0]["name"] == "pytorch"  # the operator's contract
    assert "Worker" not in k8s.pytorch_job(nodes=1, **common)["spec"]["pytorchReplicaSpecs"]
    doc = k8s.mpi_job(nodes=3, **common)
    launcher = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:3] == ["mpirun", "-np", "12"] and "resources" not in launcher
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["MASTER_ADDR"] == "gf-x-worker-0.gf-x-worker.train.svc"
    # ranks started over ssh see no pod env: every variable is forwarded by mpirun
    assert all(f"-x {k}" in " ".join(launcher["command"]) for k in env)
    assert doc["spec"]["slotsPerWorker"] == 4 and doc["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 3
    for d in (k8s.pytorch_job(nodes=3, **common), doc):
        assert crd.problems(d, schema(d["kind"])) == []


def test_gloo_job_has_no_devices_and_no_ipc_lock():
    doc = k8s.pytorch_job(
        name="gf-y", namespace="t", image="img:1", module="m", config={}, nodes=2, nproc=2, gpus_per_node=0, rdma={}
    )
    (container,) = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert "resources" not in container and "securityContext" not in container
    assert {e["name"]: e.get("value") for e in container["env"]}["GLOO_SOCKET_IFNAME"] == "eth0"
    assert crd.problems(doc, schema("PyTorchJob")) == []


def test_the_schema_check_can_fail():
    doc = k8s.pytorch_job(
        name="gf-z", namespace="t", image="img:1", module="m", config={}, nodes=2, nproc=2, gpus_per_node=2, rdma={}
    )
    bad = json.loads(json.dumps(doc))
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    found = crd.problems(bad, schema("PyTorchJob"))
    assert any("securityContxt: unknown to the schema" in p for p in found)
    assert any("Master.replicas: str where the schema has integer" in p for p in found)
    mpi = k8s.mpi_job(
        name="gf-z", namespace="t", image="img:1", module="m", config={}, nodes=2, nproc=2, gpus_per_node=2, rdma={}
    )
    mpi["spec"]["mpiImplementation"] = "LAM"
    assert any("mpiImplementation: 'LAM' not in" in p for p in crd.problems(mpi, schema("MPIJob")))


@pytest.mark.parametrize(
    ("flag", "value"), [("--k8s-network", "Bad_Net"), ("--k8s-queue", "Team A"), ("--k8s-kind", "jobset")]
)
def test_bad_k8s_values_exit_2(cli, flag, value):
    code, _, err = cli("bench", "collectives", "--launcher", "k8s", "--k8s-image", "img:1", flag, value, "--dry-run")
    assert code == 2 and flag in err and "Traceback" not in err


def test_k8s_options_need_the_k8s_launcher(cli):
    code, _, err = cli("bench", "collectives", "--launcher", "local", "--k8s-queue", "q", "--dry-run")
    assert code == 2 and "--k8s-queue has no effect without --launcher k8s" in err
