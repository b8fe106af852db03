"""What the sandbox's file system is built from: the interpreter, its standard library, the shared libraries
they load, and an explicit allowlist of packages. Nothing else of the host exists inside a run.

The launcher mounts a fresh tmpfs as the new root and binds into it, read-only, the paths listed here (at
the same places, so that the interpreter finds its prefix as it would outside), then pivots into it. So a
run sees no project tree, no virtualenv, no site-packages (a dataset's package data, such as HumanEval's
canonical solutions, included), no host /tmp, /work, /run, /home or /etc, and none of the sockets or FIFOs
anyone left in them. The interpreter is the real binary behind `python` (a venv's `bin/python` is a link
to it): the venv itself, with every package installed for training, stays outside.

What is bound is a private copy (`snapshot`), made once per caller process in a tmpfs (/dev/shm) and
removed when it exits: the standard library without its test suite, IDLE, tkinter, ensurepip, its static
library and the optimized .pyc that no run loads; the interpreter and its libpython; the allowlisted
packages; and, of the system's library directories (/usr/lib/x86_64-linux-gnu alone is 600 MB on a dev
machine), only the libraries that these load, found by reading their ELF headers (DT_NEEDED, RUNPATH,
the program interpreter) and following every symbolic link on the way, plus libgcc_s, which glibc opens
when a thread exits. About 75 MB for CPython 3.11, copied once per process: 0.15 s from the page cache,
about 1 s on a loaded 2-core machine (the per-run cost does not change: as many binds as before).

Why a copy (issue 29): files shared with other runs share their page cache, and whether a page is cached
is state that outlives a run. With posix_fadvise and preadv2(RWF_NOWAIT) a learner program wrote and read
it, run after run; the seccomp filter (rewards/code/sandbox/seccomp.py) takes those calls away, but the time of
a first read still tells a cached page from one on disk, and a first read caches it: a bit that one run
sets and a later one reads. A tmpfs page is never "not cached" (without swap), so there is nothing to set
or read; and tmpfs keeps no negative dentries, so looking up a missing name leaves nothing behind either.
Reading every bound file once instead (to cache it) was measured against this: the bound library
directories alone are 600 MB to read, and whatever memory pressure evicts later is a bit again.

Where no copy can be made (no writable /dev/shm, or one mounted noexec under a user namespace, whose
binds cannot lift noexec), the host's directories are bound as before and a warning says that first
reads can be timed across runs.

The layout of an interpreter is asked of that interpreter once (`python -I -S`), and cached.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import logging
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

from rewards.code.sandbox.leftovers import stale_entries

logger = logging.getLogger("rewards.code.sandbox")

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
# Where dynamic libraries live on Linux distributions (merged /usr or not), in the dynamic loader's order.
_LIBRARY_DIRS = ("/lib/{multiarch}", "/usr/lib/{multiarch}", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
SNAPSHOT_PARENT = "/dev/shm"
_LEFT_OUT_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo"}
_LEFT_OUT_DIRS |= {"ensurepip", "__phello__"}
_LEFT_OUT_FILES = (".opt-1.pyc", ".opt-2.pyc", ".exe", ".a")
_LEFT_OUT_MODULES = ("_test", "_ctypes_test", "_xxtestfuzz", "xxlimited", "_tkinter")  # C test modules, and Tk
_RUNTIME_LIBRARIES = ("libgcc_s.so.1",)  # opened by glibc itself (pthread_exit, cancellation), never DT_NEEDED
_snapshots: dict[tuple[str, tuple[str, ...]], dict | None] = {}
_snapshots_lock = threading.Lock()


@functools.lru_cache(maxsize=8)
def interpreter_layout(python: str) -> dict:
    """The real executable, the standard library, the site-packages to hide and the shared libraries."""
    completed = subprocess.run(
        [python, "-I", "-S", "-c", _ASK], capture_output=True, text=True, timeout=60, check=True, env={}
    )
    return json.loads(completed.stdout)


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _interpreter_paths(python: str) -> list[str]:
    """Directories the program's interpreter needs: its installation and, for a venv, the venv."""
    real = os.path.realpath(python)
    paths = {os.path.dirname(os.path.dirname(real))}
    if os.path.realpath(sys.executable) == real or os.path.abspath(python) == os.path.abspath(sys.executable):
        paths |= {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    return sorted(paths)


def _searchable_by_others(directory: str) -> bool:
    """Can a uid that owns nothing enter `directory` (it and every directory above it searchable by others)?"""
    current = "/"
    for part in [""] + os.path.abspath(directory).strip("/").split("/"):
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return False
    return True


def interpreter_reachable(python: str) -> bool:
    """Can an unprivileged uid run `python`, through its path as given and as resolved, with its installation?"""
    directories = [os.path.dirname(os.path.abspath(python)), os.path.dirname(os.path.realpath(python))]
    return all(_searchable_by_others(directory) for directory in directories + _interpreter_paths(python))


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


def _host_spec(layout: dict, packages: tuple[str, ...]) -> dict:
    """The recipe that binds the host's own directories: the library directories whole, the standard library
    with an empty read-only tmpfs over each site-packages in it, and the allowlisted packages in the first."""
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


def elf_dependencies(data: bytes) -> tuple[list[str], list[str], str | None]:
    """DT_NEEDED names, RUNPATH (else RPATH) directories and program interpreter of an ELF file; nothing for
    any other file."""
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2):
        return [], [], None
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:  # Elf64_Phdr: type, flags, offset, vaddr, paddr, filesz, memsz, align
        (table,), (size, count) = (
            struct.unpack_from(order + "Q", data, 0x20),
            struct.unpack_from(order + "HH", data, 0x36),
        )
        header, entry, at = order + "IIQQQQQQ", order + "qQ", (0, 2, 3, 5)
    else:  # Elf32_Phdr: type, offset, vaddr, paddr, filesz, memsz, flags, align
        (table,), (size, count) = (
            struct.unpack_from(order + "I", data, 0x1C),
            struct.unpack_from(order + "HH", data, 0x2A),
        )
        header, entry, at = order + "IIIIIIII", order + "iI", (0, 1, 2, 4)
    segments = [
        tuple(fields[i] for i in at)
        for fields in (struct.unpack_from(header, data, table + n * size) for n in range(count))
    ]
    interpreter, dynamic = None, []
    for kind, offset, _, length in segments:
        if kind == 3:  # PT_INTERP
            interpreter = data[offset : offset + length].split(b"\0")[0].decode()
        elif kind == 2:  # PT_DYNAMIC
            for position in range(offset, offset + length, struct.calcsize(entry)):
                tag, value = struct.unpack_from(entry, data, position)
                if tag == 0:
                    break
                dynamic.append((tag, value))
    strings = next((value for tag, value in dynamic if tag == 5), None)  # DT_STRTAB, an address
    loads = [(offset, vaddr, length) for kind, offset, vaddr, length in segments if kind == 1]
    base = next(
        (offset + strings - vaddr for offset, vaddr, length in loads if vaddr <= (strings or -1) < vaddr + length), None
    )
    if base is None:
        return [], [], interpreter

    def text(at: int) -> str:
        return data[base + at : data.index(b"\0", base + at)].decode()

    paths = {
        tag: [part for value in [v for t, v in dynamic if t == tag] for part in text(value).split(":")]
        for tag in (15, 29)
    }
    return [text(value) for tag, value in dynamic if tag == 1], paths[29] or paths[15], interpreter  # fmt: skip


class _Copy:
    """A tree under `directory` that mirrors host paths: each file copied (mtime kept, or every .pyc would be
    stale), each symbolic link on the way recreated as it is."""

    def __init__(self, directory: str):
        self.directory, self.placed, self.binaries = directory, set(), []
        self.real: dict[str, str] = {}

    def place(self, path: str, destination: str | None = None) -> None:
        while True:
            parent = os.path.dirname(path)
            folder = self.real.get(parent) or self.real.setdefault(parent, os.path.realpath(parent))
            entry = os.path.join(folder, os.path.basename(path))
            target = destination or entry
            if target in self.placed:
                return
            self.placed.add(target)
            os.makedirs(self.directory + os.path.dirname(target), 0o755, exist_ok=True)
            if destination is None and os.path.islink(entry):
                link = os.readlink(entry)
                os.symlink(link, self.directory + target)
                path = os.path.join(folder, link)  # an absolute link stays absolute
                continue
            shutil.copy2(entry, self.directory + target)
            if entry.endswith(".so") or ".so." in entry or os.access(entry, os.X_OK):
                self.binaries.append(entry)
            return

    def place_tree(self, source: str, destination: str) -> None:
        for folder, dirs, files in os.walk(source):
            dirs[:] = [d for d in dirs if d not in _LEFT_OUT_DIRS and not d.startswith("config-")]
            for name in files:
                if name.endswith(_LEFT_OUT_FILES) or (
                    folder.endswith("lib-dynload") and name.startswith(_LEFT_OUT_MODULES)
                ):
                    continue
                path = os.path.join(folder, name)
                self.place(path, destination + path[len(source) :] if destination != source else None)


def _copy_libraries(copy: _Copy, search: list[str], inside: list[str]) -> None:
    """Copy every library that the copied binaries load, and those that these load in turn."""
    done: set[str] = set()
    for name in _RUNTIME_LIBRARIES:
        found = next((os.path.join(d, name) for d in search if os.path.exists(os.path.join(d, name))), None)
        if found:
            copy.place(found)
    while copy.binaries:
        binary = copy.binaries.pop()
        if binary in done:
            continue
        done.add(binary)
        with open(binary, "rb") as handle:
            needed, runpath, interpreter = elf_dependencies(handle.read())
        if interpreter:
            copy.place(interpreter)
        origin = os.path.dirname(binary)
        directories = [d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for d in runpath] + search
        for name in needed:
            found = next((os.path.join(d, name) for d in directories if os.path.exists(os.path.join(d, name))), None)
            if found is None:
                logger.debug("code sandbox: %s needs %s, which is not installed", binary, name)
            elif not any(_under(os.path.realpath(found), path) for path in inside):  # not in a copied package
                copy.place(found)


def _snapshot(layout: dict, host: dict) -> dict:
    """Copy what a run needs into a fresh folder of SNAPSHOT_PARENT; the recipe that binds it."""
    started = time.monotonic()
    directory = tempfile.mkdtemp(prefix=f"rlvr-sandbox-root-{_pid_namespace()}-{os.getpid()}-", dir=SNAPSHOT_PARENT)
    os.chmod(directory, 0o755)
    owner = os.getpid()
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(directory, ignore_errors=True))
    try:
        return _fill(directory, layout, host, started)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _fill(directory: str, layout: dict, host: dict, started: float) -> dict:
    copy = _Copy(directory)
    roots = [target for _, target in host["binds"]]
    for path in sorted({layout["stdlib"], layout["platstdlib"]}):
        copy.place_tree(path, path)
    copy.place(layout["executable"])
    site = host["hidden"][0] if host["hidden"] else None
    package_sources = [source for source, _ in host["allowed"]]
    for source, target in host["allowed"]:
        if os.path.isdir(source):
            copy.place_tree(source, target)
        else:
            copy.place(source, target)
    search = [d.format(multiarch=layout["multiarch"]) for d in _LIBRARY_DIRS if layout["multiarch"] or "{" not in d]
    _copy_libraries(copy, [d for d in search if os.path.isdir(d)], package_sources)
    if site is not None:
        os.makedirs(directory + site, 0o755, exist_ok=True)  # exists inside, with the allowed packages only
        roots.append(site)
    for entry in sorted(copy.placed):
        if not any(_under(entry, root) for root in roots):
            roots.append(os.path.dirname(entry))
    roots = [root for root in roots if os.path.lexists(directory + root)]
    roots = sorted({root for root in roots if not any(_under(root, other) for other in roots if other != root)})
    size = sum(os.lstat(directory + entry).st_size for entry in copy.placed)
    logger.info(
        "code sandbox: the run's root is a private copy of %.0f MB in %s (%.2f s)",
        size / 1e6,
        directory,
        time.monotonic() - started,
    )
    return {"binds": [(directory + root, root) for root in roots], "hidden": [], "allowed": [], "links": host["links"],
            "python": layout["executable"], "snapshot": directory}  # fmt: skip


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _remove_stale() -> None:
    """Remove the copies of callers that died without cleaning up (killed: atexit never ran). Only those of our
    pid namespace: a container that shares /dev/shm has pids that our /proc does not show."""

    def ours(parts: list[str]) -> bool:  # rlvr-sandbox-root-<pid namespace>-<pid>-...
        return len(parts) >= 6 and parts[3] == str(_pid_namespace())

    for path in stale_entries(SNAPSHOT_PARENT, "rlvr-sandbox-root-", 4, ours):
        shutil.rmtree(path, ignore_errors=True)


def _copy_possible() -> str | None:
    """Why no copy can be bound here, or None."""
    if not os.path.isdir(SNAPSHOT_PARENT) or not os.access(SNAPSHOT_PARENT, os.W_OK | os.X_OK):
        return f"{SNAPSHOT_PARENT} is not writable"
    if os.geteuid() != 0 and os.statvfs(SNAPSHOT_PARENT).f_flag & os.ST_NOEXEC:
        return f"{SNAPSHOT_PARENT} is mounted noexec, which a user namespace cannot lift on a bind"
    return None


def root_spec(python: str, packages: tuple[str, ...] = ()) -> dict:
    """The launcher's recipe for the new root: binds (host path, sandbox path), hidden dirs, links, argv[0]."""
    layout = interpreter_layout(os.path.realpath(python) if os.path.exists(python) else python)
    host = _host_spec(layout, packages)
    key = (layout["executable"], tuple(packages))
    with _snapshots_lock:
        if key not in _snapshots:
            why = _copy_possible()
            if why is None:
                _remove_stale()
                try:
                    _snapshots[key] = _snapshot(layout, host)
                except OSError as error:
                    why = f"{type(error).__name__}: {error}"
            if why is not None:
                _snapshots[key] = None
                logger.warning(
                    "code sandbox: no private copy of the sandbox's files (%s): runs share the host's page cache "
                    "of them, so a program can time a first read that an earlier run made",
                    why,
                )
        return _snapshots[key] or host
