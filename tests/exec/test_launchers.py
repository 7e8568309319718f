"""The launcher registry and the launch record whose fields are the command line (issue 33)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from gpufabric.errors import InputError
from gpufabric.exec import knobs, launchers
from gpufabric.exec.launch import Host
from gpufabric.exec.launchers import LaunchRequest
from gpufabric.exec.site import SiteOptions


def test_the_registry_holds_every_launcher_by_its_flag_value():
    assert list(launchers.LAUNCHERS) == ["local", "torchrun", "slurm", "mpirun", "k8s"]
    assert all(launchers.get(name).name == name for name in launchers.LAUNCHERS)
    assert [n for n, launcher in launchers.LAUNCHERS.items() if launcher.follows_job] == ["k8s"]
    with pytest.raises(InputError, match=r"--launcher 'ssh': unknown launcher; use one of local, torchrun, slurm"):
        launchers.get("ssh")


@pytest.mark.parametrize("name", ["local", "torchrun", "slurm", "mpirun"])
def test_each_direct_launcher_builds_its_own_plan(name):
    plan = launchers.get(name).build(launchers.Job(module="m", args=("c.json",), nodes=1, nproc=2, master_port=29501))
    assert plan.launcher == name and plan.num_ranks == 2
    argv = " ".join(" ".join(c.argv) for c in plan.commands)
    assert "c.json" in argv
    expected = {"local": "python", "torchrun": "torch.distributed.run", "slurm": "srun", "mpirun": "mpirun"}[name]
    assert expected in argv and len(plan.commands) == (2 if name == "local" else 1)


def test_k8s_builds_a_followed_manifest_through_the_same_protocol(tmp_path):
    job = launchers.Job(
        module="m", kind="collectives", config={"ops": ["all_reduce"]}, out_dir=str(tmp_path), k8s_image="img:1"
    )
    plan = launchers.get("k8s").build(job)
    assert plan.launcher == "k8s" and "kind: TrainJob" in plan.script and plan.script_path.endswith(".yaml")
    assert launchers.get("k8s").visibility(plan, "x") == ([], 0)


def test_where_ranks_run_is_the_launchers_answer():
    lab = [Host(name="h1", netns="gfl-a-h1")]
    ssh = [Host(name="n1", ssh="n1")]
    assert launchers.ranks_run_here("local", lab) and not launchers.ranks_run_here("local", ssh)
    assert launchers.ranks_run_here("slurm", lab) and not launchers.ranks_run_here("slurm", [])
    assert not launchers.ranks_run_here("k8s", [])
    assert launchers.spans_machines("slurm", 2, []) and not launchers.spans_machines("slurm", 1, [])
    assert launchers.spans_machines("torchrun", 1, ssh) and not launchers.spans_machines("k8s", 4, [])


def test_rank_bounds_are_the_specs():
    from gpufabric.spec.models import MAX_RANKS, Cluster

    assert launchers.MAX_NODES == MAX_RANKS
    bound = next(m.le for m in Cluster.model_fields["gpus_per_node"].metadata if hasattr(m, "le"))
    assert bound == launchers.MAX_RANKS_PER_NODE


def test_every_launch_knob_is_declared_once_with_flag_and_help():
    own, last = knobs.layout(LaunchRequest)
    assert [f.name for f, _ in own][:3] == ["launcher", "slurm_mode", "nodes"]
    assert [f.name for f, _ in last] == []  # the site's knobs are the launch's own here (one level)
    names = [f.name for f, _ in own]
    assert names[-len(fields(SiteOptions)) :] == [f.name for f in fields(SiteOptions)]
    assert all(f.metadata["flag"].startswith("--") and f.metadata["help"] for f, _ in own)
    assert len({f.metadata["flag"] for f, _ in own}) == len(own)


def test_a_nested_site_goes_last_in_a_probe_request():
    from gpufabric.bench.probes.requests import CollectivesRequest

    own, last = knobs.layout(CollectivesRequest)
    assert [f.name for f, _ in last] == [f.name for f in fields(SiteOptions)]
    names = [f.name for f, _ in own]
    assert names.index("spec") < names.index("launcher") < names.index("k8s_rdma") < names.index("db")


def test_unused_knobs_are_named_with_why():
    found = dict(knobs.unused(LaunchRequest(lab="", plane="storage"), launcher="local"))
    assert set(found["without --launcher k8s"]) == {
        "k8s_image",
        "k8s_namespace",
        "k8s_rdma",
        "k8s_kind",
        "k8s_network",
        "k8s_queue",
    }
    assert found["without --lab"] == {"plane": "--plane"}
    assert (
        "partition" in found["without --launcher slurm"] and "cpu_bind" in found["without --launcher slurm or mpirun"]
    )
    with_lab = dict(knobs.unused(LaunchRequest(lab="a"), launcher="slurm"))
    assert with_lab["with --lab (the lab's hosts are used)"] == {"hosts": "--hosts"}
    assert "without --launcher slurm" not in with_lab and "without --lab" not in with_lab


def test_resolve_checks_and_types_the_launch():
    opts = LaunchRequest(timeout="10min", init_timeout="90", nproc=3).resolve(have_gpu=lambda: False)
    assert (opts.timeout_s, opts.init_timeout_s, opts.nproc, opts.backend) == (600.0, 90.0, 3, "gloo")
    assert LaunchRequest().resolve(have_gpu=lambda: True).backend == "nccl"
    assert LaunchRequest(launcher="slurm").resolve(have_gpu=lambda: False).backend == "nccl"  # ranks run elsewhere
    assert LaunchRequest(backend="auto").resolve(have_gpu=lambda: True, backend="gloo").backend == "gloo"
    hosts = [Host(name="h1", netns="n1"), Host(name="h2", netns="n2")]
    lab = LaunchRequest(lab="a", plane="storage").resolve(lab_hosts=lambda name, plane: hosts, have_gpu=lambda: False)
    assert lab.hosts == tuple(hosts) and lab.nodes == 2
    for request, message in (
        (LaunchRequest(lab="a"), "--lab: this command does not run on a lab"),
        (LaunchRequest(nproc=10**9), "--gpus-per-node must be between 1 and 1,024"),
        (LaunchRequest(master_port=70000), "--master-port 70000: not a port"),
        (LaunchRequest(timeout="200h"), "--timeout '200h': give"),
        (LaunchRequest(backend="mpi"), "--backend 'mpi'"),
    ):
        with pytest.raises(InputError, match=message):
            request.resolve(have_gpu=lambda: False)


def test_a_followed_job_cannot_be_judged_here(tmp_path):
    from gpufabric.bench.probes import requests
    from gpufabric.bench.probes.service import Judging

    req = requests.CollectivesRequest(
        thresholds=None, launch=LaunchRequest(launcher="k8s", k8s_image="img:1"), sizes="1K"
    )
    prep = req.prepare(None)
    judged = requests.Prepared(request=req, opts=prep.opts, config=prep.config, judging=Judging(slos=(object(),)))
    with pytest.raises(InputError, match="--thresholds/--plan with --launcher k8s"):
        requests.run(judged, argv=["gpufabric"])
