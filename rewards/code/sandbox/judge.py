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

No feedback (issue 37). A program must learn nothing about its answers while it runs: if the judge stopped
calling after a wrong answer, "how far did the calls get" would tell it which answer was wrong, and a
program that wrote that down somewhere (any state that outlives the run, or another run alive beside it)
could replay, run after run, what got past. So the judge works in two phases:

1. Live, while the program runs: the tests execute with every answer replaced by `UNSEEN`, a stand-in
   that plays a right answer: every comparison with it holds (`==`, `!=`, `<`, ... are all True), it is
   true, empty to iteration and absorbs any operation (`_Unseen` says why); the real replies are only read
   and recorded, never decoded or compared. Every `assert` is rewritten to record its outcome and go on
   (`_AssertsGoOn`). What the tests ask, in which order and when, is therefore a function of the tests
   alone: the same for a right answer, a wrong one, an exception or no answer at all.
2. After the run (the launcher has ended the program's side and says so): the tests execute again, from a
   fresh namespace and the same random seed, each call answered from the record; here the answers are
   decoded and compared, and each case's verdict is reported. A call that differs from the one recorded
   at its place (a test whose next input depends on an earlier answer) cannot be answered without feedback:
   it fails its case, with that reason. Every built-in code set's canonical solutions pass this way (tests).

Replies are read within bounds (`_Replies`, issue 58): one past MAX_MESSAGE_BYTES fails its case unread and ends
the live phase at once; end of file (the program ended, or closed its channel and lingers) ends it too, the
program getting a moment to exit by itself (supervise.py). Either way its slot is free within a second.

A case fails when an assert in it fails, when it raises, and also when any call it made to the candidate
failed (the candidate raised, returned something that is not plain data, or died), even if the test code
caught that error: the proxy raises `CandidateFailed`, a BaseException that an `except Exception` in a test
does not swallow.

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
import random
import sys

import sandbox_protocol as protocol

MAX_RECORDED_BYTES = 64 * 1024 * 1024  # replies kept for the verdicts; past this, a call's reply is not kept


class CandidateFailed(BaseException):  # noqa: N818 - it is not an error of the judge's own
    """A call to the candidate did not return plain data."""


class _Unseen:
    """What the tests hold in place of every answer while the program runs. It behaves as a right answer
    would: any comparison with it holds (==, !=, <, ...), it is true, and it absorbs any operation. So the tests take, while
    the program runs, the path that a correct program's answers take them on (`a == x and b == y` asks both,
    `all(...)` asks every item), whatever was really answered; after the run a wrong answer only asks less."""

    __slots__ = ()

    def __eq__(self, other):
        return True

    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__  # whatever a test checks of a right answer holds

    def __hash__(self):
        return 0

    def __bool__(self):
        return True

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())

    def __contains__(self, item):
        return True

    def __float__(self):
        return 0.0

    def __int__(self):
        return 0

    __index__ = __int__

    def __complex__(self):
        return 0j

    def __repr__(self):
        return "<an answer not seen during the run>"

    def __format__(self, spec):
        return repr(self)

    def _same(self, *args, **kwargs):
        return self

    __getitem__ = __call__ = __neg__ = __pos__ = __abs__ = __invert__ = __round__ = __trunc__ = _same
    __floor__ = __ceil__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __divmod__ = _same
    __rdivmod__ = __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _same
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __matmul__ = __rmatmul__ = _same

    def __getattr__(self, name):
        return self


UNSEEN = _Unseen()


class _AssertsGoOn(ast.NodeTransformer):
    """`assert test, message` becomes: evaluate `test`, then `message` (always: were the message evaluated only
    when the test fails, as Python does, a message that calls the candidate again, as some of HumanEval's do,
    would be a call that comes only after a wrong answer), and record a failure if the test was false or
    raised; then go on. A failed comparison never changes what the tests ask next."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:  # noqa: N802 - NodeTransformer's naming
        def guarded(value: ast.expr, target: str, on_error: ast.expr) -> ast.Try:
            store = ast.Assign([ast.Name(target, ast.Store())], value)
            fallback = ast.Assign([ast.Name(target, ast.Store())], on_error)
            handler = ast.ExceptHandler(ast.Name("BaseException", ast.Load()), "__judge_error__", [fallback])
            return ast.Try([store], [handler], [], [])

        outcome = ast.UnaryOp(ast.Not(), ast.UnaryOp(ast.Not(), node.test))
        record = ast.Call(
            ast.Name("__judge_assert__", ast.Load()),
            [ast.Name("__judge_outcome__", ast.Load()), ast.Name("__judge_message__", ast.Load())],
            [],
        )
        statements = [
            guarded(outcome, "__judge_outcome__", ast.Name("__judge_error__", ast.Load())),
            guarded(node.msg or ast.Constant(None), "__judge_message__", ast.Constant(None)),
            ast.Expr(record),
        ]
        return [ast.copy_location(statement, node) for statement in statements]


class _AssertsAskAll(ast.NodeTransformer):
    """While the program runs, within an assert: `and`/`or` evaluate every operand and `any`/`all` every item,
    so that the calls an assert would make for a right answer are all asked even where a value the stand-in
    cannot play (a `len`, an `is`) would have cut the assert short. Only asserts: the tests' own helpers,
    which build the inputs, must compute as they always do."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:  # noqa: N802
        return _EagerOperators().visit(node)


class _EagerOperators(ast.NodeTransformer):
    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:  # noqa: N802
        self.generic_visit(node)
        helper = "__judge_and__" if isinstance(node.op, ast.And) else "__judge_or__"
        return ast.copy_location(ast.Call(ast.Name(helper, ast.Load()), node.values, []), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:  # noqa: N802
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("any", "all") and len(node.args) == 1:
            node.args = [ast.Call(ast.Name("list", ast.Load()), node.args, [])]
        return node


def _eager_and(*values):
    return next((value for value in values if not value), values[-1])


def _eager_or(*values):
    return next((value for value in values if value), values[-1])


def _compile(source: str, filename: str, live: bool):
    tree = ast.parse(source, filename)
    if live:
        tree = _AssertsAskAll().visit(tree)
    tree = _AssertsGoOn().visit(tree)
    return compile(ast.fix_missing_locations(tree), filename, "exec")


ENDED = "the program ended"  # what a call gets once the reply channel is at its end (see _Replies)
TOO_LONG = "a reply past the size limit"
AFTER_TOO_LONG = "not answered: an earlier reply of the run was past the size limit, and the program was stopped"
LINGERED = "the program ended: it closed its reply channel without exiting, and was stopped"


class _Replies:
    """Lines from the sandbox, each at most MAX_MESSAGE_BYTES, as bytes; None once the channel is over.

    `closed` says why it is over: None while open, ENDED at end of file, TOO_LONG when a line ran past the limit,
    of which at most one read more than MAX_MESSAGE_BYTES is read (a 200 MB reply without a newline costs 9 MB)."""

    def __init__(self, fd: int):
        self.fd, self.buffer, self.closed = fd, bytearray(), None

    def next(self) -> bytes | None:
        # Only the bytes that arrived since the last look are searched for the end of the line, and they are
        # appended in place: an 8 MB reply read in pipe-sized chunks is linear work for the judge, not quadratic.
        searched = 0
        while (end := self.buffer.find(b"\n", searched)) < 0:
            if self.closed:
                return None
            if len(self.buffer) > protocol.MAX_MESSAGE_BYTES:
                self.closed = TOO_LONG
                self.buffer = bytearray()
                return None
            data = os.read(self.fd, 1 << 20)
            if not data:
                self.closed = ENDED
                return None
            searched = len(self.buffer)
            self.buffer += data
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        return line


def _called_names(source: str) -> set[str]:
    """Names called as functions in `source` (MBPP's asserts call the solution's function by name)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


class _Phase:
    """One execution of the setup and the cases, with `answer(case, request, failures)` behind every proxy.

    `case` is the index of the case being run (-1 during the setup); `failures` collects what went wrong in
    it: failed asserts, raised asserts, failed calls."""

    def __init__(self, spec: dict, seed: int, answer, live: bool):
        self.spec, self.answer, self.live, self.case, self.failures = spec, answer, live, -1, []
        random.seed(seed)  # tests that draw random inputs draw the same ones in both phases
        self.namespace: dict = {"__name__": "__tests__", "__builtins__": builtins, "__judge_assert__": self._asserted}
        self.namespace.update(__judge_and__=_eager_and, __judge_or__=_eager_or)
        self.setup_error = None
        try:
            if spec["setup"]:
                exec(_compile(spec["setup"], "tests.py", live), self.namespace)  # noqa: S102 - the dataset's own tests
        except BaseException as error:  # noqa: B036
            self.setup_error = f"the test setup raised {protocol._describe(error)}"
            return
        names = set(spec.get("names") or ())
        for case in spec["cases"]:
            names |= {
                name for name in _called_names(case) if name not in self.namespace and not hasattr(builtins, name)
            }
        for name in names:
            self.namespace[name] = self._proxy_for(name)

    def _asserted(self, outcome, message) -> None:
        """An assert's outcome: True, False, or what its test raised."""
        if outcome is False:
            self.failures.append(protocol._describe(AssertionError() if message is None else AssertionError(message)))
        elif outcome is not True:
            self._raised(outcome)

    def _raised(self, error: BaseException) -> None:
        self.failures.append(str(error) if isinstance(error, CandidateFailed) else protocol._describe(error))

    def _proxy_for(self, name: str):
        def candidate(*args, **kwargs):
            try:
                request = protocol.request_line(name, args, kwargs)
            except (protocol.NotPlainData, ValueError, RecursionError) as error:
                self.failures.append(f"an argument is not plain data: {error}")
                raise CandidateFailed(self.failures[-1]) from None
            return self.answer(self.case, request, self.failures)

        candidate.__name__ = name
        return candidate

    def run_case(self, index: int) -> tuple[bool, str]:
        self.case, before = index, len(self.failures)
        try:
            exec(_compile(self.spec["cases"][index], f"case_{index}.py", self.live), self.namespace)  # noqa: S102
        except BaseException as error:  # noqa: B036 - CandidateFailed, an error of the test code, anything
            self._raised(error)
        failed = self.failures[before:]
        return not failed, failed[0][:300] if failed else ""


def _live(spec: dict, seed: int, requests_fd: int, replies: _Replies) -> dict[int, list]:
    """Run the tests while the program runs, every answer UNSEEN: each case's calls, (request, raw reply), where
    a reply that was not had is the reason (a str) instead. Once the reply channel is over, the calls left are
    still made (what the tests ask does not depend on the answers), each recorded as the program having ended."""
    record: dict[int, list[tuple[bytes, bytes | str]]] = {}
    kept = 0

    def answer(case: int, request: bytes, failures: list) -> _Unseen:
        nonlocal kept
        reply: bytes | str | None = None
        already_over = replies.closed is not None
        if not already_over:
            try:
                unsent = request
                while unsent:
                    unsent = unsent[os.write(requests_fd, unsent) :]
                reply = replies.next()
            except OSError:  # the program's side has gone
                replies.closed = ENDED
        if reply is None:  # the call whose reply ran past the limit fails with that reason; later ones, unanswered
            reply = ENDED if replies.closed == ENDED else AFTER_TOO_LONG if already_over else TOO_LONG
        else:
            kept += len(reply)
            if kept > MAX_RECORDED_BYTES:
                reply = TOO_LONG  # not kept: the call fails its case, after the run
        record.setdefault(case, []).append((request, reply))
        return UNSEEN

    phase = _Phase(spec, seed, answer, live=True)
    if phase.setup_error is None:
        for index in range(len(spec["cases"])):
            phase.run_case(index)
    return record


def _verdicts(spec: dict, seed: int, record: dict[int, list], report) -> None:
    """After the run: the tests again, each call answered from the record, and each case's verdict reported.

    A call is answered by the first recorded call of its case, after the last one used, that asked the same:
    where a wrong answer makes a case ask less than it did while the program ran (`a == x and b == y` skips
    `b`), the calls it skips are passed over. A call never recorded was never asked: it fails its case."""
    cursors: dict[int, int] = {}

    def answer(case: int, request: bytes, failures: list):
        try:
            calls, cursor = record.get(case, []), cursors.get(case, 0)
            found = next((at for at in range(cursor, len(calls)) if calls[at][0] == request), None)
            if found is None:
                raise CandidateFailed(
                    "this call was not asked during the run: the test's inputs depend on an earlier answer, "
                    "which a run is never shown"
                )
            cursors[case] = found + 1
            reply = calls[found][1]
            if isinstance(reply, str):  # ENDED or TOO_LONG
                raise CandidateFailed(reply)
            if len(reply) > protocol.MAX_MESSAGE_BYTES or not reply:
                raise CandidateFailed(TOO_LONG)
            message = protocol.loads(reply)
            if "ok" not in message:
                raise CandidateFailed(f"the candidate raised {str(message.get('error'))[:300]}")
            return protocol.decode(message["ok"])
        except (Exception, CandidateFailed) as error:  # NotPlainData, a hex that is not hex, ...
            failures.append(str(error) or type(error).__name__)
            raise CandidateFailed(failures[-1]) from None

    phase = _Phase(spec, seed, answer, live=False)
    if phase.setup_error is not None:
        report(-1, False, phase.setup_error)
        return
    for index in range(len(spec["cases"])):
        report(index, *phase.run_case(index))


def judge(spec: dict, requests_fd: int, replies_fd: int, report, live_over) -> None:
    """Judge the program behind the two pipes against `spec`'s cases; `report(index, passed, detail)` each.

    `live_over(channel_ended)` is called between the two phases and returns once the program's side is gone:
    the launcher ends it at once, or, where `channel_ended` (end of file on its replies: it has most likely
    exited), after a moment's grace to exit by itself; it returns whether the side had to be ended for
    outliving that grace. Only then are answers decoded and compared."""
    replies = _Replies(replies_fd)
    sys.setrecursionlimit(10_000)
    seed = int.from_bytes(os.urandom(8), "little")
    try:
        first = replies.next()
        first = protocol.loads(first) if first is not None else None
    except protocol.NotPlainData:
        first = None
    if not first or first.get("ready") is not True:
        lingered = live_over(replies.closed == ENDED) and replies.closed == ENDED
        if first:
            why = f"the solution raised {first.get('setup_error')}"
        elif lingered:
            why = "the program closed its reply channel before it was ready, without exiting, and was stopped"
        else:
            why = f"{replies.closed or ENDED} before it was ready"
        report(-1, False, str(why)[:300])
        return
    record = _live(spec, seed, requests_fd, replies)
    if live_over(replies.closed == ENDED) and replies.closed == ENDED:  # it closed its channel and stayed
        record = {case: [(request, LINGERED if reply == ENDED else reply) for request, reply in calls]
                  for case, calls in record.items()}  # fmt: skip
    _verdicts(spec, seed, record, report)
