"""Live proof: intent, static proof and real packets agree on every probed cell.

Hosts are network namespaces (gfa-*) with one veth interface per plane, joined by one
bridge per plane inside a switch namespace. Each host loads its role's generated
ruleset with the real ``nft -f``; an agent in every namespace listens on every probe
port (TCP and UDP) and probes every other host on every shared plane. The namespaces
are always deleted and the agents always killed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpufabric.audit import nft, probe_agent
from gpufabric.audit.reachability import cell_at, prove
from gpufabric.spec.security import SecurityPolicy
from tests.audit.conftest import clean_bundle  # noqa: F401  (fixture)
from tests.conftest import needs_root, needs_tool

AGENT = Path(probe_agent.__file__)
PREFIX = "gfa-lab"
SWITCH = f"{PREFIX}-sw"


def sh(*argv: str, timeout: float = 10) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr}"
    return done.stdout


def probe_ports(policy: SecurityPolicy) -> list[int]:
    """Every intended port or range (ends and middle), plus sensitive ports no flow names."""
    ports = {2049, 9999, 28028}
    for flow in policy.flows:
        for lo, hi in flow.port_ranges():
            ports.update({lo, hi, (lo + hi) // 2})
    return sorted(ports)


@pytest.fixture
def lab(clean_bundle):  # noqa: F811
    doc = json.loads((clean_bundle / "policy.json").read_text())
    policy = SecurityPolicy.model_validate(doc["policy"])
    hosts = policy.hosts()
    ns = {h: f"{PREFIX}-{i}" for i, (h, _r) in enumerate(hosts)}
    agents: dict[str, subprocess.Popen] = {}
    created: list[str] = []
    # A run killed before its teardown leaves namespaces behind; start from a clean slate.
    for stale in sh("ip", "netns", "list").split():
        if stale.startswith(PREFIX):
            sh("ip", "netns", "del", stale)
    try:
        sh("ip", "netns", "add", SWITCH)
        created.append(SWITCH)
        for plane in policy.planes:
            sh("ip", "-n", SWITCH, "link", "add", f"br-{plane.name}", "type", "bridge")
            sh("ip", "-n", SWITCH, "link", "set", f"br-{plane.name}", "up")
        addresses = policy.addresses()
        for i, (host, role) in enumerate(hosts):
            sh("ip", "netns", "add", ns[host])
            created.append(ns[host])
            sh("ip", "-n", ns[host], "link", "set", "lo", "up")
            for plane_name in policy.role_planes(role):
                plane = policy.plane(plane_name)
                port = f"h{i}-{plane_name}"
                sh(
                    "ip",
                    "-n",
                    ns[host],
                    "link",
                    "add",
                    plane.interface,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    port,
                    "netns",
                    SWITCH,
                )
                sh("ip", "-n", SWITCH, "link", "set", port, "master", f"br-{plane_name}", "up")
                prefix = plane.network.prefixlen
                sh(
                    "ip",
                    "-n",
                    ns[host],
                    "addr",
                    "add",
                    f"{addresses[(host, plane_name)]}/{prefix}",
                    "dev",
                    plane.interface,
                )
                sh("ip", "-n", ns[host], "link", "set", plane.interface, "up")
            sh("ip", "netns", "exec", ns[host], "nft", "-f", str(clean_bundle / "roles" / role / "etc/nftables.conf"))
        ports = probe_ports(policy)
        for host in ns:
            agent = subprocess.Popen(
                ["ip", "netns", "exec", ns[host], sys.executable, str(AGENT), "listen", ",".join(map(str, ports))],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            agents[host] = agent
            assert agent.stdout.readline().strip() == "ready", agent.stderr.read() if agent.poll() is not None else ""
        yield policy, ns, ports, agents
    finally:
        for agent in agents.values():
            agent.kill()
            agent.wait(timeout=10)
        for name in reversed(created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


@needs_root
@needs_tool("nft")
@needs_tool("ip")
def test_packets_static_proof_and_intent_agree(lab, clean_bundle, tmp_path):  # noqa: F811
    policy, ns, ports, _agents = lab
    start = time.monotonic()
    role_of = dict(policy.hosts())
    addresses = policy.addresses()
    # Static proof over the rulesets as the kernel holds them (nft -j list ruleset in each namespace).
    live = {}
    for host in ns:
        live[host] = nft.parse(json.loads(sh("ip", "netns", "exec", ns[host], "nft", "-j", "list", "ruleset")))
    proof = prove(policy, live)
    # Probe every (src host, dst host, shared plane, proto, port) at once per source namespace.
    procs = {}
    expected: dict[str, tuple[str, str, str, str, int]] = {}
    for src in ns:
        probes = []
        for dst in ns:
            if dst == src:
                continue
            for plane in policy.role_planes(role_of[dst]):
                if plane not in policy.role_planes(role_of[src]):
                    continue
                for proto in ("tcp", "udp"):
                    for port in ports:
                        pid = f"{src}|{dst}|{plane}|{proto}|{port}"
                        probes.append([pid, proto, addresses[(src, plane)], addresses[(dst, plane)], port])
                        expected[pid] = (role_of[src], role_of[dst], plane, proto, port)
        spec = tmp_path / f"{src}.json"
        spec.write_text(json.dumps(probes))
        procs[src] = subprocess.Popen(
            ["ip", "netns", "exec", ns[src], sys.executable, str(AGENT), "probe", str(spec), "1.5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    seen: dict[str, str] = {}
    for src, proc in procs.items():
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        seen.update(json.loads(out))
    assert set(seen) == set(expected) and len(seen) > 500
    disagreements = []
    for pid, (src_role, dst_role, plane, proto, port) in expected.items():
        cell = cell_at(proof, src_role, dst_role, plane, proto, port)
        packets = seen[pid] == "open"
        intended = any(
            f.src == src_role
            and f.dst == dst_role
            and f.plane == plane
            and f.proto == proto
            and any(lo <= port <= hi for lo, hi in f.port_ranges())
            for f in policy.flows
        )
        if not (packets == intended == (cell.allowed == "all")) or cell.intended != intended:
            disagreements.append((pid, seen[pid], cell.allowed, intended))
    assert disagreements == [], disagreements[:10]
    opened = sum(v == "open" for v in seen.values())
    print(f"lab: {len(seen)} probes, {opened} open, {time.monotonic() - start:.1f} s")
    assert 0 < opened < len(seen)  # both outcomes were exercised


@needs_root
@needs_tool("nft")
@needs_tool("ip")
def test_live_audit_reads_the_loaded_ruleset(lab):
    """`gpufabric audit --live` inside a lab host sees the kernel's ruleset (nft -j) and ss."""
    policy, ns, _ports, _agents = lab
    host = next(h for h, r in policy.hosts() if r == "storage")
    done = subprocess.run(
        ["ip", "netns", "exec", ns[host], sys.executable, "-m", "gpufabric", "audit", "--live", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc = json.loads(done.stdout)
    assert "FW-01" in doc["passed"], doc["findings"]
    assert doc["exit_code"] == done.returncode


@needs_root
@needs_tool("nft")
@needs_tool("ip")
@pytest.mark.slow
def test_torchrun_wrapper_trains_through_the_firewall(lab, clean_bundle):  # noqa: F811
    """The generated wrapper and env file run a real 2-node gloo job over the control plane,
    with every host's generated firewall loaded."""
    pytest.importorskip("torch")
    policy, ns, _ports, agents = lab
    computes = [h for h, r in policy.hosts() if r == "compute"][:2]
    for host in computes:  # the probe listeners hold the rendezvous port
        agents[host].kill()
        agents[host].wait(timeout=10)
    rdzv = policy.addresses()[(computes[0], "ctl")]
    wrapper = clean_bundle / "roles/compute/usr/local/bin/gpufabric-torchrun"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "RDZV_HOST": rdzv,
        "GPUFABRIC_NCCL_ENV": str(clean_bundle / "roles/compute/etc/gpufabric/nccl.env"),
        "OMP_NUM_THREADS": "1",
        "GPUFABRIC_RDZV_CONF": "join_timeout=40",
    }
    procs = [
        subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns[h],
                "bash",
                str(wrapper),
                "--nnodes=2",
                "--nproc-per-node=1",
                "--rdzv-id=gfa-lab",
                str(Path(__file__).with_name("lab_train.py")),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for h in computes
    ]
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=90)
            outs.append(out)
            assert proc.returncode == 0, err[:2500]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=10)
    text = "".join(outs)
    assert "rank 0 sum 3" in text and "rank 1 sum 3" in text
    # the store and gloo bootstrap ran on control-plane addresses (--local-addr)
    ctl = policy.plane("ctl").network
    masters = {line.rsplit(" ", 1)[-1] for line in text.splitlines() if " master " in line}
    assert masters and all(ipaddress.IPv4Address(m) in ctl for m in masters), masters
