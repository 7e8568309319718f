"""Every artefact kind handed to the program that consumes it (issue 11 item 2).

shellcheck on every script; nft loads each ruleset for real in a namespace; sysctl
applies the file in a namespace and every value is read back per interface; libnvme
(`nvme config --config FILE --dump`) reads the host config; tuned's own profile loader
merges each profile; TCP connects between namespaces loaded with the generated rulesets
prove the flows the generated scripts need. A missing consumer skips with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.audit.conftest import CORPUS, render
from tests.conftest import needs_root, needs_tool

DESIGNS = {
    "ib": {"fabrics": "ib-ndr", "storage": "nvmeof-tcp"},
    "roce": {"fabrics": "roce-400g", "storage": "nvmeof-rdma"},
    "tcp": {"fabrics": "tcp-100g", "storage": "nfs"},
}
SECURE = Path(__file__).parent / "data" / "secure-ib.yaml"


@pytest.fixture(scope="module", params=sorted(DESIGNS))
def bundle(request, tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp(request.param) / "b"
    return request.param, render(CORPUS / "lab-ib.yaml", out, **DESIGNS[request.param])


def run(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False, **kw)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: {done.stderr or done.stdout}")
    return done


class Netns:
    """Network namespaces named bd-*, removed on exit (only the ones this test made)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def add(self, name: str) -> str:
        full = f"bd-{name}-{uuid.uuid4().hex[:4]}"
        run("ip", "netns", "add", full)
        self.names.append(full)
        run("ip", "-n", full, "link", "set", "lo", "up")
        return full

    def close(self) -> None:
        for name in reversed(self.names):
            run("ip", "netns", "del", name, check=False)


@pytest.fixture
def netns():
    spaces = Netns()
    try:
        yield spaces
    finally:
        spaces.close()


# ---- shellcheck ---------------------------------------------------------------------------------


@needs_tool("shellcheck")
def test_shellcheck_every_script(bundle):
    _kind, root = bundle
    scripts = [p for p in root.rglob("*") if p.is_file() and p.read_text().startswith("#!/bin/")]
    assert scripts
    for path in scripts:
        done = run("shellcheck", "-x", "-S", "style", str(path), check=False)
        assert done.returncode == 0, f"{path}:\n{done.stdout}"


# ---- nftables: a real load ----------------------------------------------------------------------


@needs_root
@needs_tool("nft")
def test_every_ruleset_loads_for_real_in_a_namespace(bundle, netns):
    _kind, root = bundle
    for path in sorted(root.glob("roles/*/etc/nftables.conf")):
        ns = netns.add("nft")
        run("ip", "netns", "exec", ns, "nft", "-f", str(path))
        listed = json.loads(run("ip", "netns", "exec", ns, "nft", "-j", "list", "ruleset").stdout)
        chains = {i["chain"]["name"] for i in listed["nftables"] if "chain" in i}
        assert {"input", "forward", "output"} <= chains
        hooks = [i["chain"] for i in listed["nftables"] if "chain" in i and i["chain"].get("hook") == "input"]
        assert hooks[0]["policy"] == "drop"


# ---- sysctl: applied in a namespace, read back per interface ------------------------------------


@needs_root
@needs_tool("sysctl")
def test_sysctl_applies_and_reads_back_per_interface(bundle, netns):
    _kind, root = bundle
    policy = json.loads((root / "policy.json").read_text())["policy"]
    for path in sorted(root.glob("roles/*/etc/sysctl.d/90-gpufabric.conf")):
        ns = netns.add("sys")
        ifaces = [p["interface"] for p in policy["planes"]]
        for i, name in enumerate(ifaces):  # veth: the dummy module may be absent in containers
            run("ip", "-n", ns, "link", "add", name, "type", "veth", "peer", "name", f"bdp{i}")
        # only the per-namespace net.* keys: kernel.* (numa_balancing) is global and would
        # change the machine running the test; its line is checked for syntax below
        text = path.read_text()
        net_only = path.parent / "net-only.conf"
        net_only.write_text("".join(line + "\n" for line in text.splitlines() if line.lstrip("-").startswith("net.")))
        applied = run("ip", "netns", "exec", ns, "sysctl", "-p", str(net_only))
        assert "error" not in applied.stderr.lower(), applied.stderr
        expected = {}
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            key, value = (part.strip() for part in line.lstrip("-").split("=", 1))
            expected[key] = value
        for key, value in expected.items():
            if not key.startswith("net."):
                assert key == "kernel.numa_balancing" and value == "0"
                continue
            got = run("ip", "netns", "exec", ns, "sysctl", "-n", key).stdout.split()
            assert got == value.split(), key
        # every plane interface the role sits on, not only all/default
        role = path.parts[-4]
        for plane in policy["planes"]:
            key = f"net.ipv4.conf.{plane['interface']}.accept_redirects"
            if key in expected:
                assert run("ip", "netns", "exec", ns, "sysctl", "-n", key).stdout.strip() == "0"
        assert any(f"net.ipv6.conf.{i}.accept_redirects" in expected for i in ifaces), role
        high = int(expected["net.ipv4.ip_local_port_range"].split()[1])
        assert high < 61000, "the ephemeral range must end below SrunPortRange 61000-63000"


# ---- libnvme: nvme config --dump ----------------------------------------------------------------


@needs_tool("nvme")
def test_libnvme_reads_the_host_config(bundle, tmp_path):
    kind, root = bundle
    configs = sorted(root.glob("hosts/*/etc/nvme/config.json"))
    if DESIGNS[kind]["storage"] == "nfs":
        assert configs == []
        return
    for path in configs:
        doc = json.loads(path.read_text())
        dumped = json.loads(run("nvme", "config", "--config", str(path), "--dump").stdout)
        assert dumped[0]["hostnqn"] == doc[0]["hostnqn"] and dumped[0]["hostid"] == doc[0]["hostid"]
        assert dumped[0]["dhchap_key"] == doc[0]["dhchap_key"]
        # libnvme's dump leaves out the discovery subsystem; re-labelled as an I/O NQN the
        # same ports must survive the parser attribute for attribute
        probe = json.loads(path.read_text())
        probe[0]["subsystems"][0]["nqn"] = "nqn.2014-08.org.nvmexpress:uuid:" + str(uuid.uuid4())
        copy = tmp_path / "probe.json"
        copy.write_text(json.dumps(probe))
        ports = json.loads(run("nvme", "config", "--config", str(copy), "--dump").stdout)[0]["subsystems"][0]["ports"]
        key = lambda port: port["traddr"]
        assert sorted(ports, key=key) == sorted(probe[0]["subsystems"][0]["ports"], key=key)
        # the object form the old renderer wrote: libnvme 1.3 rejects it (exit 1, no host)
        bad = tmp_path / "object.json"
        bad.write_text(json.dumps({"hosts": doc}))
        rejected = run("nvme", "config", "--config", str(bad), "--dump", check=False)
        assert rejected.returncode != 0 and json.loads(rejected.stdout) == []


# ---- tuned: its own profile loader --------------------------------------------------------------


def _tuned_python() -> str | None:
    python = shutil.which("python3", path="/usr/bin")
    if python is None or not Path("/usr/lib/python3/dist-packages/tuned").is_dir():
        return None
    return python


@pytest.mark.skipif(_tuned_python() is None, reason="tuned (python3-tuned) not installed")
def test_tuned_loader_merges_every_profile(bundle):
    _kind, root = bundle
    code = (
        "import sys\n"
        "from tuned.profiles.loader import Loader\n"
        "from tuned.profiles.locator import Locator\n"
        "from tuned.profiles.merger import Merger\n"
        "from tuned.profiles.factory import Factory\n"
        "from tuned.profiles.variables import Variables\n"
        "from tuned.profiles.functions.repository import Repository\n"
        "loader = Loader(Locator([sys.argv[1], '/usr/lib/tuned']), Factory(), Merger(), None, Variables())\n"
        "p = loader.load([sys.argv[2]])\n"
        "print(p.name, sorted(p.units), p.units['vm'].options.get('transparent_hugepages'),"
        " p.units['sysctl'].options.get('kernel.numa_balancing'))\n"
    )
    for profile in sorted(root.glob("roles/*/etc/tuned/gpufabric-*")):
        done = run(_tuned_python(), "-c", code, str(profile.parent), profile.name, check=False)
        assert done.returncode == 0, done.stderr[-800:]
        assert done.stdout.split()[0] == profile.name
        assert "never" in done.stdout and "'cpu'" in done.stdout  # network-latency's cpu unit merged in


# ---- TCP connects between namespaces loaded with the generated rulesets ------------------------

LISTEN = (
    "import socket, sys\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16); print('ready', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); c.close()\n"
)
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.5).close(); print('open')\n"
    "except OSError as e:\n"
    "    print('blocked', e)\n"
)


class Lab:
    """One namespace per host, one bridge per plane in a hub namespace, rulesets loaded."""

    def __init__(self, root: Path, netns: Netns) -> None:
        import sys

        self.python = sys.executable
        doc = json.loads((root / "policy.json").read_text())
        self.netns = netns
        self.hub = netns.add("hub")
        planes = {p["name"]: p for p in doc["policy"]["planes"]}
        self.addr = {(a["host"], a["plane"]): a["address"] for a in doc["addresses"]}
        self.role = {h["host"]: h["role"] for h in doc["hosts"]}
        for i, name in enumerate(planes):
            run("ip", "-n", self.hub, "link", "add", f"br{i}", "type", "bridge")
            run("ip", "-n", self.hub, "link", "set", f"br{i}", "up")
        self.ns: dict[str, str] = {}
        for h, host in enumerate(sorted(self.role)):
            ns = self.ns[host] = netns.add("h")
            for i, (name, plane) in enumerate(planes.items()):
                if (host, name) not in self.addr:
                    continue
                peer = f"h{h}p{i}"
                run(
                    "ip",
                    "link",
                    "add",
                    f"bdx{h}p{i}",
                    "netns",
                    ns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    peer,
                    "netns",
                    self.hub,
                )
                run("ip", "-n", ns, "link", "set", f"bdx{h}p{i}", "name", plane["interface"])
                prefix = plane["cidr"].split("/")[1]
                run("ip", "-n", ns, "addr", "add", f"{self.addr[(host, name)]}/{prefix}", "dev", plane["interface"])
                run("ip", "-n", ns, "link", "set", plane["interface"], "up")
                run("ip", "-n", self.hub, "link", "set", peer, "master", f"br{i}", "up")
            run("ip", "netns", "exec", ns, "nft", "-f", str(root / "roles" / self.role[host] / "etc/nftables.conf"))
        self.listeners: list[subprocess.Popen] = []

    def listen(self, host: str, plane: str, port: int) -> None:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[host], self.python, "-c", LISTEN, self.addr[(host, plane)], str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.listeners.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    def connect(self, src: str, dst: str, plane: str, port: int) -> bool:
        out = run(
            "ip", "netns", "exec", self.ns[src], self.python, "-c", CONNECT, self.addr[(dst, plane)], str(port)
        ).stdout
        return out.startswith("open")

    def close(self) -> None:
        for proc in self.listeners:
            proc.kill()  # our own listener, by its Popen handle
            proc.wait(timeout=10)


#: (src, dst, plane, port, allowed): what train.sbatch, srun and torchrun need, and what must stay shut.
FLOWS = [
    ("scheduler-1", "compute-1", "mgmt", 6818, True),  # slurmctld -> slurmd
    ("compute-2", "compute-1", "mgmt", 6818, True),  # slurmd fan-out
    ("compute-2", "compute-1", "mgmt", 61500, True),  # srun callbacks (SrunPortRange) on the batch host
    ("compute-1", "login-1", "mgmt", 62000, True),  # slurmd -> srun on the login node
    ("compute-2", "compute-1", "ctl", 29400, True),  # c10d rendezvous
    ("compute-1", "compute-2", "ctl", 29777, True),  # a per-job static rendezvous port (29500-29999)
    ("compute-2", "compute-1", "ctl", 30000, False),  # past the launchers' range
    ("compute-2", "compute-1", "ctl", 45000, True),  # NCCL bootstrap (ephemeral range)
    ("login-1", "compute-1", "mgmt", 29400, False),  # rendezvous never on management
    ("compute-2", "compute-1", "mgmt", 22, False),  # no lateral SSH
    ("compute-1", "storage-1", "mgmt", 22, False),
    ("compute-2", "compute-1", "mgmt", 60500, False),  # below SrunPortRange
]


@needs_root
@needs_tool("nft")
def test_generated_rulesets_admit_exactly_the_flows_the_scripts_need(tmp_path, netns):
    root = render(CORPUS / "lab-ib.yaml", tmp_path / "b")
    lab = Lab(root, netns)
    try:
        seen: set[tuple[str, str, int]] = set()
        for _src, dst, plane, port, _ in FLOWS:
            if (dst, plane, port) not in seen:
                lab.listen(dst, plane, port)
                seen.add((dst, plane, port))
        got = [(src, dst, plane, port, lab.connect(src, dst, plane, port)) for src, dst, plane, port, _ in FLOWS]
    finally:
        lab.close()
    assert got == FLOWS


# ---- OpenSM against ibsim: PKey tables read back per role ---------------------------------------

UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
IB_HOSTS = {
    "gpu-a1": "compute",
    "gpu-a2": "compute",
    "stor-a1": "storage",
    "login-a1": "login",
    "sched-a1": "scheduler",
}


def _ib_spec(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """secure-ib.yaml with one simulated HCA per host: port GUID = ibsim's caguid + 1."""
    import yaml

    doc = yaml.safe_load(SECURE.read_text())
    guids = {host: f"0x0002c9030000{i + 1:02x}01" for i, host in enumerate(IB_HOSTS)}
    for role in doc["security"]["roles"]:
        role["port_guids"] = [guids[h] for h in role["hosts"]]
    path = tmp_path / "ib.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, guids


def _ibsim_net(guids: dict[str, str]) -> str:
    hosts = list(guids)
    lines = ['Switch 8 "S-sw1"', '[1] "H-sm"[1]'] + [f'[{i + 2}] "H-{h}"[1]' for i, h in enumerate(hosts)] + [""]
    lines += ["caguid=0x0002c90300000f00", 'Hca 1 "H-sm"', '[1] "S-sw1"[1]', ""]
    for i, host in enumerate(hosts):
        lines += [f"caguid={guids[host][:-2]}00", f'Hca 1 "H-{host}"', f'[1] "S-sw1"[{i + 2}]', ""]
    return "\n".join(lines)


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("ibsim", "opensm", "smpquery")) or not UMAD2SIM.exists(),
    reason="needs ibsim-utils (ibsim, libumad2sim), opensm and infiniband-diags",
)
def test_opensm_on_ibsim_gives_each_role_exactly_its_pkeys(tmp_path):
    import signal
    import time

    spec, guids = _ib_spec(tmp_path)
    root = render(spec, tmp_path / "b")
    (tmp_path / "net").write_text(_ibsim_net(guids))
    env = {
        **os.environ,
        "LD_PRELOAD": str(UMAD2SIM),
        "SIM_HOST": "H-sm",
        "OSM_TMP_DIR": str(tmp_path),
        "OSM_CACHE_DIR": str(tmp_path),
    }
    conf = (
        (root / "fabric/etc/opensm/opensm.conf")
        .read_text()
        .replace("/etc/opensm/partitions.conf", str(root / "fabric/etc/opensm/partitions.conf"))
    )
    (tmp_path / "opensm.conf").write_text(conf)
    mkey = next(line.split()[1] for line in conf.splitlines() if line.startswith("m_key "))
    sim = subprocess.Popen(
        ["ibsim", "-s", str(tmp_path / "net")],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(1.0)
        done = run(
            "opensm",
            "-F",
            str(tmp_path / "opensm.conf"),
            "-f",
            str(tmp_path / "osm.log"),
            "-o",
            "-s",
            "0",
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-500:] + (tmp_path / "osm.log").read_text()[-1500:]
        tables = {}
        for i, host in enumerate(guids):
            route = f"0,1,{i + 2}"
            info = run("smpquery", "-y", mkey, "-D", "nodeinfo", route, env=env).stdout
            assert guids[host][2:] in info.replace("0x", "").lower()
            text = run("smpquery", "-y", mkey, "-D", "pkeys", route, env=env).stdout
            values = [int(v, 16) for line in text.splitlines() if ":" in line for v in line.split(":")[1].split()]
            tables[host] = values
    finally:
        os.killpg(sim.pid, signal.SIGTERM)
        sim.wait(timeout=10)
    full = lambda p: 0x8000 | p
    want = {
        "compute": {full(0x10), full(0x20), full(0x30), 0x0040},
        "storage": {full(0x10), full(0x40)},
        "login": {full(0x10)},
        "scheduler": {full(0x10)},
    }
    for host, role in IB_HOSTS.items():
        got = {v for v in tables[host] if v not in (0, 0x7FFF, 0xFFFF)}
        assert got == want[role], (host, [hex(v) for v in sorted(got)])
        assert 0x7FFF in tables[host] and 0xFFFF not in tables[host]  # limited in the default partition
    assert tables["gpu-a1"][0] == full(0x30), "indx0: the compute-data PKey sits at index 0 (NCCL_IB_PKEY=0)"


# ---- Slurm: sbatch --test-only on a real one-node cluster ---------------------------------------


@pytest.fixture
def slurm_one_node(tmp_path, monkeypatch):
    """tests/bench/probes' one-node cluster (auth/none) on ports of our own; yields its environment."""
    from tests.bench.probes.conftest import one_node_slurm

    with one_node_slurm(
        tmp_path, cluster="bdconf", ctld_port=16934, slurmd_port=16935, extra="SrunPortRange=61000-63000\n"
    ) as (conf, env):
        monkeypatch.setenv("SLURM_CONF", str(conf))
        yield env


def test_sbatch_accepts_the_generated_batch_script(slurm_one_node, tmp_path):
    root = render(CORPUS / "lab-ib.yaml", tmp_path / "b")
    script = root / "roles/login/etc/gpufabric/train.sbatch"
    # the lab has one CPU-only node: the command line overrides what it cannot offer
    # (node count, GPUs); everything else, #SBATCH lines included, is parsed as generated
    done = run(
        "sbatch",
        "--test-only",
        "--nodes=1",
        "--gpus-per-node=0",
        str(script),
        "train.py",
        env=slurm_one_node,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "to start at" in done.stderr
    bad = tmp_path / "bad.sbatch"
    bad.write_text(script.read_text().replace("#SBATCH --nodes=2", "#SBATCH --nodes=two"))
    rejected = run("sbatch", "--test-only", str(bad), env=slurm_one_node, check=False)
    assert rejected.returncode != 0  # the consumer really parses the directives


# ---- RoCE QoS script on the inbox driver's sysfs layout -----------------------------------------


def test_roce_qos_runs_on_inbox_mlx5_and_targets_use_their_storage_nic(tmp_path):
    from tests.configure.stubs import fake_sysfs, run_script

    root = render(CORPUS / "lab-ib.yaml", tmp_path / "b", fabrics="roce-400g", storage="nvmeof-rdma")
    compute = root / "roles/compute/usr/local/sbin/gpufabric-roce-qos"
    storage = root / "roles/storage/usr/local/sbin/gpufabric-roce-qos"
    work = tmp_path / "c"
    work.mkdir()
    sysfs = fake_sysfs(work, [f"mlx5_{i}" for i in range(8)], [])  # no ecn/ directories: inbox mlx5
    for dev in range(8):
        (sysfs / f"kernel/config/rdma_cm/mlx5_{dev}/ports/1").mkdir(parents=True)
    done = run_script(compute, work, sysfs=sysfs)
    assert done.returncode == 0, done.stderr  # set -eu used to die on the first missing ECN knob
    assert "inbox driver" in done.stderr
    assert (sysfs / "kernel/config/rdma_cm/mlx5_7/ports/1/default_roce_tos").read_text().strip() == "106"
    log = (work / "stub.log").read_text()
    assert "mlnx_qos -i eth7 --pfc 0,0,0,1,0,0,0,0" in log
    # a storage target configures the NIC of its storage plane, never the GPU HCAs
    text = storage.read_text()
    assert "configure_netdev stor0" in text and "configure_hca" not in text
    work = tmp_path / "s"
    work.mkdir()
    sysfs = fake_sysfs(work, [], ["stor0"])
    (sysfs / "kernel/config/rdma_cm/mlx5_9/ports/1").mkdir(parents=True)
    done = run_script(storage, work, sysfs=sysfs)
    assert done.returncode == 0, done.stderr
    assert (sysfs / "kernel/config/rdma_cm/mlx5_9/ports/1/default_roce_mode").read_text().strip() == "RoCE v2"
    assert "mlnx_qos -i stor0 --trust dscp" in (work / "stub.log").read_text()
    # a required step that fails is reported in the exit status, after trying the rest
    (work / "stubs/mlnx_qos").write_text("#!/bin/sh\nexit 1\n")
    assert run_script(storage, work, sysfs=sysfs).returncode == 1


# ---- discovery.conf against nvme-cli's own option grammar ---------------------------------------

#: Options newer than Debian 12's nvme-cli 2.3, with the release that added them (README states it).
NEWER_THAN_INSTALLED = {"--tls": "2.4"}


@needs_tool("nvme")
def test_discovery_conf_options_are_nvme_discover_options(bundle):
    kind, root = bundle
    confs = sorted(root.glob("hosts/*/etc/nvme/discovery.conf"))
    if DESIGNS[kind]["storage"] == "nfs":
        assert confs == []
        return
    import re

    helptext = run("nvme", "discover", "--help", check=False)
    known = set(re.findall(r"--[a-z][a-z-]+", helptext.stdout + helptext.stderr))
    assert {"--transport", "--traddr", "--hostnqn"} <= known
    readme = (root / "README.md").read_text()
    for path in confs:
        for line in path.read_text().splitlines():
            if line.startswith("#"):
                continue
            for word in line.split():
                option, _, value = word.partition("=")
                assert option in known or option in NEWER_THAN_INSTALLED, f"{path}: {option}"
                assert value or option in ("--tls",), word  # every other option takes a value
                if option in NEWER_THAN_INSTALLED:
                    assert f"`{option}` in discovery.conf ({NEWER_THAN_INSTALLED[option]})" in readme
