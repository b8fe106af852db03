"""The trusted half of an assert-style run: the tests execute here, the candidate only in the sandbox.

The launcher forks this judge before it builds the sandbox (so it keeps the host's view, not the
program's), and as root under a uid of its own (neither the caller's nor the program's). It joins the
run's cgroups and takes the run's limits: what it spends decoding and comparing replies (a set of
integers that all hash alike, a reply of 8 MB) counts against the run's CPU time and memory, so such a
reply fails the case within the run's budget instead of costing the caller. It runs the
row's setup and cases (HumanEval's `check(candidate)`, MBPP's asserts) with every function of the
solution that they call replaced by a proxy: calling it sends the arguments as plain data down a pipe
to the server in the sandbox (protocol.py's `serve`), which calls the solution's function and sends
back the return value, also as plain data. So the test code, its expected values and the comparison
never exist in the program's process, memory or file system; there is no nonce to steal and no
result-reporting function to call; and a returned object can only be a fresh built-in value made here.

A case fails when it raises, and also when any call it made to the candidate failed (the candidate raised,
returned something that is not plain data, or died), even if the test code caught that error: the
proxy raises `CandidateFailed`, a BaseException that an `except Exception` in a test does not swallow.

What cannot be judged this way: tests that need the solution's objects themselves (an instance of its
class, a generator, an argument the solution was meant to change in place). Their cases fail for every
solution; such rows belong in stdin/stdout form. All 164 HumanEval problems are plain data both ways.

Standard library only, like the launcher that imports it (as sandbox_judge, and protocol.py as sandbox_protocol).
"""

from __future__ import annotations

import ast
import builtins
import json  # noqa: F401 - imported now, while the sandbox starts, not when the first reply is read
import os
import sys

import sandbox_protocol as protocol


class CandidateFailed(BaseException):  # noqa: N818 - it is not an error of the judge's own
    """A call to the candidate did not return plain data."""


class _Replies:
    """Lines from the sandbox, each at most MAX_MESSAGE_BYTES; None once the program has gone."""

    def __init__(self, fd: int):
        self.fd, self.buffer, self.closed = fd, bytearray(), False

    def next(self) -> dict | None:
        # Only the bytes that arrived since the last look are searched for the end of the line, and they are
        # appended in place: an 8 MB reply read in pipe-sized chunks is linear work for the judge, not quadratic.
        searched = 0
        while (end := self.buffer.find(b"\n", searched)) < 0:
            if self.closed or len(self.buffer) > protocol.MAX_MESSAGE_BYTES:
                self.closed = True
                return None
            data = os.read(self.fd, 1 << 20)
            if not data:
                self.closed = True
                return None
            searched = len(self.buffer)
            self.buffer += data
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        if len(line) > protocol.MAX_MESSAGE_BYTES:
            raise CandidateFailed("a reply past the size limit")
        return protocol.loads(line)


def _called_names(source: str) -> set[str]:
    """Names called as functions in `source` (MBPP's asserts call the solution's function by name)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def judge(spec: dict, requests_fd: int, replies_fd: int, report) -> bool:
    """Run `spec`'s cases against the program behind the two pipes; `report(index, passed, detail)` each.

    Returns whether the program's side ended on its own (its reply pipe closed) before the judge was done."""
    replies = _Replies(replies_fd)
    failures: list[str] = []

    def proxy_for(name: str):
        def candidate(*args, **kwargs):
            try:
                request = protocol.request_line(name, args, kwargs)
            except (protocol.NotPlainData, ValueError, RecursionError) as error:
                failures.append(f"an argument is not plain data: {error}")
                raise CandidateFailed(failures[-1]) from None
            try:
                while request:
                    request = request[os.write(requests_fd, request) :]
                reply = replies.next()
                if reply is None:
                    raise CandidateFailed("the program ended")
                if "ok" not in reply:
                    raise CandidateFailed(f"the candidate raised {str(reply.get('error'))[:300]}")
                return protocol.decode(reply["ok"])
            except (Exception, CandidateFailed) as error:  # OSError, NotPlainData, a hex that is not hex
                failures.append(str(error) or type(error).__name__)
                raise CandidateFailed(failures[-1]) from None

        candidate.__name__ = name
        return candidate

    try:
        first = replies.next()
    except (protocol.NotPlainData, CandidateFailed):
        first = None
    if not first or first.get("ready") is not True:
        why = (
            "the program ended before it was ready" if not first else f"the solution raised {first.get('setup_error')}"
        )
        report(-1, False, str(why)[:300])
        return replies.closed
    namespace: dict = {"__name__": "__tests__", "__builtins__": builtins}
    try:
        if spec["setup"]:
            exec(compile(spec["setup"], "tests.py", "exec"), namespace)  # noqa: S102 - the dataset's own tests
    except BaseException as error:  # noqa: B036
        report(-1, False, f"the test setup raised {protocol._describe(error)}")
        return replies.closed
    names = set(spec.get("names") or ())
    for case in spec["cases"]:
        names |= {name for name in _called_names(case) if name not in namespace and not hasattr(builtins, name)}
    for name in names:
        namespace[name] = proxy_for(name)
    sys.setrecursionlimit(10_000)
    for index, case in enumerate(spec["cases"]):
        before = len(failures)
        try:
            exec(compile(case, f"case_{index}.py", "exec"), namespace)  # noqa: S102
            passed, detail = len(failures) == before, "" if len(failures) == before else failures[before]
        except BaseException as error:  # noqa: B036 - CandidateFailed, AssertionError, anything
            passed, detail = False, protocol._describe(error)
        report(index, passed, detail[:300])
        if not passed and spec.get("stop_on_first_failure"):
            break
    return replies.closed
