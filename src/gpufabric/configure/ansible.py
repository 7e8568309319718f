"""``ansible/site.yml`` and ``ansible/inventory.ini``: apply a bundle to a fleet with Ansible.

Sites put files on thousands of nodes with Ansible (NVIDIA DeepOps is Ansible), so the
bundle carries its own playbook: one play per role (its hosts are the inventory group of
the same name), every file of ``roles/ROLE/`` and of ``hosts/HOST/`` copied to its absolute
path with owner root and the bundle's mode, parent directories made when missing (never
re-moded: /etc stays as the distribution has it), and handlers that make the change take
effect: nftables reloaded (``nft -f``), sysctl re-read, the tuned profile applied, opensm
and nvmet restarted, slurmd restarted for Slurm configuration. ``--check --diff`` shows the
drift of a fleet from the bundle and changes nothing.

Two variables make it usable outside a real fleet: ``gpufabric_root`` prefixes every
destination (default empty: the real paths), ``gpufabric_handlers`` (default true) turns the
service reloads off; the tests apply a bundle into a temporary root that way.

The playbook is YAML written by ``yaml.safe_dump`` (quoted by construction); the only
Jinja expressions in it are the two variables and ``playbook_dir``: bundle paths never
contain ``{`` (configure/paths.py allows none).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
import yaml

from gpufabric.spec.security import SecurityPolicy

SITE = "ansible/site.yml"
INVENTORY = "ansible/inventory.ini"
#: The bundle's root seen from the playbook (site.yml is in ansible/).
BUNDLE_ROOT = "{{ playbook_dir }}/.."
#: Overridable from the inventory or -e (defaults, not play vars, which would outrank the inventory).
ROOT = "{{ gpufabric_root | default('') }}"
HANDLERS_ON = "gpufabric_handlers | default(true) | bool"


@dataclass(frozen=True, slots=True, kw_only=True)
class Handler:
    """A service that must see a changed file: which files notify it and what it runs."""

    name: str
    prefixes: tuple[str, ...]  # absolute destination paths (or their directories) that notify it
    task: dict[str, Any]


def _command(argv: Sequence[str]) -> dict[str, Any]:
    return {"ansible.builtin.command": {"argv": list(argv)}}


def _restart(service: str) -> dict[str, Any]:
    return {"ansible.builtin.service": {"name": service, "state": "restarted"}}


#: Sources (as_of 2026-12): nft(8) -f; sysctl(8) -p FILE; tuned-adm(8) profile; nvmetcli's
#: nvmet.service (restore /etc/nvmet/config.json on start); opensm(8) re-reads partitions on
#: restart; tlshd(8) reads /etc/tlshd/config at start; slurmd(8) reads slurm.conf/gres.conf/cgroup.conf
#: at start.
HANDLERS = (
    Handler(
        name="reload nftables", prefixes=("/etc/nftables.conf",), task=_command(["nft", "-f", "/etc/nftables.conf"])
    ),
    Handler(
        name="reload sysctl",
        prefixes=("/etc/sysctl.d/90-gpufabric.conf",),
        task=_command(["sysctl", "-p", "/etc/sysctl.d/90-gpufabric.conf"]),
    ),
    Handler(name="apply tuned profile", prefixes=("/etc/tuned/",), task={}),  # per role: the role's profile
    Handler(name="restart opensm", prefixes=("/etc/opensm/",), task=_restart("opensm")),
    Handler(name="restart nvmet", prefixes=("/etc/nvmet/",), task=_restart("nvmet")),
    Handler(name="restart tlshd", prefixes=("/etc/tlshd/",), task=_restart("tlshd")),
    Handler(name="restart slurmd", prefixes=("/etc/slurm/",), task=_restart("slurmd")),
)
_GROUP_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def group_name(role: str) -> str:
    """An Ansible group name for a role (letters, digits, '_'; a role's '-' becomes '_')."""
    return _GROUP_UNSAFE.sub("_", role)


def handlers_for(dest: str) -> list[str]:
    return [h.name for h in HANDLERS if any(dest == p or (p.endswith("/") and dest.startswith(p)) for p in h.prefixes)]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileEntry:
    """One bundle file to put in place: source below the bundle, destination, mode."""

    src: str  # relative to the bundle root; may hold {{ inventory_hostname }}
    dest: str  # absolute on the host
    mode: int
    hosts: tuple[str, ...] = ()  # only these hosts of the play ('' = all)


def _entries(files: Sequence[tuple[str, int]], policy: SecurityPolicy, role: str) -> list[FileEntry]:
    """The role's files, then its hosts' files (one task per destination; ``hosts/`` by inventory_hostname)."""
    out: list[FileEntry] = []
    base = f"roles/{role}/"
    for path, mode in files:
        if path.startswith(base):
            out.append(FileEntry(src=path, dest="/" + path[len(base) :], mode=mode))
    members = policy.role(role).host_names
    per_dest: dict[str, dict[str, int]] = {}
    for path, mode in files:
        parts = path.split("/", 2)
        if parts[0] == "hosts" and len(parts) == 3 and parts[1] in members:
            per_dest.setdefault("/" + parts[2], {})[parts[1]] = mode
    for dest, hosts in sorted(per_dest.items()):
        modes = set(hosts.values())
        mode = max(modes) if len(modes) > 1 else modes.pop()  # one mode per task; bundles give one anyway
        only = () if len(hosts) == len(members) else tuple(sorted(hosts))
        out.append(FileEntry(src="hosts/{{ inventory_hostname }}" + dest, dest=dest, mode=mode, hosts=only))
    return out


def _copy_task(entry: FileEntry, notify: list[str]) -> dict[str, Any]:
    task: dict[str, Any] = {
        "name": f"{entry.dest}",
        "ansible.builtin.copy": {
            "src": f"{BUNDLE_ROOT}/{entry.src}",
            "dest": ROOT + entry.dest,
            "owner": "root",
            "group": "root",
            "mode": f"{entry.mode:04o}",
        },
    }
    if entry.mode == 0o600:
        task["diff"] = False  # --diff would print the secret (keys, PSKs) into the operator's terminal
    if entry.hosts:
        task["when"] = f"inventory_hostname in {list(entry.hosts)!r}"
    if notify:
        task["notify"] = notify
    return task


def _play(name: str, group: str, entries: list[FileEntry], tuned_profile: str = "") -> dict[str, Any]:
    dirs = sorted({e.dest.rsplit("/", 1)[0] for e in entries if e.dest.rsplit("/", 1)[0]})
    tasks: list[dict[str, Any]] = [
        {
            "name": "directories",
            "ansible.builtin.file": {"path": ROOT + "{{ item }}", "state": "directory"},
            "loop": dirs,
        }
    ]
    notified: list[str] = []
    for entry in entries:
        names = handlers_for(entry.dest)
        notified += [n for n in names if n not in notified]
        tasks.append(_copy_task(entry, names))
    handlers = []
    for handler in HANDLERS:
        if handler.name not in notified:
            continue
        task = dict(handler.task) or _command(["tuned-adm", "profile", tuned_profile])
        handlers.append({"name": handler.name, **task, "when": HANDLERS_ON})
    play: dict[str, Any] = {
        "name": name,
        "hosts": group,
        "become": True,
        "gather_facts": False,
        "tasks": tasks,
    }
    if handlers:
        play["handlers"] = handlers
    return play


def playbook(files: Sequence[tuple[str, int]], policy: SecurityPolicy) -> list[dict[str, Any]]:
    """The plays: one per role, then the subnet manager's (fabric/ files to the opensm group)."""
    plays = []
    for role in policy.roles:
        entries = _entries(files, policy, role.name)
        if entries:
            plays.append(_play(f"gpufabric role {role.name}", group_name(role.name), entries, f"gpufabric-{role.name}"))
    fabric = [
        FileEntry(src=p, dest="/" + p.removeprefix("fabric/"), mode=m) for p, m in files if p.startswith("fabric/")
    ]
    if fabric:
        plays.append(_play("gpufabric subnet manager", "opensm", fabric))
    return plays


def site_yml(files: Sequence[tuple[str, int]], policy: SecurityPolicy, *, version: str, spec_name: str) -> str:
    header = (
        f"# Generated by gpufabric {version} for spec {spec_name!r}: puts this bundle's files in place.\n"
        "#   ansible-playbook -i ansible/inventory.ini ansible/site.yml --check --diff   # drift only\n"
        "#   ansible-playbook -i ansible/inventory.ini ansible/site.yml                  # apply\n"
    )
    return "---\n" + header + yaml.safe_dump(playbook(files, policy), sort_keys=False, width=1000)


def inventory_ini(env: jinja2.Environment, policy: SecurityPolicy, *, version: str, spec_name: str) -> str:
    addresses = policy.addresses()
    mgmt = [p.name for p in policy.planes_of_kind("management")]
    groups = []
    for role in policy.roles:
        hosts = [
            {"name": h, "address": next((addresses[(h, p)] for p in mgmt if (h, p) in addresses), "")}
            for h in role.host_names
        ]
        groups.append({"name": group_name(role.name), "hosts": hosts})
    return env.get_template("ansible/inventory.ini.j2").render(groups=groups, version=version, spec_name=spec_name)
