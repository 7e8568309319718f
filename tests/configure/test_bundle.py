"""Rendered artefacts: nftables passes the real nft, nvmetcli JSON is well formed, secrets stay secret."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from gpufabric.configure.nqn import DISCOVERY_NQN, nqn_problem
from tests.audit.conftest import CORPUS, render
from tests.conftest import needs_tool

DESIGNS = {
    "ib": {"fabrics": "ib-ndr", "storage": "nvmeof-tcp"},
    "roce": {"fabrics": "roce-400g", "storage": "nvmeof-rdma"},
    "tcp": {"fabrics": "tcp-100g", "storage": "nfs"},
}


@pytest.fixture(scope="module", params=sorted(DESIGNS))
def bundle(request, tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp(request.param) / "b"
    return request.param, render(CORPUS / "lab-ib.yaml", out, **DESIGNS[request.param])


def files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


@needs_tool("nft")
def test_every_nftables_ruleset_passes_nft_check(bundle):
    _kind, root = bundle
    rulesets = sorted(root.glob("roles/*/etc/nftables.conf"))
    assert len(rulesets) == 4
    for path in rulesets:
        done = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True, timeout=20)
        assert done.returncode == 0, f"{path}: {done.stderr}"
        text = path.read_text()
        assert "policy drop;" in text and "iifname vmap" in text and "flags interval" in text


def test_nvmetcli_json_shape(bundle):
    kind, root = bundle
    targets = sorted(root.glob("hosts/*/etc/nvmet/config.json"))
    if DESIGNS[kind]["storage"] == "nfs":
        assert targets == []
        return
    assert len(targets) == 2
    policy = json.loads((root / "policy.json").read_text())
    stor = next(p for p in policy["policy"]["planes"] if p["kind"] == "storage")
    import ipaddress

    for path in targets:
        doc = json.loads(path.read_text())
        assert set(doc) == {"hosts", "ports", "subsystems"}
        host_nqns = [h["nqn"] for h in doc["hosts"]]
        assert len(host_nqns) == 2 and len(set(host_nqns)) == 2
        for host in doc["hosts"]:
            assert set(host["dhchap"]) == {"key", "ctrl_key", "hash", "dhgroup"}
            assert host["dhchap"]["key"].startswith("DHHC-1:03:") and host["dhchap"]["ctrl_key"].startswith(
                "DHHC-1:03:"
            )
            assert host["dhchap"]["key"] != host["dhchap"]["ctrl_key"]
        for sub in doc["subsystems"]:
            assert nqn_problem(sub["nqn"]) is None
            # mutual exclusion (kernel configfs.c): explicit hosts and allow_any_host never together
            assert sub["attr"]["allow_any_host"] == "0" and sub["allowed_hosts"] == host_nqns
            assert all(isinstance(v, str) for v in sub["attr"].values())
            assert sub["namespaces"][0]["nsid"] == 1
        for port in doc["ports"]:
            addr = port["addr"]
            assert ipaddress.IPv4Address(addr["traddr"]) in ipaddress.IPv4Network(stor["cidr"])
            assert addr["trtype"] == ("tcp" if kind == "ib" else "rdma")
            if addr["trtype"] == "tcp":
                assert (addr["tsas"], addr["treq"]) == ("tls1.3", "required")
            assert port["subsystems"] == [doc["subsystems"][0]["nqn"]]
        # discovery is served on the I/O port: no separate 8009 listener (issue 11)
        assert {p["addr"]["trsvcid"] for p in doc["ports"]} == {"4420"}
        assert DISCOVERY_NQN not in json.dumps(doc["subsystems"])


def test_host_files(bundle):
    kind, root = bundle
    if DESIGNS[kind]["storage"] == "nfs":
        assert not list(root.glob("hosts/*/etc/nvme/hostnqn"))
        return
    nqns = [p.read_text().strip() for p in sorted(root.glob("hosts/compute-*/etc/nvme/hostnqn"))]
    assert len(nqns) == 2 and len(set(nqns)) == 2 and all(nqn_problem(n) is None for n in nqns)
    conf = json.loads((root / "hosts/compute-1/etc/nvme/config.json").read_text())
    # libnvme reads only a top-level array; it lists only discovery controllers (issue 11)
    assert isinstance(conf, list) and conf[0]["hostnqn"] == nqns[0]
    assert [s["nqn"] for s in conf[0]["subsystems"]] == [DISCOVERY_NQN]
    assert len(conf[0]["subsystems"][0]["ports"]) == 2
    hostid = (root / "hosts/compute-1/etc/nvme/hostid").read_text().strip()
    assert nqns[0].endswith(":uuid:" + hostid) and conf[0]["hostid"] == hostid
    discovery = (root / "hosts/compute-1/etc/nvme/discovery.conf").read_text().splitlines()
    assert sum(not line.startswith("#") for line in discovery) == 2
    assert all(f"--hostnqn={nqns[0]}" in line for line in discovery if not line.startswith("#"))


def test_fabric_artefacts_per_kind(bundle):
    kind, root = bundle
    names = set(files(root))
    assert ("fabric/etc/opensm/partitions.conf" in names) == (kind == "ib")
    assert ("roles/compute/usr/local/sbin/gpufabric-roce-qos" in names) == (kind == "roce")
    env = (root / "roles/compute/etc/gpufabric/nccl.env").read_text()
    assert "NCCL_SOCKET_IFNAME==ctl0" in env and "NCCL_RAS_ADDR=127.0.0.1:28028" in env
    assert "NCCL_ALGO=Ring" in env  # lab-ib.yaml asks for bitwise reproducibility
    if kind == "ib":
        parts = (root / "fabric/etc/opensm/partitions.conf").read_text()
        assert "Default=0x7fff, ipoib : ALL=limited, SELF=full ;" in parts
        assert "data=0x0030, indx0" in parts and "NCCL_IB_PKEY=0" in env
        conf = (root / "fabric/etc/opensm/opensm.conf").read_text()
        assert "part_enforce both" in conf and "m_key 0x" in conf
    if kind == "roce":
        script = (root / "roles/compute/usr/local/sbin/gpufabric-roce-qos").read_text()
        assert "PFC=0,0,0,1,0,0,0,0" in script and "--trust dscp" in script and "TOS=106" in script
        # NCCL picks the GID itself (issue 11: a pinned index breaks with VLAN netdevs)
        assert "NCCL_IB_TC=106" in env and "NCCL_IB_GID_INDEX=" not in env
    if kind == "tcp":
        assert "NCCL_IB_DISABLE=1" in env and "NCCL_IB_HCA" not in env


def test_secrets_are_0600_and_nowhere_else(bundle):
    _kind, root = bundle
    manifest = json.loads((root / "manifest.json").read_text())
    secret = {f["path"] for f in manifest["files"] if f["secret"]}
    every = files(root)
    assert set(every) == {f["path"] for f in manifest["files"]} | {"manifest.json"}
    values = set()
    for rel in secret:
        assert stat.S_IMODE(every[rel].stat().st_mode) == 0o600
        text = every[rel].read_text()
        values |= set(
            re.findall(r"DHHC-1:\d\d:[A-Za-z0-9+/=]+:|NVMeTLSkey-1:\d\d:[A-Za-z0-9+/=]+:|0x[0-9a-f]{16}", text)
        )
    for rel, path in every.items():
        if rel in secret:
            continue
        text = path.read_text()
        assert not any(v in text for v in values), rel


def test_rendering_is_deterministic_apart_from_secrets(tmp_path):
    a = render(CORPUS / "lab-ib.yaml", tmp_path / "a", seed="one")
    b = render(CORPUS / "lab-ib.yaml", tmp_path / "b", seed="two")
    c = render(CORPUS / "lab-ib.yaml", tmp_path / "c", seed="one")
    manifest = json.loads((a / "manifest.json").read_text())
    secret = {f["path"] for f in manifest["files"] if f["secret"]}
    fa, fb, fc = files(a), files(b), files(c)
    assert set(fa) == set(fb) == set(fc)
    differing = {rel for rel in fa if fa[rel].read_bytes() != fb[rel].read_bytes()}
    assert differing == secret
    assert all(fa[rel].read_bytes() == fc[rel].read_bytes() for rel in fa)
    shutil.rmtree(tmp_path)


def test_renderer_refuses_to_leak_a_secret(monkeypatch):
    from gpufabric.configure import KeySource, design_from_spec, nvme, render_bundle
    from gpufabric.spec import load_spec

    real = nvme.host_files

    def leaky(**kwargs):
        files = real(**kwargs)
        key = json.loads(files.config_json)[0]["dhchap_key"]
        return nvme.HostNvmeFiles(
            hostnqn=files.hostnqn,
            hostid=files.hostid,
            config_json=files.config_json,
            tls_keys=files.tls_keys,
            discovery_conf=files.discovery_conf + f"# {key}\n",
        )

    monkeypatch.setattr(nvme, "host_files", leaky)
    spec = load_spec(CORPUS / "lab-ib.yaml").spec
    with pytest.raises(AssertionError, match="leaked into hosts/compute-1/etc/nvme/discovery.conf"):
        render_bundle(spec, design_from_spec(spec), KeySource(seed=b"x"))


def test_key_file_makes_secrets_reproducible(cli, tmp_path):
    key = tmp_path / "key"
    key.write_bytes(bytes(range(32)))
    outs = []
    for name in ("a", "b"):
        code, _, err = cli("config", CORPUS / "lab-ib.yaml", "--out", tmp_path / name, "--key-file", key)
        assert code == 0, err
        outs.append((tmp_path / name / "fabric/etc/opensm/opensm.conf").read_text())
    assert outs[0] == outs[1] and "m_key 0x" in outs[0]
    key.write_bytes(b"short")
    code, _, err = cli("config", CORPUS / "lab-ib.yaml", "--dry-run", "--key-file", key)
    assert code == 2 and "at least 16" in err


@needs_tool("bash")
def test_shell_scripts_parse(bundle):
    _kind, root = bundle
    scripts = [p for p in root.rglob("*") if p.is_file() and p.read_text().startswith("#!/bin/")]
    assert scripts
    for path in scripts:
        shell = "sh" if path.read_text().startswith("#!/bin/sh") else "bash"
        done = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, f"{path}: {done.stderr}"
        assert stat.S_IMODE(path.stat().st_mode) == 0o755


def test_manifest_round_trips_through_its_module(bundle):
    from gpufabric.configure.manifest import MANIFEST_SCHEMA_VERSION, Manifest, read_manifest

    _kind, root = bundle
    data = json.loads((root / "manifest.json").read_text())
    assert data["schema_version"] == MANIFEST_SCHEMA_VERSION
    manifest = read_manifest(root)
    assert manifest.to_dict() == data
    assert Manifest.from_dict(manifest.to_dict()) == manifest
    assert manifest.files and all(f.mode == 0o600 for f in manifest.files if f.secret)


def test_a_manifest_of_the_previous_version_reads(bundle):
    from gpufabric.configure.manifest import Manifest

    _kind, root = bundle
    data = json.loads((root / "manifest.json").read_text())
    del data["schema_version"]  # v0: written before the key existed
    assert Manifest.from_dict(data).hosts


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": 2}, "bundle manifest schema_version 2 is newer than this gpufabric reads"),
        ({"kind": "something-else"}, "kind 'something-else'"),
        ({"hosts": [{"host": "../../etc", "role": "compute"}]}, "not a single name"),
        ({"hosts": [{"host": "..", "role": "compute"}]}, "refusing bundle path"),
        ({"files": [{"path": "a", "mode": "777", "secret": False}]}, "four octal digits"),
    ],
)
def test_a_manifest_that_cannot_be_read_safely_is_refused(tmp_path, change, message):
    from gpufabric.configure.manifest import read_manifest
    from gpufabric.errors import InputError

    doc = {
        "schema_version": 1,
        "gpufabric_version": "x",
        "kind": "gpufabric-config-bundle",
        "spec": "s",
        "design": {},
        "hosts": [],
        "files": [],
        **change,
    }
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=message):
        read_manifest(tmp_path)


def test_audit_of_a_bundle_from_a_newer_gpufabric_exits_2(cli, bundle, tmp_path):
    _kind, root = bundle
    copy = tmp_path / "newer"
    shutil.copytree(root, copy)
    data = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**data, "schema_version": 9}))
    code, _, err = cli("audit", "--config", copy)
    assert code == 2 and "schema_version 9 is newer" in err and "Traceback" not in err
