"""What the sandbox's file system is built from: the interpreter, its standard library, the system's shared
libraries, and an explicit allowlist of packages. Nothing else of the host exists inside a run.

The launcher mounts a fresh tmpfs as the new root and binds into it, read-only, exactly the paths listed
here (at the same places, so that the interpreter finds its prefix as it would outside), then pivots into
it. So a run sees no project tree, no virtualenv, no site-packages (a dataset's package data, such as
HumanEval's canonical solutions, included), no host /tmp, /work, /run, /home or /etc, and none of the
sockets or FIFOs anyone left in them. The interpreter is the real binary behind `python` (a venv's
`bin/python` is a link to it): the venv itself, with every package installed for training, stays outside.

The layout of an interpreter is asked of that interpreter once (`python -I -S`), and cached.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess

_ASK = """
import json, os, site, sys, sysconfig
paths = sysconfig.get_paths()
libdir = sysconfig.get_config_var("LIBDIR") or ""
library = sysconfig.get_config_var("INSTSONAME") or ""
print(json.dumps({
    "executable": os.path.realpath(sys.executable),
    "stdlib": os.path.realpath(paths["stdlib"]),
    "platstdlib": os.path.realpath(paths["platstdlib"]),
    "sitepackages": [os.path.realpath(path) for path in site.getsitepackages()],
    "shared_library": os.path.realpath(os.path.join(libdir, library)) if ".so" in library else "",
    "multiarch": sysconfig.get_config_var("MULTIARCH") or "",
}))
"""
# Where dynamic libraries live on Linux distributions (merged /usr or not); those that exist are bound.
_LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib64", "/lib/{multiarch}", "/usr/lib/{multiarch}")


@functools.lru_cache(maxsize=8)
def interpreter_layout(python: str) -> dict:
    """The real executable, the standard library, the site-packages to hide and the shared libraries."""
    completed = subprocess.run(
        [python, "-I", "-S", "-c", _ASK], capture_output=True, text=True, timeout=60, check=True, env={}
    )
    return json.loads(completed.stdout)


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def package_paths(names: tuple[str, ...]) -> list[str]:
    """The installed files of each allowlisted top-level package of this interpreter (and a wheel's `.libs`)."""
    paths = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin and not spec.submodule_search_locations:
            raise ValueError(f"package {name!r} is not installed, so it cannot be allowed in the sandbox")
        if spec.submodule_search_locations:
            path = os.path.realpath(list(spec.submodule_search_locations)[0])
        else:
            path = os.path.realpath(spec.origin)
        paths.append(path)
        libs = os.path.join(os.path.dirname(path), f"{name}.libs")  # manylinux wheels keep their .so here
        if os.path.isdir(libs):
            paths.append(os.path.realpath(libs))
    return paths


def root_spec(python: str, packages: tuple[str, ...] = ()) -> dict:
    """The launcher's recipe for the new root: binds (host path, sandbox path), hidden dirs, links, argv[0]."""
    layout = interpreter_layout(os.path.realpath(python) if os.path.exists(python) else python)
    binds: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    library_dirs: list[str] = []
    for pattern in _LIBRARY_DIRS:
        if "{multiarch}" in pattern and not layout["multiarch"]:
            continue
        path = pattern.format(multiarch=layout["multiarch"])
        if os.path.islink(path) and os.path.dirname(path) == "/":  # /lib -> usr/lib on a merged /usr
            links.append((path, os.readlink(path)))
            continue
        real = os.path.realpath(path)
        # never a whole /lib: only its libraries, not its python3/ folder of packages
        if os.path.isdir(real) and real not in ("/lib", "/usr/lib") and real not in library_dirs:
            library_dirs.append(real)
    for path in library_dirs:
        binds.append((path, path))
    stdlib_dirs = sorted({layout["stdlib"], layout["platstdlib"]})
    for path in stdlib_dirs:
        if not any(_under(path, other) for other in stdlib_dirs if other != path):
            binds.append((path, path))
    for path in (layout["executable"], layout["shared_library"]):
        if path and os.path.exists(path) and not any(_under(path, directory) for directory, _ in binds):
            binds.append((path, path))
    # Every site-packages under a bound directory is covered by an empty read-only tmpfs (the stdlib of pyenv,
    # conda and python.org builds holds one); allowlisted packages are bound into the first of them.
    hidden = [
        path
        for path in layout["sitepackages"]
        if os.path.isdir(path) and any(_under(path, directory) for directory, _ in binds)
    ]
    for directory, _ in list(binds):
        for name in ("site-packages", "dist-packages"):
            candidate = os.path.join(directory, name)
            if os.path.isdir(candidate) and candidate not in hidden:
                hidden.append(candidate)
    allowed = []
    if packages:
        if not hidden:
            hidden.append(layout["sitepackages"][0] if layout["sitepackages"] else "/sandbox/site-packages")
        for path in package_paths(packages):
            allowed.append((path, os.path.join(hidden[0], os.path.basename(path))))
    return {"binds": binds, "hidden": hidden, "allowed": allowed, "links": links, "python": layout["executable"]}
