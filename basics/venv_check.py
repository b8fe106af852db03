"""Is this Python the one the project was installed into?

A new user runs `make setup` (which installs everything into `.venv`) and then `python recipes/grpo.py`
with the system's python, which has none of the libraries: the first import deep inside a recipe failed
with `No module named 'trl'` and a traceback. What this adds: the entry packages (recipes, eval) check,
without importing anything, that their libraries are present, and say in one message which Python was used
and how to get the right one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUR_FOLDERS = ("recipes", "eval", "data_filters", "tasks", "rewards", "scripts")

SETUP_HINT = (
    "run `make setup` once (it installs everything into .venv), then `source .venv/bin/activate` "
    "in each new shell, or call the venv's python directly: .venv/bin/python {command}"
)


class MissingDependenciesError(ModuleNotFoundError):
    """The running Python lacks libraries the project needs: the venv is not active."""


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The top-level modules among `modules` that this Python cannot import (found without importing)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def _run_as_our_command() -> bool:
    """True when the program is one of this project's scripts (`python recipes/grpo.py`, `python -m eval...`)."""
    if sys.argv[:1] == ["-m"]:  # `python -m eval.evaluate`: runpy imports our package before its module runs
        return True
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if not main_file:
        return False
    path = Path(main_file).resolve()
    return REPO in path.parents and path.relative_to(REPO).parts[0] in OUR_FOLDERS


def _command_line() -> list[str]:
    """The command as the user typed it after `python`, without the interpreter's own options (-S, -u ...)."""
    args = list(getattr(sys, "orig_argv", sys.argv)[1:])
    while args and args[0].startswith("-") and args[0] != "-m":
        args.pop(0)
    return args


def require_installed(modules: tuple[str, ...], package: str) -> None:
    """Stop when this Python lacks `modules`: naming them, this Python and the fix.

    Run as one of our commands, that is one line on stderr and exit code 2 (a user's mistake, as elsewhere);
    imported from other code, a MissingDependenciesError."""
    missing = missing_modules(modules)
    if not missing:
        return
    command = " ".join(_command_line()) or f"-m {package}"
    message = f"{package} needs {', '.join(missing)}, which {sys.executable} does not have: " + SETUP_HINT.format(
        command=command
    )
    if _run_as_our_command():
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)
    raise MissingDependenciesError(message, name=missing[0])
