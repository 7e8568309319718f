"""Collectors: a copy of /etc, the live host, ss output."""

from __future__ import annotations

import shutil

import pytest

from gpufabric.audit.collect import from_directory, live, parse_ss
from gpufabric.audit.runner import audit
from tests.conftest import DATA

nft_usable = pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None, reason="nft/unshare not installed"
)


def test_parse_ss_authentic_output():
    # captured with `ss -tulpnH` in a namespace holding four python listeners
    rows = parse_ss((DATA / "audit" / "ss-tulpnH.txt").read_text())
    got = {(r["proto"], r["local_addr"], r["port"]) for r in rows}
    assert got == {("udp", "127.0.0.1", 28028), ("tcp", "127.0.0.1", 4420), ("tcp", "0.0.0.0", 22), ("tcp", "*", 29500)}
    assert all('"python3"' in r["process"] for r in rows)


def _etc_copy(bundle, tmp_path, host: str, role: str):
    root = tmp_path / "etc-copy"
    shutil.copytree(bundle / "roles" / role / "etc", root / "etc")
    shutil.copytree(bundle / "hosts" / host / "etc", root / "etc", dirs_exist_ok=True)
    (root / "etc" / "hostname").write_text(host + "\n")
    return root


@nft_usable
def test_copy_of_etc_is_audited_as_its_host(clean_bundle, tmp_path):
    root = _etc_copy(clean_bundle, tmp_path, "compute-1", "compute")
    facts = from_directory(root)
    [view] = facts.hosts
    assert (view.name, view.role) == ("compute-1", "compute")
    report = audit(facts, reachability=True)
    assert report.findings == []
    assert {"NCCL-01", "FW-01", "TORCH-01", "NVMF-06"} <= set(report.passed)
    # only compute-1 is present: the proof says which hosts it could not see
    assert report.proof is not None and "compute-2" in report.proof.missing_hosts


@nft_usable
def test_copy_of_etc_with_an_unloadable_ruleset(clean_bundle, tmp_path):
    root = _etc_copy(clean_bundle, tmp_path, "storage-1", "storage")
    conf = root / "etc" / "nftables.conf"
    conf.write_text(conf.read_text().replace("policy drop;", "policy dorp;", 1))
    report = audit(from_directory(root))
    # a load failure is reported as such (FW-08) with nft's whole message, never as FW-01
    # (behaviour changed by issue 12: it used to be FW-01 with only nft's caret line)
    fw = [f for f in report.findings if f.check_id == "FW-08"]
    assert fw and "rejected" in fw[0].evidence and "Error:" in fw[0].evidence and "dorp" in fw[0].evidence
    assert not [f for f in report.findings if f.check_id == "FW-01"]


def test_live_collector_reports_sources():
    facts = live(env={"NCCL_SOCKET_IFNAME": "eth0", "NCCL_RAS_ADDR": "0.0.0.0:28028"})
    [view] = facts.hosts
    assert view.live and view.env["NCCL_SOCKET_IFNAME"] == "eth0"
    report = audit(facts)
    # environment-only NCCL settings are still audited: RAS bound to every address
    assert any(f.check_id == "NCCL-06" for f in report.findings)
    assert "IB-02" in report.not_available


def test_each_file_is_read_and_each_nccl_env_parsed_once_per_host(tmp_path, monkeypatch) -> None:
    """Issue 32: six checks ask for a host's NCCL settings; the file is read and parsed once."""
    from gpufabric.audit import collect, envfiles
    from gpufabric.audit.collect import HostView

    env = tmp_path / "nccl.env"
    env.write_text("export NCCL_IB_HCA=mlx5_0\nNCCL_IB_TC='106'\n")
    calls = {"read": 0, "parse": 0}
    read_file, parse_env = collect.read_file, envfiles.parse_env

    def counting_read(path):
        calls["read"] += 1
        return read_file(path)

    def counting_parse(text):
        calls["parse"] += 1
        return parse_env(text)

    monkeypatch.setattr(collect, "read_file", counting_read)
    monkeypatch.setattr(envfiles, "parse_env", counting_parse)
    view = HostView(name="h1", role="compute", files={"/etc/gpufabric/nccl.env": env})
    got = [envfiles.nccl_settings(view) for _ in range(6)]
    assert got[0] == ({"NCCL_IB_HCA": "mlx5_0", "NCCL_IB_TC": "106"}, ["/etc/gpufabric/nccl.env"])
    assert all(g is got[0] for g in got)
    assert view.read("/etc/gpufabric/nccl.env") == env.read_text()
    assert calls == {"read": 1, "parse": 1}
    other = HostView(name="h2", role="compute", files={})
    assert envfiles.nccl_settings(other) is None
