"""The dependency rule of DESIGN.md, checked on the source: rewards <- eval <- data_filters <- recipes,
nothing imports scripts/, and rewards imports none of the others.

One refinement: eval loads its datasets through data_filters.schema and data_filters.synthetic, two
leaf modules that import nothing from eval or recipes, so no cycle can form.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("rewards", "eval", "data_filters", "recipes")
EVAL_MAY_USE = {"data_filters.schema", "data_filters.synthetic", "data_filters.arithmetic"}


def project_imports(path: Path) -> set[str]:
    """Modules of this project that a file imports, anywhere in it (lazy imports inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name.split(".")[0] in (*PACKAGES, "scripts")}
    return found


def files_of(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def test_rewards_imports_none_of_the_others():
    for path in files_of("rewards"):
        assert {name.split(".")[0] for name in project_imports(path)} <= {"rewards"}, path


def in_leaf_loaders(name: str) -> bool:
    return name == "data_filters" or any(name == module or name.startswith(module + ".") for module in EVAL_MAY_USE)


def test_eval_uses_only_rewards_and_the_leaf_loaders():
    for path in files_of("eval"):
        for name in project_imports(path):
            assert name.split(".")[0] in ("rewards", "eval") or in_leaf_loaders(name), f"{path} imports {name}"


def test_the_leaf_loaders_import_nothing_above_them():
    leaves = [REPO / (module.replace(".", "/") + ".py") for module in EVAL_MAY_USE]
    for path in [*leaves, REPO / "data_filters" / "__init__.py"]:  # importing a leaf runs the package's __init__
        for name in project_imports(path):
            assert name.split(".")[0] == "rewards" or in_leaf_loaders(name), f"{path} imports {name}"


def test_data_filters_never_imports_recipes_and_nothing_imports_scripts():
    for package in PACKAGES:
        for path in files_of(package):
            names = project_imports(path)
            assert not any(name.split(".")[0] == "scripts" for name in names), path
            if package != "recipes":
                assert not any(name.split(".")[0] == "recipes" for name in names), path
