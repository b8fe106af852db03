"""How every command finds the code: the checkout goes on sys.path, ahead of site-packages (the standard library only).

The project's packages (basics, rewards, tasks, eval, data_filters, recipes, and scripts/) are not installed: `pip install .`
installs their dependencies and nothing else, so no folder named `eval` or `tasks` is ever written into
site-packages, and a distribution of that name installed there cannot take their place (docs/ARCHITECTURE.md,
"What is installed"). This file is the one place that puts a checkout on sys.path, used two ways:

* `make setup` runs it (`python recipes/_checkout.py`), which writes `rlvr_recipes_checkout.pth` into the venv's
  site-packages; from then on every start of the venv's Python runs this file, so `python recipes/grpo.py`,
  `accelerate launch ...`, `python -m eval.evaluate` and pytest find the packages from any working directory;
* a recipe run by path imports it from beside itself (`import _checkout`), so that a Python without the venv
  reaches basics.venv_check, which says in one line what is missing and how to use the venv.

The checkout put on sys.path is the one that holds the script being run, when it is a checkout of this project
(a clone run with another clone's venv runs its own code); otherwise the one that holds this file. It goes just
ahead of the first site-packages folder: behind the script's folder, the working directory of `python -m`,
PYTHONPATH and the standard library, all of which keep their usual precedence.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.realpath(__file__)
PTH_NAME = "rlvr_recipes_checkout.pth"


def checkout_of(path: str) -> str | None:
    """The nearest folder at or above `path` that holds this file's counterpart: a checkout of this project."""
    folder = os.path.realpath(path)
    while True:
        if os.path.isfile(os.path.join(folder, "recipes", "_checkout.py")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def checkout_root() -> str:
    """The checkout of the script being run (`python path/to/script.py`), else the one holding this file."""
    main = (getattr(sys, "argv", None) or [""])[0]
    if main and main not in ("-c", "-m", "-") and os.path.exists(main):
        found = checkout_of(os.path.dirname(os.path.abspath(main)))
        if found:
            return found
    return os.path.dirname(os.path.dirname(HERE))


def _same(entry: str, root: str) -> bool:
    return os.path.realpath(entry or os.curdir) == root


def put_on_path(root: str) -> None:
    """`root` on sys.path ahead of the first site-packages folder (at the end when there is none), once."""
    site = next(
        (i for i, entry in enumerate(sys.path) if os.path.basename(entry) in ("site-packages", "dist-packages")),
        len(sys.path),
    )
    if any(_same(entry, root) for entry in sys.path[:site]):
        return  # already there: the working directory of `python -m`, PYTHONPATH or an earlier run of this file
    sys.path[site:] = [entry for entry in sys.path[site:] if not _same(entry, root)]
    sys.path.insert(site, root)


def pth_line() -> str:
    """The .pth line that runs this file at every start of the Python whose site-packages hold it (not through
    runpy.run_path, which would set sys.argv[0] to this file while it runs)."""
    return (
        f"import importlib.util as u, os; p = {HERE!r}; os.path.isfile(p) and "
        '(s := u.spec_from_file_location("_rlvr_recipes_checkout", p)).loader.exec_module(u.module_from_spec(s))\n'
    )


def write_pth(site_dir: str) -> str:
    path = os.path.join(site_dir, PTH_NAME)
    with open(path, "w") as handle:
        handle.write(pth_line())
    return path


put_on_path(checkout_root())

if __name__ == "__main__":  # make setup: python recipes/_checkout.py [SITE_DIR]
    import sysconfig

    write_pth(sys.argv[1] if len(sys.argv) > 1 else sysconfig.get_path("purelib"))
