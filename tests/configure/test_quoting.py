"""Every value in every template is quoted for its context or refused (issue 9 item 2).

Three layers: (1) the template ASTs: every ``{{ }}`` ends in a context filter;
(2) the filters themselves; (3) every template rendered with hostile values in every
field, then handed to its consumer: scripts run with stubbed commands and must not run
the payload, env files are sourced, rulesets pass ``nft -c``, and no value adds a line.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
from jinja2 import nodes

from gpufabric.configure import quoting
from gpufabric.configure.bundle import template_env
from gpufabric.errors import InputError
from tests.configure.stubs import (
    fake_sysfs,
    nft_check,
    payloads,
    run_script,
    source_env_file,
)

_TEMPLATE_DIR = Path(quoting.__file__).parent / "templates"
TEMPLATES = sorted(p.relative_to(_TEMPLATE_DIR).as_posix() for p in _TEMPLATE_DIR.rglob("*.j2"))


def _outputs(tree: nodes.Node) -> list[nodes.Expr]:
    return [
        expr for out in tree.find_all(nodes.Output) for expr in out.nodes if not isinstance(expr, nodes.TemplateData)
    ]


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_output_of_every_template_ends_in_a_context_filter(name):
    env = template_env()
    source = env.loader.get_source(env, name)[0]
    unfiltered = [
        expr
        for expr in _outputs(env.parse(source))
        if not (isinstance(expr, nodes.Filter) and expr.name in quoting.CONTEXT_FILTERS)
    ]
    assert unfiltered == [], [f"line {e.lineno}: {type(e).__name__}" for e in unfiltered]


def test_strict_undefined():
    with pytest.raises(jinja2.UndefinedError):
        template_env().get_template("tuned.conf.j2").render(version="1")


@pytest.mark.parametrize("value", ["$(id)", "a b", "x\\ny", "${IFS}", "'", '"', "`id`", "a;b", "*", ""])
def test_sh_round_trips_through_a_real_shell(value):
    done = subprocess.run(
        ["sh", "-c", f"printf %s {quoting.sh(value)}"], check=False, capture_output=True, text=True, timeout=10
    )
    assert done.stdout == value


COMMON_BAD = ["eth0\n", "a b", "$(id)", '"x', "", "a;b", "\u00e9", "a\x00"]


@pytest.mark.parametrize(
    ("fn", "extra"),
    [
        (quoting.ifname, ["..", "a/b", "x" * 16, "a:1"]),
        (quoting.sysctl_ifname, ["..", "a/b", "x" * 16]),
        (quoting.nft_ident, ["1a", "a.b", "x" * 65]),
        (quoting.opensm_word, ["a,b", "a=b", "a:b"]),
        (quoting.plain, ["a,b", "a=b", "#x"]),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_identifier_filters_refuse_metacharacters(fn, extra):
    for value in COMMON_BAD + extra:
        with pytest.raises(InputError, match="allowed"):
            fn(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, "3", None])
def test_num_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(InputError):
        quoting.num(value)


def test_comment_filters_keep_one_line():
    for fn in (quoting.comment, quoting.nft_comment, quoting.md):
        text = fn('a\nb\r"c`d\\e\x00')
        assert (
            "\n" not in text
            and "\r" not in text
            and '"' not in text
            and "`" not in text
            and "\\" not in text.replace("\\|", "")
        )


# ---- every template with hostile values in every field --------------------------------------


def _objects(v) -> dict[str, dict[str, object]]:
    """Template contexts whose every free field ``f`` holds ``v(f)``."""
    plane = SimpleNamespace(
        name=v("plane.name"),
        kind=v("plane.kind"),
        cidr=v("plane.cidr"),
        interface=v("plane.interface"),
        vlan=v("plane.vlan"),
        pkey=None,
    )
    role = SimpleNamespace(name=v("role.name"), kind=v("role.kind"), host_names=[v("host"), v("host")])
    policy = SimpleNamespace(planes=[plane], roles=[role], role_planes=lambda name: [v("plane.name")])
    design = SimpleNamespace(
        fabric=v("design.fabric"),
        fabric_kind="roce",
        storage=v("design.storage"),
        source=v("design.source"),
        storage_transport="tcp",
        rented=False,
    )
    rule = SimpleNamespace(
        saddr_set=v("set.name"), proto=v("proto"), dports=((29400, 29400), (32768, 60999)), comment=v("purpose")
    )
    chain = SimpleNamespace(name=v("chain.name"), interface=v("ifname"), rules=[rule])
    rs = SimpleNamespace(
        role=v("role"),
        sets=[SimpleNamespace(name=v("set.name"), ranges=((v("addr"), v("addr")), ("10.0.1.1", "10.0.1.9")))],
        chains=[chain],
    )
    member = SimpleNamespace(guid=v("guid"), membership=v("membership"))
    part = SimpleNamespace(name=v("plane.name"), pkey=0x10, indx0=True, members=[member, member], comment=v("purpose"))
    common = {"version": v("version"), "spec_name": v("spec_name"), "role": v("role")}
    return {
        "README.md.j2": {
            **common,
            "design": design,
            "policy": policy,
            "policy_source": v("policy_source"),
            "interfaces": v("ifname"),
            "files": [SimpleNamespace(path=v("path"), mode=0o600, secret=True)],
            "notes": [v("note")],
            "dscp": 26,
            "prio": 3,
            "placeholder": v("device"),
            "srun_range": v("srun_range"),
            "ephemeral_range": v("ephemeral_range"),
        },
        "nccl.env.j2": {
            **common,
            "kind": "roce",
            "ctl_if": v("ifname"),
            "hcas": [v("hca"), v("hca")],
            "tos": 106,
            "dscp": 26,
            "pkey": 16,
            "pkey_index": 0,
            "ras_port": 28028,
            "bitwise": True,
            "channels": 16,
        },
        "nftables.conf.j2": {**common, "rs": rs},
        "opensm.conf.j2": {**common, "m_key": v("key"), "sm_key": v("key"), "sa_key": v("key")},
        "partitions.conf.j2": {**common, "partitions": [part]},
        "roce-qos.sh.j2": {
            **common,
            "prio": 3,
            "dscp": 26,
            "tos": 106,
            "pfc": v("pfc"),
            "hcas": [v("hca")],
            "netdevs": [v("ifname")],
        },
        "sysctl.conf.j2": {
            **common,
            "interfaces": [v("ifname")],
            "ephemeral_low": 32768,
            "ephemeral_high": 60999,
            "srun_low": 61000,
            "srun_high": 63000,
        },
        "tlshd.conf.j2": {**common},
        "ansible/inventory.ini.j2": {
            **common,
            "groups": [{"name": v("role.name"), "hosts": [{"name": v("host"), "address": v("addr")}]}],
        },
        "torchrun.sh.j2": {**common, "ctl_if": v("ifname"), "ctl_cidr": v("cidr"), "rdzv_port": 29400},
        "train.sbatch.j2": {
            **common,
            "job_name": v("job_name"),
            "nodes": 2,
            "gpus_per_node": 8,
            "ctl_if": v("ifname"),
            "srun_range": v("srun_range"),
        },
        "tuned.conf.j2": {**common},
    }


#: A valid value per field: the benign render every hostile one is compared with.
BENIGN = {
    "hca": "mlx5_0:1",
    "addr": "10.0.0.1",
    "guid": "0x0002c90300000001",
    "membership": "full",
    "proto": "tcp",
    "cidr": "10.20.0.0/16",
    "key": "0x8000000000000001",
    "pfc": "0,0,0,1,0,0,0,0",
    "srun_range": "61000-63000",
}


def _fields() -> list[str]:
    seen: list[str] = []
    _objects(lambda f: seen.append(f) or BENIGN.get(f, "ok1"))
    return sorted(set(seen))


FIELDS = _fields()
ENV = template_env()


def _render(name: str, field: str | None, value: str) -> str | None:
    context = _objects(lambda f: value if f == field else BENIGN.get(f, "ok1"))[name]
    try:
        return ENV.get_template(name).render(**context)
    except InputError:
        return None  # refused: the other acceptable outcome


def test_hostile_contexts_cover_every_template():
    assert sorted(_objects(lambda f: "x")) == TEMPLATES and len(FIELDS) > 20


@pytest.mark.parametrize("name", TEMPLATES)
def test_hostile_values_in_every_field_never_inject(name, tmp_path):
    canary = tmp_path / "canary"
    benign = _render(name, None, "")
    assert benign is not None, "the benign render must pass"
    _consume(name, _write(tmp_path / "benign", name, benign), tmp_path / "benign")
    consumed = 0
    for field in FIELDS:
        for i, value in enumerate(payloads(canary)):
            text = _render(name, field, value)
            if text is None or text == benign:
                continue  # refused, or a field this template does not use
            assert text.count("\n") == benign.count("\n"), f"{field}={value!r} added or removed a line in {name}"
            assert "\r" not in text and "\x00" not in text
            work = tmp_path / f"{field}-{i}"
            _consume(name, _write(work, name, text), work)
            consumed += 1
            assert not canary.exists(), f"{field}={value!r} executed through {name}"
    if name != "tlshd.conf.j2":
        assert consumed or name in REFUSE_ALL, f"no hostile value reached {name}: the test proves nothing"


#: Templates whose every free field is an identifier: every payload is refused.
REFUSE_ALL = {"opensm.conf.j2"}


def _write(work: Path, name: str, text: str) -> Path:
    path = work / name.removesuffix(".j2")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _consume(name: str, path: Path, work: Path) -> None:
    """Hand the rendered file to the program that reads it."""
    if name.endswith(".sh.j2") or name == "train.sbatch.j2":
        shell = "sh" if path.read_text().startswith("#!/bin/sh") else "bash"
        assert subprocess.run([shell, "-n", str(path)], check=False, capture_output=True, timeout=10).returncode == 0
        env_file = work / "nccl.env"
        env_file.write_text("NCCL_X=1\n")
        run_script(path, work, env_file=env_file, sysfs=fake_sysfs(work, ["mlx5_0"], []), args=("train.py",))
    elif name == "nccl.env.j2":
        done = source_env_file(path, work)
        assert done.returncode == 0, done.stderr
    elif name == "nftables.conf.j2":
        done = nft_check(path)
        if done is not None:
            assert done.returncode == 0, done.stderr
    elif name == "tuned.conf.j2" or name == "tlshd.conf.j2":
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(path.read_text())
    elif name == "ansible/inventory.ini.j2":
        # ansible's own INI inventory parser: exactly the one group and host rendered, nothing injected.
        exe = shutil.which("ansible-inventory") or str(Path(sys.executable).parent / "ansible-inventory")
        done = subprocess.run(
            [exe, "-i", str(path), "--list"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
        )
        assert done.returncode == 0, done.stderr
        listed = json.loads(done.stdout)
        hosts = set(listed.get("_meta", {}).get("hostvars", {})) | {
            h for g, v in listed.items() if g != "_meta" for h in v.get("hosts", [])
        }
        assert len(hosts) == 1, hosts
        sections = {line[1:-1] for line in path.read_text().splitlines() if line.startswith("[") and ":" not in line}
        # [opensm] is written empty (ansible lists no empty group); nothing else may appear.
        assert sections - {"opensm"} == set(listed) - {"_meta", "all", "ungrouped", "gpufabric"}, listed
        assert len(sections) == 2, sections
    elif name == "sysctl.conf.j2":
        for line in path.read_text().splitlines():
            assert line.startswith("#") or re.fullmatch(r"-?[a-z0-9_]+(\.[A-Za-z0-9_/-]+)+ = [0-9 ]+", line), line


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft not installed")
def test_nft_breakout_is_refused_in_names_and_neutralised_in_comments(tmp_path):
    # the classic breakout: close the string and the rule, open an accepting chain
    evil = '" accept; } chain evil { type filter hook input priority 0; policy accept; #'
    for field in ("set.name", "chain.name", "ifname", "proto", "addr"):
        assert _render("nftables.conf.j2", field, evil) is None, field
    text = _render("nftables.conf.j2", "purpose", evil)
    assert text is not None and "chain evil {" in text  # inside the comment string, inert
    path = _write(tmp_path, "nftables.conf.j2", text)
    done = nft_check(path)
    assert done is not None and done.returncode == 0, done.stderr
    listed = subprocess.run(
        ["nft", "-c", "-e", "-f", str(path)], check=False, capture_output=True, text=True, timeout=20
    )
    assert "hook input priority 0; policy accept" not in listed.stdout
