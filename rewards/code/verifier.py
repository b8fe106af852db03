"""Is this code completion correct? The code verifier and the `code_pass_rate` / `code_binary` rewards.

A completion's program is the last fenced block of the language (```python ... ```), or else its last
fenced block. It runs in the sandbox (rewards.code.sandbox) against the row's `tests` (rewards.code.tests_format):
stdin/stdout cases, one `run_python` per case, its output compared here; or assert-style tests, one
`run_judged` per completion, the tests run by the trusted judge outside the sandbox, the solution's
functions called inside it with plain data (see rewards/code/sandbox/judge.py). Runs go through a thread pool
of `max_concurrency` workers; each run is a separate, isolated process with its own hard timeout, so one
hostile program cannot hang or slow the others beyond its own limits. The default, and the most, is the
sandbox's process-wide limit (rewards.code.sandbox.process.max_runs: the cores this process may use, each run
holding one), which also holds across reward calls made at once. `timeout_s` counts the run's CPU seconds,
under a wall-clock ceiling three times as long: a correct program beside CPU hogs still passes.

Every case runs, whatever the program answered in the others (issue 37): were the cases after a failure
skipped, whether a later run came, or a later call arrived, would tell a program which of its answers was
wrong, and a program that writes that down anywhere could learn the answers across runs. So
`stop_on_first_failure` is a scoring rule only: scores count only the cases that passed before the first
failure, whatever order the pool happened to run them in, so a score does not depend on `max_concurrency`.

A row without tests (a math row in a mixed dataset) or with tests in neither format is None: TRL leaves
it out. A completion without a code block scores 0, with the reason logged, never raised.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rewards.code.sandbox import run_judged, run_python
from rewards.code.sandbox.process import max_runs
from rewards.code.tests_format import AssertTests, StdioTests, outputs_match, parse_tests
from rewards.registry import register
from rewards.text import completion_text

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 512
LANGUAGE_TAGS = {"python": {"python", "py", "python3", "py3"}}
# A fence is three or more backticks or tildes at the start of a line, then the info string, whose first
# word names the language. The block ends at a line of the same character, at least as long, and nothing else.
_OPENING_FENCE = re.compile(r"(`{3,}|~{3,})(.*)")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, code) of every closed fenced block, in order; one pass over the lines.

    A line scan rather than one regular expression: a completion full of fences that never close would
    make a lazy `.*?` rescan the rest of the text from each of them, in the training process itself.
    """
    blocks, fence, tag, body = [], None, "", []
    for line in text.splitlines():
        if fence is None:
            match = _OPENING_FENCE.fullmatch(line)
            if match and not (match[1][0] == "`" and "`" in match[2]):  # a backtick fence's info has no backtick
                fence, words, body = match[1], match[2].split(), []
                tag = words[0].lower() if words else ""
        elif line.rstrip().startswith(fence) and line.rstrip().strip(fence[0]) == "":
            blocks.append((tag, "".join(part + "\n" for part in body)))
            fence = None
        else:
            body.append(line)
    return blocks


def extract_code(completion, language: str = "python") -> str | None:
    """The last fenced block tagged `language` (aliases: py, python3), else the last fenced block, else None.

    `completion` may be a string or TRL's message list. An unclosed block (a completion cut at the length
    limit) is not code: it would fail anyway, and half a program must not pass a lenient test.
    """
    blocks = fenced_blocks(completion_text(completion))
    if not blocks:
        return None
    tags = LANGUAGE_TAGS.get(language.lower(), {language.lower()})
    tagged = [body for tag, body in blocks if tag in tags]
    return (tagged or [body for _, body in blocks])[-1]


@dataclass(frozen=True)
class CodeVerdict:
    """The verifier's decision on one completion: how many of the row's cases its program passed, and why."""

    passed: int
    total: int
    reason: str

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


@dataclass(frozen=True)
class _Options:
    language: str
    timeout_s: float
    memory_mb: int
    stop_on_first_failure: bool
    float_tolerance: float | None


class _Row:
    """The cases of one completion, filled in by pool workers."""

    def __init__(self, code: str, tests: StdioTests | AssertTests, total: int):
        self.code, self.tests, self.total = code, tests, total
        self.results: dict[int, tuple[bool, str]] = {}
        self.first_failure: int | None = None
        self.lock = threading.Lock()

    def record(self, index: int, passed: bool, detail: str) -> None:
        with self.lock:
            self.results[index] = (passed, detail)
            if not passed and (self.first_failure is None or index < self.first_failure):
                self.first_failure = index

    def verdict(self, options: _Options) -> CodeVerdict:
        limit = self.first_failure if options.stop_on_first_failure and self.first_failure is not None else self.total
        passed = sum(1 for index, (ok, _) in self.results.items() if ok and index < limit)
        if self.first_failure is None and passed == self.total:
            return CodeVerdict(passed, self.total, f"passed {passed}/{self.total}")
        failures = sorted((index, detail) for index, (ok, detail) in self.results.items() if not ok)
        reason = f"case {failures[0][0]}: {failures[0][1]}" if failures else "not run"
        return CodeVerdict(passed, self.total, reason)


def _run_stdio_case(row: _Row, index: int, options: _Options) -> None:
    tests = row.tests
    result = run_python(row.code, stdin=tests.inputs[index], timeout_s=options.timeout_s, memory_mb=options.memory_mb)
    if result.status != "ok":
        row.record(index, False, f"{result.status} ({result.reason})")
    elif outputs_match(result.stdout, tests.outputs[index], options.float_tolerance):
        row.record(index, True, "")
    else:
        row.record(index, False, "wrong answer")


def _run_assert_cases(row: _Row, options: _Options) -> None:
    tests = row.tests
    result = run_judged(
        row.code,
        tests.setup,
        tests.cases,
        tests.names,
        timeout_s=options.timeout_s,
        memory_mb=options.memory_mb,
    )
    reports = dict(result.cases)
    if result.status != "ok":  # the program died under a limit: say which, not just that it ended
        for index, (passed, detail) in reports.items():
            if not passed and "the program ended" in detail:
                reports[index] = (False, f"{result.status}: {result.reason}")
    if -1 in reports:
        for index in range(row.total):
            row.record(index, False, reports[-1][1])
        return
    for index in range(row.total):
        if index in reports:
            row.record(index, *reports[index])
        else:  # unjudged: the run ended (the memory limit, a judge out of time) before this case was decided
            detail = result.reason if result.status != "ok" else "the run ended before the case ran"
            row.record(index, False, f"{result.status}: {detail}")


def verify_code_batch(
    completions: Sequence,
    tests: Sequence,
    *,
    language: str = "python",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    max_concurrency: int | None = None,
    stop_on_first_failure: bool = False,
    float_tolerance: float | None = None,
) -> list[CodeVerdict | None]:
    """Verdicts for `completions[i]` against `tests[i]`; None where the row's tests are missing or unreadable."""
    if len(completions) != len(tests):
        raise ValueError(f"{len(completions)} completions but {len(tests)} tests")
    options = _Options(language, timeout_s, memory_mb, stop_on_first_failure, float_tolerance)
    verdicts: list[CodeVerdict | None] = [None] * len(completions)
    rows: dict[int, _Row] = {}
    for position, (completion, row_tests) in enumerate(zip(completions, tests, strict=True)):
        if row_tests is None or (isinstance(row_tests, str) and not row_tests.strip()):
            continue
        try:
            parsed = parse_tests(row_tests)
        except ValueError as error:
            logger.warning("code verifier: row %d cannot be scored: %s", position, error)
            continue
        total = len(parsed.inputs) if isinstance(parsed, StdioTests) else len(parsed.cases)
        code = extract_code(completion, language)
        if code is None or not code.strip():
            reason = f"no {language} code block" if code is None else "empty code block"
            logger.info("code verifier: completion %d scores 0: %s", position, reason)
            verdicts[position] = CodeVerdict(0, total, reason)
            continue
        rows[position] = _Row(code, parsed, total)
    limit = max_runs()  # more threads would only wait: the sandbox lets no more runs go at once
    workers = max(1, min(max_concurrency or limit, limit))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code-verifier") as pool:
        futures = []
        for row in rows.values():  # submitted in case order: a pool runs them first in, first out
            if isinstance(row.tests, StdioTests):
                futures += [pool.submit(_run_stdio_case, row, index, options) for index in range(row.total)]
            else:
                futures.append(pool.submit(_run_assert_cases, row, options))
        for future in futures:
            future.result()
    for position, row in rows.items():
        verdicts[position] = row.verdict(options)
    if logger.isEnabledFor(logging.DEBUG):
        reasons = Counter(verdict.reason.split(":")[0] for verdict in verdicts if verdict is not None)
        logger.debug("code verifier reasons: %s", dict(reasons))
    return verdicts


def verify_code(completion, tests, **options) -> CodeVerdict | None:
    """The verdict for one completion (see `verify_code_batch` for the options)."""
    return verify_code_batch([completion], [tests], **options)[0]


def _code_reward(name: str, score, stop_on_first: bool, doc: str):
    """Register, as `name`, the factory of a reward in TRL's form that scores each verdict with `score`; its
    parameters are the verifier's options, `stop_on_first_failure` defaulting to `stop_on_first`."""

    def factory(
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_mb: int = DEFAULT_MEMORY_MB,
        max_concurrency: int | None = None,
        stop_on_first_failure: bool = stop_on_first,
        float_tolerance: float | None = None,
        language: str = "python",
    ):
        options = {
            "timeout_s": timeout_s,
            "memory_mb": memory_mb,
            "max_concurrency": max_concurrency,
            "stop_on_first_failure": stop_on_first_failure,
            "float_tolerance": float_tolerance,
            "language": language,
        }

        def reward(completions, tests=None, **kwargs) -> list[float | None]:
            column = [None] * len(completions) if tests is None else list(tests)
            verdicts = verify_code_batch(list(completions), column, **options)
            return [None if verdict is None else score(verdict) for verdict in verdicts]

        reward.__name__ = name  # TRL logs a reward under its function's name
        return reward

    factory.__name__ = factory.__qualname__ = f"make_{name}"
    factory.__doc__ = doc
    return register(name, accuracy=True)(factory)


make_code_pass_rate = _code_reward(
    "code_pass_rate",
    lambda verdict: verdict.pass_rate,
    stop_on_first=False,
    doc="The fraction of the row's test cases that the completion's program passes.",
)
make_code_binary = _code_reward(
    "code_binary",
    lambda verdict: float(verdict.all_passed),
    stop_on_first=True,  # for a 0/1 score the first failure decides (every case still runs)
    doc="1.0 when the completion's program passes every test case of the row, else 0.0.",
)


code_pass_rate = make_code_pass_rate()
code_binary = make_code_binary()
