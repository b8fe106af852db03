"""A sandboxed program that lives across several exchanges with its caller: the python tool's interpreter, which
keeps a trajectory's variables from one call to the next without running the earlier calls again.

A `run_python` run is one program whose processes all end with the call. `LiveProgram` starts the same program in
the same sandbox (rewards/code/sandbox/run.py's launcher, root, seccomp filter and cgroup; namespaces only) with a
pipe for stdin instead of a sealed file, and keeps it: each `exchange` writes a request and reads the program's
stdout and stderr until a line the caller names (the end of that answer) appears on stderr. The budgets are per
exchange, as a run's are per run:
* CPU seconds, read from the program's cgroup (the time of all its processes) as a difference from the exchange's
  start, so live programs exist only where a cgroup counts CPU time (`LiveUnavailable` elsewhere: the caller then
  runs one program per call);
* a wall-clock ceiling, for a program that sleeps or waits;
* output: at most `max_output_bytes` of stdout and stderr each;
* memory and processes: the cgroup's, for the program's whole life; and a CPU rlimit for its whole life
  (`session_cpu_s`), which also bounds what threads a program leaves running between exchanges can spend.
An exchange that meets a budget, or a program that ends, closes the program (every process of it killed, its cgroup
removed): an exchange never returns with more than one answer's worth of the program's doing unaccounted, and the
next one needs a new program. An exchange waits, as a run does, for one of the process's run slots
(rewards/code/sandbox/process.py); an idle program holds none.

What a live program can learn that a run cannot: nothing of the caller's beyond its requests; its stdin is the
read end of a pipe (a pipe's inode number, like those of the pipes a judged program gets, counts the machine's
pipes). Its requests come from the trusted caller, which treats every byte back as untrusted, as run.py does.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import selectors
import signal
import sys
import tempfile
import threading
import time
import weakref

from rewards.code.sandbox import cgroup as sandbox_cgroup
from rewards.code.sandbox import seccomp as sandbox_seccomp
from rewards.code.sandbox.process import STOP_GRACE_S, classify, end_launcher, read_events, run_slot, start_launcher
from rewards.code.sandbox.results import RunResult
from rewards.code.sandbox.run import _remove_tree, _requested_mode, launcher_config, namespaces_problem
from rewards.code.sandbox.settings import run_limits, with_defaults

logger = logging.getLogger("rewards.code.sandbox")

_programs: weakref.WeakSet = weakref.WeakSet()  # open ones, closed at exit


class LiveUnavailable(Exception):
    """No live program here (no namespaces, or no cgroup that counts CPU time): run one program per call."""


class LiveProgram:
    """One sandboxed program kept across exchanges (see the module's docstring). Thread-safe: exchanges run one
    at a time, and `close` from another thread ends one in flight."""

    def __init__(
        self, files: dict[str, bytes], script: str, session_cpu_s: float, memory_mb: int = 512, **options
    ) -> None:
        """`files` and `script` as for a run; `session_cpu_s`: the program's CPU rlimit for its whole life;
        `options` as for `run_python` (`timeout_s` and `wall_timeout_s` are per exchange instead)."""
        options = with_defaults(memory_mb=memory_mb, **options)
        if _requested_mode(options["isolation"]) == "fallback" or namespaces_problem():
            raise LiveUnavailable("the sandbox runs without namespaces here")
        if not sandbox_cgroup.cpu_counted():
            raise LiveUnavailable("no cgroup counts a program's CPU time here")
        seccomp = sandbox_seccomp.for_runs()  # SeccompUnavailableError, as every run would raise
        self.max_output = options["max_output_bytes"]
        self.group = sandbox_cgroup.create(
            memory_mb * 1024 * 1024, options["max_processes"] + 3, sandbox_cgroup.RUN_CORES
        )
        if self.group is None or self.group.cpu_seconds() is None:
            if self.group is not None:
                self.group.remove()
            raise LiveUnavailable("no cgroup counts a program's CPU time here")
        self.limits = limits = run_limits(session_cpu_s, None, memory_mb, options["max_processes"], self.group, options)
        self.host_dir = tempfile.mkdtemp(prefix="rlvr-sandbox-")
        python = options["python"] or sys.executable
        config = launcher_config(
            "namespaces", python, files, script, options, limits, self.group, self.host_dir, seccomp, None
        )
        self._lock = threading.Lock()  # held by an exchange, and by the close that cleans up
        self._closed = False
        self._events = bytearray()
        stdin_read, self._stdin = os.pipe()
        try:
            self.process, self._status = start_launcher(config, stdin_read, self.group, self.host_dir)
        except BaseException:
            os.close(self._stdin)
            self.group.remove()
            _remove_tree(self.host_dir)
            raise
        finally:
            os.close(stdin_read)
        _ensure_reaper()
        resources = (self.process, self.group, self._stdin, self._status, self.host_dir)
        self._finalizer = weakref.finalize(self, _dropped.put, resources)
        self._finalizer.atexit = False  # at exit, _close_all ends what is open
        os.set_blocking(self._stdin, False)
        for fd in (self.process.stdout.fileno(), self.process.stderr.fileno(), self._status):
            os.set_blocking(fd, False)
        _programs.add(self)

    @property
    def alive(self) -> bool:
        return not self._closed and self.process.poll() is None

    def exchange(self, request: bytes, end: bytes, cpu_s: float, wall_s: float) -> RunResult:
        """Write `request`, then read until stderr holds `end`: that answer's stdout and stderr (up to the end of the
        read that brought `end`), status "ok". Else, after `cpu_s` CPU seconds, `wall_s` seconds or output
        past the cap, or when the program ends, the status says which (as a run's would) and the program is
        closed. Never raises for what the program does; raises LiveUnavailable if the sandbox could not start."""
        with self._lock:
            if self._closed:
                return self._result("error", b"", b"", "the program was closed", 0.0, False)
            with run_slot():
                return self._exchange(request, end, cpu_s, wall_s)

    def _exchange(self, request: bytes, end: bytes, cpu_s: float, wall_s: float) -> RunResult:
        out_fd, err_fd = self.process.stdout.fileno(), self.process.stderr.fileno()
        buffers = {out_fd: bytearray(), err_fd: bytearray()}
        pending = memoryview(request)
        selector = selectors.DefaultSelector()
        for fd in (out_fd, err_fd, self._status):
            selector.register(fd, selectors.EVENT_READ)
        if pending:
            selector.register(self._stdin, selectors.EVENT_WRITE)
        start, cpu_start = time.monotonic(), self.group.cpu_seconds() or 0.0
        status, reason, overflow = "", "", False
        try:
            while not status:
                now = time.monotonic()
                if now - start >= wall_s:
                    status, reason = "timeout", f"no result within the {wall_s:g} s wall-clock ceiling"
                    break
                if (self.group.cpu_seconds() or 0.0) - cpu_start >= cpu_s:
                    status, reason = "timeout", f"CPU time limit ({cpu_s:g} s)"
                    break
                for key, _ in selector.select(max(0.0, min(wall_s - (now - start), 0.02))):
                    if key.fd == self._stdin:
                        try:
                            pending = pending[os.write(self._stdin, pending) :]
                        except BlockingIOError:
                            continue
                        except OSError:  # the program closed its stdin, or ended
                            pending = pending[:0]
                        if not pending:
                            selector.unregister(self._stdin)
                        continue
                    try:
                        data = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if not data:
                        selector.unregister(key.fd)
                        continue
                    if key.fd == self._status:
                        self._events += data
                        continue
                    buffers[key.fd] += data
                    if len(buffers[key.fd]) > self.max_output:
                        overflow = True
                if overflow:
                    status, reason = "error", "output past the cap; the program was stopped"
                    break
                if end in buffers[err_fd]:
                    _drain(out_fd, buffers[out_fd])  # what the program wrote before its last line is in the pipe
                    status = "ok"
                    break
                if out_fd not in selector.get_map() and err_fd not in selector.get_map():
                    status = "ended"  # both pipes closed: the program has gone
                    break
                if self._closed:
                    status, reason = "error", "the program was closed"
        finally:
            selector.close()
        stdout, stderr = bytes(buffers[out_fd]), bytes(buffers[err_fd])
        if status == "ok":
            return self._result("ok", stdout, stderr, "", time.monotonic() - start, False)
        self._close_locked(finished=status == "ended")
        cpu_used = (self.group.cpu_seconds() or 0.0) - cpu_start
        if status == "ended":
            status, reason = self._ended(stderr)
        return self._result(
            status, stdout[: self.max_output], stderr[: self.max_output], reason, time.monotonic() - start, overflow,
            cpu_used,
        )  # fmt: skip

    def _ended(self, stderr: bytes) -> tuple[str, str]:
        """Why a program ended by itself, judged as a run's end is (process.classify: its exit, the OOM killer, its
        CPU rlimit, a memory error on stderr)."""
        events, _ = read_events(self._events)
        if "setup_error" in events or "seccomp_error" in events or "isolated" not in events:
            message = (events.get("setup_error") or events.get("seccomp_error") or {}).get("message")
            raise LiveUnavailable(f"the sandbox could not start a program: {message or stderr[-300:]!r}")
        outcome = {"events": events, "stderr": stderr, "cpu_out": False, "timed_out": False, "overflow": False,
                   "oom": self._oom, "oom_counted": self.group.limits_memory}  # fmt: skip
        return classify(outcome, self.limits)

    def _result(self, status, stdout, stderr, reason, wall_s, overflow, cpu_s=None) -> RunResult:
        return RunResult(
            status=status,
            stdout=stdout.decode(errors="replace"),
            stderr=stderr.decode(errors="replace"),
            returncode=None,
            wall_s=wall_s,
            network_isolated=b"'network': True" in self._events,
            isolation="namespaces",
            output_truncated=overflow,
            reason=reason,
            cpu_s=cpu_s,
            cgroup=True,
        )

    def tasks(self) -> int | None:
        """The threads of the program's processes now (init and the interpreter's main thread are two), or None
        where no cgroup counts them."""
        return None if self._closed else self.group.tasks()

    def close(self, wait: bool = True) -> None:
        """End the program (every process of it) and clean up; an exchange in flight returns at once. `wait=False`:
        the cleanup is the reaper thread's, so that ending many programs (the end of a batch's trajectories) does not
        wait on each one's processes in turn."""
        if self._closed:
            return
        if self._lock.acquire(blocking=False):
            try:
                if wait:
                    self._close_locked(finished=False)
                elif self._finalizer.detach() is not None:
                    self._closed = True
                    _dropped.put((self.process, self.group, self._stdin, self._status, self.host_dir))
                    _programs.discard(self)
            finally:
                self._lock.release()
            return
        self._closed = True  # the exchange in flight sees it, and cleans up as it returns
        try:
            os.kill(self.process.pid, signal.SIGTERM)  # the launcher ends the program's processes, then exits
        except OSError:
            pass

    def _close_locked(self, finished: bool) -> None:
        if self._finalizer.detach() is None:
            return  # cleaned up already
        self._closed = True
        self._oom = self.group.out_of_memory()
        _cleanup(self.process, self.group, self._stdin, self._status, self.host_dir, self._events, finished)
        _programs.discard(self)

    _oom = False


def _cleanup(process, group, stdin: int, status: int, host_dir: str, events: bytearray, finished: bool) -> None:
    """End a program's processes and launcher, close its pipes, remove its cgroup and folder."""
    try:
        os.close(stdin)
    except OSError:
        pass
    try:
        end_launcher(process, group, status, events, finished)
    finally:
        process.wait()
        process.stdout.close()
        process.stderr.close()
        os.close(status)
        group.kill(STOP_GRACE_S)
        group.remove()
        _remove_tree(host_dir)


# A program dropped without `close` (its session garbage collected) is ended here, off the thread that dropped it:
# garbage collection may run anywhere, and ending a program waits on processes.
_dropped: queue.SimpleQueue = queue.SimpleQueue()


def _reap() -> None:
    while True:
        resources = _dropped.get()
        try:
            _cleanup(*resources, bytearray(), False)
        except Exception as error:  # noqa: BLE001 - the reaper must go on
            logger.warning("code sandbox: a dropped live program could not be cleaned up: %s", error)


_reaper_pid: list[int] = []  # the process whose reaper thread runs (a forked child starts its own)
_reaper_lock = threading.Lock()


def _ensure_reaper() -> None:
    with _reaper_lock:
        if _reaper_pid != [os.getpid()]:
            threading.Thread(target=_reap, name="sandbox-live-reaper", daemon=True).start()
            _reaper_pid[:] = [os.getpid()]


def _drain(fd: int, buffer: bytearray) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            return
        if not data:
            return
        buffer += data


@atexit.register
def _close_all() -> None:
    for program in list(_programs):
        try:
            program.close()
        except Exception:  # noqa: BLE001
            pass


def _forget_programs() -> None:  # in a forked child: the parent's programs are not this process's to end
    global _programs
    _programs = weakref.WeakSet()


os.register_at_fork(after_in_child=_forget_programs)
