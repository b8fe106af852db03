"""Run an untrusted Python program on this machine, with nothing else installed, and always get an answer.

During RL a policy will sooner or later write infinite loops, fork bombs, memory bombs, floods of output
and code that deletes files. `run_python` runs such a program so that none of it reaches the caller:

- isolation (`isolation="namespaces"`, Linux): a private mount namespace where every mount is read-only
  except a fresh, size-capped tmpfs working directory (and /dev/shm), and where /run, with the host
  services' sockets, is empty (a read-only mount does not stop connect() on a socket); a pid namespace,
  so the program sees and signals only its own processes and all of them die with the run; a network
  namespace with no route anywhere; IPC and hostname namespaces. As root the program runs under a uid of
  its own (so RLIMIT_NPROC holds); otherwise a user namespace gives the unprivileged caller the rights to
  set this up. The launcher (`rewards/sandbox_launcher.py`) does the kernel work.
- always: rlimits on address space, CPU seconds, file size, processes and open files; a wall-clock
  timeout after which the whole process tree is killed; an environment reduced to an allowlist;
  stdout and stderr read as they come and capped (a program that floods past the cap is stopped).
- fallback (`isolation="fallback"`, or where the kernel refuses namespaces, e.g. a container without
  CAP_SYS_ADMIN or a desktop that forbids unprivileged user namespaces): rlimits, a temporary directory,
  the kill of the process group and of every descendant, and, as root, the drop to a uid of its own
  when the interpreter is reachable for it. A one-time warning says what is not isolated.

Not used, on purpose: cgroups (they need root and a delegated hierarchy; RLIMIT_AS and RLIMIT_NPROC under
a uid of the run's own cap memory and processes instead), seccomp (system calls stay open: the kernel's
namespaces and permissions are the boundary), bubblewrap (one more thing to install; it would do the same).

`RLVR_SANDBOX_ISOLATION` (auto, namespaces, fallback) sets the default mode. Nothing here uses signals
in the calling thread, so runs may be made from worker threads; `run_many` runs a batch with a
concurrency limit.
"""

from __future__ import annotations

import ast
import logging
import marshal
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

LAUNCHER = Path(__file__).with_name("sandbox_launcher.py")
ISOLATION_ENV = "RLVR_SANDBOX_ISOLATION"
UID_BASE = 1_000_000_000  # program uids (as root) are UID_BASE + the launcher's pid: no real user has them
MAX_OUTPUT_BYTES = 1_000_000
STOP_GRACE_S = 0.5  # how long the launcher gets to take the process tree down before it is killed outright
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")

_state_lock = threading.Lock()
_namespaces_problem: str | None = None  # why namespaces failed on this machine, once we know
_warned: set[str] = set()


class SandboxUnavailableError(RuntimeError):
    """`isolation="namespaces"` was required and the kernel does not allow it."""


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


def default_concurrency() -> int:
    """The number of cores this process may use: one sandbox per core keeps a batch CPU-bound, not thrashing."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


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


def _interpreter_reachable(python: str) -> bool:
    """Can an unprivileged uid run `python`, through its path as given and as resolved, with its installation?"""
    directories = [os.path.dirname(os.path.abspath(python)), os.path.dirname(os.path.realpath(python))]
    return all(_searchable_by_others(directory) for directory in directories + _interpreter_paths(python))


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


def _wait_exited(pid: int, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for `pid` to exit, without reaping it (its pid, our process group id, stays ours)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def _read_events(data: bytes) -> dict[str, dict]:
    """The launcher's events, one Python literal per line, by name."""
    events = {}
    for line in data.decode(errors="replace").splitlines():
        try:
            event = ast.literal_eval(line)
            events[event.pop("event")] = event
        except (ValueError, SyntaxError, KeyError, AttributeError, TypeError):
            logger.warning("code sandbox: unreadable launcher event %r", line)
    return events


def _launch(config: dict, stdin_file, timeout_s: float, max_output_bytes: int, cwd: str) -> dict:
    """Start the launcher, collect its output and events until it ends or the deadline passes."""
    status_read, status_write = os.pipe()
    config = {**config, "status_fd": status_write}
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(LAUNCHER), marshal.dumps(config).hex()],
        stdin=stdin_file,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=config["env"],
        start_new_session=True,  # its own process group: one killpg reaches what the fallback leaves
        pass_fds=(status_write,),
    )
    os.close(status_write)
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    streams = {out_fd: bytearray(), err_fd: bytearray(), status_read: bytearray()}
    selector = selectors.DefaultSelector()
    for fd in streams:
        selector.register(fd, selectors.EVENT_READ)
    timed_out = overflow = False
    exited_at = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= start + timeout_s:
                timed_out = True
                break
            for key, _ in selector.select(min(start + timeout_s - now, 0.1)):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fd)
                    continue
                buffer = streams[key.fd]
                buffer += data
                if key.fd != status_read and len(buffer) > max_output_bytes:
                    overflow = True
            if overflow:
                break
            # The launcher ends only after every process of the run; a pipe still open after that belongs
            # to something that escaped the fallback. Give it a moment, then stop waiting for it.
            if exited_at is None and os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                exited_at = time.monotonic()
            if exited_at is not None and time.monotonic() - exited_at > 0.2:
                break
        finished = not (timed_out or overflow)  # then the launcher is exiting, or about to
        if not _wait_exited(process.pid, STOP_GRACE_S if finished else 0):
            os.kill(process.pid, signal.SIGTERM)  # the launcher kills the whole tree, then exits
            if not _wait_exited(process.pid, STOP_GRACE_S):
                logger.warning("code sandbox: the launcher did not stop within %.1f s; killing it", STOP_GRACE_S)
                os.killpg(process.pid, signal.SIGKILL)
                _wait_exited(process.pid, 5.0)
        groups = [process.pid]  # safe: the launcher is not reaped yet, so its group id is ours
        events = _read_events(streams[status_read])
        if "started" in events and "exit" not in events:
            # The fallback launcher died before its program (the program, running as this user, killed it):
            # the program's own group is still in use by it, so its id cannot have been reused.
            groups.append(events["started"]["pid"])
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    finally:
        process.wait()
        selector.close()
        process.stdout.close()
        process.stderr.close()
        os.close(status_read)
    return {
        "stdout": bytes(streams[out_fd][:max_output_bytes]),
        "stderr": bytes(streams[err_fd][:max_output_bytes]),
        "events": _read_events(streams[status_read]),
        "timed_out": timed_out,
        "overflow": overflow,
        "wall_s": time.monotonic() - start,
    }


def _classify(outcome: dict, timeout_s: float, memory_mb: int, cpu_limit_s: int) -> tuple[str, str]:
    exit_event = outcome["events"].get("exit", {})
    returncode, cpu_s = exit_event.get("returncode"), exit_event.get("cpu_s") or 0.0
    stderr_tail = outcome["stderr"][-2000:].decode(errors="replace")
    if outcome["timed_out"]:
        return "timeout", f"no result within {timeout_s:g} s"
    if outcome["overflow"]:
        return "error", "output past the cap; the program was stopped"
    if returncode == 0:
        return "ok", ""
    if returncode == -signal.SIGXCPU or (returncode == -signal.SIGKILL and cpu_s >= cpu_limit_s - 0.05):
        return "timeout", f"CPU time limit ({cpu_limit_s} s)"
    if any(marker in stderr_tail for marker in _MEMORY_MARKERS):
        return "memory", f"memory limit ({memory_mb} MB)"
    if returncode == -signal.SIGKILL:
        return "memory", "killed by SIGKILL (the kernel's out-of-memory killer)"
    if returncode == -signal.SIGXFSZ:
        return "error", "file size limit"
    if returncode is None:
        return "error", "the run ended without a return code (its launcher was killed)"
    return "error", f"exit code {returncode}"


def run_python(
    code: str,
    stdin: str | None = None,
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    *,
    file_size_mb: int = 64,
    disk_mb: int = 128,
    max_processes: int = 64,
    max_open_files: int = 256,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
    isolation: str | None = None,
    python: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> RunResult:
    """Run `code` as `python main.py` in a fresh working directory, feeding it `stdin`.

    `isolation`: "auto" (namespaces where the kernel allows, else the fallback), "namespaces" (raise
    SandboxUnavailableError if not possible) or "fallback"; None reads RLVR_SANDBOX_ISOLATION.
    `python` is the interpreter (default: this one). `timeout_s` counts from the start of the launcher.
    `file_size_mb` caps each file the program writes; `disk_mb` the whole working directory (and /dev/shm)
    when isolated: it is a tmpfs, so it counts against memory, not disk.
    """
    global _namespaces_problem
    requested = _requested_mode(isolation)
    python = python or sys.executable
    mode = (
        "namespaces" if requested == "namespaces" or (requested == "auto" and not _namespaces_problem) else "fallback"
    )
    stdin_file = tempfile.TemporaryFile() if stdin is not None else subprocess.DEVNULL
    host_dir = tempfile.mkdtemp(prefix="rlvr-sandbox-")
    try:
        if stdin is not None:
            stdin_file.write(stdin.encode())
        Path(host_dir, "main.py").write_text(code, encoding="utf-8")
        while True:
            drop_uid = os.geteuid() == 0 and (mode == "namespaces" or _interpreter_reachable(python))
            if mode == "fallback":
                _warn_once(f"fallback-{drop_uid}", _fallback_warning(drop_uid, python))
            home = "/tmp/work" if mode == "namespaces" else host_dir  # the launcher's WORK_DIR
            config = {
                "mode": mode,
                "argv": [python, "-I", "main.py"],
                "env": _environment(home, extra_env),
                "host_dir": host_dir,
                "files": ["main.py"],
                "drop_uid": drop_uid,
                "uid_base": UID_BASE,
                "expose": _interpreter_paths(python),
                "tmpfs_mb": disk_mb,
                "limits": {
                    "address_space": memory_mb * 1024 * 1024,
                    "cpu_s": max(1, int(timeout_s + 0.999)),
                    "file_size": file_size_mb * 1024 * 1024,
                    "nproc": max_processes,
                    "open_files": max_open_files,
                },
            }
            if stdin is not None:
                stdin_file.seek(0)
            outcome = _launch(config, stdin_file, timeout_s, max_output_bytes, host_dir)
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
        if stdin is not None:
            stdin_file.close()
        _remove_tree(host_dir)
    status, reason = _classify(outcome, timeout_s, memory_mb, config["limits"]["cpu_s"])
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
    )


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
