"""eval.tools.python's live interpreter (rewards/code/sandbox/live.py): a session's calls go to one sandboxed
interpreter that stays between them, and it is the same session as replay gives (tests/test_python_tool.py runs
every session test both ways). Here: what only the live interpreter does, and that it ends when it must.

These need a cgroup that counts CPU time, as the live interpreter does; where the sandbox has none, the tool replays
and `require_live` fails the test (CI's machines have them: the sandbox's CPU limits are tested there too).
"""

from __future__ import annotations

import logging
import os
import time

import pytest

from eval.tools import PythonEnvironment, PythonSession
from eval.tools import python as python_tool
from eval.tools.stats import ToolCalls
from rewards.code.sandbox import cgroup as sandbox_cgroup
from rewards.code.sandbox import live as sandbox_live

SMALL = {"timeout_s": 1.0, "memory_mb": 256}


@pytest.fixture(autouse=True)
def require_live():
    assert sandbox_cgroup.cpu_counted(), "no cgroup counts CPU time here: the python tool would replay every call"


def session(**options) -> PythonSession:
    return PythonSession(**{**SMALL, **options})


def programs(monkeypatch) -> list:
    """The live interpreters started from now on."""
    started, original = [], python_tool.LiveProgram

    def counting(*args, **kwargs):
        started.append(original(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(python_tool, "LiveProgram", counting)
    return started


def group_gone(program, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(os.path.exists(directory) for _, directory in program.group.directories.values()):
            return True
        time.sleep(0.02)
    return False


def test_the_calls_of_a_session_go_to_one_interpreter_that_keeps_what_replay_could_not(monkeypatch):
    started = programs(monkeypatch)
    tool = session()
    first = tool.run("import time\nstamp = time.monotonic_ns()\nprint(stamp)")
    assert tool.run("print(stamp)") == first  # the same object: not computed again, as a replay would
    assert tool.run("stamp += 1\nprint(stamp - int(" + repr(first) + "))") == "1"
    assert len(started) == 1 and started[0].alive


def test_a_failed_call_ends_the_interpreter_and_the_next_rebuilds_the_kept_state(monkeypatch):
    started = programs(monkeypatch)
    tool = session()
    assert tool.run("kept = [1, 2]") == ""
    assert tool.run("kept.append(3)\nraise ValueError('late')") == "ValueError: late"
    assert not started[0].alive and group_gone(started[0])  # what the failed cell did is gone with it
    assert tool.run("print(kept)") == "[1, 2]"  # replayed in a new interpreter: as if the failed cell never ran
    assert len(started) == 2 and started[1].alive


def test_the_cpu_budget_is_per_call_and_a_loop_after_many_calls_still_times_out(monkeypatch):
    started = programs(monkeypatch)
    tool = session(timeout_s=0.5, wall_timeout_s=5.0)
    for index in range(6):  # each call's CPU counts alone: six of them pass, together over the budget
        assert tool.run(f"total = sum(range(200_000))\nprint({index})") == str(index)
    start = time.monotonic()
    assert tool.run("while True:\n    pass") == "Timed out after 0.5 s of CPU time."
    assert time.monotonic() - start < 5.0 + 1.0
    assert tool.run("print(total)") == str(sum(range(200_000)))  # rebuilt by replay
    assert len(started) == 2


@pytest.mark.parametrize(
    "leftover",
    [
        "import threading, time\nthreading.Thread(target=lambda: time.sleep(30), daemon=True).start()",
        "import _thread, time\n_thread.start_new_thread(lambda: time.sleep(30), ())",
        "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)",
    ],
    ids=["thread", "raw_thread", "child_process"],
)
def test_an_interpreter_with_threads_or_processes_left_running_is_not_kept(monkeypatch, leftover):
    started = programs(monkeypatch)
    tool = session()
    assert tool.run("base = 7") == ""
    assert tool.run(leftover + "\nprint('started')") == "started"
    assert not started[0].alive and group_gone(started[0])  # nothing runs on between calls
    assert tool.run("print(base)") == "7"
    assert len(started) == 2


def test_finish_and_reset_end_the_interpreter_and_a_later_call_rebuilds_it(monkeypatch):
    started = programs(monkeypatch)
    tool = session()
    assert tool.run("x = 'kept'") == ""
    tool.finish()
    assert not started[0].alive and group_gone(started[0])
    assert tool.run("print(x)") == "kept"  # finish keeps the state: a later call replays it
    tool.reset()
    assert not started[1].alive and group_gone(started[1])
    assert tool.run("print(x)") == "NameError: name 'x' is not defined"


def test_the_end_of_trls_loop_ends_every_environments_interpreter(monkeypatch):
    started = programs(monkeypatch)
    environments = [PythonEnvironment(**SMALL) for _ in range(3)]
    with ToolCalls().ahead_of([[] for _ in environments], environments):
        for index, environment in enumerate(environments):
            assert environment.python(f"print({index})") == str(index)
        assert all(program.alive for program in started)
    assert len(started) == 3 and all(not program.alive and group_gone(program) for program in started)


def test_a_session_dropped_without_finish_has_its_interpreter_reaped(monkeypatch):
    started = programs(monkeypatch)
    tool = session()
    assert tool.run("print('x')") == "x"
    program = started.pop()
    process = program.process
    del tool, program
    assert group_gone_by_pid(process)


def group_gone_by_pid(process, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.returncode is not None:
            return True
        time.sleep(0.02)
    return False


def test_without_a_live_interpreter_every_call_replays_and_says_so_once(monkeypatch, caplog):
    def unavailable(*args, **kwargs):
        raise sandbox_live.LiveUnavailable("no cgroup counts a program's CPU time here")

    monkeypatch.setattr(python_tool, "LiveProgram", unavailable)
    monkeypatch.setattr(python_tool, "_live_problem", [])
    with caplog.at_level(logging.WARNING, logger="eval.tools.python"):
        tool = session()
        assert tool.run("a = 2") == ""
        assert tool.run("print(a * 21)") == "42"
    assert caplog.text.count("every call replays") == 1 and python_tool._live_problem


def test_an_idle_interpreter_holds_no_run_slot(monkeypatch):
    # more live sessions than runs at once: each call still gets a slot, none waits on an idle interpreter
    sessions = [session() for _ in range(3 * sandbox_live.run_slot()._initial_value)]
    for index, tool in enumerate(sessions):
        assert tool.run(f"v = {index}") == ""
    assert [tool.run("print(v)") for tool in sessions] == [str(index) for index in range(len(sessions))]
    for tool in sessions:
        tool.finish()
