"""The import graph flows one way, in the layers of docs/architecture.md.

The test walks every ``import`` in ``src/gpufabric`` with ``ast`` (no module is imported)
and fails on an arrow that points up, or sideways inside a layer, unless it is listed in
``ALLOWED_SIDEWAYS`` with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "gpufabric"

# Top to bottom; a package may import only packages in lower layers.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"__main__"}),
    frozenset({"cli"}),
    # The declared library API: a facade over the features, beside the CLI (cli does not use it).
    frozenset({"api"}),
    # Application services: typed requests and outcomes, the workload registry (cli and api use them).
    frozenset({"app"}),
    frozenset({"plan", "sim", "configure", "audit", "bench", "lab", "report"}),
    frozenset({"model", "results"}),
    # The foundation, itself in three steps so that no arrow inside it is sideways.
    frozenset({"catalog", "exec"}),
    frozenset({"spec", "units"}),
    # Capped reads and catalog-id checks; JSON conversion and the schema_version check.
    frozenset({"boundary", "jsonable"}),
    frozenset({"errors"}),
)

# Sideways arrows that are part of the design, each with its reason.
ALLOWED_SIDEWAYS: dict[tuple[str, str], str] = {
    ("audit", "configure"): "the static audit reads a bundle through the layout that configure writes",
}


def _layer(package: str) -> int:
    for index, members in enumerate(LAYERS):
        if package in members:
            return index
    raise AssertionError(f"package {package!r} is in no layer of docs/architecture.md")


def _imports(path: Path) -> set[str]:
    rel = path.relative_to(SRC)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel.parts[:-1])[: max(0, len(rel.parts) - node.level)]
                names = [".".join(["gpufabric", *base, *([node.module] if node.module else [])])]
            else:
                names = [node.module or ""]
        else:
            continue
        found.update(name.split(".")[1] for name in names if name.startswith("gpufabric."))
    return found


def _arrows() -> list[tuple[str, str, str]]:
    arrows = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if package == "__init__":
            continue
        for target in _imports(path) - {package}:
            arrows.append((package, target, str(rel)))
    return arrows


def test_imports_point_down_the_layers() -> None:
    bad = []
    for source, target, where in _arrows():
        if (source, target) in ALLOWED_SIDEWAYS:
            continue
        if _layer(target) <= _layer(source):
            bad.append(f"{where}: {source} -> {target}")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(set(bad)))


def test_every_allowed_sideways_arrow_is_still_used() -> None:
    used = {(s, t) for s, t, _ in _arrows()}
    stale = [f"{s} -> {t}" for s, t in ALLOWED_SIDEWAYS if (s, t) not in used and _layer(s) == _layer(t)]
    assert not stale, f"remove stale entries from ALLOWED_SIDEWAYS: {stale}"


@pytest.mark.parametrize("module", ["subprocess"])
def test_only_exec_starts_processes(module: str) -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "exec":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == module or n.startswith(module + ".") for n in names):
                offenders.append(str(rel))
    assert not offenders, f"only gpufabric.exec may import {module}: {sorted(set(offenders))}"
