"""No import cycle in `src/foxhunt`: a module's imports, the lazy ones inside functions too, never
lead back to it, so each module reads from the modules below it."""

from __future__ import annotations

import ast
from pathlib import Path

import foxhunt

SRC = Path(foxhunt.__file__).parent


def module_files() -> dict[str, Path]:
    modules = {}
    for path in SRC.rglob("*.py"):
        parts = ["foxhunt", *path.relative_to(SRC).with_suffix("").parts]
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every name `module` imports, absolute; `from a import b` gives `a.b` (b may be a module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = module_files()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        targets = {owner(name) for name in imported_names(module, path)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_lazy_and_package_imports():
    graph = import_graph()
    assert "foxhunt.cli.common" in graph["foxhunt.cli.data"]
    assert "foxhunt.cli.data" in graph["foxhunt.cli"]  # `from foxhunt.cli import data`
    assert "foxhunt.data.store" in graph["foxhunt.cli.data"]  # inside a function


def test_no_import_cycle_in_src():
    graph = import_graph()
    assert cycles(graph) == []
    assert cycles({**graph, "foxhunt.cli.common": graph["foxhunt.cli.common"] | {"foxhunt.cli.train"}})
