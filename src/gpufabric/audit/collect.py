"""Collectors: what the checks look at, from an artefact bundle, a copy of /etc, or this host.

Every source is optional. A view answers "what is in /etc/x on this host" and "what is
its mode"; live views also carry ``nft -j list ruleset``, ``ss -tulpnH``, ``ip -j addr``,
the environment and sysfs/configfs. A view with a ``root`` (this host's ``/``, or a
directory holding copies of ``sys/``, ``proc/``, ``var/``, ``usr/``) also answers sysfs,
configfs and procfs reads, and ``output(name)`` gives a tool's output: run live, or read
from ``commands/<file>`` in the directory (COMMANDS). Anything that cannot be read is
None, and checks turn None into "not available".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from gpufabric.audit import nft, nftinclude
from gpufabric.audit.nftinclude import IncludeRefused
from gpufabric.boundary import loads_json, read_capped
from gpufabric.errors import CommandTimeout, InputError, ParseError, ToolNotFound
from gpufabric.exec.process import Completed, run
from gpufabric.spec.security import SecurityPolicy

#: Collector commands get a short timeout: an audit must never hang on a stuck tool.
TOOL_TIMEOUT_S = 10.0


#: Prefixes of ruleset errors that are the ruleset's own (FW-08), not the auditing machine's.
REJECTED = ("nft rejected", "include refused", "nftables.json unreadable")

T = TypeVar("T")


@dataclass(slots=True, kw_only=True)
class HostView:
    """One host (or the subnet manager) as the checks see it."""

    name: str
    role: str | None
    files: dict[str, Path]  # absolute path on the host -> readable local path
    live: bool = False
    env: dict[str, str] | None = None
    listeners: list[dict[str, Any]] | None = None
    addrs: list[dict[str, Any]] | None = None
    root: Path | None = None  # "/" live; a directory with sys/, proc/, commands/ ...; None for bundles
    interfaces: tuple[str, ...] = ()  # the policy's plane interfaces (created before loading a ruleset)
    _ruleset: Any = None
    ruleset_error: str | None = None
    ruleset_rejected: bool = False  # nft refused to load the ruleset (FW-08), ruleset_error has its message
    _outputs: dict[str, str | None] = field(default_factory=dict)
    # Each file's text, read once: the checks read the same files again and again (the
    # 10,000-host audit read 29 files per host where 13 exist; docs/performance.md).
    _texts: dict[str, str | None] = field(default_factory=dict)
    # What the checks derive from the files, built once per host (envfiles.nccl_settings:
    # six checks parsed the same NCCL env file per host).
    _derived: dict[str, Any] = field(default_factory=dict)

    def has(self, path: str) -> bool:
        return path in self.files

    def read(self, path: str) -> str | None:
        if path in self._texts:
            return self._texts[path]
        local = self.files.get(path)
        if local is None:
            return None
        try:
            text: str | None = read_file(local)
        except OSError:
            text = None
        self._texts[path] = text
        return text

    def derived(self, key: str, build: Callable[[HostView], T]) -> T:
        """``build(self)``, computed once per host and kept under ``key`` (read-only use)."""
        if key not in self._derived:
            self._derived[key] = build(self)
        return cast("T", self._derived[key])

    def mode(self, path: str) -> int | None:
        local = self.files.get(path)
        try:
            return local.stat().st_mode & 0o777 if local else None
        except OSError:
            return None

    def glob(self, prefix: str) -> list[str]:
        return sorted(p for p in self.files if p.startswith(prefix))

    def where(self, path: str) -> str:
        return str(self.files.get(path, path))

    def sys_read(self, path: str) -> str | None:
        """A sysfs/configfs/procfs (or /var, /usr) file under the view's root, stripped."""
        if self.root is None:
            return None
        try:
            return read_file(self.root / path.lstrip("/")).strip()
        except OSError:
            return None

    def sys_glob(self, pattern: str) -> list[str]:
        """Host paths under the view's root matching a glob (``/sys/class/net/*/mtu``)."""
        if self.root is None:
            return []
        return sorted("/" + p.relative_to(self.root).as_posix() for p in self.root.glob(pattern.lstrip("/")))

    def sys_mode(self, path: str) -> tuple[int, str] | None:
        """(permission bits, file type) of a path under the root, without following links."""
        if self.root is None:
            return None
        try:
            st = (self.root / path.lstrip("/")).lstat()
        except OSError:
            return None
        kind = "socket" if stat.S_ISSOCK(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"
        return st.st_mode & 0o777, kind

    def output(self, name: str) -> str | None:
        """A tool's output (COMMANDS): run live, or captured in the directory; None when absent."""
        if name not in self._outputs:
            self._outputs[name] = _command_output(self, name)
        return self._outputs[name]

    def output_source(self, name: str) -> str:
        argv, file = COMMANDS[name]
        return " ".join(argv) if self.live else str((self.root or Path(".")) / "commands" / file)

    def has_firewall_source(self) -> bool:
        """Live (nft -j list ruleset), or a copy of /etc/nftables.conf or its JSON form."""
        return self.live or self.has("/etc/nftables.conf") or self.has("/etc/gpufabric/nftables.json")

    def ruleset(self) -> nft.Ruleset | None:
        """The host's nftables ruleset, parsed; None (with ruleset_error) when unavailable."""
        if self._ruleset is None and self.ruleset_error is None:
            self._ruleset, self.ruleset_error = _load_ruleset(self)
            # what the host would not load: nft's refusal, an include the audit cannot see,
            # a JSON ruleset that is not nft's JSON (FW-08); a missing tool is not the ruleset's fault
            self.ruleset_rejected = (self.ruleset_error or "").startswith(REJECTED)
        return self._ruleset


@dataclass(slots=True, kw_only=True)
class Facts:
    source: str
    hosts: list[HostView]
    policy_doc: dict[str, Any] | None = None
    policy: SecurityPolicy | None = None

    def _design(self, key: str) -> str | None:
        design = self.policy_doc.get("design") if isinstance(self.policy_doc, dict) else None
        value = design.get(key) if isinstance(design, dict) else None
        return value if isinstance(value, str) else None  # policy.json is user input: anything else is absent

    @property
    def fabric_kind(self) -> str | None:
        return self._design("fabric_kind")

    @property
    def storage(self) -> str | None:
        return self._design("storage")

    @property
    def reproducibility(self) -> str | None:
        value = self.policy_doc.get("reproducibility") if isinstance(self.policy_doc, dict) else None
        return value if isinstance(value, str) else None

    def role_kind(self, role: str | None) -> str | None:
        if role is None or self.policy is None:
            return None
        return next((r.kind for r in self.policy.roles if r.name == role), None)


#: Tool outputs the host checks read: name -> (live argv, file under ``commands/`` in a
#: directory). Capture them on the host with exactly these commands (docs/security.md).
COMMANDS: dict[str, tuple[list[str], str]] = {
    "ibv_devinfo": (["ibv_devinfo"], "ibv_devinfo.txt"),
    "ip-link": (["ip", "-j", "link"], "ip-j-link.json"),
    "ulimit-l": (["sh", "-c", "ulimit -l"], "ulimit-l.txt"),
    "lsmod": (["lsmod"], "lsmod.txt"),
    "nvidia-smi-topo": (["nvidia-smi", "topo", "-m"], "nvidia-smi-topo-m.txt"),
    "lspci": (["lspci", "-vvv"], "lspci-vvv.txt"),
}


def _command_output(view: HostView, name: str) -> str | None:
    argv, file = COMMANDS[name]
    if not view.live:
        if view.root is None:
            return None
        try:
            return read_file(view.root / "commands" / file)
        except OSError:
            return None
    result = run_tool(argv)
    if result is None or result.returncode != 0:
        if name == "lsmod":  # lsmod only formats /proc/modules; the name is the first column of both
            try:
                return Path("/proc/modules").read_text()
            except OSError:
                return None
        return None
    return result.stdout


#: Bytes read from one file of an audited directory or host: configuration files are kilobytes,
#: a captured command output (``ss``, ``ip -j addr`` of a big node) at most a few MB.
MAX_AUDIT_FILE_BYTES = 16 * 1024 * 1024


def read_file(path: Path) -> str:
    """Text of a file under the audited directory, at most MAX_AUDIT_FILE_BYTES.

    The directory is user input: a FIFO in it would block the read forever and a link to
    /dev/zero would fill memory, so anything but a regular file is refused (InputError,
    exit 2) before it is opened. OSError passes through for the callers' "cannot read" paths.
    """
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise InputError(f"{path}: not a regular file; an audited directory holds copies of files only")
    try:
        raw = read_capped(path, MAX_AUDIT_FILE_BYTES, "audited")
    except InputError as exc:
        # read_capped turns OSError into InputError; callers treat an unreadable file as absent.
        if isinstance(exc.__context__, OSError):
            raise exc.__context__ from None
        raise
    return raw.decode("utf-8", errors="replace")


def _tree(root: Path, prefix: str = "/") -> dict[str, Path]:
    files: dict[str, Path] = {}
    if not root.is_dir():
        return files
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            local = Path(dirpath) / name
            rel = local.relative_to(root).as_posix()
            files[prefix + rel] = local
    return files


def _policy(doc: dict[str, Any] | None) -> SecurityPolicy | None:
    if doc is not None and not isinstance(doc, dict):
        raise InputError("policy.json is not a JSON object with a 'policy' key; copy it from the bundle again")
    if not doc or "policy" not in doc:
        return None
    try:
        return SecurityPolicy.model_validate(doc["policy"])
    except ValueError as exc:
        raise InputError(f"policy.json does not hold a valid security policy: {str(exc).splitlines()[0]}") from exc


def _read_json(path: Path) -> Any:
    try:
        return loads_json(read_file(path), source=str(path), what="JSON")
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc


def from_directory(root: Path) -> Facts:
    """An artefact bundle (has manifest.json) or a copy of /etc (anything else)."""
    if not root.is_dir():
        raise InputError(f"--config {root} is not a directory")
    if (root / "manifest.json").exists():
        return _from_bundle(root)
    etc = root / "etc" if (root / "etc").is_dir() else root
    # sys/, proc/, var/, usr/ and commands/ beside etc/ are the host's sysfs/configfs/procfs
    # subset and its captured tool outputs (docs/security.md, "What a directory may hold").
    sys_root = root if any((root / d).is_dir() for d in ("etc", "sys", "proc", "commands")) else None
    files = _tree(etc, "/etc/")
    doc = _read_json(files["/etc/gpufabric/policy.json"]) if "/etc/gpufabric/policy.json" in files else None
    policy = _policy(doc)
    hostname = (read_file(files["/etc/hostname"]).strip() if "/etc/hostname" in files else "") or root.name
    role = dict(policy.hosts()).get(hostname) if policy else None
    view = HostView(name=hostname, role=role, files=files, root=sys_root, interfaces=plane_interfaces(policy))
    return Facts(source=f"copy of /etc at {root}", hosts=[view], policy_doc=doc, policy=policy)


def plane_interfaces(policy: SecurityPolicy | None) -> tuple[str, ...]:
    """The planes' interface names: a ruleset naming them (``iif "mgmt0"``) loads only
    where they exist, so the text path creates them before loading."""
    if policy is None:
        return ()
    return tuple(sorted({p.interface for p in policy.planes if p.interface}))


def _from_bundle(root: Path) -> Facts:
    from gpufabric.configure.manifest import read_manifest

    manifest = read_manifest(root)
    doc = _read_json(root / "policy.json") if (root / "policy.json").exists() else None
    policy = _policy(doc)
    views = []
    role_trees = {}
    for host in manifest.hosts:
        role = host.role
        if role not in role_trees:
            role_trees[role] = _tree(root / "roles" / role)
        files = dict(role_trees[role])
        files.update(_tree(root / "hosts" / host.host))
        views.append(HostView(name=host.host, role=role, files=files, interfaces=plane_interfaces(policy)))
    fabric = _tree(root / "fabric")
    if fabric:
        views.append(HostView(name="subnet-manager", role=None, files=fabric))
    # Hosts that share a role tree share one parsed ruleset (the proof evaluates it once);
    # an include can name a host's own file, so the key is every file the ruleset reads.
    shared: dict[tuple[str, str], HostView] = {}
    for view in views:
        local = view.files.get("/etc/nftables.conf") or view.files.get("/etc/gpufabric/nftables.json")
        if local is None:
            continue
        first = shared.setdefault(_ruleset_key(view, local), view)
        if first is not view:
            view._ruleset, view.ruleset_error = first.ruleset(), first.ruleset_error
            view.ruleset_rejected = first.ruleset_rejected
    return Facts(source=f"bundle {root}", hosts=views, policy_doc=doc, policy=policy)


def _ruleset_key(view: HostView, local: Path) -> tuple[str, str]:
    """What makes two views' rulesets the same: the file, or, when it includes others
    (which a host's own tree may hold), the inlined text itself."""
    try:
        if local.name != "nftables.conf" or not nftinclude.has_include(read_file(local)):
            return ("file", str(local))
        flat = nftinclude.flatten("/etc/nftables.conf", view.files, read_file)
    except (OSError, InputError) as exc:
        return ("unreadable", f"{local}: {exc}")
    return ("text", hashlib.sha256(flat.encode()).hexdigest())


def run_tool(argv: list[str]) -> Completed | None:
    """The finished command, or None when the tool is missing or hangs (a collector never raises)."""
    try:
        return run(argv, timeout_s=TOOL_TIMEOUT_S)
    except (ToolNotFound, CommandTimeout):
        return None


#: Linux interface names: 1-15 characters, no slash, colon or white space (IFNAMSIZ 16).
IFNAME = re.compile(r"[A-Za-z0-9_.@+-]{1,15}")
#: nft's whole error message is kept, up to this many characters (a runaway file stays bounded).
NFT_MESSAGE_MAX = 4000
#: Loads and lists a ruleset in the current (throwaway) namespace after creating the
#: interfaces given as arguments: a dummy device, or one end of a veth pair where the
#: kernel has no dummy driver (this machine, reference/this-machine.md). The JSON
#: listing, a separator line, then the text listing (for table flags and ingress devices).
LOAD_SCRIPT = r"""
f=$1; shift; i=0
for name in "$@"; do
  ip link add "$name" type dummy 2>/dev/null || ip link add "$name" type veth peer name "gfpeer$i" || exit 3
  ip link set "$name" up; i=$((i+1))
done
nft -f "$f" || exit 4
nft -j list ruleset && echo "--- text ---" && nft list ruleset
"""


@contextmanager
def flat_ruleset(view: HostView) -> Iterator[Path]:
    """The view's /etc/nftables.conf with its includes resolved inside the view's files
    (:mod:`gpufabric.audit.nftinclude`): the file itself when it has none, else a
    temporary inlined copy. Raises IncludeRefused for what the audit cannot see."""
    local = view.files["/etc/nftables.conf"]
    text = read_file(local)
    if not nftinclude.has_include(text):
        yield local
        return
    where = f"the files audited for {view.name}"
    flat = nftinclude.flatten("/etc/nftables.conf", view.files, read_file, where=where)
    with tempfile.TemporaryDirectory(prefix="gpufabric-nft-") as tmp:
        path = Path(tmp) / "nftables.conf"
        path.write_text(flat)
        yield path


def nft_text_to_json(path: Path, interfaces: tuple[str, ...] = ()) -> tuple[Any | None, str | None]:
    """Load a ruleset file into a throwaway network namespace with the real nft and list
    it as JSON: nft's own parser is the only faithful reader of nft syntax. The planes'
    interfaces exist there first, so rules naming them (``iif "mgmt0"``) load."""
    if shutil.which("nft") is None or shutil.which("unshare") is None or shutil.which("ip") is None:
        return None, "nft, ip or unshare not installed"
    names = [n for n in interfaces if IFNAME.fullmatch(n) and n != "lo"]
    argv = ["unshare", "--net"] + ([] if os.geteuid() == 0 else ["--user", "--map-root-user"])
    result = run_tool([*argv, "sh", "-c", LOAD_SCRIPT, "sh", str(path), *names])
    if result is None:
        return None, "unshare/nft did not run"
    err = result.stderr.strip()
    if result.returncode == 4:
        return None, f"nft rejected {path}:\n{err[:NFT_MESSAGE_MAX] or 'no message'}"
    if result.returncode != 0:
        return None, f"could not prepare a namespace for {path}: {err[:NFT_MESSAGE_MAX] or result.returncode}"
    listing, _sep, text = result.stdout.partition("\n--- text ---\n")
    try:
        return nft.augment(json.loads(listing), text), None
    except json.JSONDecodeError:
        return None, "nft -j printed no JSON"


def _load_ruleset(view: HostView) -> tuple[nft.Ruleset | None, str | None]:
    if view.live:
        result = run_tool(["nft", "-j", "list", "ruleset"])
        if result is None or result.returncode != 0:
            return None, "nft -j list ruleset unavailable (nft missing or not root)"
        listing = run_tool(["nft", "list", "ruleset"])
        try:
            doc = json.loads(result.stdout)
            if listing is not None and listing.returncode == 0:
                doc = nft.augment(doc, listing.stdout)
            return nft.parse(doc, "nft -j list ruleset"), None
        except (json.JSONDecodeError, ParseError) as exc:
            return None, f"nft -j output unreadable: {exc}"
    text = view.files.get("/etc/nftables.conf")
    error = None
    if text is not None:
        try:
            with flat_ruleset(view) as flat:
                doc, error = nft_text_to_json(flat, view.interfaces)
        except IncludeRefused as exc:
            return None, f"include refused: {exc}"
        except OSError as exc:
            return None, f"cannot read {text}: {exc}"
        if doc is not None:
            return nft.parse(doc, str(text)), None
        if (error or "").startswith("nft rejected"):
            return None, error
    js = view.files.get("/etc/gpufabric/nftables.json")
    if js is None and error is not None:
        return None, f"cannot read {text}: {error}"
    if js is not None:
        try:
            return nft.parse(loads_json(read_file(js), source=str(js), what="nft JSON"), str(js)), None
        except (OSError, json.JSONDecodeError, InputError) as exc:
            return None, f"nftables.json unreadable: {js}: {exc}"
    return None, "no /etc/nftables.conf"


LIVE_FILES = (
    "/etc/nvmet/config.json",
    "/etc/nvme/config.json",
    "/etc/nvme/hostnqn",
    "/etc/nvme/hostid",
    "/etc/nvme/discovery.conf",
    "/etc/nvme/tls-keys",
    "/etc/nvme/nvme-fabrics.conf",
    "/etc/nccl.conf",
    "/etc/gpufabric/nccl.env",
    "/etc/gpufabric/policy.json",
    "/etc/opensm/partitions.conf",
    "/etc/opensm/opensm.conf",
    "/etc/nftables.conf",
    "/etc/sysctl.d/90-gpufabric.conf",
    "/etc/slurm/slurm.conf",
    "/etc/tuned/active_profile",
)


def live(env: dict[str, str] | None = None) -> Facts:
    """This host: files under /etc, nft, ss, ip, environment, sysfs/configfs."""
    files = {p: Path(p) for p in LIVE_FILES if Path(p).exists()}
    doc = None
    if "/etc/gpufabric/policy.json" in files:
        try:
            doc = loads_json(read_file(Path("/etc/gpufabric/policy.json")), source="policy.json", what="policy")
        except (OSError, json.JSONDecodeError, InputError):
            doc = None
    policy = _policy(doc)
    hostname = os.uname().nodename
    role = dict(policy.hosts()).get(hostname) if policy else None
    listeners = None
    result = run_tool(["ss", "-tulpnH"])
    if result is not None and result.returncode == 0:
        listeners = parse_ss(result.stdout)
    addrs = None
    result = run_tool(["ip", "-j", "addr"])
    if result is not None and result.returncode == 0:
        try:
            addrs = json.loads(result.stdout)
        except json.JSONDecodeError:
            addrs = None
    view = HostView(
        name=hostname,
        role=role,
        files=files,
        live=True,
        env=dict(os.environ if env is None else env),
        listeners=listeners,
        addrs=addrs,
        root=Path("/"),
    )
    return Facts(source=f"live host {hostname}", hosts=[view], policy_doc=doc, policy=policy)


def parse_ss(text: str) -> list[dict[str, Any]]:
    """``ss -tulpnH`` lines -> [{proto, state, local_addr, port, process}]."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5:
            continue
        local = parts[4]
        addr, _, port = local.rpartition(":")
        if not port.isdigit():
            continue
        addr = addr.strip("[]").split("%", 1)[0]
        out.append(
            {
                "proto": parts[0],
                "state": parts[1],
                "local_addr": addr,
                "port": int(port),
                "process": " ".join(parts[6:]) if len(parts) > 6 else "",
            }
        )
    return out
