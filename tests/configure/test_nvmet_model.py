"""The nvmet JSON against a model of `nvmetcli restore` and the kernel's configfs rules.

nvmetcli is in neither Debian 12 nor PyPI, so its restore walk is modelled from its
source (linux-nvme/nvmetcli nvmet/nvme.py, commit 112cd9d, read 2026-12-01): hosts first,
then subsystems (namespaces, allowed_hosts symlinks, then the ``attr`` group), then ports
(``addr``/``param`` groups, subsystem symlinks, ANA groups, referrals). Every key of an
attribute group becomes the file ``<group>_<key>``, which must exist in configfs;
``enable`` is written last and a namespace cannot be enabled on a missing device (the
kernel opens it), which nvmetcli does not catch: the restore aborts with a traceback.
Attribute names and value rules are the kernel's (drivers/nvme/target/configfs.c, Linux
6.8): a value the kernel rejects fails the write with EINVAL.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from tests.audit.conftest import CORPUS, render

#: configfs files per object (kernel drivers/nvme/target/configfs.c, 6.8); the host's dhchap
#: group is restored by nvmetcli from commit 7a94d92 on.
FILES = {
    "host": {"dhchap_key", "dhchap_ctrl_key", "dhchap_hash", "dhchap_dhgroup"},
    "subsystem": {
        "attr_allow_any_host",
        "attr_version",
        "attr_serial",
        "attr_model",
        "attr_cntlid_min",
        "attr_cntlid_max",
        "attr_pi_enable",
        "attr_qid_max",
        "attr_ieee_oui",
        "attr_firmware",
    },
    "namespace": {
        "device_path",
        "device_uuid",
        "device_nguid",
        "enable",
        "ana_grpid",
        "buffered_io",
        "p2pmem",
        "revalidate_size",
        "resv_enable",
    },
    "port": {
        "addr_adrfam",
        "addr_traddr",
        "addr_treq",
        "addr_trsvcid",
        "addr_trtype",
        "addr_tsas",
        "param_inline_data_size",
        "param_pi_enable",
        "param_max_queue_size",
    },
    "ana_group": {"ana_state"},
}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Value rules: the kernel's store functions (EINVAL otherwise).
RULES = {
    "dhchap_key": lambda v: v.startswith("DHHC-1:"),
    "dhchap_ctrl_key": lambda v: v.startswith("DHHC-1:"),
    "dhchap_hash": lambda v: v in ("hmac(sha256)", "hmac(sha384)", "hmac(sha512)"),
    "dhchap_dhgroup": lambda v: v in ("null", "ffdhe2048", "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192"),
    "attr_allow_any_host": lambda v: v in ("0", "1", "y", "n"),
    "attr_version": lambda v: re.fullmatch(r"\d+\.\d+(\.\d+)?", v) is not None,
    "attr_serial": lambda v: 0 < len(v) <= 20 and all(0x20 <= ord(c) <= 0x7E for c in v),
    "attr_model": lambda v: 0 < len(v) <= 40 and all(0x20 <= ord(c) <= 0x7E for c in v),
    "attr_cntlid_min": lambda v: v.isdigit() and 1 <= int(v) <= 0xFFEF,
    "attr_cntlid_max": lambda v: v.isdigit() and 1 <= int(v) <= 0xFFEF,
    "attr_pi_enable": lambda v: v in ("0", "1"),
    "device_path": lambda v: v.startswith("/"),
    "device_uuid": lambda v: UUID.fullmatch(v) is not None,
    "device_nguid": lambda v: UUID.fullmatch(v) is not None,
    "addr_adrfam": lambda v: v in ("ipv4", "ipv6", "ib", "fc", "loop"),
    "addr_trtype": lambda v: v in ("rdma", "tcp", "fc", "loop"),
    "addr_treq": lambda v: v in ("not specified", "required", "not required"),
    "addr_tsas": lambda v: v in ("none", "tls1.3"),
    "addr_trsvcid": lambda v: v.isdigit() and 0 < int(v) < 65536,
    "param_inline_data_size": lambda v: v.lstrip("-").isdigit(),
    "ana_state": lambda v: v in ("optimized", "non-optimized", "inaccessible", "persistent-loss", "change"),
}


class RestoreError(Exception):
    """What nvmetcli would report (or die with)."""


def _attrs(kind: str, node: dict, groups: tuple[str, ...], done: dict[str, str]) -> None:
    for group in groups:
        for key, value in node.get(group, {}).items():
            name = f"{group}_{key}"
            if name not in FILES[kind]:
                raise RestoreError(f"Cannot find attribute: {kind}/{name}")
            if not isinstance(value, str) or not RULES.get(name, lambda v: True)(value):
                raise RestoreError(f"Cannot set attribute {kind}/{name}: Invalid argument ({value!r})")
            done[name] = value


def restore(config: dict, existing_devices: set[str]) -> dict:
    """Walk ``config`` as nvmetcli restore does; return the configfs state or raise."""
    state: dict = {"hosts": {}, "subsystems": {}, "ports": {}}
    for host in config.get("hosts", []):
        attrs: dict[str, str] = {}
        _attrs("host", host, ("dhchap",), attrs)
        state["hosts"][host["nqn"]] = attrs
    for sub in config.get("subsystems", []):
        entry: dict = {"namespaces": {}, "allowed_hosts": [], "attrs": {}}
        for ns in sub.get("namespaces", []):
            if not 1 <= int(ns["nsid"]) <= 8192:
                raise RestoreError("NSID must be 1 to 8192")
            attrs = {}
            _attrs("namespace", ns, ("device",), attrs)
            if ns.get("enable") not in (None, 0, 1):
                raise RestoreError(f"Cannot enable namespace: {ns['enable']!r}")
            if ns.get("enable") == 1 and attrs.get("device_path") not in existing_devices:
                # set_enable raises CFSError outside _setup_attrs' try: a traceback, half a target
                raise RestoreError(f"Cannot enable namespace {ns['nsid']}: No such file or directory (traceback)")
            entry["namespaces"][ns["nsid"]] = {**attrs, "enable": ns.get("enable", 0)}
        for nqn in sub.get("allowed_hosts", []):
            if nqn not in state["hosts"]:
                raise RestoreError(f"Could not symlink {nqn} in configFS: no such host")
            entry["allowed_hosts"].append(nqn)
        _attrs("subsystem", sub, ("attr",), entry["attrs"])
        low, high = int(entry["attrs"].get("attr_cntlid_min", 1)), int(entry["attrs"].get("attr_cntlid_max", 0xFFEF))
        if low > high:
            raise RestoreError("cntlid_min > cntlid_max: Invalid argument")
        if entry["attrs"].get("attr_allow_any_host") == "1" and entry["allowed_hosts"]:
            raise RestoreError("allow_any_host with allowed_hosts: Invalid argument (kernel configfs.c)")
        state["subsystems"][sub["nqn"]] = entry
    for port in config.get("ports", []):
        attrs = {}
        _attrs("port", port, ("addr", "param"), attrs)
        if attrs.get("addr_tsas") == "tls1.3" and attrs.get("addr_trtype") != "tcp":
            raise RestoreError("tsas tls1.3 on a non-TCP port: Invalid argument")
        for nqn in port.get("subsystems", []):
            if nqn not in state["subsystems"]:
                raise RestoreError(f"Could not symlink {nqn} in configFS: no such subsystem")
        for group in port.get("ana_groups", []):
            if not 1 <= int(group["grpid"]) <= 1024:
                raise RestoreError("GRPID must be 1 to 1024")
            _attrs("ana_group", group, ("ana",), {})
        state["ports"][port["portid"]] = {"attrs": attrs, "subsystems": list(port.get("subsystems", []))}
    return state


@pytest.fixture(scope="module", params=[("ib-ndr", "nvmeof-tcp"), ("roce-400g", "nvmeof-rdma")], ids=["tcp", "rdma"])
def target_configs(request, tmp_path_factory):
    fabric, storage = request.param
    root = render(CORPUS / "lab-ib.yaml", tmp_path_factory.mktemp(storage) / "b", fabrics=fabric, storage=storage)
    return storage, [json.loads(p.read_text()) for p in sorted(root.glob("hosts/*/etc/nvmet/config.json"))]


def test_every_target_config_restores(target_configs):
    storage, configs = target_configs
    assert configs
    for config in configs:
        state = restore(config, existing_devices=set())
        (sub,) = state["subsystems"].values()
        assert sub["attrs"]["attr_allow_any_host"] == "0" and len(sub["allowed_hosts"]) == 2
        assert all(ns["enable"] == 0 for ns in sub["namespaces"].values())  # until the device is set
        (port,) = state["ports"].values()  # one port: discovery is served on it, no 8009 listener
        assert port["attrs"]["addr_trsvcid"] == "4420"
        assert port["attrs"]["addr_trtype"] == ("tcp" if storage == "nvmeof-tcp" else "rdma")
        for host in state["hosts"].values():
            assert set(host) == FILES["host"]


def test_the_operator_edit_the_readme_asks_for_restores(target_configs):
    _storage, configs = target_configs
    config = json.loads(json.dumps(configs[0]))
    ns = config["subsystems"][0]["namespaces"][0]
    ns["device"]["path"], ns["enable"] = "/dev/disk/by-id/nvme-real", 1
    state = restore(config, existing_devices={"/dev/disk/by-id/nvme-real"})
    restored = state["subsystems"][config["subsystems"][0]["nqn"]]["namespaces"][ns["nsid"]]
    assert restored["enable"] == 1 and restored["device_path"] == "/dev/disk/by-id/nvme-real"


def test_the_model_rejects_what_the_kernel_rejects(target_configs):
    _storage, configs = target_configs
    base = configs[0]
    placeholder = base["subsystems"][0]["namespaces"][0]["device"]["path"]

    def mutated(edit) -> dict:
        doc = json.loads(json.dumps(base))
        edit(doc)
        return doc

    bad = [
        lambda d: d["subsystems"][0]["namespaces"][0].update(enable=1),  # the old render: placeholder enabled
        lambda d: d["ports"][0]["addr"].update(trtypo="tcp"),
        lambda d: d["ports"][0]["addr"].update(treq="mandatory"),
        lambda d: d["subsystems"][0]["attr"].update(serial="x" * 21),
        lambda d: d["subsystems"][0]["allowed_hosts"].append("nqn.2014-08.org.nvmexpress:uuid:" + str(uuid.uuid4())),
        lambda d: d["hosts"][0]["dhchap"].update(hash="sha512"),
        lambda d: d["ports"][0].update(subsystems=["nqn.2014-08.org.nvmexpress.discovery"]),
    ]
    for edit in bad:
        with pytest.raises(RestoreError):
            restore(mutated(edit), existing_devices={"/dev/sda"} - {placeholder})
