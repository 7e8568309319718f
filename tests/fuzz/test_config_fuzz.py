"""Fuzz `gpufabric config` with mutated shipped examples (issue 9 item 9, config part).

Each example replaces one string of a shipped spec (the examples plus a spec with a full
security section, whose host, interface, HCA and purpose strings reach every artefact)
with a hostile one: shell and nft metacharacters, newlines, ``../``, unicode, huge.
Invariants: exit code in {0, 1, 2}; no exception escapes; no file appears outside
``--out``; when a bundle is written, every script passes ``bash -n`` and runs with its
external commands stubbed without running the injected command, and every nftables file
passes ``nft -c``. CI loads the derandomized "ci" profile (tests/conftest.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufabric.cli.app import main
from tests.configure.stubs import PAYLOADS, fake_sysfs, nft_check, run_script

ROOT = Path(__file__).resolve().parents[2]
SPECS = [
    ROOT / "examples/lab-2node.yaml",
    ROOT / "examples/roce-256gpu-8b.yaml",
    ROOT / "tests/configure/data/secure-ib.yaml",
]
CANARY = Path(tempfile.gettempdir()) / f"bd-fuzz-canary-{os.getpid()}"
BASES = {p.name: yaml.safe_load(p.read_text()) for p in SPECS}
#: Content hashes of files already proven (the same script from two examples runs once).
PROVEN: set[str] = set()


def _string_paths(node: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _string_paths(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _string_paths(v, (*path, i))]
    return [path] if isinstance(node, str) else []


def _set(doc: Any, path: tuple, value: str) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


METACHARS = ["\n", "\r", "$(", "`", "'", '"', ";", "|", "&", "{", "}", "#", "\\", "../", " ", "\x00", "*", "=", ","]
hostile = st.one_of(
    st.sampled_from([p.replace("CANARY", str(CANARY)) for p in PAYLOADS]),
    st.text(min_size=0, max_size=40),
    st.lists(st.sampled_from(METACHARS + ["a", "0", "-", ".", "touch " + str(CANARY)]), max_size=12).map("".join),
)


@st.composite
def mutated_spec(draw) -> tuple[str, dict, list[str]]:
    name = draw(st.sampled_from(sorted(BASES)))
    base = BASES[name]["options"]
    # half the examples pin the design, so a mutation that makes every design infeasible
    # (exit 1 before rendering) does not keep hostile strings away from the renderers
    extra = draw(st.sampled_from([[], ["--design", f"fabric={base['fabrics'][0]},storage={base['storage'][0]}"]]))
    doc = yaml.safe_load(yaml.safe_dump(BASES[name]))
    paths = _string_paths(doc)
    # most draws hit strings that reach artefacts (the spec name, everything under
    # security:); enum and catalog fields only show that validation refuses cleanly
    reaching = [p for p in paths if p[0] in ("name", "security")]
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(reaching if reaching and draw(st.integers(0, 9)) < 8 else paths))
        original = _get(doc, path)
        value = draw(hostile)
        how = draw(st.sampled_from(["replace", "append", "prepend"]))
        _set(doc, path, value if how == "replace" else original + value if how == "append" else value + original)
    return name, doc, extra


def _get(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=mutated_spec())
def test_config_survives_mutated_examples(case):
    _name, doc, extra = case
    with tempfile.TemporaryDirectory(prefix="bd-fuzz-") as tmp:
        work = Path(tmp)
        spec = work / "spec.yaml"
        try:
            spec.write_text(yaml.safe_dump(doc, allow_unicode=True))
        except UnicodeEncodeError:
            return  # a lone surrogate cannot be a file's content
        out = work / "a" / "b" / "out"
        try:
            code = main(["config", str(spec), "--out", str(out), "--seed", "fuzz", *extra])
        except SystemExit as exc:  # pragma: no cover - main never exits; a failure if it does
            raise AssertionError(f"config called exit({exc.code})") from exc
        assert code in (0, 1, 2)
        outside = {p for p in _listing(work) if not p.startswith("a/b/out/") and p != "a/b/out"}
        assert outside <= {"spec.yaml", "a", "a/b"}, sorted(outside)
        if code == 0:
            _prove(out, work)
        assert not CANARY.exists(), f"an injected command ran: {doc}"


def _prove(out: Path, work: Path) -> None:
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        text = path.read_text()
        digest = hashlib.sha256(path.name.encode() + text.encode()).hexdigest()
        if digest in PROVEN:
            continue
        if path.name == "nftables.conf":
            done = nft_check(path)
            assert done is None or done.returncode == 0, done.stderr
        elif text.startswith(("#!/bin/bash", "#!/bin/sh")):
            shell = "sh" if text.startswith("#!/bin/sh") else "bash"
            done = subprocess.run([shell, "-n", str(path)], check=False, capture_output=True, text=True, timeout=20)
            assert done.returncode == 0, done.stderr
            run = work / "run"
            shutil.rmtree(run, ignore_errors=True)
            run.mkdir()
            env_file = next(out.glob("roles/*/etc/gpufabric/nccl.env"), None)
            run_script(path, run, env_file=env_file, sysfs=fake_sysfs(run, ["mlx5_0"], ["stor0"]), args=("train.py",))
        PROVEN.add(digest)
