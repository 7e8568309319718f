"""Render every artefact of a design into a bundle, and write it safely.

One renderer per artefact (nftables, nvme, fabric, launch); this module decides which
artefacts a role needs for the chosen design, tracks secrets, and writes files with
their modes. Rendering is deterministic except for secrets, which come from
:class:`KeySource`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from gpufabric import SCHEMA_VERSION, __version__
from gpufabric.configure import ansible, fabric, launch, nftables, nvme, quoting
from gpufabric.configure.design import Design, effective_policy
from gpufabric.configure.jsontext import json_text
from gpufabric.configure.keys import KeySource
from gpufabric.configure.manifest import MANIFEST, Manifest, ManifestFile, ManifestHost
from gpufabric.configure.paths import (
    atomic_tree,
    check_relative,
    make_parents,
    write_file,
)
from gpufabric.errors import InputError
from gpufabric.spec.models import Spec
from gpufabric.spec.security import EPHEMERAL_RANGE, SRUN_RANGE, SecurityPolicy

#: Threads creating bundle files (2,048 hosts: 8,000+ files; creation is filesystem-bound).
WRITERS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Artefact:
    path: str
    content: str
    mode: int = 0o644
    secret: bool = False


@dataclass(slots=True, kw_only=True)
class Bundle:
    design: Design
    policy: SecurityPolicy
    policy_source: str
    artefacts: list[Artefact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, path: str, content: str, *, mode: int = 0o644, secret: bool = False) -> None:
        check_relative(path)
        self.artefacts.append(Artefact(path=path, content=content, mode=0o600 if secret else mode, secret=secret))

    def sorted_artefacts(self) -> list[Artefact]:
        return sorted(self.artefacts, key=lambda a: a.path)

    def file_list(self) -> list[dict[str, Any]]:
        """Path, octal mode and secret flag of every artefact so far, by path (manifest.json, --format json)."""
        return [{"path": a.path, "mode": f"{a.mode:04o}", "secret": a.secret} for a in self.sorted_artefacts()]


def template_env() -> jinja2.Environment:
    """StrictUndefined (a missing value is an error, never an empty string) and the
    context filters of :mod:`gpufabric.configure.quoting`, one of which ends every output."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpufabric.configure", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    quoting.install(env)
    return env


def policy_document(policy: SecurityPolicy, design: Design, spec: Spec) -> dict[str, Any]:
    """The effective policy plus what audit needs: addresses, design, reproducibility."""
    return {
        "schema_version": SCHEMA_VERSION,
        "spec": spec.name,
        "design": {"fabric": design.fabric, "storage": design.storage, "fabric_kind": design.fabric_kind},
        "reproducibility": spec.requirements.reproducibility,
        "policy": policy.model_dump(mode="json"),
        "hosts": [{"host": h, "role": r} for h, r in policy.hosts()],
        "addresses": [{"host": h, "plane": p, "address": a} for (h, p), a in policy.addresses().items()],
    }


def render_bundle(spec: Spec, design: Design, keys: KeySource) -> Bundle:
    """All artefacts for ``design``; raises InputError when the policy cannot serve it."""
    policy = effective_policy(spec, design)
    source = (
        "the spec's security section"
        if spec.security is not None
        else "the least-privilege default (no security section)"
    )
    bundle = Bundle(design=design, policy=policy, policy_source=source)
    env = template_env()
    version = __version__
    common = {"version": version, "spec_name": spec.name}
    if not any(role.kind == "compute" for role in policy.roles):
        raise InputError("the security policy has no role of kind compute; add one")
    if not policy.planes_of_kind("control"):
        raise InputError("the security policy has no control plane; NCCL bootstrap and rendezvous need one")

    document = policy_document(policy, design, spec)
    doc = json_text(document)
    bundle.add("policy.json", doc)
    for role in policy.roles:
        base = f"roles/{role.name}"
        ruleset = nftables.role_ruleset(policy, role.name)
        bundle.add(f"{base}/etc/nftables.conf", nftables.render_text(ruleset, env=env, **common), mode=0o755)
        bundle.add(f"{base}/etc/gpufabric/nftables.json", json_text(nftables.render_json(ruleset)))
        bundle.add(f"{base}/etc/gpufabric/policy.json", doc)
        bundle.add(
            f"{base}/etc/sysctl.d/90-gpufabric.conf", launch.sysctl(env, policy=policy, role=role.name, version=version)
        )
        bundle.add(
            f"{base}/etc/tuned/gpufabric-{role.name}/tuned.conf", launch.tuned(env, role=role.name, version=version)
        )
        if role.kind == "compute":
            nccl = launch.nccl_env(env, spec=spec, policy=policy, design=design, role=role.name, version=version)
            bundle.add(f"{base}/etc/gpufabric/nccl.env", nccl)
            bundle.add(
                f"{base}/usr/local/bin/gpufabric-torchrun",
                launch.torchrun(env, policy=policy, role=role.name, version=version),
                mode=0o755,
            )
        if role.kind == "login":
            sbatch = launch.sbatch(env, spec=spec, policy=policy, version=version)
            bundle.add(f"{base}/etc/gpufabric/train.sbatch", sbatch, mode=0o755)
        rdma_host = role.kind == "compute" or (role.kind == "storage" and design.storage_transport == "rdma")
        if design.fabric_kind == "roce" and rdma_host and not design.rented:
            qos = fabric.roce_qos(
                env, policy=policy, role=role.name, version=version, gpus_per_node=spec.cluster.gpus_per_node
            )
            bundle.add(f"{base}/usr/local/sbin/gpufabric-roce-qos", qos, mode=0o755)
        if design.storage_transport == "tcp" and role.kind in ("compute", "storage"):
            bundle.add(f"{base}/etc/tlshd/config", env.get_template("tlshd.conf.j2").render(version=version))
    if design.rented:
        # The provider runs the switches, the subnet manager and the storage targets.
        bundle.notes.append(
            "rented design: host-side artefacts only (nftables, sysctl, tuned, NCCL environment, launch scripts); the"
            " provider owns the switches, so no OpenSM partitions.conf/opensm.conf, no RoCE/switch QoS script and no"
            " NVMe-oF target or host files were rendered"
        )
    elif design.fabric_kind == "ib":
        parts, notes = fabric.partitions(policy)
        bundle.notes.extend(notes)
        bundle.add(
            "fabric/etc/opensm/partitions.conf",
            env.get_template("partitions.conf.j2").render(partitions=parts, **common),
        )
        bundle.add("fabric/etc/opensm/opensm.conf", fabric.opensm_conf(env, keys=keys, **common), secret=True)
    if design.rented:
        pass
    elif design.storage_transport:
        _storage(bundle, spec, policy, design, design.storage_transport, keys)
    elif design.storage != "local-nvme":
        bundle.notes.append(f"storage {design.storage} is not NVMe-oF: no target or host NVMe files were rendered")
    files = [(a.path, a.mode) for a in bundle.sorted_artefacts()]
    bundle.add(ansible.SITE, ansible.site_yml(files, policy, version=version, spec_name=spec.name))
    bundle.add(ansible.INVENTORY, ansible.inventory_ini(env, policy, version=version, spec_name=spec.name))
    interfaces = ", ".join(p.interface or "" for p in policy.planes)
    readme = env.get_template("README.md.j2").render(
        design=design,
        policy=policy,
        policy_source=source,
        interfaces=interfaces,
        files=bundle.sorted_artefacts(),
        notes=bundle.notes,
        dscp=policy.rdma_tos >> 2,
        prio=policy.roce_priority,
        placeholder=nvme.PLACEHOLDER_DEVICE,
        srun_range=SRUN_RANGE,
        ephemeral_range=EPHEMERAL_RANGE,
        **common,
    )
    bundle.add("README.md", readme)
    manifest = Manifest(
        spec=spec.name,
        design=document["design"],
        hosts=tuple(ManifestHost(host=h, role=r) for h, r in policy.hosts()),
        files=tuple(ManifestFile(path=a.path, mode=a.mode, secret=a.secret) for a in bundle.sorted_artefacts()),
    )
    bundle.add(MANIFEST, json_text(manifest.to_dict()))
    _check_secrets(bundle, keys)
    return bundle


def _storage(
    bundle: Bundle, spec: Spec, policy: SecurityPolicy, design: Design, transport: str, keys: KeySource
) -> None:
    target_roles = [r for r in policy.roles if r.kind == "storage"]
    if not target_roles:
        raise InputError(f"storage {design.storage} needs a role of kind storage in the security policy")
    role_of = dict(policy.hosts())
    # who may connect to which target follows the flows (SecurityPolicy.nvme_initiators):
    # with two compute/storage pairs each compute host holds keys for its own targets only
    admitted: dict[str, list[str]] = {}
    for role in target_roles:
        plane = policy.storage_plane(role.name)
        initiators = [h for name in policy.nvme_initiators(role.name) for h in policy.role(name).host_names]
        for host in [*role.host_names, *initiators]:
            if plane not in policy.role_planes(role_of[host]):
                raise InputError(
                    f"role {role_of[host]} is not attached to the storage plane {plane!r}; add a flow or planes entry"
                )
        names = policy.nvme_initiators(role.name)
        paired = bool(policy.storage_flows(plane))
        sharing = [r.name for r in policy.roles if r.kind == "storage" and policy.storage_plane(r.name) == plane]
        if not paired and (len(names) > 1 or len(sharing) > 1) and role.name == sharing[0]:
            bundle.notes.append(
                f"plane {plane}: no flow names a storage role, so every compute role on it ({', '.join(names)})"
                f" is admitted to every target ({', '.join(sharing)}); add flows <compute role> -> <storage role>"
                f" on {plane} to pair them (on RDMA the keys are the only isolation)"
            )
        if not initiators:
            bundle.notes.append(
                f"storage role {role.name}: no flow on plane {plane} names it, so its targets admit no host;"
                f" add a flow from its initiators' role to {role.name} on {plane}"
            )
        for target in role.host_names:
            admitted[target] = initiators
    targets = list(admitted)
    nvmet = {
        t: nvme.nvmet_config(
            policy=policy, spec_name=spec.name, target=t, initiators=admitted[t], transport=transport, keys=keys
        )
        for t in targets
    }
    psks: dict[tuple[str, str], tuple[str, str]] = {}
    if transport == "tcp":
        psks = {
            (h, t): (keys.tls_psk(f"tls-discovery/{spec.name}/{h}/{t}"), keys.tls_psk(f"tls/{spec.name}/{h}/{t}"))
            for t in targets
            for h in admitted[t]
        }
    for target in targets:
        bundle.add(f"hosts/{target}/etc/nvmet/config.json", json_text(nvmet[target]), secret=True)
        if psks and admitted[target]:
            lines = "".join(
                nvme.tls_key_lines(nvme.host_identity(spec.name, h).hostnqn, nvmet[target], psks[(h, target)])
                for h in admitted[target]
            )
            bundle.add(f"hosts/{target}/etc/nvme/tls-keys", lines, secret=True)
    index = nvme.host_index(nvmet)
    own_targets: dict[str, list[str]] = {}
    for target in targets:
        for host in admitted[target]:
            own_targets.setdefault(host, []).append(target)
    for host, mine in own_targets.items():
        files = nvme.host_files(
            policy=policy,
            spec_name=spec.name,
            host=host,
            targets=mine,
            transport=transport,
            nvmet=nvmet,
            tls_psks=psks,
            index=index,
        )
        base = f"hosts/{host}/etc/nvme"
        bundle.add(f"{base}/hostnqn", files.hostnqn)
        bundle.add(f"{base}/hostid", files.hostid)
        bundle.add(f"{base}/discovery.conf", files.discovery_conf)
        bundle.add(f"{base}/config.json", files.config_json, secret=True)
        if files.tls_keys:
            bundle.add(f"{base}/tls-keys", files.tls_keys, secret=True)


def _check_secrets(bundle: Bundle, keys: KeySource) -> None:
    """Every issued secret must live only in secret files (a bug here is ours, not the user's)."""
    issued = set(keys.issued)
    for artefact in bundle.artefacts:
        if artefact.secret:
            continue
        # every secret has one of these shapes; looking up tokens keeps this linear
        for token in _SECRET_TOKEN.findall(artefact.content):
            if token in issued:
                raise AssertionError(f"secret material leaked into {artefact.path}")


_SECRET_TOKEN = re.compile(r"DHHC-1:\d\d:[A-Za-z0-9+/=]+:|NVMeTLSkey-1:\d\d:[A-Za-z0-9+/=]+:|0x[0-9a-f]{16}")


def write_bundle(bundle: Bundle, out: Path, *, verify: Callable[[Path, list[str]], None] | None = None) -> list[Path]:
    """Write all artefacts as a whole new ``out``: see :func:`gpufabric.configure.paths.atomic_tree`.

    ``verify`` runs on the complete temporary tree, with the paths of the executable
    artefacts and rulesets, before it replaces ``out`` (the consumers' syntax checks): if
    it raises, ``out`` is left as it was."""
    with atomic_tree(out) as tmp:
        made: set[str] = set()
        for a in bundle.artefacts:  # directories first, in one thread: the writers below only read `made`
            make_parents(tmp, a.path, made)
        # file creation waits on the filesystem, not the CPU: a few writers overlap that
        with ThreadPoolExecutor(WRITERS) as pool:
            try:
                written = list(
                    pool.map(
                        lambda a: write_file(tmp, a.path, a.content, mode=a.mode, secret=a.secret, made=made),
                        bundle.artefacts,
                    )
                )
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        if verify is not None:
            verify(tmp, [a.path for a in bundle.artefacts if a.mode & 0o111 or a.path.endswith("nftables.conf")])
    return [out / p.relative_to(tmp) for p in written]
