"""The dependency rule of the packages (docs/ARCHITECTURE.md), checked on the source, with no exceptions:

    rewards <- tasks <- eval <- data_filters <- recipes <- scripts/

Each package imports only itself and the packages below it; nothing imports scripts/ or tests/.
Imports inside functions count too: a lazy import that runs up the layers is still an arrow up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

LAYERS = ("basics", "rewards", "tasks", "eval", "data_filters", "recipes", "scripts")
OURS = (*LAYERS, "tests")


def project_imports(path: Path) -> set[str]:
    """Top-level names of this project's packages that a file imports, anywhere in it (lazy imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names if name.split(".")[0] in OURS}
    return found


def files_of(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def allowed(package: str) -> set[str]:
    """The package itself and every layer below it."""
    return set(LAYERS[: LAYERS.index(package) + 1])


@pytest.mark.parametrize("package", LAYERS)
def test_every_import_points_down(package):
    assert files_of(package), f"no sources under {package}/"
    bad = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in files_of(package)
        for name in sorted(project_imports(path) - allowed(package))
    ]
    assert not bad, "imports that run up the layers:\n" + "\n".join(bad)


def test_the_rule_catches_an_arrow_up(tmp_path):
    """The checker itself: a lazy import of eval from the task layer is found."""
    source = tmp_path / "leaf.py"
    source.write_text("def load():\n    from eval.runner import sample_and_score\n    import tests.conftest\n")
    assert project_imports(source) - allowed("tasks") == {"eval", "tests"}


def test_every_package_is_described():
    """Each library layer says in its docstring what it may import. (None is installed: tests/test_packaging.py.)"""
    for package in LAYERS[:-1]:
        docstring = ast.get_docstring(ast.parse((REPO / package / "__init__.py").read_text())) or ""
        assert "May import" in docstring, f"{package}/__init__.py does not say what it may import"


# Issue 17's limits on size: a recipe script is its story, read top to bottom; no module is a grab-bag.
RECIPE_SCRIPT_LINES = 150
MODULE_LINES = 400
# Files allowed to be longer: none (the sandbox's launcher was, until its supervision became a file of its own).
LONG_MODULES: set[str] = set()


def test_each_recipe_script_reads_in_under_150_lines():
    scripts = sorted(path for path in (REPO / "recipes").glob("*.py") if path.name != "__init__.py")
    assert {path.stem for path in scripts} >= {"sft", "grpo", "rejection_sampling", "distill"}
    long = {path.name: n for path in scripts if (n := len(path.read_text().splitlines())) >= RECIPE_SCRIPT_LINES}
    assert not long, f"recipe scripts of {RECIPE_SCRIPT_LINES} lines or more (move helpers to recipes/common/): {long}"


def what_it_does(path: Path) -> str:
    """A module's job as the size check reports it: its docstring's first line and its top-level definitions."""
    tree = ast.parse(path.read_text())
    summary = (ast.get_docstring(tree) or "").split("\n")[0]
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    return f"{summary!r}; defines {len(names)}: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}"


def test_no_module_is_over_400_lines_and_each_says_what_it_does():
    """A file over the cap is reported with what it does, so that the fix is to split it by job, not to move
    lines; a module without a docstring saying what it does is reported too."""
    paths = [path for package in OURS for path in files_of(package)]
    long = [
        f"{path.relative_to(REPO)} ({n} lines): {what_it_does(path)}"
        for path in paths
        if (n := len(path.read_text().splitlines())) > MODULE_LINES and str(path.relative_to(REPO)) not in LONG_MODULES
    ]
    assert not long, f"modules over {MODULE_LINES} lines; split each by job:\n" + "\n".join(long)
    library = [path for package in LAYERS[:-1] for path in files_of(package)]
    silent = [str(path.relative_to(REPO)) for path in library if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not silent, f"modules that do not say what they do (no docstring): {silent}"


def test_the_size_report_says_what_a_file_does(tmp_path):
    source = tmp_path / "grab_bag.py"
    source.write_text('"""Two jobs.\n\nMore."""\n\ndef a():\n    pass\n\n\nclass B:\n    pass\n')
    assert what_it_does(source) == "'Two jobs.'; defines 2: a, B"
