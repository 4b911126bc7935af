"""Import arrows go one way (docs/architecture.md, "The layering rule"): no two modules of toolrun import
each other at import time, and the formats never import the registry (the registry sits above them and
imports them, lazily, for its cached exports). Imports inside functions and under `if TYPE_CHECKING:` are
not arrows at import time and are left out; everything else is read from the source, not from a running
import."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "toolrun").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        found[name] = path
    return found


def _top_level_imports(path: Path, module: str, modules: dict[str, Path]) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.If | ast.Try):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                continue
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name.startswith("toolrun") and name != module:
                    out.add(name)

    visit(ast.parse(path.read_text()).body)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _top_level_imports(path, name, modules) for name, path in modules.items()}


def test_no_import_circles_between_modules() -> None:
    graph = _graph()
    # A package's __init__ re-exports its submodules, and a submodule may import a sibling through the
    # package (`from toolrun.runtime import _errors`): that is one module's own package, not a circle.
    for name in graph:
        graph[name] = {t for t in graph[name] if not (name.startswith(t + ".") and t.count(".") >= 1)}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_formats_never_import_the_registry_nor_above() -> None:
    above = ("toolrun.registry", "toolrun.runtime", "toolrun.agent", "toolrun.server", "toolrun.models")
    for path in (SRC / "toolrun" / "formats").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):  # lazy and TYPE_CHECKING imports count here
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(above), (path.name, node.module)


def _every_import(path: Path) -> set[str]:
    """Every module `path` imports: at import time, inside functions and under TYPE_CHECKING alike."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_server_imports_nothing_from_the_apps() -> None:
    """`toolrun.server` serves any App on the public contract: the task assistant is one App among any
    number (docs/architecture.md), named only as the default `module:attribute` string, never imported."""
    server = SRC / "toolrun" / "server"
    found = {
        (str(path.relative_to(server)), name)
        for path in server.rglob("*.py")
        for name in _every_import(path)
        if name == "toolrun.apps" or name.startswith("toolrun.apps.")
    }
    assert found == set()


def test_the_rule_on_apps_sees_a_lazy_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from toolrun.apps.tasks import task_tools\n")
    assert "toolrun.apps.tasks" in _every_import(module)


def test_the_task_app_uses_only_the_servers_public_names() -> None:
    """The task assistant is built on the contract alone: from `toolrun.server` it takes public names
    (`App`, `Panel`, `AppResources`, `deps`), never a private module."""
    private = set()
    for path in (SRC / "toolrun" / "apps").rglob("*.py"):
        for name in _every_import(path):
            if name.startswith("toolrun.server") and any(p.startswith("_") for p in name.split(".")[2:]):
                private.add((path.name, name))
    assert private == set()
