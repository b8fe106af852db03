"""A pool of math-verify worker processes with a hard deadline per item.

Why our own pool and not `multiprocessing.Pool` or a thread pool:
* a thread cannot be stopped, and math-verify's `signal.alarm` timeouts work only in the main thread
  (TRL calls reward functions from other threads too); a process can always be killed;
* `multiprocessing` children cannot be started from a daemonic process (a DataLoader worker, another
  pool's worker), and `fork` after torch has started threads can deadlock; the workers here are plain
  `subprocess` children (`python -m rewards.math.worker`) talking JSON lines over pipes;
* a worker that overruns its deadline is killed and replaced at once, and the batch goes on with the
  other workers, so one power tower costs at most `timeout_s` of one worker, never the whole step.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0  # importing sympy and the LaTeX parser: about 1-2 s normally
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds rewards/


class _Worker:
    def __init__(self, warm_up: bool = True):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", "1")
        self.process = subprocess.Popen(
            # A replacement for a killed worker skips the warm-up: it boots sooner, so the items waiting for
            # it keep the latency bound (a power tower costs its item the timeout, not also a long boot).
            [sys.executable, "-m", "rewards.math.worker", *([] if warm_up else ["--no-warm-up"])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # Ctrl-C in the terminal reaches the trainer, which then closes the pool
        )
        self.started = time.monotonic()
        self.buffer = b""
        self.ready = False
        self.task: int | None = None  # index of the item in flight
        self.deadline = 0.0

    def fileno(self) -> int:
        return self.process.stdout.fileno()

    def send(self, index: int, payload: bytes, timeout_s: float) -> None:
        self.task = index
        self.deadline = time.monotonic() + timeout_s
        self.process.stdin.write(payload)
        self.process.stdin.flush()

    def read_messages(self) -> list[dict] | None:
        """Complete messages available now; None when the worker has exited."""
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def kill(self) -> None:
        try:
            self.process.kill()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed child always exits
            pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass


class MathVerifyPool:
    """Compare (gold, answer) pairs with math-verify in `size` worker processes, `timeout_s` per pair."""

    def __init__(self, size: int | None = None):
        # At least two, so that a killed worker's replacement can boot while another one works.
        self.size = max(2, size or min(4, os.cpu_count() or 1))
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._fatal: str | None = None
        self._deaths = 0  # workers that exited on their own since the last result

    def _ensure_workers(self) -> None:
        if self._pid != os.getpid():  # forked: the pipes belong to the parent's workers; start our own
            self._workers, self._pid = [], os.getpid()
        self._workers = [worker for worker in self._workers if worker.process.poll() is None]
        while len(self._workers) < self.size:
            self._workers.append(_Worker())

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self._workers.remove(worker)
        self._workers.append(_Worker(warm_up=False))

    def compare(self, pairs: list[tuple[str, str]], timeout_s: float) -> list[dict]:
        """One result per pair: {"gold_ok", "equal", ...}, or {"timeout": True}, or {"error": ...}."""
        if not pairs:
            return []
        with self._lock:
            if self._fatal:
                return [{"gold_ok": True, "equal": False, "error": self._fatal} for _ in pairs]
            self._ensure_workers()
            return self._run(pairs, timeout_s)

    def _run(self, pairs: list[tuple[str, str]], timeout_s: float) -> list[dict]:
        results: list[dict | None] = [None] * len(pairs)
        pending = deque(range(len(pairs)))
        while pending or any(worker.task is not None for worker in self._workers):
            for worker in self._workers:
                if worker.ready and worker.task is None and pending:
                    index = pending.popleft()
                    gold, answer = pairs[index]
                    payload = (json.dumps({"gold": gold, "answer": answer}) + "\n").encode()
                    try:
                        worker.send(index, payload, timeout_s)
                    except OSError:  # died between two items
                        pending.appendleft(index)
                        worker.task = None
                        self._replace(worker)
                        break
            now = time.monotonic()
            waits = [worker.deadline - now for worker in self._workers if worker.task is not None]
            waits += [worker.started + STARTUP_TIMEOUT_S - now for worker in self._workers if not worker.ready]
            readable, _, _ = select.select(self._workers, [], [], max(0.0, min(waits, default=1.0)))
            for worker in readable:
                messages = worker.read_messages()
                if messages is None:
                    self._worker_died(worker, results)
                    if self._fatal:
                        error = {"gold_ok": True, "equal": False, "error": self._fatal}
                        return [result or error for result in results]
                    continue
                for message in messages:
                    if "fatal" in message:
                        self._fatal = message["fatal"]
                        logger.error("math-verify workers cannot start: %s", self._fatal)
                        error = {"gold_ok": True, "equal": False, "error": self._fatal}
                        return [result or error for result in results]
                    if message.get("ready"):
                        worker.ready = True
                    elif worker.task is not None:
                        results[worker.task] = message
                        worker.task = None
                        self._deaths = 0
            now = time.monotonic()
            for worker in list(self._workers):
                if worker.task is not None and now >= worker.deadline:
                    results[worker.task] = {"timeout": True}
                    logger.debug("verification of item %d overran %.1f s: worker replaced", worker.task, timeout_s)
                    worker.task = None
                    self._replace(worker)
                elif not worker.ready and now >= worker.started + STARTUP_TIMEOUT_S:
                    self._fatal = f"a math-verify worker did not start within {STARTUP_TIMEOUT_S:.0f} s"
                    logger.error(self._fatal)
                    error = {"gold_ok": True, "equal": False, "error": self._fatal}
                    return [result or error for result in results]
        return results

    def _worker_died(self, worker: _Worker, results: list) -> None:
        if worker.task is not None:
            results[worker.task] = {"gold_ok": True, "equal": False, "error": "verifier process died"}
            worker.task = None
        self._deaths += 1
        if self._deaths > 4 * self.size:  # they keep dying before answering: do not respawn forever
            self._fatal = "math-verify workers keep exiting; run 'python -m rewards.math.worker' to see why"
            logger.error(self._fatal)
        self._replace(worker)

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                for worker in self._workers:
                    worker.kill()
            self._workers = []


_POOL: MathVerifyPool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool() -> MathVerifyPool:
    """The process-wide pool, started on first use and closed at exit."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = MathVerifyPool()
            atexit.register(_POOL.close)
        return _POOL
