"""What is installed and how the commands find the code (docs/ARCHITECTURE.md, "What is installed").

The distribution installs the dependencies only: its wheel holds no `eval/`, `tasks/`, `rewards/`, `recipes/` or
`data_filters/` that could collide in site-packages with a distribution of the same name. The checkout goes on
sys.path through one helper, recipes/_checkout.py, whose .pth file `make setup` writes into the venv; no other file
puts the checkout on sys.path itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

OUR_PACKAGES = ("basics", "rewards", "tasks", "eval", "data_filters", "recipes")
HELPER = REPO / "recipes" / "_checkout.py"


def test_the_wheel_installs_none_of_our_folders(tmp_path):
    source = tmp_path / "source"
    for folder in (*OUR_PACKAGES, "scripts"):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", ".", "-w", "dist"],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (source / "dist").glob("rlvr_recipes-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert all(top.endswith(".dist-info") for top in tops), tops  # the metadata (and dependencies) only


def fake_site(tmp_path: Path) -> Path:
    """A venv's site-packages as `make setup` leaves it (the helper's .pth), plus unrelated distributions named like
    our packages that fail when imported."""
    site = tmp_path / "venv" / "site-packages"
    site.mkdir(parents=True)
    subprocess.run([sys.executable, "-S", str(HELPER), str(site)], check=True, timeout=60)
    assert (site / "rlvr_recipes_checkout.pth").read_text().startswith("import ")
    for name in OUR_PACKAGES:
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f"raise ImportError('the unrelated {name} distribution')\n")
    return site


PROBE = """
import importlib.util, json, site, sys
site.addsitedir({site!r})  # what the venv's Python does at start, here without the venv's other packages (-S)
import basics.venv_check
print(json.dumps({{"origins": {{name: importlib.util.find_spec(name).origin for name in {names!r}}}, "path": sys.path}}))
"""


def run_probe(script: Path, site: Path, cwd: Path, env: dict | None = None) -> dict:
    script.write_text(PROBE.format(site=str(site), names=OUR_PACKAGES))
    completed = subprocess.run(
        [sys.executable, "-S", str(script)], cwd=cwd, capture_output=True, text=True, timeout=60, env=env
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_the_venv_finds_this_checkout_ahead_of_same_named_distributions(tmp_path):
    site = fake_site(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(elsewhere)}
    found = run_probe(tmp_path / "probe.py", site, cwd=tmp_path, env=env)
    for name, origin in found["origins"].items():
        assert Path(origin) == REPO / name / "__init__.py", (name, origin)
    path = found["path"]
    # ahead of site-packages, behind PYTHONPATH (which keeps its usual precedence)
    assert path.index(str(elsewhere)) < path.index(str(REPO)) < path.index(str(site)), path


def test_a_clone_run_with_another_checkouts_venv_runs_its_own_code(tmp_path):
    site = fake_site(tmp_path)
    clone = tmp_path / "clone"
    for name in OUR_PACKAGES:
        (clone / name).mkdir(parents=True)
        (clone / name / "__init__.py").write_text("")
    (clone / "basics" / "venv_check.py").write_text("")
    shutil.copy(HELPER, clone / "recipes" / "_checkout.py")
    (clone / "runs").mkdir()
    found = run_probe(clone / "runs" / "probe.py", site, cwd=tmp_path)
    for name, origin in found["origins"].items():
        assert Path(origin) == clone / name / "__init__.py", (name, origin)


# sys.path.insert / append anywhere in our source, tests and test programs included
PATH_EDIT = re.compile(r"sys\.path\.(?:insert|append)\((?:\d+,\s*)?(.+)\)")
# What may still be put on sys.path: not the checkout, but one of its folders or a copy of one.
ALLOWED = {
    'str(REPO / "scripts")',  # tests importing the demo's modules, which import their siblings in scripts/
    "{module_dir!r}",  # test_sandbox_hostile: a copy of rewards/code/sandbox that another user's Python can read
}


def test_no_file_but_the_helper_puts_the_checkout_on_sys_path():
    edits = []
    for folder in (*OUR_PACKAGES, "scripts", "tests"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path == HELPER:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = PATH_EDIT.search(line)
                if match and match.group(1).strip() not in ALLOWED:
                    edits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not edits, "the checkout goes on sys.path through recipes/_checkout.py only:\n" + "\n".join(edits)


def test_the_rule_catches_a_repeated_startup_line():
    edit = "sys.path" + ".insert"  # spelled in two parts, so that the scan above does not find this file
    assert PATH_EDIT.search(f"    {edit}(0, str(Path(__file__).resolve().parents[1]))").group(1) not in ALLOWED
    assert PATH_EDIT.search(f"{edit}(0, str(REPO))").group(1) not in ALLOWED
    assert PATH_EDIT.search(f'{edit}(0, str(REPO / "scripts"))').group(1) in ALLOWED


@pytest.mark.parametrize(
    "command",
    [[str(REPO / "recipes" / "grpo.py"), "--help"], ["-m", "eval.evaluate", "--help"]],
    ids=["python recipes/grpo.py", "python -m eval.evaluate"],
)
def test_a_command_runs_from_outside_the_checkout(command, tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    completed = subprocess.run(
        [sys.executable, *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "usage:" in completed.stdout
