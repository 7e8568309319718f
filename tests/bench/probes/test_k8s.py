"""--launcher k8s: the Kubeflow Trainer TrainJob, checked against the operator's published API models."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess

import pytest

from gpufabric.errors import InputError
from gpufabric.exec import k8s

api = pytest.importorskip("kubeflow_trainer_api.models", reason="pip install 'gpufabric[test]' (kubeflow-trainer-api)")

MOD = "gpufabric.bench.probes.collectives"


def _job(**kw):
    args = {
        "name": "gf-coll",
        "namespace": "train",
        "image": "ghcr.io/acme/gpufabric:0.1",
        "module": MOD,
        "config": {"ops": ["all_reduce"], "out_dir": "/tmp/r"},
        "nodes": 2,
        "nproc": 8,
        "gpus_per_node": 8,
        "rdma": {"rdma/rdma_shared_device_a": 1},
    }
    return k8s.train_job(**{**args, **kw})


def _env(doc):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in doc["spec"]["trainer"]["env"]}


def test_rendered_trainjob_is_accepted_by_the_api_models():
    doc = _job()
    k8s.validate(doc)  # raises on anything the models reject or drop
    model = api.TrainerV1alpha1TrainJob.from_dict(doc)
    trainer = model.spec.trainer
    assert (model.spec.runtime_ref.name, trainer.num_nodes, trainer.num_proc_per_node) == ("torch-distributed", 2, 8)
    requests = {k: v.actual_instance for k, v in trainer.resources_per_node.requests.items()}
    assert requests == {"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "1"}
    env = _env(doc)
    assert env["NCCL_SOCKET_IFNAME"] == "=eth0" and env["NCCL_IB_DISABLE"] == "0"
    assert env["GPUFABRIC_HOST"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert json.loads(env["GPUFABRIC_PROBE_CONFIG"]) == {"ops": ["all_reduce"], "out_dir": "/tmp/r"}
    script = doc["spec"]["trainer"]["command"][2]
    assert '--local-addr="$POD_IP"' in script and f"--module {MOD}" in script


def test_gloo_job_requests_no_devices():
    doc = _job(gpus_per_node=0, rdma={}, data_ifname="net1")
    k8s.validate(doc)
    assert "resourcesPerNode" not in doc["spec"]["trainer"]
    assert _env(doc)["NCCL_IB_DISABLE"] == "1" and _env(doc)["GLOO_SOCKET_IFNAME"] == "net1"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["spec"]["trainer"].__setitem__("numNodes", "2"), "valid integer"),
        (
            lambda d: d["spec"]["trainer"].__setitem__("numNode", 2),
            "unknown to kubeflow-trainer-api: spec.trainer.numNode",
        ),
        (lambda d: d["spec"].pop("runtimeRef"), "runtimeRef"),
        (lambda d: d["spec"]["trainer"]["env"].append({"name": "NCCL_DEBUG", "value": 1}), "valid string"),
        (
            lambda d: d["spec"]["trainer"]["resourcesPerNode"].__setitem__("request", {"cpu": "1"}),
            "resourcesPerNode.request",
        ),
        (lambda d: d.__setitem__("kind", "PyTorchJob"), "not a trainer.kubeflow.org/v1alpha1 TrainJob"),
    ],
)
def test_manifests_the_api_models_reject_fail(mutate, message):
    doc = copy.deepcopy(_job())
    mutate(doc)
    with pytest.raises(k8s.ManifestRejected, match=message.replace(".", r"\.")):
        k8s.validate(doc)


def test_hostile_names_are_refused():
    with pytest.raises(InputError, match="DNS-1123"):
        _job(name="Bad_Name")
    with pytest.raises(InputError, match="k8s-image"):
        _job(image="img; rm -rf /")
    with pytest.raises(InputError, match="interface name"):
        _job(data_ifname="eth0 ib0")
    with pytest.raises(InputError, match="RESOURCE"):
        k8s.parse_resources("rdma/ib=x")
    assert k8s.parse_resources("rdma/ib=2,vpc.amazonaws.com/efa") == {"rdma/ib": 2, "vpc.amazonaws.com/efa": 1}
    assert k8s.parse_resources("none") == {}


def test_cli_dry_run_prints_the_manifest(cli):
    code, out, err = cli(
        "bench",
        "train",
        "--launcher",
        "k8s",
        "--nodes",
        "4",
        "--gpus-per-node",
        "8",
        "--backend",
        "nccl",
        "--k8s-image",
        "ghcr.io/acme/gpufabric:0.1",
        "--k8s-namespace",
        "ml",
        "--dry-run",
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["launcher"] == "k8s" and "gpufabric.exec.k8s follow" in doc["commands"][0]
    import yaml

    manifest = yaml.safe_load(doc["sbatch_script"])
    k8s.validate(manifest)
    trainer = manifest["spec"]["trainer"]
    assert manifest["metadata"]["namespace"] == "ml" and trainer["numNodes"] == 4
    assert trainer["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "1"}
    code, _, err = cli("bench", "train", "--launcher", "k8s", "--dry-run")
    assert code == 2 and "--k8s-image" in err


def test_state_from_trainjob_status():
    status = api.TrainerV1alpha1TrainJobStatus.from_dict(
        {
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "JobsCompleted",
                    "message": "done",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
            ]
        }
    )
    assert k8s._state({"status": status.to_dict()}) == "Complete"
    assert k8s._state({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == "Failed"
    assert k8s._state({}) == "Pending"


def _cluster_with_trainer() -> bool:
    if shutil.which("kubectl") is None:
        return False
    done = subprocess.run(
        ["kubectl", "get", "crd", "trainjobs.trainer.kubeflow.org", "--request-timeout=5s"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode == 0


@pytest.mark.skipif(not _cluster_with_trainer(), reason="needs kubectl and a cluster with the Kubeflow Trainer CRDs")
def test_api_server_accepts_the_manifest(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(k8s.to_yaml(_job(namespace="default")))
    done = subprocess.run(
        ["kubectl", "apply", "--dry-run=server", "-f", str(path)],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr


def _fake_kubectl(tmp_path, final: str):
    """A stand-in for kubectl (orchestration only): apply, two `get` answers, then logs."""
    script = tmp_path / "kubectl"
    count = tmp_path / "gets"
    running = json.dumps({"status": {"jobsStatus": [{"name": "node", "active": 2}]}})
    done = json.dumps({"status": {"conditions": [{"type": final, "status": "True"}]}})
    script.write_text(f"""#!/bin/bash
shift 2   # -n NAMESPACE
case "$1" in
  apply) echo "trainjob.trainer.kubeflow.org/gf created";;
  get) n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}
       if [ "$n" -ge 1 ]; then echo '{done}'; else echo '{running}'; fi;;
  logs) echo "[pod/gf-node-0-0] rank 0 all_reduce ok";;
esac
""")
    script.chmod(0o755)
    return (str(script),)


@pytest.mark.parametrize(("final", "code"), [("Complete", 0), ("Failed", 1)])
def test_follow_applies_waits_and_streams_logs(tmp_path, capfd, final, code):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(k8s.to_yaml(_job()))
    assert k8s.follow(str(manifest), "gf", "train", poll_s=0.01, kubectl=_fake_kubectl(tmp_path, final)) == code
    out = capfd.readouterr().out
    assert "created" in out and "rank 0 all_reduce ok" in out and f"trainjob gf {final}" in out


@pytest.mark.parametrize(("final", "code", "status"), [("Complete", 0, "passed"), ("Failed", 1, "failed")])
def test_k8s_runs_are_recorded_like_every_probe_run(cli, tmp_path, monkeypatch, final, code, status):
    """Issue 23: a `--launcher k8s` probe is one stored run whose status is its exit code."""
    from gpufabric.results.store import Store

    fake = _fake_kubectl(tmp_path, final)[0]
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert shutil.which("kubectl") == fake
    db = tmp_path / "r.db"
    got, out, err = cli("bench", "collectives", "--launcher", "k8s", "--k8s-image", "ghcr.io/x/gpufabric:1", "--db", db)
    assert got == code, err + out
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.kind == "bench.collectives" and run.status == status
    assert [r.name for r in run.results] == ["k8s.collectives"]
    assert run.job_id.startswith("gpufabric-collectives-") and run.cluster == "default"
    assert "kind: TrainJob" in run.artifacts["trainjob_manifest"]
