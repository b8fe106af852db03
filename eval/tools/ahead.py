"""A batch's python calls started ahead, side by side: the part of eval.tools.python.PythonSession that runs the
calls TRL is about to make before it makes them one by one.

Concurrency: TRL 1.16's loop (`_tool_call_loop`) calls an environment's sync tools one rollout after another. So
just before it runs a turn's calls, each environment is handed the calls its rollout will make, as TRL parsed them
(eval.tools.stats.ToolCalls.ahead_of -> `PythonSession.prefetch`), and starts them on a shared pool of
`call_workers` threads (default: the sandbox's runs at once, rewards.code.sandbox.default_concurrency; 0: none).
A session's calls run in order in one task, each on the state the one before leaves. `python(code)` then takes a
result only if its code and the session's state (seed, kept cells) are exactly those it ran on; else it is dropped
(one not begun is cancelled, one running waited for: a session never has two runs at once) and the call runs as
it would have. Replies, failures and state are thus the serial calls'. What is not taken is dropped on `reset` and
at the end of TRL's loop.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from rewards.code.sandbox import default_concurrency

logger = logging.getLogger("eval.tools.python")


class CallsAhead:
    """The calls of one session started ahead (a mixin of eval.tools.python.PythonSession, which holds the state
    these read: `_lock`, `_seed`, `_cells`, `call_workers`, `_ahead`, and `_call`, one call on a given state)."""

    def prefetch(self, codes: Sequence[str], workers: int | None = None) -> bool:
        """Start `codes`, the calls this session gets next, in order, on the pool of `workers` threads (default:
        `call_workers`), each on the state the one before leaves; `run` takes a result whose code and state match.
        What was started ahead before and not taken is dropped. False where nothing started. Never raises."""
        codes = [code if isinstance(code, str) else str(code) for code in codes]
        workers = self.call_workers if workers is None else workers
        with self._lock:
            try:
                self._drop_ahead(wait_running=False)
                if not codes or workers == 0:
                    return False
                ahead = Ahead(self._seed, list(self._cells), codes)
                ahead.task = _pool(workers).submit(self._run_ahead, ahead)
                self._ahead = ahead
                return True
            except Exception as error:  # noqa: BLE001 - the calls then run when asked, as without it
                logger.warning("python tool: no call started ahead: %s: %s", type(error).__name__, error)
                return False

    def prefetch_tool_calls(self, tool_calls) -> bool:
        """`prefetch` the `python` calls at the head of a turn's `tool_calls` as TRL parsed them (`{"type":
        "function", "function": {"name": "python", "arguments": {"code": ...}}}`), up to the first that is not one."""
        codes = []
        for call in tool_calls or []:
            function = call.get("function") if isinstance(call, dict) and call.get("type") == "function" else None
            if not isinstance(function, dict) or function.get("name") != "python":
                break
            arguments = function.get("arguments")
            if not isinstance(arguments, dict) or set(arguments) != {"code"} or not isinstance(arguments["code"], str):
                break  # TRL's call would not reach the session as python(code)
            codes.append(arguments["code"])
        return self.prefetch(codes)

    @property
    def prefetched(self) -> bool:
        """Whether calls started ahead remain to be taken."""
        ahead = self._ahead
        return ahead is not None and ahead.taken < len(ahead.codes)

    def drop_prefetched(self) -> None:
        """Drop the calls started ahead and not taken: those not begun are cancelled, a running one ends alone."""
        self.prefetch([])

    def _run_ahead(self, ahead: Ahead) -> None:
        """A pool thread: the calls in order, each result (the state it ran on, what `run` would return and keep)
        into its future; stops at a cancelled one. Reads no state of the session's but what `ahead` holds."""
        cells = ahead.cells
        for code, future in zip(ahead.codes, ahead.futures, strict=True):
            if not future.set_running_or_notify_cancel():
                return
            try:
                done = self._call(ahead.seed, cells, code)
            except Exception as error:  # noqa: BLE001 - `run` then runs the call itself
                future.set_exception(error)
                for later in ahead.futures:
                    later.cancel()
                return
            future.set_result((cells, done))
            cells = done[2]

    def _take_ahead(self, code: str):
        """The result started ahead for `code` on the session's current state, or None (then it is dropped)."""
        ahead = self._ahead
        if ahead is None:
            return None
        index = ahead.taken
        if index < len(ahead.codes) and ahead.codes[index] == code and ahead.seed == self._seed:
            ahead.taken += 1
            try:
                state, done = ahead.futures[index].result()
            except Exception:  # noqa: BLE001 - cancelled or failed: run it here
                state, done = None, None
            if state == self._cells and done is not None:
                if ahead.taken == len(ahead.codes):
                    self._ahead = None
                return done
        self._drop_ahead(wait_running=True)  # a session never has two runs at once
        return None

    def _drop_ahead(self, wait_running: bool) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        for future in ahead.futures:
            future.cancel()
        if ahead.task is not None:
            ahead.task.cancel()
        if wait_running:
            wait([future for future in ahead.futures if future.running()])


class Ahead:
    """Calls of one session started ahead: the state they start on, their codes, a future each (the state it ran on
    and what `run` returns and keeps), how many were taken, and the pool's task that runs them."""

    def __init__(self, seed: int, cells: list[tuple[str, float]], codes: list[str]):
        self.seed, self.cells, self.codes = seed, cells, codes
        self.futures: list[Future] = [Future() for _ in codes]
        self.taken, self.task = 0, None


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(workers: int | None) -> ThreadPoolExecutor:
    """The process's pool of `workers` threads (None: the sandbox's runs at once) for calls started ahead."""
    workers = max(1, workers or default_concurrency())
    with _pools_lock:
        if workers not in _pools:
            _pools[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="python-tool-ahead")
        return _pools[workers]


def _forget_pools() -> None:  # in a forked child: the parent's threads are not there
    global _pools_lock
    _pools_lock = threading.Lock()
    _pools.clear()


os.register_at_fork(after_in_child=_forget_pools)
