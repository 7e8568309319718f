"""Fixtures for the audit tests: a clean bundle rendered from tests/data/audit/lab-ib.yaml."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from gpufabric.configure import KeySource, design_from_spec, render_bundle, write_bundle
from gpufabric.spec import load_spec

CORPUS = Path(__file__).resolve().parents[1] / "data" / "audit"


def render(spec_file: Path, out: Path, seed: str = "corpus", **replace: str) -> Path:
    spec = load_spec(spec_file).spec
    if replace:
        spec = spec.model_copy(update={"options": spec.options.model_copy(update={k: [v] for k, v in replace.items()})})
    bundle = render_bundle(spec, design_from_spec(spec), KeySource(seed=seed.encode()))
    write_bundle(bundle, out)
    return out


@pytest.fixture(scope="session")
def clean_bundle(tmp_path_factory) -> Path:
    return render(CORPUS / "lab-ib.yaml", tmp_path_factory.mktemp("bundle") / "clean")


@pytest.fixture
def bundle_copy(clean_bundle, tmp_path) -> Path:
    dst = tmp_path / "bundle"
    shutil.copytree(clean_bundle, dst)  # copy2 keeps the 0600 modes
    return dst


def apply_edits(root: Path, edits: list[dict]) -> None:
    for edit in edits:
        ((op, args),) = edit.items()
        if op == "replace":
            path = root / args["file"]
            text = path.read_text()
            assert text.count(args["old"]) == 1, f"{args['old']!r} must occur once in {path}"
            path.write_text(text.replace(args["old"], args["new"]))
        elif op == "json_set":
            path = root / args["file"]
            doc = json.loads(path.read_text())
            node = doc
            for key in args["path"][:-1]:
                node = node[key]
            node[args["path"][-1]] = args["value"]
            path.write_text(json.dumps(doc, indent=2))
        elif op == "chmod":
            os.chmod(root / args["file"], int(args["mode"], 8))
        elif op == "copy":
            (root / args["dst"]).write_text((root / args["src"]).read_text())
        else:
            raise AssertionError(f"unknown edit {op}")


def corpus_cases() -> list[Path]:
    return sorted(CORPUS.glob("case-*.yaml"))


def load_case(path: Path) -> dict:
    return yaml.safe_load(path.read_text())
