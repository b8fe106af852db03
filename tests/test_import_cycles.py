"""No import cycle between the modules of the project, lazy imports inside functions included.

An edge is an import of one of our modules by another, read from the source: `import a.b`, `from a.b import x`
(x a name: an edge to a.b; x a submodule: an edge to a.b.x alone, the package's __init__ being the importer's
parent, not a dependency it chose). Imports under `if TYPE_CHECKING:` count too: they never run, but the module
is written against the other's names, so two modules that import each other that way (one for its types, the
other lazily) still depend on each other, and a cycle hidden behind TYPE_CHECKING is still a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("basics", "rewards", "tasks", "eval", "data_filters", "recipes")


def module_names(root: Path) -> dict[str, Path]:
    names = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {ours(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    edges.add(submodule if submodule in modules else ours(node.module))
        graph[name] = edges - {None, name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_between_our_modules():
    found = cycles(import_graph(module_names(REPO)))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(cycle) for cycle in found)


def test_the_check_finds_a_lazy_cycle_and_one_behind_type_checking(tmp_path):
    package = tmp_path / "tasks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from tasks.b import f\n")
    (package / "b.py").write_text("def f():\n    from tasks import a\n")  # lazy: still an edge back to a
    # c imports d lazily and d imports c for its types only: the shape of a backend and a helper that calls it
    (package / "c.py").write_text("def g():\n    from tasks.d import h\n")
    (package / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tasks.c import g\n")
    for other in [name for name in PACKAGES if name != "tasks"]:
        (tmp_path / other).mkdir()
    graph = import_graph(module_names(tmp_path))
    assert graph["tasks.d"] == {"tasks.c"}
    assert sorted(cycles(graph)) == [["tasks.a", "tasks.b"], ["tasks.c", "tasks.d"]]
