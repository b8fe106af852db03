"""One sandbox run: the isolation mode (namespaces, or the fallback where the kernel refuses them), the run's
cgroup, root and seccomp filter, the launch, the fall back from a failed namespace setup, and the cleanup.

rewards.code.sandbox.entry_points calls `run_program` with a run's files and settings; the launcher
(launcher.py), started by rewards.code.sandbox.process, does the work inside.
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

from rewards.code.sandbox import cgroup as sandbox_cgroup
from rewards.code.sandbox import seccomp as sandbox_seccomp
from rewards.code.sandbox.process import STOP_GRACE_S, classify, launch
from rewards.code.sandbox.results import RunResult, SandboxUnavailableError
from rewards.code.sandbox.root import interpreter_reachable, root_spec
from rewards.code.sandbox.settings import environment, run_limits

logger = logging.getLogger("rewards.code.sandbox")

ISOLATION_ENV = "RLVR_SANDBOX_ISOLATION"
UID_BASE = 1_000_000_000  # program uids (as root): UID_BASE + one of 2**30 at random, judges' 2**30 above: no
UID_SPAN = 1 << 30  # real user has them, and no run learns from its uid how many processes ran before it

_state_lock = threading.Lock()
_namespaces_problem: str | None = None  # why namespaces failed on this machine, once we know
_warned: set[str] = set()


def namespaces_problem() -> str | None:
    """Why namespaces failed on this machine, or None while they have not."""
    return _namespaces_problem


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


def run_program(
    files: dict[str, bytes], script: str, stdin: str | None, judge: dict | None, options: dict
) -> RunResult:
    """Run `script` among `files` (name -> contents) with `stdin`, judged by `judge` (run_judged's spec) or not."""
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
    limits = run_limits(options["timeout_s"], options["wall_timeout_s"], memory_mb, max_processes, group, options)
    stdin_file = _sealed(stdin.encode()) if stdin is not None else subprocess.DEVNULL
    host_dir = tempfile.mkdtemp(prefix="rlvr-sandbox-")
    try:
        while True:
            config = launcher_config(mode, python, files, script, options, limits, group, host_dir, seccomp, judge)
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


def launcher_config(
    mode: str, python: str, files: dict, script: str, options: dict, limits: dict, group, host_dir: str, seccomp, judge
) -> dict:
    """What the launcher of one run reads (its configuration): the program, its root, uids, limits and judge."""
    drop_uid = os.geteuid() == 0 and (mode == "namespaces" or interpreter_reachable(python))
    if mode == "fallback":
        _warn_once(f"fallback-{drop_uid}", _fallback_warning(drop_uid, python))
    home = "/tmp/work" if mode == "namespaces" else host_dir  # the launcher's WORK_DIR
    root = root_spec(python, tuple(options["packages"])) if mode == "namespaces" else None
    return {
        "mode": mode,
        "argv": [root["python"] if root else python, "-I", script],
        "env": environment(home, options["extra_env"]),
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
            "memory_bytes": options["memory_mb"] << 20
            if group and group.limits_memory
            else limits["launcher"]["address_space"],
            # where no cgroup counts the run's CPU time, the judge's own limit is the run's
            "cpu_s": None if group and sandbox_cgroup.cpu_counted() else limits["launcher"]["cpu_s"],
            "interpreter_reachable": drop_uid and interpreter_reachable(sys.executable),
        },
    }


def _sealed(data: bytes) -> int:
    """The program's stdin: a memory file that no one can write, shrink or grow any more (not a host file that
    the program, given it read-write, could fill up to its file-size limit)."""
    fd = os.memfd_create("rlvr-sandbox-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    while data:
        data = data[os.write(fd, data) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    return fd


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
