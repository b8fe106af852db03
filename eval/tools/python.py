"""The built-in `python` tool: model-written code run in the code sandbox as a session that keeps its state across
the calls of one trajectory, and a batch of calls run at once.

- `PythonSession`: one trajectory's interpreter. `session.run(code)` gives the text the model sees.
- `PythonEnvironment`: the same session as TRL's GRPOTrainer takes it (`environment_factory=PythonEnvironment`,
  one instance per rollout): its one public method, `python(code)`, is the tool the model calls, and `reset(**row)`
  starts the session afresh for the next trajectory. A factory with other budgets: `functools.partial`.
- `run_calls([(session, code), ...])`: many calls at once, each session's calls in their order.

How state is kept: by replay (eval/tools/replay.py). A sandbox run is one program and nothing of it outlives the
call (rewards/code/sandbox), so each call runs, in one sandboxed program, the cells of this session that succeeded
before (their output thrown away) and then the new cell, and returns only the new cell's output. A cell that failed
is not kept, so it is not run again. What replay means for the model's code:
- side effects run again each call: files a cell wrote are written again (in the run's private /tmp, so nothing
  piles up); time, the process id, `os.urandom` and the order of a set of strings (hashes are salted per process)
  may differ from the first run; `random` is seeded per session, so its draws repeat;
- a kept cell that fails, runs out of time or of memory when replayed takes the cells from it on out of the session
  (the reply says so), so a trajectory is never stuck on a state it cannot rebuild;
- cost grows with the calls: so a call's CPU budget is `timeout_s` for the new cell plus what the kept cells took
  (measured when they ran, with a margin), and a cell is kept only while the session holds fewer than `max_cells`
  cells and `max_replay_cpu_s` of replay; past either, the cell still runs but its state is not kept (the reply
  says so). One call thus costs at most `timeout_s + max_replay_cpu_s` of CPU (plus the margin).

Budgets, all passed to the sandbox: `timeout_s` CPU seconds, `memory_mb` for the whole run, a wall-clock ceiling
(`wall_timeout_s`, default three times the CPU budget plus a second: only a program that sleeps or waits meets it),
and the output cap. The text returned is the cell's stdout, then the last line of the traceback when it raised,
cut to `max_output_chars` with a note saying how much was cut; a timeout, memory or output flood is a plain
sentence. Nothing raises into the caller: an unexpected failure (the sandbox unavailable, say) is a sentence and a
logged warning.

Concurrency: the sandbox lets one run per core at a time, process-wide (rewards.code.sandbox.default_concurrency),
so `run_calls` uses that many threads. TRL 1.16's loop calls an environment's sync tools one sample after another
(its `_tool_call_loop`), so under GRPOTrainer calls run one at a time; a loop of our own batches them with `run_calls`.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eval.tools import replay
from rewards.code.sandbox import default_concurrency, run_python
from rewards.code.sandbox.settings import WALL_EXTRA_S, WALL_FACTOR

logger = logging.getLogger("eval.tools.python")

PROGRAM = Path(replay.__file__).read_text()
REPLAY_MARGIN, REPLAY_EXTRA_S = 1.25, 0.05  # a kept cell's CPU when replayed: this times what it took, plus this


class PythonSession:
    """One trajectory's Python: what its successful cells defined is there for the next call (by replay)."""

    def __init__(
        self,
        timeout_s: float = 5.0,
        memory_mb: int = 512,
        wall_timeout_s: float | None = None,
        max_output_chars: int = 1000,
        max_cells: int = 32,
        max_replay_cpu_s: float = 10.0,
        **sandbox_options,
    ):
        """`sandbox_options` go to `rewards.code.sandbox.run_python` as they are (`isolation`, `packages`, ...)."""
        self.timeout_s, self.memory_mb, self.wall_timeout_s = timeout_s, memory_mb, wall_timeout_s
        self.max_output_chars, self.max_cells, self.max_replay_cpu_s = max_output_chars, max_cells, max_replay_cpu_s
        self.sandbox_options = {"max_output_bytes": max(65536, 8 * max_output_chars), **sandbox_options}
        self._lock = threading.Lock()  # one call at a time: a cell runs on the state its predecessors left
        self.last_call_failed = False  # the last call raised, timed out, ran out of memory or failed to run
        self.reset()

    def reset(self) -> None:
        """Forget every cell: the next call starts from an empty interpreter, with a new seed for `random`."""
        with self._lock:
            self._cells: list[tuple[str, float]] = []  # (source, CPU seconds it took), the cells replayed
            self._seed = secrets.randbits(32)

    @property
    def cells(self) -> list[str]:
        """The sources of the cells kept, in order."""
        return [source for source, _ in self._cells]

    def run(self, code: str) -> str:
        """Run `code` after the session's kept cells; the text for the model. Never raises."""
        with self._lock:
            self.last_call_failed = True  # until the code is seen to end well
            try:
                return self._run(code if isinstance(code, str) else str(code))
            except Exception as error:  # noqa: BLE001 - a tool call must not raise into the trainer
                logger.warning("python tool: the call failed: %s: %s", type(error).__name__, error, exc_info=True)
                return f"The python tool failed: {type(error).__name__}: {error}"

    def _run(self, code: str) -> str:
        replay_s = sum(REPLAY_MARGIN * cpu_s + REPLAY_EXTRA_S for _, cpu_s in self._cells)
        cpu_budget = self.timeout_s + replay_s
        # The new cell's ceiling (the sandbox's default rule unless one is set), and the replay's by the same rule.
        ceiling = (
            self.wall_timeout_s if self.wall_timeout_s is not None else WALL_FACTOR * self.timeout_s + WALL_EXTRA_S
        )
        ceiling += WALL_FACTOR * replay_s
        program_input = replay.encode_input(self._seed, self.cells, code)
        result = run_python(
            PROGRAM,
            stdin=program_input,
            timeout_s=cpu_budget,
            wall_timeout_s=ceiling,
            memory_mb=self.memory_mb,
            **self.sandbox_options,
        )
        marks = _marks(result.stderr)
        stdout = self._clip(result.stdout)
        replayed = max((int(words[1]) for words, _ in marks if words[:1] == ("replayed",)), default=0)
        final, after = marks[-1] if marks else ((), "")
        if final[:1] == ("replay-failed",) and len(final) == 2:
            return self._lost(int(final[1]), f"failed this time ({after.strip() or 'no error was shown'})")
        if result.status in ("timeout", "memory") and replayed < len(self._cells):
            why = "ran out of time" if result.status == "timeout" else "ran out of memory"
            return self._lost(replayed + 1, why)
        if result.status == "timeout":
            if "wall-clock" in result.reason:
                return _joined(
                    stdout, f"Timed out after {ceiling:.1f} s of wall-clock time (the code waited or slept)."
                )
            return _joined(stdout, f"Timed out after {self.timeout_s:g} s of CPU time.")
        if result.status == "memory":
            return _joined(stdout, f"Ran out of memory (the limit is {self.memory_mb} MB).")
        if result.output_truncated:
            limit = self.sandbox_options["max_output_bytes"]
            return _joined(stdout, f"Stopped: the code printed more than {limit} bytes.")
        if final[:1] == ("ok",) and len(final) == 2 and result.status == "ok":
            self.last_call_failed = False
            return _joined(stdout, self._keep(code, _seconds(final[1])))
        if final[:1] == ("error",):
            return _joined(stdout, self._clip(_last_line(_before_last_mark(result.stderr))))
        return _joined(stdout, f"The code's process ended abnormally ({result.reason or result.status}).")

    def _keep(self, code: str, cpu_s: float) -> str:
        """Keep a cell that succeeded, if the session has room; the note for the model when it has not."""
        replay_s = sum(spent for _, spent in self._cells) + cpu_s
        if len(self._cells) >= self.max_cells or replay_s > self.max_replay_cpu_s:
            return "[The session is full: this cell ran, but what it defined is not kept for the next call.]"
        self._cells.append((code, cpu_s))
        return ""

    def _lost(self, cell: int, why: str) -> str:
        """Earlier cell `cell` (1-based) did not run again: drop it and those after it, and say so."""
        cell = min(max(1, cell), max(1, len(self._cells)))
        gone = len(self._cells) - cell + 1
        self._cells = self._cells[: cell - 1]
        return (
            f"The session could not be restored: call {cell} of those kept, run again before this code, {why}. "
            f"What the last {gone} kept call(s) defined is gone; this code did not run. Please run it again."
        )

    def _clip(self, text: str) -> str:
        limit = self.max_output_chars
        if len(text) <= limit:
            return text
        return f"{text[:limit]}\n[... output cut: {len(text) - limit} more characters]"


class PythonEnvironment:
    """One trajectory's Python session as TRL's GRPOTrainer takes an environment: `environment_factory=` this class,
    `reset(**row)` before each trajectory, and `python` the tool. Its only public methods are those two, since TRL
    makes a tool of every other public method."""

    def __init__(self, **options):
        """`options` as for PythonSession (budgets, max_output_chars, sandbox options)."""
        self._session = PythonSession(**options)

    def reset(self, **row) -> None:
        """A new trajectory: the session starts empty. The row's columns are not needed."""
        self._session.reset()

    @property
    def last_call_failed(self) -> bool:
        """Whether the last call raised, timed out, ran out of memory or failed to run (for the tool statistics,
        eval/tools/stats.py; a property, so TRL makes no tool of it)."""
        return self._session.last_call_failed

    def python(self, code: str) -> str:
        """Run Python code in a sandboxed interpreter that keeps its variables between calls.

        Print what you need to see: the reply is the code's standard output and, if it raised, the last line of the
        traceback. There is no network and no file of the host; each call has a CPU-time and a memory limit.

        Args:
            code: The Python source to run.

        Returns:
            The printed output, and the error if the code raised.
        """
        return self._session.run(code)


def run_calls(
    calls: Sequence[tuple[PythonSession | PythonEnvironment, str]], max_workers: int | None = None
) -> list[str]:
    """Run `(session, code)` calls at once and return their replies in order. Calls of one session run one after
    another in the order given (each needs the state its predecessors left); different sessions run side by side,
    at most `max_workers` at a time (default: as many runs as the sandbox lets this process have)."""
    sessions: dict[int, PythonSession] = {}
    order: dict[int, list[int]] = {}
    for index, (target, _) in enumerate(calls):
        session = target._session if isinstance(target, PythonEnvironment) else target
        sessions[id(session)] = session
        order.setdefault(id(session), []).append(index)
    replies: list[str] = [""] * len(calls)

    def run_one_session(key: int) -> None:
        for index in order[key]:
            replies[index] = sessions[key].run(calls[index][1])

    if not calls:
        return replies
    workers = max(1, min(len(order), max_workers or default_concurrency()))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="python-tool") as pool:
        list(pool.map(run_one_session, list(order)))
    return replies


def _marks(stderr: str) -> list[tuple[tuple[str, ...], str]]:
    """replay.py's lines on stderr: (the words after the mark, the text up to the next mark)."""
    parts = stderr.split(f"\n{replay.MARK} ")[1:]
    found = []
    for part in parts:
        head, _, rest = part.partition("\n")
        words = tuple(head.split())
        if words[:1] in (("replayed",), ("replay-failed",)) and not (len(words) == 2 and words[1].isdigit()):
            continue  # not a line of replay.py's (a cell may print anything)
        found.append((words or ("",), rest))
    return found


def _seconds(text: str) -> float:
    try:
        return max(0.0, float(text))
    except ValueError:
        return 0.0


def _before_last_mark(stderr: str) -> str:
    return stderr.rpartition(f"\n{replay.MARK} ")[0]


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _joined(*parts: str) -> str:
    """The reply: its non-empty parts, each on lines of its own."""
    return "\n".join(part.rstrip("\n") for part in parts if part)
