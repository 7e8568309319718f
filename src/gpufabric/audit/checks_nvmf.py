"""NVMe-oF checks (NVMF-*), reference/security-config.md "Audit checks" / NVMe-oF."""

from __future__ import annotations

import ipaddress
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from gpufabric.audit.collect import Facts, HostView
from gpufabric.audit.findings import Finding, NotAvailable, Severity, check, finding
from gpufabric.boundary import loads_json
from gpufabric.configure.nqn import nqn_problem
from gpufabric.errors import InputError

NVMET = "/etc/nvmet/config.json"
#: Files that hold key material (nvmetcli writes config.json 0600; libnvme's config.json
#: and TLS key import files hold secrets in plain text).
SECRET_FILES = ("/etc/nvmet/config.json", "/etc/nvme/config.json", "/etc/nvme/tls-keys", "/etc/nvme/nvme-fabrics.conf")
SECRET_MARKERS = re.compile(r"(--dhchap-secret|--dhchap-ctrl-secret|--kxchap-secret|--tls-key\b|DHHC-1:|NVMeTLSkey-1:)")


def _nvmet(
    facts: Facts, unreadable: list[tuple[HostView, str]] | None = None
) -> Iterator[tuple[HostView, dict[str, Any]]]:
    """Each host's nvmetcli JSON that has nvmetcli's shape. One that does not (not JSON,
    nested beyond the JSON bound, a subsystem that is not an object) is left out of the
    checks and listed in ``unreadable``: NVMF-01 reports it, failing closed, because
    nvmetcli may still restore the parts it reads (an allow_any_host among them)."""
    seen = False
    for view in facts.hosts:
        text = view.read(NVMET)
        if text is None:
            continue
        seen = True
        try:
            doc = loads_json(text, source=view.where(NVMET), what="nvmetcli JSON")
            problem = _shape_problem(doc)
        except json.JSONDecodeError as exc:
            problem = f"not JSON ({exc.msg} at line {exc.lineno})"
        except InputError as exc:
            problem = str(exc).removeprefix(f"{view.where(NVMET)}: ")
        if problem is None:
            yield view, doc
        elif unreadable is not None:
            unreadable.append((view, problem))
    if not seen and not any(v.live and v.sys_glob("/sys/kernel/config/nvmet") for v in facts.hosts):
        raise NotAvailable("no nvmetcli config.json (/etc/nvmet/config.json) and no nvmet configfs")


def _shape_problem(doc: Any) -> str | None:
    """Why ``doc`` is not nvmetcli's shape (hosts/ports/subsystems lists of objects, their
    attr/addr/param groups objects, allowed_hosts a list); None when it is."""
    if not isinstance(doc, dict):
        return "the top level is not an object"
    for key in ("hosts", "ports", "subsystems"):
        items = doc.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return f"{key} is not a list of objects"
        for item in items:
            for group in ("attr", "addr", "param", "dhchap"):
                if not isinstance(item.get(group, {}), (dict, type(None))):
                    return f"{key}[].{group} is not an object"
            for listed in ("allowed_hosts", "subsystems", "namespaces", "ana_groups", "referrals"):
                if not isinstance(item.get(listed, []), list):
                    return f"{key}[].{listed} is not a list"
    return None


@check(
    "NVMF-01",
    "A subsystem allows any host",
    Severity.critical,
    'set attr.allow_any_host to "0" and list the initiators in allowed_hosts',
)
def nvmf01(facts: Facts) -> Iterator[Finding]:
    unreadable: list[tuple[HostView, str]] = []
    for view, doc in _nvmet(facts, unreadable):
        for sub in doc.get("subsystems", []):
            if str(sub.get("attr", {}).get("allow_any_host", "0")) == "1":
                yield finding(
                    "NVMF-01", f"{view.name}: {sub.get('nqn')}", 'attr.allow_any_host = "1"', location=view.where(NVMET)
                )
    for view, problem in unreadable:
        yield finding(
            "NVMF-01",
            f"{view.name}: {NVMET}",
            f"cannot be read as nvmetcli JSON ({problem}): which hosts it admits is unknown (fail closed)",
            severity=Severity.high,
            location=view.where(NVMET),
        )
    for view in facts.hosts:
        if view.live:
            for attr in view.sys_glob("/sys/kernel/config/nvmet/subsystems/*/attr_allow_any_host"):
                if view.sys_read(attr) == "1":
                    yield finding("NVMF-01", f"{view.name}: {attr.split('/')[-2]}", f"{attr} = 1", location=attr)


@check(
    "NVMF-02",
    "A target port listens outside the storage plane",
    Severity.high,
    "set ports[].addr.traddr to the target's storage-plane address",
)
def nvmf02(facts: Facts) -> Iterator[Finding]:
    storage = [p for p in (facts.policy.planes if facts.policy else []) if p.kind == "storage"]
    if not storage:
        raise NotAvailable("no policy with a storage plane (policy.json) to compare traddr with")
    nets = [ipaddress.IPv4Network(p.cidr) for p in storage]
    for view, doc in _nvmet(facts):
        for port in doc.get("ports", []):
            addr = port.get("addr", {})
            traddr = addr.get("traddr", "")
            if addr.get("adrfam", "ipv4") != "ipv4":
                continue
            try:
                ip = ipaddress.IPv4Address(traddr)
            except ValueError:
                yield finding(
                    "NVMF-02",
                    f"{view.name}: port {port.get('portid')}",
                    f"traddr {traddr!r} is not an IPv4 address",
                    location=view.where(NVMET),
                )
                continue
            if ip.is_unspecified or not any(ip in n for n in nets):
                yield finding(
                    "NVMF-02",
                    f"{view.name}: port {port.get('portid')}",
                    f"traddr {traddr} is outside the storage plane {', '.join(map(str, nets))}",
                    location=view.where(NVMET),
                )


@check(
    "NVMF-03",
    "A TCP port runs without TLS, or TLS is downgradable",
    Severity.high,
    'set addr.tsas to "tls1.3" and addr.treq to "required" on every tcp port',
)
def nvmf03(facts: Facts) -> Iterator[Finding]:
    for view, doc in _nvmet(facts):
        for port in doc.get("ports", []):
            addr = port.get("addr", {})
            if addr.get("trtype") != "tcp":
                continue
            subject = f"{view.name}: port {port.get('portid')} ({addr.get('traddr')}:{addr.get('trsvcid')})"
            if addr.get("tsas") != "tls1.3":
                yield finding(
                    "NVMF-03", subject, f"tsas = {addr.get('tsas')!r}: cleartext NVMe/TCP", location=view.where(NVMET)
                )
            elif addr.get("treq") == "not required":
                yield finding(
                    "NVMF-03",
                    subject,
                    'tsas tls1.3 with treq "not required": non-TLS connections still allowed',
                    location=view.where(NVMET),
                )


@check(
    "NVMF-04",
    "Allowed hosts lack DH-HMAC-CHAP",
    Severity.high,
    "give every hosts[] entry a dhchap.key (nvme gen-dhchap-key) and use nvmetcli with commit 7a94d92",
)
def nvmf04(facts: Facts) -> Iterator[Finding]:
    for view, doc in _nvmet(facts):
        keyed = {h.get("nqn") for h in doc.get("hosts", []) if (h.get("dhchap") or {}).get("key")}
        for sub in doc.get("subsystems", []):
            for host in sub.get("allowed_hosts", []):
                if host not in keyed:
                    yield finding(
                        "NVMF-04",
                        f"{view.name}: {host}",
                        f"allowed on {sub.get('nqn')} without a dhchap key",
                        location=view.where(NVMET),
                    )


@check(
    "NVMF-05",
    "Authentication is one-way only, or uses weak parameters",
    Severity.medium,
    "set dhchap.ctrl_key, an FFDHE dhgroup and a DHHC-1:01..03 key for every host",
)
def nvmf05(facts: Facts) -> Iterator[Finding]:
    for view, doc in _nvmet(facts):
        for host in doc.get("hosts", []):
            dh = host.get("dhchap") or {}
            if not dh.get("key"):
                continue  # NVMF-04's finding
            problems = []
            if not dh.get("ctrl_key"):
                problems.append("no ctrl_key (no controller authentication)")
            if not dh.get("dhgroup") or dh.get("dhgroup") == "null":
                problems.append("no dhgroup (no forward secrecy)")
            if str(dh.get("key", "")).startswith("DHHC-1:00:"):
                problems.append("key hash 00 (untransformed)")
            if problems:
                yield finding(
                    "NVMF-05", f"{view.name}: {host.get('nqn')}", "; ".join(problems), location=view.where(NVMET)
                )


@check("NVMF-06", "Secret files are readable by others", Severity.high, "chmod 0600 the file (owner root)")
def nvmf06(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        paths = [p for p in SECRET_FILES if view.has(p)]
        text = view.read("/etc/opensm/opensm.conf")
        if text is not None and re.search(r"^\s*(m_key|sm_key|sa_key)\s+0x", text, re.MULTILINE):
            paths.append("/etc/opensm/opensm.conf")
        for path in paths:
            seen = True
            mode = view.mode(path)
            if mode is not None and mode & 0o077:
                yield finding(
                    "NVMF-06",
                    f"{view.name}: {path}",
                    f"mode {mode:04o} (group/other can read key material)",
                    location=view.where(path),
                )
    if not seen:
        raise NotAvailable("no secret-bearing NVMe-oF/OpenSM files found")


@check(
    "NVMF-07",
    "Secrets appear on command lines or in public files",
    Severity.medium,
    "keep keys only in 0600 key files or the .nvme keyring; never pass them as options",
)
def nvmf07(facts: Facts) -> Iterator[Finding]:
    secret = set(SECRET_FILES) | {"/etc/opensm/opensm.conf"}
    scanned: set[str] = set()  # a role's files are shared by its hosts: scan and report each once
    for view in facts.hosts:
        for path in view.files:
            local = view.where(path)
            if path in secret or local in scanned:
                continue
            scanned.add(local)
            text = view.read(path)
            if text and (match := SECRET_MARKERS.search(text)):
                yield finding("NVMF-07", f"{view.name}: {path}", f"contains {match.group(1)!r}", location=local)
        if view.live and view.env:
            for key, value in view.env.items():
                if SECRET_MARKERS.search(value):
                    yield finding("NVMF-07", f"{view.name}: environment", f"${key} holds key material")


@check(
    "NVMF-08",
    "An NQN is invalid or duplicated",
    Severity.high,
    "give every host its own /etc/nvme/hostnqn and hostid (nvme gen-hostnqn); fix invalid NQNs",
)
def nvmf08(facts: Facts) -> Iterator[Finding]:
    owners: dict[str, list[str]] = defaultdict(list)
    ids: dict[str, list[str]] = defaultdict(list)
    seen = False
    for view in facts.hosts:
        nqn = (view.read("/etc/nvme/hostnqn") or "").strip()
        hostid = (view.read("/etc/nvme/hostid") or "").strip()
        if nqn:
            seen = True
            owners[nqn].append(view.name)
            if (problem := nqn_problem(nqn)) is not None:
                yield finding(
                    "NVMF-08",
                    f"{view.name}: hostnqn",
                    f"{nqn!r} {problem}",
                    severity=Severity.medium,
                    location=view.where("/etc/nvme/hostnqn"),
                )
        if hostid:
            ids[hostid].append(view.name)
    for view, doc in _safe_nvmet(facts):
        seen = True
        for sub in doc.get("subsystems", []):
            if (problem := nqn_problem(str(sub.get("nqn", "")))) is not None:
                yield finding(
                    "NVMF-08",
                    f"{view.name}: subsystem",
                    f"{sub.get('nqn')!r} {problem}",
                    severity=Severity.medium,
                    location=view.where(NVMET),
                )
    if not seen:
        raise NotAvailable("no /etc/nvme/hostnqn or nvmet config")
    for nqn, hosts in owners.items():
        if len(hosts) > 1:
            yield finding("NVMF-08", ", ".join(hosts), f"hostnqn {nqn} is shared by {len(hosts)} hosts (cloned image?)")
    for hostid, hosts in ids.items():
        if len(hosts) > 1:
            yield finding("NVMF-08", ", ".join(hosts), f"hostid {hostid} is shared by {len(hosts)} hosts")


def _safe_nvmet(facts: Facts) -> Iterator[tuple[HostView, dict[str, Any]]]:
    try:
        yield from _nvmet(facts)
    except NotAvailable:
        return


@check(
    "NVMF-10",
    "Kernel support for the required NVMe-oF security is missing",
    Severity.high,
    "use a kernel with CONFIG_NVME_TARGET_AUTH/TCP_TLS (targets) or NVME_HOST_AUTH/NVME_TCP_TLS (hosts)",
)
def nvmf10(facts: Facts) -> Iterator[Finding]:
    import gzip
    import os

    live = [v for v in facts.hosts if v.live]
    if not live or facts.storage not in ("nvmeof-tcp", "nvmeof-rdma"):
        raise NotAvailable("needs --live on a host whose policy.json selects NVMe-oF storage")
    view = live[0]
    kind = facts.role_kind(view.role)
    if kind not in ("compute", "storage"):
        raise NotAvailable("this host is not a compute or storage node of the policy")
    text = None
    release = os.uname().release
    for path in (f"/boot/config-{release}", "/proc/config.gz"):
        try:
            with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as handle:
                text = handle.read()
            break
        except OSError:
            continue
    if text is None:
        raise NotAvailable("no /boot/config-$(uname -r) or /proc/config.gz")
    wanted = ["NVME_TARGET_AUTH", "NVME_TARGET_TCP_TLS"] if kind == "storage" else ["NVME_HOST_AUTH", "NVME_TCP_TLS"]
    if facts.storage == "nvmeof-rdma":
        wanted = wanted[:1]
    for option in wanted:
        if not re.search(rf"^CONFIG_{option}=[ym]", text, re.MULTILINE):
            yield finding("NVMF-10", view.name, f"CONFIG_{option} is not set in kernel {release}")


#: Where nvmetcli's module lives: distribution packages and pip installs.
NVMETCLI_MODULES = (
    "/usr/lib/python3*/site-packages/nvmet/nvme.py",
    "/usr/lib/python3/dist-packages/nvmet/nvme.py",
    "/usr/lib64/python3*/site-packages/nvmet/nvme.py",
    "/usr/local/lib/python3*/*-packages/nvmet/nvme.py",
)


def _host_class(source: str) -> str | None:
    """The body of nvmetcli's ``class Host(CFSNode)`` (up to the next top-level statement)."""
    match = re.search(r"^class Host\(CFSNode\):\n(.*?)(?=^\S)", source + "\nEOF", re.MULTILINE | re.DOTALL)
    return match.group(1) if match else None


@check(
    "NVMF-11",
    "nvmetcli too old to persist DH-HMAC-CHAP",
    Severity.medium,
    "install nvmetcli with commit 7a94d92 (2026-07-15), then nvmetcli save; older versions drop hosts[].dhchap",
)
def nvmf11(facts: Facts) -> Iterator[Finding]:
    seen = False
    saved = {id(v): doc for v, doc in _safe_nvmet(facts)}
    for view in facts.hosts:
        modules = [p for pattern in NVMETCLI_MODULES for p in view.sys_glob(pattern)]
        if not modules:
            continue
        # keys in use: in the saved JSON, or set in the kernel (configfs) and about to be saved
        keyed = any((h.get("dhchap") or {}).get("key") for h in saved.get(id(view), {}).get("hosts", [])) or any(
            view.sys_read(p) for p in view.sys_glob("/sys/kernel/config/nvmet/hosts/*/dhchap_key")
        )
        if not keyed:
            continue
        seen = True
        body = _host_class(view.sys_read(modules[0]) or "")
        # Before 7a94d92 Host has no attribute group: setup() and dump() carry only the NQN
        # (reference 2.1), so `nvmetcli save` writes hosts without their dhchap group.
        if body is not None and "dhchap" not in body:
            yield finding(
                "NVMF-11",
                f"{view.name}: {modules[0]}",
                "nvmetcli's Host class has no dhchap attribute group: save/restore drops the host keys, "
                "so authentication is lost after a reboot",
                location=modules[0],
            )
    if not seen:
        raise NotAvailable("no DH-HMAC-CHAP host keys together with an installed nvmetcli (nvmet/nvme.py)")


SPDK_SOCKET = "/var/tmp/spdk.sock"


@check(
    "NVMF-12",
    "SPDK RPC socket is open to other users",
    Severity.critical,
    "restrict the SPDK RPC socket to root (chmod 0600, or 0660 with a dedicated group)",
)
def nvmf12(facts: Facts) -> Iterator[Finding]:
    seen = False
    for view in facts.hosts:
        stat = view.sys_mode(SPDK_SOCKET)
        if stat is None:
            continue
        seen = True
        mode, kind = stat
        # JSON-RPC on this socket is full control of the target (reference 2.11): 0600/0660 only
        if mode & 0o007:
            yield finding(
                "NVMF-12",
                f"{view.name}: {SPDK_SOCKET}",
                f"{kind} mode {mode:04o}: any local user can drive nvmf_tgt over JSON-RPC",
                location=SPDK_SOCKET,
            )
    if not seen:
        raise NotAvailable(f"no SPDK RPC socket ({SPDK_SOCKET}): SPDK nvmf_tgt not running or not collected")


def _discovery_tos(text: str) -> Iterator[tuple[str, int | None, str]]:
    """discovery.conf lines -> (transport, ToS or None, line); nvme-cli option syntax (reference 2.5, 2.7)."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        transport = re.search(r"(?:^|\s)(?:-t\s*|--transport[=\s])(\w+)", line)
        tos = re.search(r"(?:^|\s)(?:-T\s*|--tos[=\s])(\d+)", line)
        yield (transport.group(1) if transport else "", int(tos.group(1)) if tos else None, line)


@check(
    "NVMF-13",
    "ToS/DSCP of NVMe traffic does not match the fabric QoS",
    Severity.medium,
    "mark NVMe/RDMA with the RoCE ToS (rdma_cm default_roce_tos, nvme connect -T) and keep NVMe/TCP out of the "
    "lossless class",
)
def nvmf13(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None or facts.fabric_kind != "roce" or facts.storage not in ("nvmeof-tcp", "nvmeof-rdma"):
        raise NotAvailable("needs a RoCE design with NVMe-oF storage in policy.json (DSCP QoS is a RoCE matter)")
    dscp = facts.policy.rdma_tos >> 2
    seen = False
    for view in facts.hosts:
        text = view.read("/etc/nvme/discovery.conf")
        for transport, tos, _line in _discovery_tos(text or ""):
            seen = True
            if tos is None:
                continue  # RDMA inherits rdma_cm's default; TCP stays unmarked
            if transport == "rdma" and tos >> 2 != dscp:
                yield finding(
                    "NVMF-13",
                    f"{view.name}: discovery.conf",
                    f"NVMe/RDMA -T {tos} is DSCP {tos >> 2}, "
                    f"the RoCE class is DSCP {dscp} (ToS {facts.policy.rdma_tos})",
                    location=view.where("/etc/nvme/discovery.conf"),
                )
            elif transport == "tcp" and tos >> 2 == dscp:
                yield finding(
                    "NVMF-13",
                    f"{view.name}: discovery.conf",
                    f"NVMe/TCP -T {tos} puts TCP into the lossless RoCE class (DSCP {dscp}): PFC interference",
                    location=view.where("/etc/nvme/discovery.conf"),
                )
        if facts.storage != "nvmeof-rdma":
            continue
        for path in view.sys_glob("/sys/kernel/config/rdma_cm/*/ports/*/default_roce_tos"):
            seen = True
            value = view.sys_read(path)
            if value is not None and value.isdigit() and int(value) >> 2 != dscp:
                yield finding(
                    "NVMF-13",
                    f"{view.name}: {path.split('/')[5]} port {path.split('/')[7]}",
                    f"rdma_cm default_roce_tos {value} (DSCP {int(value) >> 2}); NVMe/RDMA needs the RoCE "
                    f"class DSCP {dscp} (ToS {facts.policy.rdma_tos})",
                    location=path,
                )
    if not seen:
        raise NotAvailable("no /etc/nvme/discovery.conf and no rdma_cm default_roce_tos")


@check(
    "NVMF-14",
    "A target admits hosts its flows do not name",
    Severity.high,
    "list in allowed_hosts only the hosts of the roles with a flow to this target on its storage plane",
)
def nvmf14(facts: Facts) -> Iterator[Finding]:
    """Over-grant: on RDMA the host firewall cannot stop an initiator holding valid keys,
    so allowed_hosts is the isolation; it must follow the flows (SecurityPolicy.nvme_initiators)."""
    policy = facts.policy
    if policy is None:
        raise NotAvailable("no policy.json: no flows to compare allowed_hosts with")
    host_of: dict[str, str] = {}
    for view in facts.hosts:
        nqn = (view.read("/etc/nvme/hostnqn") or "").strip()
        if nqn:
            host_of.setdefault(nqn, view.name)
    if not host_of:
        raise NotAvailable("no /etc/nvme/hostnqn of any host: cannot tell who an allowed NQN is")
    for view, doc in _nvmet(facts):
        role = policy.role_of(view.name)
        if role is None or policy.role(role).kind != "storage":
            continue
        wanted = {h for name in policy.nvme_initiators(role) for h in policy.role(name).host_names}
        for sub in doc.get("subsystems", []):
            if not isinstance(sub, dict):
                continue
            allowed = sub.get("allowed_hosts", [])
            for nqn in allowed if isinstance(allowed, list) else []:
                host = host_of.get(str(nqn))
                if host is not None and host not in wanted:
                    yield finding(
                        "NVMF-14",
                        f"{view.name}: {sub.get('nqn')}",
                        f"admits {host} ({nqn}), whose role {policy.role_of(host)} has no flow to {role} on plane"
                        f" {policy.storage_plane(role)}",
                        location=view.where(NVMET),
                    )
