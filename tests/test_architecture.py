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
    # The one exception tree; lazily loaded package names (no imports of their own).
    frozenset({"errors", "lazy"}),
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The gpufabric modules ``path`` imports when it runs: module-level and function-level
    imports alike; only the body of ``if TYPE_CHECKING:`` is left out (types only). An
    imported name that is a submodule (``from pkg import mod``) is an arrow to that module."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolve(module: str) -> str:
        while module and module not in modules:
            module = module.rpartition(".")[0]
        return module

    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(resolve(a.name) for a in child.names if a.name.startswith("gpufabric."))
            elif isinstance(child, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - child.level + 1] if child.level else []
                module = ".".join([*base, child.module] if child.module else base) if child.level else child.module
                if module and module.startswith("gpufabric"):
                    found.update(
                        f"{module}.{a.name}" if f"{module}.{a.name}" in modules else resolve(module)
                        for a in child.names
                    )
            else:
                visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found - {name, ""}


def test_no_import_cycle_between_modules() -> None:
    """Issue 33: no two modules import each other at run time (function-level imports
    included), directly or through others. A cycle is reported as one strongly connected
    component of the module graph (Tarjan's algorithm)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph = {name: sorted(_runtime_imports(path, set(paths))) for name, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    assert not cycles, "modules that import each other at run time:\n" + "\n".join(" <-> ".join(c) for c in cycles)
