"""A command run with a Python that lacks the project's libraries (the venv not active) stops with one line
that names the missing libraries, that Python, and how to use the venv: not a traceback ending in
`No module named 'trl'`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from basics.venv_check import MissingDependenciesError, missing_modules, require_installed
from tests.conftest import REPO


@pytest.mark.parametrize(
    "command",
    [
        ["recipes/grpo.py", "--max_steps", "2"],
        ["-m", "eval.evaluate", "--help"],
        ["recipes/sft.py"],
        ["recipes/rejection_sampling.py"],
        ["recipes/distill.py"],
    ],
    ids=["grpo script", "eval module", "sft script", "rejection sampling script", "distill script"],
)
def test_a_command_without_the_venv_says_how_to_use_it(command):
    # -S: no site-packages, as the system python of a user who did not activate .venv
    result = subprocess.run(
        [sys.executable, "-S", *command], cwd=REPO, capture_output=True, text=True, timeout=60, env={"PATH": ""}
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "source .venv/bin/activate" in lines[0] and "make setup" in lines[0]
    assert "torch" in lines[0] and sys.executable in lines[0]
    assert ".venv/bin/python " + " ".join(command) in lines[0]  # the same command, with the venv's python


def test_imported_from_other_code_it_raises_a_module_error():
    assert missing_modules(("json", "no_such_module_rlvr")) == ["no_such_module_rlvr"]
    with pytest.raises(MissingDependenciesError, match="no_such_module_rlvr") as caught:
        require_installed(("json", "no_such_module_rlvr"), "recipes")
    assert isinstance(caught.value, ModuleNotFoundError)
    require_installed(("json",), "recipes")  # nothing missing: nothing raised
