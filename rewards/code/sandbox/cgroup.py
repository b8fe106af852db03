"""A control group per sandbox run: memory, processes and CPU for the run as a whole, and a kill that ends it.

rlimits hold per process: a run of 64 processes under RLIMIT_AS=512 MB may take 32 GB, and RLIMIT_CPU lets
each of them spin for the whole limit. A cgroup counts the run as one: `memory` caps the memory of all its
processes together (tmpfs pages written by them included), `pids` their number, `cpu` the cores they may
use at once (so a run that forks spinners takes one core from its neighbours, not all), and the CPU time
they used is read from `cpuacct` (v1) or `cpu.stat` (v2): the sandbox's timeout counts CPU seconds, so a
loaded machine slows a correct program without failing it. At the end the whole group is killed
(`cgroup.kill` on v2, else SIGKILL to every member until none is left) and removed, before the call returns.

Both layouts are handled: cgroup v2 (one `cgroup2` mount), v1 (a mount per controller) and the hybrid of
both that this project's CI machines have (v1 controllers, and a v2 mount with no controllers that still
gives `cgroup.kill`, `cgroup.events` and `cpu.stat`). Groups are made under this process's own group in
each hierarchy; where that is not allowed (no root, no delegation) `available()` is False and the sandbox
falls back to per-process limits sized to stay within the run's memory budget.

`cpu_cores` reads the other side: the cores the calling process itself may use (its affinity, and the CPU
limit of its own group and of each group above it, as a container's is), from which the sandbox sizes
its concurrency: runs at once x RUN_CORES (each run's CPU limit) stays within them.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from rewards.code.sandbox.leftovers import stale_entries

logger = logging.getLogger(__name__)

WANTED = ("memory", "pids", "cpu", "cpuacct")
RUN_CORES = 1.0  # the cores a run's group may use at once: the unit in which concurrency is counted
_counter = itertools.count()
_lock = threading.Lock()
_found: dict[str, tuple[str, str]] | None = None  # what -> (version, directory of our own group)


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _own_groups() -> list[tuple[str, str, str, str]]:
    """(controller, or "unified" for a v2 mount; its version; the mount point; our own group's directory) for
    each wanted hierarchy mounted here that holds our group."""
    own: dict[str, str] = {}
    for line in _read("/proc/self/cgroup").splitlines():
        number, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["unified"]:
            own[name] = path
    found: list[tuple[str, str, str, str]] = []
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, point, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2":
            names = ["unified"]
        elif fstype == "cgroup":
            names = [option for option in options if option in WANTED]
        else:
            continue
        for name in names:
            path = own.get(name)
            if path is None or not (path + "/").startswith(root.rstrip("/") + "/"):
                continue
            relative = path[len(root.rstrip("/")) :].lstrip("/")
            found.append((name, "v2" if fstype == "cgroup2" else "v1", point, os.path.join(point, relative)))
    return found


def _discover() -> dict[str, tuple[str, str]]:
    """For each wanted controller (and "unified" for a v2 mount), its version and our group's directory."""
    found: dict[str, tuple[str, str]] = {}
    for name, version, _, directory in _own_groups():
        found.setdefault(name, (version, directory))
    if "unified" in found:
        controllers = _read(os.path.join(found["unified"][1], "cgroup.controllers")).split()
        for name in ("memory", "pids", "cpu"):
            if name not in found and name in controllers:
                found[name] = found["unified"]
    return found


def _quota_cores(directory: str, version: str) -> float | None:
    """The cores that a group's CPU limit grants (v2 cpu.max, v1 cfs quota / period); None where it sets none."""
    try:
        if version == "v2":
            quota, period = _read(os.path.join(directory, "cpu.max")).split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota = int(_read(os.path.join(directory, "cpu.cfs_quota_us")))
        return None if quota < 0 else quota / int(_read(os.path.join(directory, "cpu.cfs_period_us")))
    except (OSError, ValueError, ZeroDivisionError):
        return None


def cpu_cores() -> float:
    """The cores this process may use at once: the fewest of its CPU affinity (a cpuset included) and the CPU
    limits of its cgroup and of every group above it that is visible here (a container's limit among them)."""
    try:
        cores = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = float(os.cpu_count() or 1)
    try:
        groups = _own_groups()
    except (OSError, ValueError):  # no /proc, or a line in it that is not what we expect
        groups = []
    for name, version, point, directory in groups:
        if (name, version) not in (("cpu", "v1"), ("unified", "v2")):
            continue
        top, current = os.path.normpath(point), os.path.normpath(directory)
        while True:
            quota = _quota_cores(current, version)
            if quota is not None:
                cores = min(cores, quota)
            if current == top or not current.startswith(top + "/"):
                break
            current = os.path.dirname(current)
    return cores


def _usable() -> dict[str, tuple[str, str]]:
    """The hierarchies where we may make a group (tried once per process with a probe group)."""
    global _found
    with _lock:
        if _found is None:
            _found = {}
            try:
                discovered = _discover()
            except OSError as error:
                logger.info("code sandbox: no cgroups (%s)", error)
                discovered = {}
            for name, (version, directory) in discovered.items():
                probe = os.path.join(directory, f"rlvr-probe-{os.getpid()}")
                try:
                    os.mkdir(probe)
                    os.rmdir(probe)
                    _found[name] = (version, directory)
                except OSError:
                    continue
                _remove_stale(directory)
        return dict(_found)


def _remove_stale(directory: str) -> None:
    """Remove the empty groups that a caller killed mid-run left behind (their pid is gone)."""
    for path in stale_entries(directory, "rlvr-sandbox-", 2, lambda parts: len(parts) == 4):
        try:
            os.rmdir(path)
        except OSError:
            pass  # still holds processes: left alone


def available() -> dict[str, str]:
    """Which per-run controls this process can use: {"memory": "v1", "pids": "v1", ...}; empty if none."""
    return {name: version for name, (version, _) in _usable().items()}


@dataclass
class RunGroup:
    """The groups of one run, one per hierarchy; `procs` are the files a process writes "0" to, to join."""

    directories: dict[str, tuple[str, str]] = field(default_factory=dict)  # what -> (version, directory)

    @property
    def procs(self) -> list[str]:
        return sorted({os.path.join(directory, "cgroup.procs") for _, directory in self.directories.values()})

    @property
    def limits_memory(self) -> bool:
        return "memory" in self.directories

    def cpu_seconds(self) -> float | None:
        """CPU time used by the run's processes so far (dead ones included), or None if not counted."""
        try:
            if "cpuacct" in self.directories:
                return int(_read(os.path.join(self.directories["cpuacct"][1], "cpuacct.usage"))) / 1e9
            for name in ("unified", "cpu"):
                version, directory = self.directories.get(name, ("", ""))
                if version == "v2":
                    for line in _read(os.path.join(directory, "cpu.stat")).splitlines():
                        if line.startswith("usage_usec "):
                            return int(line.split()[1]) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def out_of_memory(self) -> bool:
        """Did the kernel's OOM killer act in this run's memory group?"""
        version, directory = self.directories.get("memory", ("", ""))
        try:
            if version == "v1":
                text = _read(os.path.join(directory, "memory.oom_control"))
            elif version == "v2":
                text = _read(os.path.join(directory, "memory.events"))
            else:
                return False
        except OSError:
            return False
        return any(line.split()[:1] == ["oom_kill"] and line.split()[1] != "0" for line in text.splitlines())

    def tasks(self) -> int | None:
        """Threads of the run's processes now, all together (the pids controller counts threads), or None."""
        version, directory = self.directories.get("pids", ("", ""))
        if not directory:
            return None
        try:
            return int(_read(os.path.join(directory, "pids.current")))
        except (OSError, ValueError):
            return None

    def members(self) -> set[int]:
        pids: set[int] = set()
        for path in self.procs:
            try:
                pids.update(int(entry) for entry in _read(path).split())
            except (OSError, ValueError):
                continue
        return pids

    def kill(self, timeout_s: float = 0.5) -> bool:
        """Kill every process of the run and wait until none is left; True if the groups are empty."""
        deadline = time.monotonic() + timeout_s
        killer = next((d for v, d in self.directories.values() if v == "v2"), None)
        if killer is not None and os.path.exists(os.path.join(killer, "cgroup.kill")):
            try:
                _write(os.path.join(killer, "cgroup.kill"), "1")
            except OSError:
                killer = None
        while True:
            members = self.members()
            if not members:
                return True
            if time.monotonic() >= deadline:
                logger.warning("code sandbox: %d processes of a run survived its kill", len(members))
                return False
            for pid in members:  # v1, or a straggler that joined while cgroup.kill ran
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)

    def remove(self) -> None:
        for _, directory in self.directories.values():
            for _ in range(50):
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.002)  # a killed process still leaving the group
            else:
                logger.warning("code sandbox: could not remove the cgroup %s", directory)


def _set(directory: str, name: str, value: str, required: bool = True) -> None:
    try:
        _write(os.path.join(directory, name), value)
    except OSError as error:
        if required:
            raise
        logger.debug("code sandbox: cgroup %s not set: %s", name, error)


def create(memory_bytes: int, max_processes: int, cpu_cores: float) -> RunGroup | None:
    """A fresh group in every usable hierarchy, with the limits set; None if this machine gives none."""
    usable = _usable()
    if not usable:
        return None
    with _lock:
        name = f"rlvr-sandbox-{os.getpid()}-{next(_counter)}"
    group = RunGroup()
    made: set[str] = set()
    try:
        for what, (version, parent) in usable.items():
            directory = os.path.join(parent, name)
            if directory not in made:
                os.mkdir(directory)
                made.add(directory)
            group.directories[what] = (version, directory)
            if what == "memory" and version == "v1":
                _set(directory, "memory.limit_in_bytes", str(memory_bytes))
                _set(directory, "memory.memsw.limit_in_bytes", str(memory_bytes), required=False)  # no swap
            elif what == "memory":
                _set(directory, "memory.max", str(memory_bytes))
                _set(directory, "memory.swap.max", "0", required=False)
            elif what == "pids":
                _set(directory, "pids.max", str(max_processes))
            elif what == "cpu" and version == "v1":
                _set(directory, "cpu.cfs_period_us", "100000")
                _set(directory, "cpu.cfs_quota_us", str(int(100000 * cpu_cores)))
            elif what == "cpu":
                _set(directory, "cpu.max", f"{int(100000 * cpu_cores)} 100000")
    except OSError as error:
        logger.warning("code sandbox: cannot set up a cgroup (%s); per-process limits only", error)
        group.remove()
        return None
    return group


def cpu_counted() -> bool:
    """Does a per-run group count CPU time here (cpuacct on v1, cpu.stat on every v2 group)?"""
    usable = _usable()
    return "cpuacct" in usable or "unified" in usable or usable.get("cpu", ("",))[0] == "v2"
