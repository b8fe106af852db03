"""The caller's side of one sandbox run: start the launcher, watch it, end it, and say what happened.

`launch` starts rewards/code/sandbox/launcher.py with its configuration in a memory file, reads the program's
stdout and stderr as they come (capped), the launcher's events (the judge's cases among them), and the
run's CPU time where a cgroup counts it. It ends the run at the first of: the launcher's exit, the CPU
time limit, the wall-clock ceiling, or output past the cap; then every process of the run is killed
(through the cgroup where there is one, else through the launcher and its process group) before it
returns. `classify` turns what happened into a status and a reason. Split from rewards.code.sandbox, whose
`run_python` and `run_judged` are the entry points.

Runs of one process go at most `max_runs()` at a time, whichever thread or reward call starts them: a
process-wide semaphore, sized to the cores this process may use (rewards.code.sandbox.cgroup.cpu_cores) over
the cores each run's cgroup grants. The timeout counts CPU seconds and the wall-clock ceiling is a
generous multiple of it, so a correct program passes on a loaded host; still, a pool larger than the cores
(two reward calls at once, a pass-rate filter beside a reward, a GRPO group of 16 on 8 cores) would only
make runs wait on each other. A run waits for its slot before its clock starts.
"""

from __future__ import annotations

import ast
import logging
import marshal
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rewards.code.sandbox import cgroup as sandbox_cgroup

logger = logging.getLogger("rewards.code.sandbox")

LAUNCHER = Path(__file__).with_name("launcher.py")
STOP_GRACE_S = 0.25  # how long the launcher gets to take the process tree down before it is killed outright
JUDGE_GRACE_S = 2.0  # after a judged run's time is up: the judge's time to decide the cases answered before
CPU_POLL_S = 0.02  # how often the run's CPU time is read, where a cgroup counts it
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")


def _wait_exited(pid: int, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for `pid` to exit, without reaping it (its pid, our process group id, stays ours)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def read_events(data: bytes) -> tuple[dict[str, dict], dict[int, tuple[bool, str]]]:
    """The launcher's events, one Python literal per line: by name, and the judge's cases by index."""
    events: dict[str, dict] = {}
    cases: dict[int, tuple[bool, str]] = {}
    for line in data.decode(errors="replace").splitlines():
        try:
            event = ast.literal_eval(line)
            name = event.pop("event")
        except (ValueError, SyntaxError, KeyError, AttributeError, TypeError, MemoryError, RecursionError):
            logger.warning("code sandbox: unreadable launcher event %r", line[:200])
            continue
        if name == "case":
            cases.setdefault(int(event["index"]), (event["passed"] is True, str(event["detail"])))
        else:
            events[name] = event
    return events, cases


def _judge_may_finish(config: dict, events: bytes, launcher: int) -> bool:
    """At a judged run's timeout: ask the launcher (SIGUSR1) to end the program's side, so that the judge can
    decide the cases answered before it; True if asked. Not before the launcher has said that the program
    started (its handler for the signal is in place by then), and never for a run without a judge."""
    if not config.get("judge") or not (b"'isolated'" in events or b"'started'" in events):
        return False
    os.kill(launcher, signal.SIGUSR1)
    return True


def _config_file(config: dict) -> int:
    """The launcher's configuration in a memory file (not argv, which /proc shows to every user)."""
    fd = os.memfd_create("rlvr-sandbox-config", 0)
    data = marshal.dumps(config)
    while data:
        data = data[os.write(fd, data) :]
    return fd


def max_runs() -> int:
    """How many runs this process lets go at once: its cores over each run's share, at least one."""
    return _run_slots()[0]


def run_slot() -> threading.BoundedSemaphore:
    """The process-wide semaphore of runs at once: hold it while a program may use a core."""
    return _run_slots()[1]


def _run_slots() -> tuple[int, threading.BoundedSemaphore]:
    with _slots_lock:
        if not _slots:
            cores = sandbox_cgroup.cpu_cores()
            count = max(1, int(cores / sandbox_cgroup.RUN_CORES + 1e-9))
            _slots.append((count, threading.BoundedSemaphore(count)))
            logger.info("code sandbox: at most %d runs at once (%.2f cores usable by this process)", count, cores)
        return _slots[0]


def _forget_slots() -> None:
    """In a forked child: the parent's runs are not ours, nor are its threads that held slots."""
    global _slots_lock
    _slots_lock = threading.Lock()
    _slots.clear()


_slots_lock = threading.Lock()
_slots: list[tuple[int, threading.BoundedSemaphore]] = []  # (count, semaphore), made on first use
os.register_at_fork(after_in_child=_forget_slots)


def launch(config: dict, stdin_file, limits: dict, group, cwd: str) -> dict:
    """Start the launcher, collect its output and events until it ends, its CPU time runs out or the ceiling.

    It first waits for one of the process's `max_runs()` slots; the wall clock starts once it has one."""
    with _run_slots()[1]:
        return _launch(config, stdin_file, limits, group, cwd)


def start_launcher(config: dict, stdin_file, group, cwd: str) -> tuple[subprocess.Popen, int]:
    """Start the launcher of one run: (the process, the read end of its events' pipe)."""
    status_read, status_write = os.pipe()
    config = {**config, "status_fd": status_write, "cgroup_procs": group.procs if group else []}
    config_fd = _config_file(config)
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(LAUNCHER), str(config_fd)],
            stdin=stdin_file,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=config["env"],
            start_new_session=True,  # its own process group: one killpg reaches what the fallback leaves
            pass_fds=(status_write, config_fd),
        )
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
        os.close(config_fd)
    return process, status_read


def _launch(config: dict, stdin_file, limits: dict, group, cwd: str) -> dict:
    start = time.monotonic()
    ceiling, cpu_limit, max_output = limits["wall_s"], limits["cpu_s"], limits["max_output_bytes"]
    process, status_read = start_launcher(config, stdin_file, group, cwd)
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    streams = {out_fd: bytearray(), err_fd: bytearray(), status_read: bytearray()}
    selector = selectors.DefaultSelector()
    for fd in streams:
        selector.register(fd, selectors.EVENT_READ)
    timed_out = overflow = cpu_out = False
    exited_at = verdict_deadline = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if verdict_deadline is None and not timed_out:
                if now >= start + ceiling:
                    timed_out = True
                elif group is not None and (group.cpu_seconds() or 0.0) >= cpu_limit:
                    timed_out = cpu_out = True  # the run's CPU time, all its processes together
                if timed_out:
                    if not _judge_may_finish(config, streams[status_read], process.pid):
                        break
                    # The program's side is ended by the launcher; the judge then decides the cases answered so
                    # far (it compares nothing while the program lives), within a grace of its own.
                    verdict_deadline = now + JUDGE_GRACE_S
            if verdict_deadline is not None and now >= verdict_deadline:
                break
            deadline = verdict_deadline if verdict_deadline is not None else start + ceiling
            for key, _ in selector.select(max(0.0, min(deadline - now, CPU_POLL_S))):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fd)
                    continue
                buffer = streams[key.fd]
                buffer += data
                if key.fd != status_read and len(buffer) > max_output:
                    overflow = True
            if overflow:
                break
            # The launcher ends only after every process of the run; a pipe still open after that belongs
            # to something that escaped the fallback. Give it a moment, then stop waiting for it.
            if exited_at is None and os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                exited_at = time.monotonic()
            if exited_at is not None and time.monotonic() - exited_at > 0.1:
                break
        finished = not overflow and (not timed_out or exited_at is not None)  # the launcher is exiting, or about to
        end_launcher(process, group, status_read, streams[status_read], finished)
    finally:
        process.wait()
        selector.close()
        process.stdout.close()
        process.stderr.close()
        os.close(status_read)
    events, cases = read_events(streams[status_read])
    return {
        "stdout": bytes(streams[out_fd][:max_output]),
        "stderr": bytes(streams[err_fd][:max_output]),
        "events": events,
        "cases": cases,
        "timed_out": timed_out,
        "cpu_out": cpu_out,
        "overflow": overflow,
        "wall_s": time.monotonic() - start,
        "cpu_s": group.cpu_seconds() if group is not None else None,
        "oom": group.out_of_memory() if group is not None else False,
        "oom_counted": group is not None and group.limits_memory,
    }


def end_launcher(process: subprocess.Popen, group, status_read: int, events: bytearray, finished: bool) -> None:
    """End a run: its processes (through its cgroup, else through the launcher, which kills the whole tree), then
    the launcher; the rest of its events are read into `events`. `finished`: the launcher is exiting by itself, so
    it gets a moment first. Leaves the launcher unreaped (the caller waits for it)."""
    if group is not None and not finished:
        group.kill(STOP_GRACE_S)  # the program's side at once; the launcher then sees init gone
    if not _wait_exited(process.pid, STOP_GRACE_S if finished else 0):
        os.kill(process.pid, signal.SIGTERM)  # the launcher kills the whole tree, then exits
        if not _wait_exited(process.pid, STOP_GRACE_S):
            logger.warning("code sandbox: the launcher did not stop within %.1f s; killing it", STOP_GRACE_S)
            os.killpg(process.pid, signal.SIGKILL)
            _wait_exited(process.pid, 5.0)
    groups = [process.pid]  # safe: the launcher is not reaped yet, so its group id is ours
    parsed, _ = read_events(events)
    if "started" in parsed and "exit" not in parsed:
        # The fallback launcher died before its program (the program, running as this user, killed it):
        # the program's own group is still in use by it, so its id cannot have been reused.
        groups.append(parsed["started"]["pid"])
    for process_group in groups:
        try:
            os.killpg(process_group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        while True:  # the rest of the events (the judge's last cases), now that every writer is gone
            data = os.read(status_read, 65536)
            if not data:
                break
            events += data
    except OSError:
        pass


def classify(outcome: dict, limits: dict) -> tuple[str, str]:
    exit_event = outcome["events"].get("exit", {})
    returncode, cpu_s = exit_event.get("returncode"), exit_event.get("cpu_s") or 0.0
    stderr_tail = outcome["stderr"][-2000:].decode(errors="replace")
    if outcome["cpu_out"]:
        return "timeout", f"CPU time limit ({limits['cpu_s']:g} s)"
    if outcome["timed_out"]:
        return "timeout", f"no result within the {limits['wall_s']:g} s wall-clock ceiling"
    if outcome["overflow"]:
        return "error", "output past the cap; the program was stopped"
    if returncode == 0:
        return "ok", ""
    if outcome["oom"]:
        return "memory", f"memory limit of the run ({limits['memory_mb']} MB; the kernel's OOM killer)"
    if returncode == -signal.SIGXCPU or (returncode == -signal.SIGKILL and cpu_s >= limits["rlimit_cpu_s"] - 0.05):
        return "timeout", f"CPU time limit ({limits['cpu_s']:g} s)"
    if any(marker in stderr_tail for marker in _MEMORY_MARKERS):
        return "memory", f"memory limit ({limits['memory_mb']} MB)"
    if returncode == -signal.SIGKILL:
        if outcome["oom_counted"]:  # the run's memory group counts the OOM killer's kills, and it made none
            return (
                "error",
                "killed by SIGKILL, not by the out-of-memory killer (the program, or a process of its, sent it)",
            )
        return "memory", "killed by SIGKILL (the kernel's out-of-memory killer, or the program itself)"
    if returncode == -signal.SIGXFSZ:
        return "error", "file size limit"
    if returncode is None:
        return "error", "the run ended without a return code (its launcher was killed)"
    return "error", f"exit code {returncode}"
