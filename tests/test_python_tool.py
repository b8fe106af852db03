"""eval.tools: the built-in `python` tool (a session per trajectory, in the code sandbox: a live interpreter, or
replay) and tool names (the built-in one, a user's `path/to/file.py:function`).

Budgets are small so that the file runs in seconds. The containment checks (no host file, no network) need the
sandbox's namespaces and skip where the kernel refuses them, as tests/test_sandbox_hostile.py does (a failure in CI).
"""

from __future__ import annotations

import inspect
import logging
import time

import pytest

from eval.tools import PythonEnvironment, PythonSession, resolve_tool, run_calls, tool_names, trainer_tools
from eval.tools import python as python_tool
from rewards.code.sandbox import SandboxUnavailableError, default_concurrency
from tests.conftest import REPO
from tests.support.sandbox_checks import Listener, require_namespaces

SMALL = {"timeout_s": 1.0, "memory_mb": 256}


@pytest.fixture(autouse=True, params=["live", "replay"])
def tool_mode(request, monkeypatch) -> str:
    """Every test twice: with the interpreter kept between calls (where the sandbox can: cgroups that count CPU), and
    with every call replaying the session's cells (what runs elsewhere). A session's replies are the same."""
    monkeypatch.setitem(SMALL, "live", request.param == "live")
    return request.param


def session(**options) -> PythonSession:
    return PythonSession(**{**SMALL, **options})


# ---------------------------------------------------------------- state across the calls of one trajectory


def test_state_is_kept_across_calls_and_not_shared_between_sessions():
    first, second = session(), session()
    assert first.run("x = 41\nprint('set')") == "set"
    assert first.run("x += 1\nprint(x)") == "42"
    assert first.run("def double(n):\n    return 2 * n\nprint(double(x))") == "84"
    assert second.run("print(x)") == "NameError: name 'x' is not defined"
    assert first.run("print(x)") == "42"  # the other session's failure changed nothing here


def test_reset_clears_the_session():
    environment = PythonEnvironment(**SMALL)
    environment.reset(prompt=[{"role": "user", "content": "hi"}], answer="1")
    assert environment.python("y = 'kept'\nprint(y)") == "kept"
    assert environment.python("print(y)") == "kept"
    environment.reset(prompt=[{"role": "user", "content": "next"}], answer="2")
    assert environment.python("print(y)") == "NameError: name 'y' is not defined"


def test_a_failed_cell_is_not_replayed():
    tool = session()
    assert tool.run("n = 1\nfrom pathlib import Path\nPath('log').write_text('a')") == ""
    # It ran up to the error (printed, changed n), but it is not kept: neither runs again.
    assert tool.run("n += 1\nprint('partial')\nraise ValueError('boom')") == "partial\nValueError: boom"
    assert tool.run("print(n, open('log').read())") == "1 a"
    assert tool.cells == [
        "n = 1\nfrom pathlib import Path\nPath('log').write_text('a')",
        "print(n, open('log').read())",
    ]


def test_replayed_output_is_not_shown_again_and_random_draws_repeat():
    tool = session()
    drawn = tool.run("import random\nr = random.random()\nprint(r)")
    assert tool.run("print(r)") == drawn  # the replayed draw is the same number
    assert tool.run("print('new')") == "new"  # no output of the kept cells


def test_a_cell_that_fails_when_replayed_takes_itself_and_those_after_out_of_the_session(tool_mode):
    tool = session()
    live = tool_mode == "live"
    # Passes when first run (stdout is a pipe), fails when replayed (stdout is /dev/null then).
    assert tool.run("import os, stat\nassert not stat.S_ISCHR(os.fstat(1).st_mode)\nz = 1") == ""
    if live:  # the live interpreter still holds z; a failed call ends it, so the next call replays
        assert tool.run("print(z)\nraise ValueError") == "1\nValueError"
    reply = tool.run("print(z)")
    assert "could not be restored" in reply and "AssertionError" in reply and "did not run" in reply
    assert tool.cells == []
    assert tool.run("print('fresh')") == "fresh"


def test_a_full_session_still_runs_a_cell_but_says_its_state_is_not_kept():
    tool = session(max_cells=1)
    assert tool.run("a = 1") == ""
    reply = tool.run("b = 2\nprint(a)")
    assert reply.startswith("1\n") and "not kept" in reply
    assert tool.run("print(a)").startswith("1\n[The session is full")  # every call says so from now on
    assert tool.run("print(b)").startswith("NameError")


# ---------------------------------------------------------------- what comes back


def test_an_exception_returns_the_output_and_the_traceback_last_line():
    tool = session()
    assert tool.run("print('before')\nraise KeyError('missing')") == "before\nKeyError: 'missing'"
    assert tool.run("def f(:\n    pass") == "SyntaxError: invalid syntax"
    assert tool.run("import sys\nprint('bye')\nsys.exit(3)") == "bye\nSystemExit: 3"
    assert tool.run("import sys\nprint('done')\nsys.exit(0)") == "done"  # a normal end


def test_a_cell_that_ends_the_interpreter_is_a_failed_call_and_the_state_stays():
    tool = session()
    assert tool.run("a = 1") == ""
    assert tool.run("import os\nprint('x', flush=True)\nos._exit(0)") == "x\nThe code's process ended abnormally (ok)."
    assert tool.last_call_failed
    assert tool.run("import os\nos._exit(3)") == "The code's process ended abnormally (exit code 3)."
    assert tool.run("import os\nos.close(1)\nos.close(2)").startswith("The code's process ended abnormally (exit code")
    assert tool.run("print(a)") == "1"


def test_output_is_cut_to_the_set_length_with_a_marker():
    tool = session(max_output_chars=50)
    reply = tool.run("print('a' * 200)\nraise RuntimeError('late')")
    assert reply.startswith("a" * 50 + "\n[... output cut: 151 more characters]")
    assert reply.endswith("RuntimeError: late")  # the error line is kept whatever the output's length
    assert tool.run("print('short')") == "short"


def test_an_output_flood_is_stopped_with_a_message():
    reply = session(max_output_chars=20).run("while True:\n    print('flood' * 1000)")
    assert reply.endswith("Stopped: the code printed more than 65536 bytes.")
    assert len(reply) < 200


def test_an_infinite_loop_returns_the_timeout_message_within_the_wall_ceiling():
    tool = session(timeout_s=0.5, wall_timeout_s=5.0)  # room on a loaded host for the CPU limit to end it
    start = time.monotonic()
    reply = tool.run("print('started', flush=True)\nwhile True:\n    pass")
    assert time.monotonic() - start < 5.0 + 1.0
    assert reply == "started\nTimed out after 0.5 s of CPU time."
    assert tool.cells == []


def test_a_sleeping_cell_meets_the_wall_ceiling():
    start = time.monotonic()
    reply = session(wall_timeout_s=1.0).run("import time\ntime.sleep(60)")
    assert time.monotonic() - start < 1.0 + 1.0
    assert reply == "Timed out after 1.0 s of wall-clock time (the code waited or slept)."


def test_a_memory_bomb_returns_the_memory_message():
    tool = session()
    tool.run("kept = 1")
    reply = tool.run("blocks = []\nwhile True:\n    blocks.append(bytearray(32 * 1024 * 1024))")
    assert reply == "Ran out of memory (the limit is 256 MB)."
    assert tool.run("print(kept)") == "1"  # the session is still there


def test_a_tool_call_never_raises(monkeypatch, caplog):
    def unavailable(*args, **kwargs):
        raise SandboxUnavailableError("code sandbox: no libseccomp")

    monkeypatch.setattr(python_tool, "run_python", unavailable)
    monkeypatch.setattr(python_tool, "LiveProgram", unavailable)
    with caplog.at_level(logging.WARNING, logger="eval.tools.python"):
        reply = PythonEnvironment().python("print(1)")
    assert reply == "The python tool failed: SandboxUnavailableError: code sandbox: no libseccomp"
    assert "no libseccomp" in caplog.text


# ---------------------------------------------------------------- containment (the sandbox's namespaces)


@pytest.fixture(scope="module")
def namespaces():
    require_namespaces()


def test_no_host_file_can_be_read(namespaces):
    tool = session(isolation="namespaces")
    for path in ("/etc/passwd", str(REPO / "pyproject.toml"), "/work"):
        reply = tool.run(
            f"import os\nprint(os.listdir({path!r}) if os.path.isdir({path!r}) else open({path!r}).read())"
        )
        assert reply.startswith(("FileNotFoundError", "PermissionError")), (path, reply)


def test_no_network(namespaces):
    listener = Listener()
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=1)\nprint('connected')"
        reply = session(isolation="namespaces").run(code)
        assert "connected" not in reply and reply.split(":")[0].endswith("Error"), reply
        assert listener.connections() == 0
    finally:
        listener.close()


# ---------------------------------------------------------------- many calls at once


def test_a_batch_of_calls_gets_each_its_own_answer_in_order():
    sessions = [session() for _ in range(6)]
    first = run_calls([(tool, f"token = {index}") for index, tool in enumerate(sessions)])
    assert first == [""] * 6
    calls = [(tool, "token += 100\nprint(token)") for tool in sessions] + [
        (tool, "print(token * 2)") for tool in sessions
    ]
    replies = run_calls(calls)  # each session twice in one batch: its calls run in their order
    assert replies == [str(index + 100) for index in range(6)] + [str(2 * (index + 100)) for index in range(6)]
    assert run_calls([]) == []


def test_calls_of_different_sessions_run_side_by_side(two_sandbox_runs):
    code = "import time\nstart = time.time()\ntime.sleep(0.5)\nprint(start, time.time())"
    replies = run_calls([(session(), code) for _ in range(4)], max_workers=4)
    spans = sorted(tuple(map(float, reply.split())) for reply in replies)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), spans  # two overlapped


# ---------------------------------------------------------------- tool names and TRL's form


def test_the_environment_shows_trl_one_tool_with_its_schema():
    from transformers.utils import get_json_schema

    public = {name for name, _ in inspect.getmembers(PythonEnvironment, inspect.isfunction) if not name.startswith("_")}
    assert public == {"python", "reset"}  # TRL makes a tool of every public method but reset and get_reward
    schema = get_json_schema(PythonEnvironment().python)["function"]
    assert schema["name"] == "python"
    assert schema["parameters"]["properties"]["code"]["type"] == "string"
    assert trainer_tools(["python"]) == {"tools": [], "environment_factory": PythonEnvironment}
    factory = trainer_tools(["python"], timeout_s=2.0)["environment_factory"]
    assert factory()._session.timeout_s == 2.0


OWN_TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def untyped(a):
    return a


class Counter:
    def reset(self, **row):
        self.count = 0

    def bump(self, by: int) -> str:
        """Add to the counter.

        Args:
            by: How much.
        """
        self.count += by
        return str(self.count)
'''


def test_an_own_tool_resolves_from_a_file(tmp_path):
    path = tmp_path / "tool.py"
    path.write_text(OWN_TOOLS)
    add = resolve_tool(f"{path}:add")
    assert add(2, 3) == 5
    environment = resolve_tool(f"{path}:Counter")()
    environment.reset()
    assert environment.bump(2) == "2"
    assert trainer_tools([f"{path}:add", "python"]) == {"tools": [add], "environment_factory": PythonEnvironment}
    with pytest.raises(ValueError, match="at most one"):
        trainer_tools([f"{path}:Counter", "python"])
    with pytest.raises(ValueError, match="untyped cannot be shown to the model"):
        resolve_tool(f"{path}:untyped")
    with pytest.raises(ValueError, match="no function 'missing'"):
        resolve_tool(f"{path}:missing")
    with pytest.raises(ValueError, match="no such file"):
        resolve_tool(f"{tmp_path / 'absent.py'}:add")


def test_an_unknown_tool_name_is_a_clear_error_naming_the_known_ones():
    assert tool_names() == ["python"]
    with pytest.raises(ValueError) as error:
        resolve_tool("pyhton")
    message = str(error.value)
    assert "unknown tool 'pyhton'" in message and "did you mean" in message and "python" in message
    assert "path/to/file.py:function" in message


# ---------------------------------------------------------------- calls started ahead (prefetch)

SPAN = "import time\nstart = time.time()\ntime.sleep(0.3)\nprint(start, time.time())"


def counted_launches(monkeypatch) -> list[str]:
    """The sandbox runs the tool makes from now on, and the exchanges with its live interpreters: each one's
    request, in the order they started."""
    launched, run_python, exchange = [], python_tool.run_python, python_tool.LiveProgram.exchange

    def counting(program, stdin=None, **options):
        launched.append(stdin)
        return run_python(program, stdin=stdin, **options)

    def counting_exchange(self, request, *args):
        launched.append(request)
        return exchange(self, request, *args)

    monkeypatch.setattr(python_tool, "run_python", counting)
    monkeypatch.setattr(python_tool.LiveProgram, "exchange", counting_exchange)
    return launched


def test_calls_started_ahead_for_different_sessions_overlap_in_time(two_sandbox_runs):
    sessions = [session() for _ in range(4)]
    for tool in sessions:
        assert tool.prefetch([SPAN], workers=4)
    spans = [tuple(map(float, tool.run(SPAN).split())) for tool in sessions]  # taken one after another, as TRL does
    assert all(not tool.prefetched for tool in sessions)
    # each call slept 0.3 s, side by side: the first as many as the sandbox's runs at once (at least 2) overlap
    spans.sort()
    together = spans[: min(4, default_concurrency())]
    assert all(start < min(end for _, end in together) for start, _ in together), spans


def test_a_sessions_calls_started_ahead_see_each_others_state_as_serially(monkeypatch):
    codes = ["x = 41", "x += 1\nprint(x)", "print(undefined)", "import random\nprint(x * 2, random.random())", "y = 0"]
    serial, ahead = session(max_cells=3), session(max_cells=3)
    ahead._seed = serial._seed  # the same seed for `random`: the same draws
    expected = [(serial.run(code), serial.last_call_failed) for code in codes]
    launched = counted_launches(monkeypatch)
    assert ahead.prefetch(codes)  # one task: each call on the state the one before left
    got = [(ahead.run(code), ahead.last_call_failed) for code in codes]
    assert got == expected and expected[1][0] == "42" and expected[2][1] and not expected[3][1]
    assert "session is full" in expected[4][0]  # max_cells: the state after each call is the serial one too
    assert ahead.cells == serial.cells == codes[:2] + codes[3:4]
    assert len(launched) == len(codes)  # each call ran once, ahead; none again when taken


def test_a_result_started_ahead_is_the_serial_result():
    cases = ["print(6 * 7)", "raise ValueError('boom')", "print('x' * 5000)", "while True:\n    pass"]
    for code in cases:
        serial, ahead = session(timeout_s=0.3, max_output_chars=100), session(timeout_s=0.3, max_output_chars=100)
        ahead._seed = serial._seed
        assert ahead.prefetch([code])
        reply = ahead.run(code)
        assert (reply, ahead.last_call_failed, ahead.cells) == (serial.run(code), serial.last_call_failed, serial.cells)


def test_a_mismatched_call_started_ahead_is_ignored_and_the_call_runs_as_usual(monkeypatch):
    tool = session()
    launched = counted_launches(monkeypatch)
    assert tool.prefetch(["leaked = 'ahead'\nprint(leaked)", "print('second')"])
    assert tool.run("print('asked')") == "asked"  # another code: the started calls are dropped, this one runs
    assert not tool.prefetched and tool.cells == ["print('asked')"]
    assert tool.run("print(leaked)") == "NameError: name 'leaked' is not defined"  # nothing of it kept
    # started on a state that is no longer the session's: dropped too
    assert tool.prefetch(["print(kept)"])
    tool._cells = [*tool._cells, ("kept = 1", 0.0)]  # as if a call had changed the state meanwhile
    assert tool.run("print(kept)") == "1"
    # reset drops what was started for the trajectory before
    assert tool.prefetch(["print('old trajectory')"])
    tool.reset()
    assert not tool.prefetched and tool.run("print('new')") == "new"
    assert tool.prefetch([], workers=0) is False and session(call_workers=0).prefetch(["print(1)"]) is False
    assert len(launched) >= 5


def test_a_call_started_ahead_never_raises(monkeypatch):
    def unavailable(*args, **kwargs):
        raise SandboxUnavailableError("code sandbox: no libseccomp")

    monkeypatch.setattr(python_tool, "run_python", unavailable)
    monkeypatch.setattr(python_tool, "LiveProgram", unavailable)
    tool = session()
    assert tool.prefetch(["print(1)"])
    assert tool.run("print(1)") == "The python tool failed: SandboxUnavailableError: code sandbox: no libseccomp"
    assert tool.last_call_failed


def test_only_trls_python_calls_are_started_ahead():
    def call(name, arguments):
        return {"type": "function", "function": {"name": name, "arguments": arguments}}

    tool = session()
    calls = [call("python", {"code": "a = 1"}), call("python", {"code": "print(a)"}), call("other", {"code": "1"})]
    assert tool.prefetch_tool_calls(calls) and tool._ahead.codes == ["a = 1", "print(a)"]
    assert not tool.prefetch_tool_calls([call("python", {"code": "1", "extra": 2})])  # TRL's call would raise
    assert not tool.prefetch_tool_calls([call("python", "{'code': '1'}")]) and not tool.prefetch_tool_calls(None)
