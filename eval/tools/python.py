"""The built-in `python` tool: model-written code run in the code sandbox as a session that keeps its state across
the calls of one trajectory, and a batch of calls run at once.

- `PythonSession`: one trajectory's interpreter. `session.run(code)` gives the text the model sees.
- `PythonEnvironment`: the same session as TRL's GRPOTrainer takes it (`environment_factory=PythonEnvironment`,
  one instance per rollout): its one public method, `python(code)`, is the tool the model calls, and `reset(**row)`
  starts the session afresh for the next trajectory. A factory with other budgets: `functools.partial`.
- `run_calls([(session, code), ...])`: many calls at once (started ahead), each session's in their order.

How state is kept. The session is defined by its cells that succeeded, as if each call ran them again, silently,
before the new one (replay: eval/tools/replay.py), and there are two ways to run a call:
- live (the default, where a cgroup counts a program's CPU time and namespaces work; rewards/code/sandbox/live.py):
  one sandboxed interpreter per session, kept between its calls, each call a request to it. It is kept only while it
  holds exactly the session's state: a call that failed, whose cell was not kept, or that left a thread or process
  running ends it (`_call`), and the next call starts a new one that replays the kept cells first. `finish` (the end
  of TRL's loop) and `reset` end it; a session dropped without them has it ended by the sandbox's reaper thread.
- replay (`live=False`, or where live is unavailable: a warning, once): every call is one sandboxed program that
  runs the kept cells and then the new cell, and nothing of it outlives the call.
The replies are the same either way (tests/test_python_tool.py runs every test both ways). What replay means for
the model's code:
- side effects run again each call: files a cell wrote are written again (in the run's private /tmp, so nothing
  piles up); time, the process id, `os.urandom` and the order of a set of strings (hashes are salted per process)
  may differ from the first run; `random` is seeded per session, so its draws repeat;
- a kept cell that fails, runs out of time or of memory when replayed takes the cells from it on out of the session
  (the reply says so), so a trajectory is never stuck on a state it cannot rebuild;
- cost grows with the calls: so a call's CPU budget is `timeout_s` for the new cell plus what the kept cells took
  (measured when they ran, with a margin), and a cell is kept only while the session holds fewer than `max_cells`
  cells and `max_replay_cpu_s` of replay; past either, the cell still runs but its state is not kept (the reply
  says so). One call thus costs at most `timeout_s + max_replay_cpu_s` of CPU (plus the margin).
A live interpreter's call has the new cell's budget alone; its CPU rlimit for its whole life is a replay's worth
(`max_replay_cpu_s` with the margin) plus the kept cells' `max_replay_cpu_s` plus one cell.

Budgets, all passed to the sandbox: `timeout_s` CPU seconds, `memory_mb` for the whole run, a wall-clock ceiling
(`wall_timeout_s`, default three times the CPU budget plus a second: only a program that sleeps or waits meets it),
and the output cap. The text returned is the cell's stdout, then the last line of the traceback when it raised,
cut to `max_output_chars` with a note saying how much was cut; a timeout, memory or output flood is a plain
sentence. Nothing raises into the caller: an unexpected failure (the sandbox unavailable, say) is a sentence and a
logged warning.
Concurrency: a batch's calls start ahead, side by side (eval/tools/ahead.py, which `PythonSession` takes its
`prefetch` from).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
from collections.abc import Sequence
from pathlib import Path

from eval.tools import replay
from eval.tools.ahead import Ahead, CallsAhead
from rewards.code.sandbox import default_concurrency, run_python
from rewards.code.sandbox.live import LiveProgram, LiveUnavailable
from rewards.code.sandbox.settings import WALL_EXTRA_S, WALL_FACTOR

logger = logging.getLogger("eval.tools.python")

PROGRAM = Path(replay.__file__).read_text()
REPLAY_MARGIN, REPLAY_EXTRA_S = 1.25, 0.05  # a kept cell's CPU when replayed: this times what it took, plus this
LIVE_TASKS = 2  # a live interpreter between calls: init and the interpreter's one thread
_live_problem: list[str] = []  # why this process runs no live interpreter (LiveUnavailable), once known


class PythonSession(CallsAhead):
    """One trajectory's Python: what its successful cells defined is there for the next call (by replay)."""

    def __init__(
        self,
        timeout_s: float = 5.0,
        memory_mb: int = 512,
        wall_timeout_s: float | None = None,
        max_output_chars: int = 1000,
        max_cells: int = 32,
        max_replay_cpu_s: float = 10.0,
        call_workers: int | None = None,
        live: bool = True,
        **sandbox_options,
    ):
        """`call_workers`: the pool's threads for calls started ahead (`prefetch`; default: the sandbox's runs at
        once; 0: none). `live`: keep the interpreter between calls where the sandbox can (else every call replays).
        `sandbox_options` go to `rewards.code.sandbox.run_python` (`isolation`, `packages`, ...)."""
        self.timeout_s, self.memory_mb, self.wall_timeout_s = timeout_s, memory_mb, wall_timeout_s
        self.max_output_chars, self.max_cells, self.max_replay_cpu_s = max_output_chars, max_cells, max_replay_cpu_s
        self.call_workers, self.live = call_workers, live
        self._live: LiveProgram | None = None  # the interpreter kept between calls, and the state it holds:
        self._live_state: tuple | None = None  # (seed, the kept cells' sources) while it holds exactly those
        self.sandbox_options = {"max_output_bytes": max(65536, 8 * max_output_chars), **sandbox_options}
        self._lock = threading.Lock()  # one call at a time: a cell runs on the state its predecessors left
        self.last_call_failed = False  # the last call raised, timed out, ran out of memory or failed to run
        self._ahead: Ahead | None = None  # the calls started ahead and not yet taken
        self.reset()

    def reset(self) -> None:
        """Forget every cell: the next call starts from an empty interpreter, with a new seed for `random`."""
        with self._lock:
            self._drop_ahead(wait_running=False)
            self._end_live()
            self._cells: list[tuple[str, float]] = []  # (source, CPU seconds it took), the cells replayed
            self._seed = secrets.randbits(32)

    def finish(self) -> None:
        """The trajectory's calls are over for now: drop what was started ahead and end the live interpreter (its
        processes and memory). The state stays: a later call rebuilds it by replay."""
        with self._lock:
            self._drop_ahead(wait_running=False)
            self._end_live()

    def _end_live(self) -> None:
        program, self._live, self._live_state = self._live, None, None
        if program is not None:
            program.close(wait=False)  # its processes end on the sandbox's reaper thread, not in this call

    @property
    def cells(self) -> list[str]:
        """The sources of the cells kept, in order."""
        return [source for source, _ in self._cells]

    def run(self, code: str) -> str:
        """Run `code` after the session's kept cells; the text for the model. Never raises."""
        with self._lock:
            self.last_call_failed = True  # until the code is seen to end well
            try:
                code = code if isinstance(code, str) else str(code)
                done = self._take_ahead(code)
                if done is None:
                    done = self._call(self._seed, self._cells, code)
                reply, self.last_call_failed, self._cells = done
                return reply
            except Exception as error:  # noqa: BLE001 - a tool call must not raise into the trainer
                logger.warning("python tool: the call failed: %s: %s", type(error).__name__, error, exc_info=True)
                return f"The python tool failed: {type(error).__name__}: {error}"

    # ------------------------------------------------------------ one call: the run, then what it means

    def _call(self, seed: int, cells: list[tuple[str, float]], code: str):
        """One call of `code` on the state `cells` with `seed`: what `_outcome` says, the live interpreter kept only
        while it holds exactly the state the call leaves (so that it and a replay are the same session)."""
        result, ceiling, restored = self._launch(seed, cells, code)
        done = self._outcome(cells, code, result, ceiling, restored)
        program = self._live
        if program is not None and self._live_state is not None:
            _, failed, kept = done
            tasks = program.tasks()
            if failed or len(kept) != len(cells) + 1 or not program.alive or (tasks or 0) > LIVE_TASKS:
                self._end_live()  # a failed or unkept cell, or threads or processes left running: replay next
            else:
                self._live_state = (seed, tuple(source for source, _ in kept))
        return done

    def _launch(self, seed: int, cells: list[tuple[str, float]], code: str):
        """The sandboxed run of `code` after `cells`, with its budgets: (the run's result, its wall ceiling, whether
        the cells were in place already: a live interpreter holding them)."""
        replay_s = sum(REPLAY_MARGIN * cpu_s + REPLAY_EXTRA_S for _, cpu_s in cells)
        # The new cell's ceiling (the sandbox's default rule unless one is set), and the replay's by the same rule.
        ceiling = (
            self.wall_timeout_s if self.wall_timeout_s is not None else WALL_FACTOR * self.timeout_s + WALL_EXTRA_S
        )
        sources = [source for source, _ in cells]
        if self.live and not _live_problem:
            try:
                return self._live_exchange(seed, sources, code, replay_s, ceiling)
            except LiveUnavailable as error:
                self._end_live()
                if not _live_problem:
                    _live_problem.append(str(error))
                    logger.warning("python tool: every call replays the session's cells (%s)", error)
        cpu_budget = self.timeout_s + replay_s
        ceiling += WALL_FACTOR * replay_s
        program_input = replay.encode_input(seed, sources, code)
        result = run_python(
            PROGRAM,
            stdin=program_input,
            timeout_s=cpu_budget,
            wall_timeout_s=ceiling,
            memory_mb=self.memory_mb,
            **self.sandbox_options,
        )
        return result, ceiling, False

    def _live_exchange(self, seed: int, sources: list[str], code: str, replay_s: float, ceiling: float):
        """`_launch` on the live interpreter: the one that holds `sources` takes just the cell; else a new one
        replays them first (and is then kept, by `_call`, if the cell is)."""
        token = secrets.token_hex(8)
        end = f"\n{replay.MARK} end {token}\n"
        program = self._live
        restored = program is not None and program.alive and self._live_state == (seed, tuple(sources))
        if restored:
            request, cpu_s = replay.encode_request(code, token), self.timeout_s
        else:
            self._end_live()
            # Its whole life's CPU: a replay, the cells kept after it (max_replay_cpu_s at most), one more cell.
            life_s = REPLAY_MARGIN * self.max_replay_cpu_s + REPLAY_EXTRA_S * self.max_cells
            life_s += self.max_replay_cpu_s + self.timeout_s + 1.0
            program = LiveProgram(
                {"main.py": PROGRAM.encode()}, "main.py", life_s, memory_mb=self.memory_mb, **self.sandbox_options
            )
            self._live, self._live_state = program, (seed, tuple(sources))
            request, cpu_s = replay.encode_input(seed, sources, code, token), self.timeout_s + replay_s
            ceiling += WALL_FACTOR * replay_s
        result = program.exchange(request.encode(), end.encode(), cpu_s, ceiling)
        if result.status == "ok" and end in result.stderr:  # the end line is the session's, not the cell's
            result = dataclasses.replace(result, stderr=result.stderr[: result.stderr.index(end)])
        if not program.alive:
            self._live, self._live_state = None, None  # closed by the exchange (its budget, or the program ended)
        return result, ceiling, restored

    def _outcome(self, cells: list[tuple[str, float]], code: str, result, ceiling: float, restored: bool = False):
        """What a run of `code` after `cells` means: (the reply, whether the call failed, the cells kept after it).
        `restored`: the cells were in place before the run (a live interpreter). Changes nothing."""
        marks = _marks(result.stderr)
        stdout = self._clip(result.stdout)
        replayed = max((int(words[1]) for words, _ in marks if words[:1] == ("replayed",)), default=0)
        replayed = len(cells) if restored else replayed
        final, after = marks[-1] if marks else ((), "")
        if final[:1] == ("replay-failed",) and len(final) == 2:
            return self._lost(cells, int(final[1]), f"failed this time ({after.strip() or 'no error was shown'})")
        if result.status in ("timeout", "memory") and replayed < len(cells):
            why = "ran out of time" if result.status == "timeout" else "ran out of memory"
            return self._lost(cells, replayed + 1, why)
        if result.status == "timeout":
            if "wall-clock" in result.reason:
                why = f"Timed out after {ceiling:.1f} s of wall-clock time (the code waited or slept)."
                return _joined(stdout, why), True, cells
            return _joined(stdout, f"Timed out after {self.timeout_s:g} s of CPU time."), True, cells
        if result.status == "memory":
            return _joined(stdout, f"Ran out of memory (the limit is {self.memory_mb} MB)."), True, cells
        if result.output_truncated:
            limit = self.sandbox_options["max_output_bytes"]
            return _joined(stdout, f"Stopped: the code printed more than {limit} bytes."), True, cells
        if final[:1] == ("ok",) and len(final) == 2 and result.status == "ok":
            note, kept = self._keep(cells, code, _seconds(final[1]))
            return _joined(stdout, note), False, kept
        if final[:1] == ("error",):
            return _joined(stdout, self._clip(_last_line(_before_last_mark(result.stderr)))), True, cells
        why = f"The code's process ended abnormally ({result.reason or result.status})."
        return _joined(stdout, why), True, cells

    def _keep(self, cells: list[tuple[str, float]], code: str, cpu_s: float) -> tuple[str, list]:
        """A cell that succeeded kept, if the session has room: (the note for the model when it has not, the cells)."""
        replay_s = sum(spent for _, spent in cells) + cpu_s
        if len(cells) >= self.max_cells or replay_s > self.max_replay_cpu_s:
            return "[The session is full: this cell ran, but what it defined is not kept for the next call.]", cells
        return "", [*cells, (code, cpu_s)]

    def _lost(self, cells: list[tuple[str, float]], cell: int, why: str) -> tuple[str, bool, list]:
        """Earlier cell `cell` (1-based) did not run again: it and those after it dropped, and the reply says so."""
        cell = min(max(1, cell), max(1, len(cells)))
        reply = (
            f"The session could not be restored: call {cell} of those kept, run again before this code, {why}. "
            f"What the last {len(cells) - cell + 1} kept call(s) defined is gone; this code did not run. Please run "
            "it again."
        )
        return reply, True, cells[: cell - 1]

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

    @property
    def prefetcher(self) -> PythonSession:
        """The session, to start the calls TRL parsed ahead (ToolCalls.ahead_of); a property: TRL makes no tool."""
        return self._session

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
    targets = [target._session if isinstance(target, PythonEnvironment) else target for target, _ in calls]
    codes: dict[int, list[str]] = {}
    for session, (_, code) in zip(targets, calls, strict=True):
        codes.setdefault(id(session), []).append(code)
    for session in {id(session): session for session in targets}.values():
        session.prefetch(codes[id(session)], workers=max_workers or default_concurrency())
    return [session.run(code) for session, (_, code) in zip(targets, calls, strict=True)]


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
