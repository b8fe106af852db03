"""The program that every call of the `python` tool runs in the sandbox: the session's kept cells again, silently,
then the new cell, whose stdout is the reply.

This file is the program itself (eval/tools/python.py hands its text to `rewards.code.sandbox.run_python`, as
`main.py`); it imports the standard library only, since the sandbox has nothing else. Its input, on stdin, is one
dict, marshalled and written as hex (`encode_input`; marshal and bytes.fromhex are built in, where json would import
`re` and `enum` on every call): `seed` (the session's seed for `random`), `kept` (the sources of the cells that
succeeded before, in order) and `cell` (the new source). `traceback` (which imports `tokenize`, and so `re`) is
imported only when a cell raised: every call starts the interpreter anew, so what it imports is paid each time
(scripts/bench/tool_cost.py measures it).

Why replay: a sandbox run is one program whose processes are all killed when it ends (rewards/code/sandbox), so no
interpreter outlives a call. Running the kept cells again before the new one rebuilds the state, including the
files they wrote in the run's private /tmp, with nothing kept on the host between calls.

A live session (eval/tools/python.py's default, on rewards/code/sandbox/live.py) runs the same program once for many
calls: its first request carries a `token`, and after each cell that succeeded the program writes `MARK end TOKEN`
and reads the next request, one line on stdin (`encode_request`: the new cell and its token), into the same
namespace. After a cell that raised it exits, as a one-call run does, so that its end is judged the same way.

What it writes to stderr after the cells' own stderr, one line each, for the caller to read:
`MARK replayed N` once kept cell N has run again; `MARK replay-failed N` and then the last line of its traceback
when it failed this time; `MARK ok CPU` when the new cell finished (CPU: its CPU seconds, which decide how much
the next call's budget grows for replaying it); `MARK error` after the new cell's traceback.

The cells run in a module of their own named `__main__` (so `if __name__ == "__main__":` and classes that pickle
work as in a script), with `random` seeded the same way in every run, so that a cell that drew random numbers draws
the same ones when it is replayed. What the seed cannot make the same is listed in eval/tools/python.py.
"""

import marshal
import os
import random
import sys
import time
import types

MARK = "\x1erlvr-python-tool"  # starts each line of ours on stderr (a record separator: not what a cell prints)


def encode_input(seed: int, kept: list[str], cell: str, token: str | None = None) -> str:
    """The program's stdin for a call (the caller's side: eval/tools/python.py). With `token`, the first request of
    a live session, which answers and then waits for the next (`encode_request`)."""
    spec = {"seed": seed, "kept": list(kept), "cell": cell}
    if token is not None:
        spec["token"] = token
    return marshal.dumps(spec, 4).hex() + "\n"


def encode_request(cell: str, token: str) -> str:
    """A later request of a live session: one line."""
    return marshal.dumps({"cell": cell, "token": token}, 4).hex() + "\n"


def _report(fd: int, text: str) -> None:
    """One line of ours on `fd`, written past Python's buffers (so it survives a kill that follows)."""
    data = f"\n{MARK} {text}\n".encode(errors="replace")
    while data:
        data = data[os.write(fd, data) :]


def _run_cell(source: str, name: str, namespace: dict) -> BaseException | None:
    """Run one cell; the exception that ended it, or None. `sys.exit()` / `sys.exit(0)` end a cell normally."""
    try:
        exec(compile(source, name, "exec"), namespace)
    except SystemExit as stop:
        if stop.code not in (None, 0):
            return stop
    except BaseException as error:  # noqa: BLE001 - whatever the cell raised is the model's answer
        return error
    return None


def _last_line(error: BaseException) -> str:
    import traceback  # only when a cell raised (see the docstring)

    lines = [line for line in "".join(traceback.format_exception(error)).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a cell may have closed or replaced the stream
            pass


def _serve_cell(source: str, namespace: dict) -> bool:
    """Run the new cell with the program's own stdout and stderr, then write its mark; whether it succeeded."""
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    start = time.process_time()
    error = _run_cell(source, "<cell>", namespace)
    cpu_s = time.process_time() - start
    _flush()
    if error is None:
        _report(2, f"ok {cpu_s:.4f}")
        return True
    import traceback  # only when the cell raised (see the docstring)

    sys.__stderr__.write("".join(traceback.format_exception(error)))
    _flush()
    _report(2, "error")
    return False


def main() -> None:
    requests = os.fdopen(os.dup(0), "rb")  # a live session's later requests come here, a line each
    spec = marshal.loads(bytes.fromhex(requests.readline().decode()))
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # a cell that reads input() sees end of file
    sys.stdin = open(os.devnull)
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    namespace = module.__dict__
    random.seed(spec["seed"])
    # The kept cells' output goes nowhere: their fds 1 and 2 point at /dev/null while they run again.
    _flush()
    real_out, real_err = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    for index, source in enumerate(spec["kept"], start=1):
        error = _run_cell(source, f"<cell {index}>", namespace)
        _flush()
        if error is not None:
            _report(real_err, f"replay-failed {index}\n{_last_line(error)}")
            os._exit(2)
        _report(real_err, f"replayed {index}")
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    os.dup2(real_out, 1)
    os.dup2(real_err, 2)
    sys.stdout.reconfigure(line_buffering=True)  # what was printed before a kill still comes back
    while True:
        ok = _serve_cell(spec["cell"], namespace)
        if not ok or "token" not in spec:
            # One call, or a cell that raised (a live session is not kept past a failed call): the program ends
            # here, and its exit is judged as any run's. Threads a cell left running do not hold the call.
            os._exit(0 if ok else 1)
        _report(2, f"end {spec['token']}")  # a live session: the answer ends here; then the next request
        line = requests.readline()
        if not line:
            os._exit(0)
        spec = marshal.loads(bytes.fromhex(line.decode()))


if __name__ == "__main__":
    main()
