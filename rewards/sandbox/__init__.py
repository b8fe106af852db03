"""Run an untrusted Python program on this machine, with nothing else installed, and always get an answer.

During RL a policy will sooner or later write infinite loops, fork bombs, memory bombs, floods of output,
code that deletes files, and code that attacks the judge itself. Two entry points:

- `run_python(code, stdin)`: the program's stdout comes back; the caller compares it (stdin/stdout tests).
- `run_judged(solution, setup, cases, names)`: assert-style tests. The tests run in a trusted judge
  process outside the sandbox (rewards/sandbox/judge.py); the sandbox runs only a small server with the
  solution, which answers calls with plain data over a pipe (rewards/sandbox/protocol.py). The judge never
  shares a process, a uid or a file system view with the program it judges, but it shares the run's
  cgroups and limits: its CPU time and memory (a reply built to be slow or large to decode) are the run's.

The sandbox (`isolation="namespaces"`, Linux; the launcher, rewards/sandbox/launcher.py, does the work):
- a root file system built from nothing (rewards/sandbox/root.py): the interpreter, its standard library,
  the libraries they load and an allowlist of packages, read-only, from a copy in memory (so no page of a
  shared disk file, whose cache state would outlive the run); a private size-capped tmpfs for /tmp and
  /dev/shm; a /proc of the run's processes only; no project tree, no site-packages, no host /tmp, /work,
  /run, sockets or FIFOs;
- pid, network (no route anywhere), IPC and hostname namespaces; as root, a uid of the run's own, drawn at
  random; otherwise a user namespace gives the unprivileged caller the rights to set this up;
- no kernel state that outlives the run (issue 29): a seccomp filter (rewards/sandbox/seccomp.py) denies
  keyrings, page cache probes, new namespaces, io_uring, bpf, ptrace and the like; the program gets a
  session keyring of its own, and stdin is a sealed memory file it cannot write;
- a cgroup per run where the host lets us make one (rewards/sandbox/cgroup.py): memory, processes and
  cores for the run as a whole, killed as a whole and empty before the call returns; elsewhere the
  process count times the per-process address space is kept within `memory_mb`;
- `timeout_s` counts CPU seconds (of the whole run where a cgroup counts them, else per process): verdicts
  are by CPU time, not by the host's load. The wall-clock ceiling (`wall_timeout_s`, default three times
  the timeout plus a second) is only for a program that sleeps or waits; runs go at most one per core this
  process may use, across threads and reward calls (rewards/sandbox/process.py); the call returns within
  the ceiling plus half a second (two and a half for a judged run, whose judge then decides the cases
  answered before), with no process of the run left;
- always: rlimits, an environment reduced to an allowlist, stdout and stderr read as they come and capped.
- fallback (`isolation="fallback"`, or where the kernel refuses namespaces): rlimits, cgroups where
  available, a temporary directory, the kill of every descendant, and as root a uid of its own. A
  one-time warning says what is not isolated: the file system above all, so a program can read whatever
  its uid may (a dataset's answers included). Training should not rely on it.

`RLVR_SANDBOX_ISOLATION` (auto, namespaces, fallback) sets the default mode. Without libseccomp every run
raises SandboxUnavailableError, unless `RLVR_SANDBOX_SECCOMP=off` waives the filter. Nothing here uses signals
in the calling thread, so runs may be made from worker threads; `run_many` runs a batch with a
concurrency limit.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rewards.sandbox import cgroup as sandbox_cgroup
from rewards.sandbox import seccomp as sandbox_seccomp
from rewards.sandbox.process import STOP_GRACE_S, classify, launch, max_runs
from rewards.sandbox.root import interpreter_reachable as _interpreter_reachable
from rewards.sandbox.root import root_spec

logger = logging.getLogger(__name__)

PROTOCOL = Path(__file__).with_name("protocol.py")  # copied into the sandbox as the call server
ISOLATION_ENV = "RLVR_SANDBOX_ISOLATION"
UID_BASE = 1_000_000_000  # program uids (as root): UID_BASE + one of 2**30 at random, judges' 2**30 above: no
UID_SPAN = 1 << 30  # real user has them, and no run learns from its uid how many processes ran before it
MAX_OUTPUT_BYTES = 1_000_000
# The wall-clock ceiling over a run's CPU-time limit (issue 37): verdicts are by CPU time, and a run on a
# loaded host gets its CPU seconds slower; at db84883 the ceiling was the limit plus half a second, and a
# correct program that needed 70% of its CPU time failed while the trainer held the cores. A program that
# only sleeps holds its slot this long.
WALL_FACTOR, WALL_EXTRA_S = 3.0, 1.0
# Without a memory cgroup a run may have this many processes (threads count too), each with memory_mb / this
# of address space: together never more than memory_mb. Most programs are one process; 4 leaves room for a few.
FALLBACK_PROCESSES = 4

_state_lock = threading.Lock()
_namespaces_problem: str | None = None  # why namespaces failed on this machine, once we know
_warned: set[str] = set()


class SandboxUnavailableError(RuntimeError):
    """The isolation asked for cannot be had here: `isolation="namespaces"` where the kernel refuses them, or
    any run without libseccomp (see rewards/sandbox/seccomp.py)."""


@dataclass(frozen=True)
class RunResult:
    """What one run did.

    `status` is "ok" (exit code 0), "timeout" (wall clock or CPU limit), "memory" (the address-space
    limit, or the kernel's OOM killer) or "error" (any other failure, including output past the cap).
    `reason` says it in words. `network_isolated` is True only when the program ran in its own network
    namespace; `isolation` is the mode that was used.
    """

    status: str
    stdout: str
    stderr: str
    returncode: int | None
    wall_s: float
    network_isolated: bool
    isolation: str
    output_truncated: bool = False
    reason: str = ""
    cpu_s: float | None = None  # CPU seconds of the whole run, where a cgroup counted them
    cases: dict[int, tuple[bool, str]] = field(default_factory=dict)  # run_judged: case -> (passed, detail)
    cgroup: bool = False  # the run had a cgroup of its own


def default_concurrency() -> int:
    """The runs this process may have at once: the cores its affinity and cgroup grant, one per run
    (rewards.sandbox.process.max_runs, the limit every launch waits on anyway)."""
    return max_runs()


def _warn_once(key: str, message: str) -> None:
    with _state_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message)


def _requested_mode(isolation: str | None) -> str:
    mode = (isolation or os.environ.get(ISOLATION_ENV) or "auto").strip().lower()
    if mode not in ("auto", "namespaces", "fallback"):
        raise ValueError(f"isolation must be auto, namespaces or fallback, not {mode!r}")
    return mode


def _environment(home: str, extra_env: dict[str, str] | None) -> dict[str, str]:
    """The program's whole environment: nothing is inherited, so no token or secret of the caller leaks."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        # Under RLIMIT_AS every thread's malloc arena and every BLAS thread reserves address space.
        "MALLOC_ARENA_MAX": "2",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra_env or {})
    return env


def _fallback_warning(drop_uid: bool, python: str) -> str:
    why = _namespaces_problem or f"{ISOLATION_ENV} or isolation='fallback' asked for it"
    text = (
        f"code sandbox: Linux namespaces are not used ({why}). Programs run with rlimits, a temporary "
        "directory and a kill of their process tree only. NOT isolated: the file system (a program can read and "
        "write whatever its user can, other processes' environments in /proc included), the network, and "
    )
    if drop_uid:
        return text + "shared places such as /tmp."
    if os.geteuid() == 0:
        return text + (
            f"the machine itself: programs run as ROOT because {python} is not reachable for an unprivileged "
            "uid, so the process-count limit does not apply. Use a world-readable interpreter (python=...)."
        )
    return text + "signals: a program can signal this user's other processes and escape the final kill."


def _limits(
    timeout_s: float, wall_timeout_s: float | None, memory_mb: int, max_processes: int, group, options: dict
) -> dict:
    """The numbers of one run. Without a memory cgroup, processes x address space stays within memory_mb."""
    processes = max_processes
    address_space = memory_mb
    if group is None or not group.limits_memory:
        processes = max(1, min(max_processes, FALLBACK_PROCESSES))
        address_space = memory_mb // processes
    return {
        "cpu_s": timeout_s,
        "wall_s": wall_timeout_s if wall_timeout_s is not None else WALL_FACTOR * timeout_s + WALL_EXTRA_S,
        "rlimit_cpu_s": max(1, int(timeout_s + 0.999)),
        "memory_mb": memory_mb,
        "max_output_bytes": options["max_output_bytes"],
        "launcher": {
            "address_space": address_space * 1024 * 1024,
            "cpu_s": max(1, int(timeout_s + 0.999)),
            "file_size": options["file_size_mb"] * 1024 * 1024,
            "nproc": processes,
            "open_files": options["max_open_files"],
        },
    }


def _run(files: dict[str, bytes], script: str, stdin: str | None, judge: dict | None, options: dict) -> RunResult:
    global _namespaces_problem
    requested = _requested_mode(options["isolation"])
    python = options["python"] or sys.executable
    mode = (
        "namespaces" if requested == "namespaces" or (requested == "auto" and not _namespaces_problem) else "fallback"
    )
    memory_mb, max_processes = options["memory_mb"], options["max_processes"]
    try:
        seccomp = sandbox_seccomp.for_runs()
    except sandbox_seccomp.SeccompUnavailableError as error:
        raise SandboxUnavailableError(f"code sandbox: {error}") from None
    group = sandbox_cgroup.create(
        memory_mb * 1024 * 1024, max_processes + 3, sandbox_cgroup.RUN_CORES
    )  # + init, judge, a spare
    limits = _limits(options["timeout_s"], options["wall_timeout_s"], memory_mb, max_processes, group, options)
    stdin_file = _sealed(stdin.encode()) if stdin is not None else subprocess.DEVNULL
    host_dir = tempfile.mkdtemp(prefix="rlvr-sandbox-")
    try:
        while True:
            drop_uid = os.geteuid() == 0 and (mode == "namespaces" or _interpreter_reachable(python))
            if mode == "fallback":
                _warn_once(f"fallback-{drop_uid}", _fallback_warning(drop_uid, python))
            home = "/tmp/work" if mode == "namespaces" else host_dir  # the launcher's WORK_DIR
            root = root_spec(python, tuple(options["packages"])) if mode == "namespaces" else None
            config = {
                "mode": mode,
                "argv": [root["python"] if root else python, "-I", script],
                "env": _environment(home, options["extra_env"]),
                "host_dir": host_dir,
                "files": files,
                "root": root,
                "drop_uid": drop_uid,
                "uid": UID_BASE + secrets.randbelow(UID_SPAN),
                "judge_uid": UID_BASE + UID_SPAN + secrets.randbelow(UID_SPAN),
                "tmpfs_mb": options["disk_mb"],
                "limits": limits["launcher"],
                "seccomp": seccomp,
                "judge": judge
                and {
                    **judge,
                    # the judge is in the run's cgroups; without a memory cgroup it is one more process of the run
                    "memory_bytes": memory_mb << 20
                    if group and group.limits_memory
                    else limits["launcher"]["address_space"],
                    # where no cgroup counts the run's CPU time, the judge's own limit is the run's
                    "cpu_s": None if group and sandbox_cgroup.cpu_counted() else limits["launcher"]["cpu_s"],
                    "interpreter_reachable": drop_uid and _interpreter_reachable(sys.executable),
                },
            }
            if stdin is not None:
                os.lseek(stdin_file, 0, os.SEEK_SET)
            outcome = launch(config, stdin_file, limits, group, host_dir)
            if "seccomp_error" in outcome["events"]:
                message = outcome["events"]["seccomp_error"].get("message")
                raise SandboxUnavailableError(f"code sandbox: cannot install the seccomp filter: {message}")
            setup_error = outcome["events"].get("setup_error")
            ended_early = not (outcome["timed_out"] or outcome["overflow"]) and "isolated" not in outcome["events"]
            if mode == "namespaces" and (setup_error or ended_early):
                problem = (setup_error or {}).get("message") or outcome["stderr"].decode(errors="replace")[-500:]
                if requested == "namespaces":
                    raise SandboxUnavailableError(f"cannot set up namespaces: {problem}")
                with _state_lock:
                    _namespaces_problem = _namespaces_problem or problem or "setup failed"
                mode = "fallback"
                continue
            break
    finally:
        if group is not None:
            group.kill(STOP_GRACE_S)
            group.remove()
        if stdin is not None:
            os.close(stdin_file)
        _remove_tree(host_dir)
    if "judge_error" in outcome["events"]:
        logger.warning("code sandbox: the judge failed: %s", outcome["events"]["judge_error"].get("message"))
    status, reason = classify(outcome, limits)
    if "judged" in outcome["events"] and status not in ("timeout", "memory") and not outcome["overflow"]:
        status, reason = "ok", ""  # every case has its verdict; how the program then ended does not matter
    return RunResult(
        status=status,
        stdout=outcome["stdout"].decode(errors="replace"),
        stderr=outcome["stderr"].decode(errors="replace"),
        returncode=outcome["events"].get("exit", {}).get("returncode"),
        wall_s=outcome["wall_s"],
        network_isolated=bool(outcome["events"].get("isolated", {}).get("network", False)),
        isolation=mode,
        output_truncated=outcome["overflow"],
        reason=reason,
        cpu_s=outcome["cpu_s"],
        cases=outcome["cases"],
        cgroup=group is not None,
    )


def _sealed(data: bytes) -> int:
    """The program's stdin: a memory file that no one can write, shrink or grow any more (not a host file that
    the program, given it read-write, could fill up to its file-size limit)."""
    fd = os.memfd_create("rlvr-sandbox-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    while data:
        data = data[os.write(fd, data) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    return fd


def _options(**options) -> dict:
    defaults = {
        "timeout_s": 5.0,
        "wall_timeout_s": None,
        "memory_mb": 512,
        "file_size_mb": 64,
        "disk_mb": 128,
        "max_processes": 64,
        "max_open_files": 256,
        "max_output_bytes": MAX_OUTPUT_BYTES,
        "isolation": None,
        "python": None,
        "extra_env": None,
        "packages": (),
    }
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"unknown sandbox options: {sorted(unknown)}")
    return {**defaults, **options}


def run_python(
    code: str, stdin: str | None = None, timeout_s: float = 5.0, memory_mb: int = 512, **options
) -> RunResult:
    """Run `code` as `python main.py` in a fresh working directory, feeding it `stdin`.

    Options: `timeout_s` (CPU seconds), `wall_timeout_s` (the wall-clock ceiling; default 3 x timeout + 1 s),
    `memory_mb` (the whole run), `file_size_mb` (each file), `disk_mb` (the private /tmp and /dev/shm: a tmpfs,
    so memory), `max_processes`, `max_open_files`, `max_output_bytes`, `packages` (names of installed
    packages the program may import, besides the standard library), `isolation` ("auto": namespaces where
    the kernel allows, else the fallback; "namespaces": raise SandboxUnavailableError if not possible;
    "fallback"; None reads RLVR_SANDBOX_ISOLATION), `python` (default: this interpreter), `extra_env`.
    """
    settings = _options(timeout_s=timeout_s, memory_mb=memory_mb, **options)
    return _run({"main.py": code.encode()}, "main.py", stdin, None, settings)


def run_judged(
    solution: str,
    setup: str,
    cases: Sequence[str],
    names: Sequence[str] = (),
    **options,
) -> RunResult:
    """Judge `solution` against assert-style `cases` (after `setup`), the tests on the trusted side.

    `names` are the solution's functions that the tests call (the entry point); names that the cases call
    and the setup does not define are added. `RunResult.cases` maps each judged case to (passed, detail);
    index -1 means the solution or the setup failed before any case. Every case runs to its end whatever the
    program answers, and the answers are compared only after the program has gone (rewards/sandbox/judge.py):
    nothing a program sees while it runs depends on whether its answers were right. Options as for `run_python`.
    """
    settings = _options(**options)
    files = {"serve.py": PROTOCOL.read_bytes(), "solution.py": solution.encode()}
    spec = {"setup": setup, "cases": list(cases), "names": list(names)}
    return _run(files, "serve.py", None, spec, settings)


def _unlock(directory: str) -> None:
    os.chmod(directory, 0o700)
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            _unlock(entry.path)


def _remove_tree(path: str) -> None:
    """Remove the working directory, even where the program took away its own permissions on parts of it."""
    try:
        shutil.rmtree(path)
    except OSError:
        try:
            _unlock(path)
            shutil.rmtree(path)
        except OSError as error:
            logger.warning("code sandbox: could not remove %s: %s", path, error)


def run_many(
    programs: Sequence[tuple[str, str | None]], max_concurrency: int | None = None, **limits
) -> list[RunResult]:
    """Run `(code, stdin)` pairs, at most `max_concurrency` at a time (default: one per core), in order."""
    workers = max(1, max_concurrency or default_concurrency())
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as pool:
        return list(pool.map(lambda program: run_python(program[0], program[1], **limits), programs))


def isolation_info(isolation: str | None = None) -> dict[str, object]:
    """The mode a run gets on this machine and whether its network is isolated, found by running a no-op."""
    result = run_python("print('ok')", timeout_s=10.0, isolation=isolation)
    return {
        "isolation": result.isolation,
        "network_isolated": result.network_isolated,
        "works": result.status == "ok" and result.stdout.strip() == "ok",
        "namespaces_problem": _namespaces_problem,
    }
