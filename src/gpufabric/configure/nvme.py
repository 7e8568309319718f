"""NVMe-oF artefacts: nvmetcli JSON for each target, host identity and connection files.

Formats (reference/security-config.md 2.1-2.9): nvmetcli's /etc/nvmet/config.json with
the configfs attribute groups split at the first ``_`` (``addr_tsas`` -> ``addr.tsas``),
DH-HMAC-CHAP host keys under ``hosts[].dhchap``; nvme-cli 2.x ``/etc/nvme/discovery.conf``
(one discover command per line) and libnvme ``/etc/nvme/config.json``; default ports
4420 (I/O) and 8009 (NVMe/TCP discovery). Access control is ``allowed_hosts`` only
(``allow_any_host`` "0"); TCP ports demand TLS 1.3 (``tsas`` tls1.3, ``treq`` required).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufabric.configure.jsontext import json_text
from gpufabric.configure.keys import KeySource
from gpufabric.configure.nqn import DISCOVERY_NQN, UUID_PREFIX, stable_uuid, uuid_nqn
from gpufabric.configure.quoting import comment, ifname
from gpufabric.spec.security import NVME_TCP, SecurityPolicy

#: nvmetcli hash/dhgroup names as the kernel's dhchap_hash/dhchap_dhgroup files take
#: them; SHA-512 with ffdhe4096 gives controller authentication with forward secrecy.
DHCHAP_HASH = "hmac(sha512)"
DHCHAP_DHGROUP = "ffdhe4096"
#: Namespace backing device the operator must set before enabling the namespace.
PLACEHOLDER_DEVICE = "/dev/disk/by-id/CHANGEME-checkpoint-volume"


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmeIdentity:
    host: str
    hostnqn: str
    hostid: str


def host_identity(spec_name: str, host: str) -> NvmeIdentity:
    """hostid is the UUID of the UUID-form hostnqn: nvme-cli and the target tie the two
    together, and a host presenting another hostid is a different host to nvmet."""
    hostid = stable_uuid(spec_name, "host", host)
    return NvmeIdentity(host=host, hostnqn=UUID_PREFIX + hostid, hostid=hostid)


def subsystem_nqn(spec_name: str, target: str) -> str:
    return uuid_nqn(spec_name, "subsystem", target)


def storage_plane(policy: SecurityPolicy, host: str | None = None) -> str:
    """The storage plane of ``host``'s role (SecurityPolicy.storage_plane)."""
    return policy.storage_plane(policy.role_of(host) if host is not None else None)


def nvmet_config(
    *, policy: SecurityPolicy, spec_name: str, target: str, initiators: list[str], transport: str, keys: KeySource
) -> dict[str, Any]:
    """nvmetcli JSON for one target: one subsystem, allowed_hosts = ``initiators``
    (the hosts its flows name, SecurityPolicy.nvme_initiators)."""
    plane = storage_plane(policy, target)
    traddr = policy.addresses()[(target, plane)]
    nqn = subsystem_nqn(spec_name, target)
    hosts = []
    for host in initiators:
        ident = host_identity(spec_name, host)
        hosts.append(
            {
                "nqn": ident.hostnqn,
                "dhchap": {
                    "key": keys.dhchap(f"dhchap-host/{spec_name}/{host}"),
                    "ctrl_key": keys.dhchap(f"dhchap-ctrl/{spec_name}/{target}/{host}"),
                    "hash": DHCHAP_HASH,
                    "dhgroup": DHCHAP_DHGROUP,
                },
            }
        )

    def port(portid: int, trsvcid: int) -> dict[str, Any]:
        addr = {"adrfam": "ipv4", "traddr": traddr, "trsvcid": str(trsvcid), "trtype": transport}
        if transport == "tcp":
            addr.update({"treq": "required", "tsas": "tls1.3"})
        else:
            addr.update({"treq": "not specified"})
        return {
            "portid": portid,
            "addr": addr,
            "ana_groups": [{"grpid": 1, "ana": {"state": "optimized"}}],
            "param": {"inline_data_size": "16384"},
            "referrals": [],
            "subsystems": [nqn],
        }

    # One port: the kernel serves the well-known discovery subsystem on every port, so
    # hosts discover on 4420 too and no separate discovery port (8009) is opened.
    ports = [port(1, NVME_TCP)]
    return {
        "hosts": hosts,
        "ports": ports,
        "subsystems": [
            {
                "nqn": nqn,
                "allowed_hosts": [h["nqn"] for h in hosts],
                "attr": {
                    "allow_any_host": "0",
                    "cntlid_max": "65519",
                    "cntlid_min": "1",
                    "model": "gpufabric-checkpoint",
                    "pi_enable": "0",
                    "serial": stable_uuid(spec_name, "serial", target).replace("-", "")[:20],
                    "version": "1.3",
                },
                # disabled until the operator replaces the placeholder path (README step 1):
                # enabling a missing device makes `nvmetcli restore` abort half way
                "namespaces": [
                    {
                        "nsid": 1,
                        "enable": 0,
                        "ana_grpid": 1,
                        "device": {
                            "path": PLACEHOLDER_DEVICE,
                            "uuid": stable_uuid(spec_name, "ns", target),
                            "nguid": stable_uuid(spec_name, "nguid", target),
                        },
                    }
                ],
            }
        ],
    }


def tls_key_line(hostnqn: str, subnqn: str, psk: str) -> str:
    """One line of a TLS key import file: the PSK identity (``NVMe0R01 <hostnqn> <subnqn>``), then the PSK."""
    return f"NVMe0R01 {hostnqn} {subnqn} {psk}\n"


def tls_key_lines(hostnqn: str, target_cfg: dict[str, Any], psks: tuple[str, str]) -> str:
    """The PSKs one host needs for one target: the discovery NQN first (the kernel looks
    the discovery controller's PSK up by that NQN), then the I/O subsystem."""
    discovery_psk, io_psk = psks
    return tls_key_line(hostnqn, DISCOVERY_NQN, discovery_psk) + tls_key_line(
        hostnqn, target_cfg["subsystems"][0]["nqn"], io_psk
    )


def host_index(nvmet: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """target -> hostnqn -> the target's hosts[] entry (built once: 2,048 hosts x targets)."""
    return {t: {h["nqn"]: h for h in cfg["hosts"]} for t, cfg in nvmet.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class HostNvmeFiles:
    hostnqn: str
    hostid: str
    discovery_conf: str
    config_json: str
    tls_keys: str


def host_files(
    *,
    policy: SecurityPolicy,
    spec_name: str,
    host: str,
    targets: list[str],
    transport: str,
    nvmet: dict[str, dict[str, Any]],
    tls_psks: dict[tuple[str, str], tuple[str, str]],
    index: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> HostNvmeFiles:
    """hostnqn/hostid, discovery.conf (no secrets), libnvme config.json (with the host's DH-HMAC-CHAP key, 0600).

    libnvme reads config.json only when its top level is an array of hosts, and
    ``nvme connect-all`` treats every controller in it as a discovery controller: so it
    lists exactly the discovery controllers (the well-known discovery NQN on each
    target's port); the I/O controllers come from their discovery log pages and
    authenticate with the host-level ``dhchap_key``.
    """
    ident = host_identity(spec_name, host)
    lines = [
        f"# nvme-cli discovery controllers for {comment(host)} (install as /etc/nvme/discovery.conf);",
        "# --tls needs nvme-cli 2.4 or later",
    ]
    ports = []
    host_key = ""
    for target in targets:
        plane = storage_plane(policy, target)  # each target on its own role's storage plane
        iface = ifname(policy.plane(plane).interface or "", what=f"plane {plane} interface")
        own = policy.addresses()[(host, plane)]
        traddr = policy.addresses()[(target, plane)]
        words = [
            f"--transport={transport}",
            f"--traddr={traddr}",
            f"--trsvcid={NVME_TCP}",
            f"--host-traddr={own}",
            f"--hostnqn={ident.hostnqn}",
            f"--hostid={ident.hostid}",
        ]
        if transport == "tcp":
            words += [f"--host-iface={iface}", "--tls"]
        lines.append(" ".join(words))
        target_cfg = nvmet[target]
        host_key = (index or host_index({target: target_cfg}))[target][ident.hostnqn]["dhchap"]["key"]
        port: dict[str, Any] = {"transport": transport, "traddr": traddr, "trsvcid": str(NVME_TCP), "host_traddr": own}
        if transport == "tcp":
            port.update({"host_iface": iface, "tls": True})  # keyring: the default .nvme
        ports.append(port)
    config = [
        {
            "hostnqn": ident.hostnqn,
            "hostid": ident.hostid,
            "hostsymname": host,
            "dhchap_key": host_key,
            "subsystems": [{"nqn": DISCOVERY_NQN, "ports": ports}] if ports else [],
        }
    ]
    tls = "".join(tls_key_lines(ident.hostnqn, nvmet[t], tls_psks[(host, t)]) for t in targets if (host, t) in tls_psks)
    return HostNvmeFiles(
        hostnqn=ident.hostnqn + "\n",
        hostid=ident.hostid + "\n",
        discovery_conf="\n".join(lines) + "\n",
        config_json=json_text(config),
        tls_keys=tls,
    )
