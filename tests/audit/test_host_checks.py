"""NVMF-11..13, IB-05..07, ROCE-06/07, HOST-04..07 on host directories.

Each fixture is a copy of one host's /etc from a clean rendered bundle (which audits with
zero findings) plus the sysfs/configfs/procfs files and captured command outputs the
check reads, in the formats of reference/security-config.md and authentic captures in
tests/data/audit/host/. A passing case must give no finding at all; a violating case
exactly the check's own ID and severity.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from gpufabric.audit.collect import from_directory, live
from gpufabric.audit.runner import audit
from gpufabric.audit.sysinfo import (
    parse_cpulist,
    parse_ibv_devinfo,
    parse_lspci_acs,
    parse_modules,
    parse_topo,
)
from tests.audit.conftest import CORPUS, apply_edits, render

HOST_DATA = CORPUS / "host"
NCCL_ENV = "etc/gpufabric/nccl.env"
# lsmod output (header "Module Size Used by", one module a line, kmod's format)
LSMOD_PEERMEM = """Module                  Size  Used by
nvidia_peermem         16384  0
mlx5_ib               454656  0
ib_core               438272  8 rdma_cm,ib_ipoib,iw_cm,ib_umad,rdma_ucm,ib_uverbs,mlx5_ib,nvidia_peermem
nvidia              56471552  2 nvidia_uvm,nvidia_peermem
"""
LSMOD_NO_PEERMEM = "".join(line + "\n" for line in LSMOD_PEERMEM.splitlines() if not line.startswith("nvidia_peermem"))


@pytest.fixture(scope="session")
def roce_bundle(tmp_path_factory) -> Path:
    return render(
        CORPUS / "lab-ib.yaml", tmp_path_factory.mktemp("roce") / "clean", fabrics="roce-400g", storage="nvmeof-rdma"
    )


def host_dir(bundle: Path, tmp_path: Path, host: str, role: str, files: dict[str, str]) -> Path:
    """A copy of one host's /etc plus sys/, proc/, usr/ and commands/ files."""
    root = tmp_path / host
    shutil.copytree(bundle / "roles" / role / "etc", root / "etc")
    if (bundle / "hosts" / host / "etc").is_dir():
        shutil.copytree(bundle / "hosts" / host / "etc", root / "etc", dirs_exist_ok=True)
    (root / "etc" / "hostname").write_text(host + "\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def result(root: Path) -> tuple[list[tuple[str, str]], object]:
    report = audit(from_directory(root))
    return sorted((f.check_id, f.severity.value) for f in report.findings), report


def passes(root: Path, check_id: str) -> None:
    found, report = result(root)
    assert found == [], [(f.check_id, f.subject, f.evidence) for f in report.findings]
    assert check_id in report.passed, report.not_available.get(check_id)


def data(name: str) -> str:
    return (HOST_DATA / name).read_text()


# -- parsers on authentic captures ------------------------------------------------------


def test_parse_ibv_devinfo_ports():
    ports = parse_ibv_devinfo(data("ibv_devinfo-roce.txt"))
    assert [(p.hca, p.port, p.state, p.active_mtu_bytes, p.link_layer) for p in ports] == [
        ("rocep1s0f0", 1, "PORT_ACTIVE", 4096, "Ethernet"),
        ("rocep1s0f1", 1, "PORT_DOWN", 1024, "Ethernet"),
    ]


def test_parse_topo_renames_nics_through_the_legend():
    matrix = parse_topo(data("nvidia-smi-topo-m.txt"))
    assert sorted(matrix) == [f"GPU{i}" for i in range(8)]
    assert matrix["GPU0"]["mlx5_0"] == "PXB" and matrix["GPU0"]["mlx5_8"] == "SYS"
    assert matrix["GPU7"]["mlx5_7"] == "PXB" and len(matrix["GPU7"]) == 10


def test_parse_lspci_acs_bridges():
    [bridge] = parse_lspci_acs(data("lspci-vvv-acs-off.txt"))
    assert bridge.bdf == "00:13.1" and not bridge.redirects and bridge.acsctl["SrcValid"] is False
    bridges = parse_lspci_acs(data("lspci-vvv-acs-redirect.txt"))
    assert [b.bdf for b in bridges] == ["00:01.1", "00:01.2"] and all(b.redirects for b in bridges)


def test_parse_cpulist_and_modules():
    assert parse_cpulist("0-2,8,10-11\n") == {0, 1, 2, 8, 10, 11}
    assert parse_modules(LSMOD_PEERMEM) == {"nvidia_peermem", "mlx5_ib", "ib_core", "nvidia"}


# -- NVMe-oF ---------------------------------------------------------------------------

NVMET_MODULE = "usr/lib/python3/dist-packages/nvmet/nvme.py"


def test_nvmf11_nvmetcli_with_dhchap_passes(clean_bundle, tmp_path):
    root = host_dir(
        clean_bundle, tmp_path, "storage-1", "storage", {NVMET_MODULE: data("nvmet-nvme-with-dhchap.py.txt")}
    )
    passes(root, "NVMF-11")


def test_nvmf11_nvmetcli_before_7a94d92(clean_bundle, tmp_path):
    root = host_dir(
        clean_bundle, tmp_path, "storage-1", "storage", {NVMET_MODULE: data("nvmet-nvme-before-7a94d92.py.txt")}
    )
    found, report = result(root)
    assert found == [("NVMF-11", "medium")]
    assert "/usr/lib/python3/dist-packages/nvmet/nvme.py" in report.findings[0].subject


def _spdk_socket(root: Path, mode: int, monkeypatch) -> None:
    sock_dir = root / "var" / "tmp"
    sock_dir.mkdir(parents=True)
    monkeypatch.chdir(sock_dir)  # AF_UNIX paths are limited to 108 bytes; bind relative
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind("spdk.sock")
    sock.close()
    os.chmod(sock_dir / "spdk.sock", mode)


@pytest.mark.parametrize(
    ("mode", "expect"),
    [(0o600, []), (0o660, []), (0o777, [("NVMF-12", "critical")]), (0o755, [("NVMF-12", "critical")])],
)
def test_nvmf12_spdk_rpc_socket_mode(clean_bundle, tmp_path, monkeypatch, mode, expect):
    root = host_dir(clean_bundle, tmp_path, "storage-1", "storage", {})
    _spdk_socket(root, mode, monkeypatch)
    found, report = result(root)
    assert found == expect
    if not expect:
        assert "NVMF-12" in report.passed
    else:
        assert f"socket mode {mode:04o}" in report.findings[0].evidence


def test_nvmf13_rdma_discovery_inherits_roce_tos(roce_bundle, tmp_path):
    root = host_dir(
        roce_bundle,
        tmp_path,
        "compute-1",
        "compute",
        {
            "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos": "106\n",
            "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode": "RoCE v2\n",
        },
    )
    passes(root, "NVMF-13")


def test_nvmf13_rdma_cm_tos_off_the_roce_class(roce_bundle, tmp_path):
    root = host_dir(
        roce_bundle,
        tmp_path,
        "compute-1",
        "compute",
        {
            "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos": "0\n",
            "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode": "RoCE v2\n",
        },
    )
    found, report = result(root)
    assert found == [("NVMF-13", "medium")]
    assert "default_roce_tos 0" in report.findings[0].evidence


def test_nvmf13_nvme_connect_tos_option(roce_bundle, tmp_path):
    root = host_dir(roce_bundle, tmp_path, "compute-1", "compute", {})
    conf = root / "etc/nvme/discovery.conf"
    lines = conf.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("--transport=rdma"))
    lines[first] += " --tos=32"  # DSCP 8, not the RoCE class DSCP 26
    conf.write_text("\n".join(lines) + "\n")
    found, report = result(root)
    assert found == [("NVMF-13", "medium")]
    assert "-T 32 is DSCP 8" in report.findings[0].evidence


# -- InfiniBand ------------------------------------------------------------------------

PKEYS = "sys/class/infiniband/mlx5_0/ports/1/pkeys/"


def test_ib05_ib06_pkey_table_of_the_planes_passes(clean_bundle, tmp_path):
    # compute sits on every plane; index 0 is the compute-data PKey 0x0030 (indx0), full member
    root = host_dir(
        clean_bundle,
        tmp_path,
        "compute-1",
        "compute",
        {PKEYS + "0": "0x8030\n", PKEYS + "1": "0x7fff\n", PKEYS + "2": "0x8040\n", PKEYS + "3": "0x0000\n"},
    )
    passes(root, "IB-05")
    passes(root, "IB-06")


def test_ib05_full_member_of_the_default_partition(clean_bundle, tmp_path):
    root = host_dir(clean_bundle, tmp_path, "compute-1", "compute", {PKEYS + "0": "0x8030\n", PKEYS + "1": "0xffff\n"})
    found, report = result(root)
    assert found == [("IB-05", "high")]
    assert "0xffff" in report.findings[0].evidence


def test_ib06_nccl_pkey_index_points_at_storage(clean_bundle, tmp_path):
    root = host_dir(clean_bundle, tmp_path, "compute-1", "compute", {PKEYS + "0": "0x8040\n", PKEYS + "1": "0x8030\n"})
    found, report = result(root)
    assert found == [("IB-06", "medium")]
    assert "NCCL_IB_PKEY=0" in report.findings[0].evidence and "0x8040" in report.findings[0].evidence
    # pointing NCCL at index 1 fixes it
    env = root / NCCL_ENV
    env.write_text(env.read_text().replace("NCCL_IB_PKEY=0", "NCCL_IB_PKEY=1"))
    passes(root, "IB-06")


def test_ib07_active_mtu(clean_bundle, tmp_path):
    root = host_dir(
        clean_bundle, tmp_path, "compute-1", "compute", {"commands/ibv_devinfo.txt": data("ibv_devinfo-ib.txt")}
    )
    passes(root, "IB-07")
    (root / "commands/ibv_devinfo.txt").write_text(
        data("ibv_devinfo-ib.txt").replace("active_mtu:\t\t4096 (5)", "active_mtu:\t\t2048 (4)")
    )
    found, report = result(root)
    assert found == [("IB-07", "medium")]
    assert "active_mtu 2048" in report.findings[0].evidence


def test_ib07_partition_mtu_in_the_bundle(bundle_copy):
    apply_edits(
        bundle_copy,
        [
            {
                "replace": {
                    "file": "fabric/etc/opensm/partitions.conf",
                    "old": "data=0x0030, indx0, ipoib, mtu=5",
                    "new": "data=0x0030, indx0, ipoib, mtu=4",
                }
            }
        ],
    )
    report = audit(from_directory(bundle_copy))
    assert sorted((f.check_id, f.severity.value) for f in report.findings) == [("IB-07", "medium")]
    assert "mtu=4 (2048 bytes)" in report.findings[0].evidence


# -- RoCE ------------------------------------------------------------------------------


def test_roce06_mtu(roce_bundle, tmp_path):
    root = host_dir(
        roce_bundle,
        tmp_path,
        "compute-1",
        "compute",
        {"commands/ibv_devinfo.txt": data("ibv_devinfo-roce.txt"), "commands/ip-j-link.json": data("ip-j-link.json")},
    )
    passes(root, "ROCE-06")  # the down port's 1024 does not count
    (root / "commands/ip-j-link.json").write_text(data("ip-j-link-mtu1500.json"))
    found, report = result(root)
    assert found == [("ROCE-06", "medium")]
    assert report.findings[0].subject == "compute-1: data0 (data)" and "mtu 1500" in report.findings[0].evidence


def test_roce06_mtu_differs_between_hosts(roce_bundle, tmp_path):
    from gpufabric.audit.checks_fabric import roce06

    a = host_dir(roce_bundle, tmp_path, "compute-1", "compute", {"commands/ip-j-link.json": data("ip-j-link.json")})
    b = host_dir(
        roce_bundle, tmp_path, "compute-2", "compute", {"commands/ip-j-link.json": data("ip-j-link-mtu1500.json")}
    )
    facts = from_directory(a)
    facts.hosts += from_directory(b).hosts
    found = [(f.subject, f.evidence) for f in roce06(facts)]
    assert found == [
        ("compute-2: data0 (data)", "netdev mtu 1500 < 4200: RoCE falls below 4096"),
        ("data0", "MTU differs between hosts: 1500: compute-2; 9000: compute-1"),
    ]


def test_roce07_rdma_cm_mode(roce_bundle, tmp_path):
    mode = "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode"
    root = host_dir(roce_bundle, tmp_path, "compute-1", "compute", {mode: "RoCE v2\n"})
    passes(root, "ROCE-07")
    (root / mode).write_text("IB/RoCE v1\n")
    found, report = result(root)
    assert found == [("ROCE-07", "low")]
    assert "'IB/RoCE v1'" in report.findings[0].evidence


# -- host ------------------------------------------------------------------------------


def _irqs(affinity_121: str) -> dict[str, str]:
    return {
        "sys/class/net/data0/device/numa_node": "1\n",
        "sys/class/net/data0/device/msi_irqs/120": "msix\n",
        "sys/class/net/data0/device/msi_irqs/121": "msix\n",
        "sys/devices/system/node/node1/cpulist": "48-95,144-191\n",
        "proc/irq/120/smp_affinity_list": "48\n",
        "proc/irq/121/smp_affinity_list": affinity_121,
    }


def test_host04_irqs_on_the_nic_node(clean_bundle, tmp_path):
    passes(host_dir(clean_bundle, tmp_path, "compute-1", "compute", _irqs("49\n")), "HOST-04")


def test_host04_irq_off_node(clean_bundle, tmp_path):
    found, report = result(host_dir(clean_bundle, tmp_path, "compute-1", "compute", _irqs("0-191\n")))
    assert found == [("HOST-04", "medium")]
    assert report.findings[0].subject == "compute-1: data0" and "IRQ 121 -> 0-191" in report.findings[0].evidence


def test_host05_gpus_next_to_their_hcas(clean_bundle, tmp_path):
    root = host_dir(
        clean_bundle,
        tmp_path,
        "compute-1",
        "compute",
        {"commands/nvidia-smi-topo-m.txt": data("nvidia-smi-topo-m.txt")},
    )
    passes(root, "HOST-05")


def test_host05_nccl_hcas_across_the_smp_link(clean_bundle, tmp_path):
    root = host_dir(
        clean_bundle,
        tmp_path,
        "compute-1",
        "compute",
        {"commands/nvidia-smi-topo-m.txt": data("nvidia-smi-topo-m.txt")},
    )
    env = root / NCCL_ENV
    text = env.read_text()
    hca = next(line for line in text.splitlines() if line.startswith("NCCL_IB_HCA="))
    env.write_text(text.replace(hca, "NCCL_IB_HCA==mlx5_8:1,mlx5_9:1"))
    found, report = result(root)
    assert found == [("HOST-05", "medium")] * 8
    assert report.findings[0].evidence == "nearest NIC mlx5_8 is SYS (nvidia-smi topo -m)"


CMDLINE = "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=/dev/nvme0n1p2 ro {}\n"


def test_host06_acs_off_with_iommu_pt(clean_bundle, tmp_path):
    passes(
        host_dir(
            clean_bundle,
            tmp_path,
            "compute-1",
            "compute",
            {"commands/lspci-vvv.txt": data("lspci-vvv-acs-off.txt"), "proc/cmdline": CMDLINE.format("iommu=pt")},
        ),
        "HOST-06",
    )


def test_host06_acs_redirect_breaks_gdr(clean_bundle, tmp_path):
    found, report = result(
        host_dir(
            clean_bundle,
            tmp_path,
            "compute-1",
            "compute",
            {"commands/lspci-vvv.txt": data("lspci-vvv-acs-redirect.txt"), "proc/cmdline": CMDLINE.format("iommu=pt")},
        )
    )
    assert found == [("HOST-06", "medium")]
    assert "00:01.1, 00:01.2" in report.findings[0].subject


def test_host06_acs_off_under_a_translating_iommu_is_high(clean_bundle, tmp_path):
    found, report = result(
        host_dir(
            clean_bundle,
            tmp_path,
            "compute-1",
            "compute",
            {"commands/lspci-vvv.txt": data("lspci-vvv-acs-off.txt"), "proc/cmdline": CMDLINE.format("intel_iommu=on")},
        )
    )
    assert found == [("HOST-06", "high")]
    assert "bypasses IOMMU isolation" in report.findings[0].evidence


def test_host07_memlock_and_peermem(clean_bundle, tmp_path):
    files = {"commands/ulimit-l.txt": "unlimited\n", "commands/lsmod.txt": LSMOD_PEERMEM}
    root = host_dir(clean_bundle, tmp_path, "compute-1", "compute", files)
    passes(root, "HOST-07")
    (root / "commands/ulimit-l.txt").write_text("8192\n")
    found, report = result(root)
    assert found == [("HOST-07", "low")] and "ulimit -l = 8192 KiB" in report.findings[0].evidence
    (root / "commands/ulimit-l.txt").write_text("unlimited\n")
    (root / "commands/lsmod.txt").write_text(LSMOD_NO_PEERMEM)
    found, report = result(root)
    assert found == [("HOST-07", "low")] and "without nvidia_peermem" in report.findings[0].evidence


# -- not available ---------------------------------------------------------------------

NEW = (
    "NVMF-11",
    "NVMF-12",
    "NVMF-13",
    "IB-05",
    "IB-06",
    "IB-07",
    "ROCE-06",
    "ROCE-07",
    "HOST-04",
    "HOST-05",
    "HOST-06",
    "HOST-07",
)


def test_clean_bundles_leave_the_host_checks_not_available(clean_bundle, roce_bundle):
    """Bundles carry no sysfs or tool output: those checks say why instead of passing."""
    for bundle in (clean_bundle, roce_bundle):
        report = audit(from_directory(bundle))
        # lab-ib.yaml's policy opens NVMe/TCP 4420 on the targets; the RoCE variant exports
        # NVMe/RDMA, so that port is open for nothing (BND-03), and only there
        assert [f.check_id for f in report.findings] == ([] if bundle is clean_bundle else ["BND-03"])
        for check_id in (
            "NVMF-11",
            "NVMF-12",
            "IB-05",
            "IB-06",
            "ROCE-06",
            "ROCE-07",
            "HOST-04",
            "HOST-05",
            "HOST-06",
            "HOST-07",
        ):
            assert check_id in report.not_available, check_id
    assert "IB-07" in audit(from_directory(clean_bundle)).passed  # partitions.conf mtu=5
    assert "NVMF-13" in audit(from_directory(roce_bundle)).passed  # discovery.conf without -T


def test_live_host_without_rdma_or_gpu(tmp_path):
    if Path("/sys/class/infiniband").is_dir() or shutil.which("nvidia-smi") or Path("/var/tmp/spdk.sock").exists():
        pytest.skip("this host has RDMA, a GPU or SPDK: the not-available path needs a host without them")
    report = audit(live(env={}))
    for check_id in ("NVMF-11", "NVMF-12", "NVMF-13", "IB-05", "IB-06", "IB-07", "ROCE-07", "HOST-05", "HOST-07"):
        assert check_id in report.not_available, check_id
    assert "SPDK" in report.not_available["NVMF-12"] and "nvidia-smi" in report.not_available["HOST-05"]
    assert not any(f.check_id in NEW for f in report.findings)
