"""The two test formats of code datasets, and how each turns into programs for the sandbox.

- stdin/stdout cases (APPS, CodeContests, LiveCodeBench): `{"inputs": [...], "outputs": [...]}` (or the
  singular `input`/`output` of CodeContests). Each case is one run of the program with the input on
  stdin; its stdout must equal the expected output up to whitespace (and, optionally, a float tolerance).
- assert-style (HumanEval, MBPP): `{"test": "...", "entry_point": "..."}`, optionally with `prompt` (the
  problem's own code: HumanEval's helpers, such as `poly` or `encode_cyclic`, that some checks call),
  `test_imports` and `test_setup_code` (MBPP). Top-level `assert` statements are the cases and the rest of
  `test` is setup; a `test` that only defines `check(candidate)` (HumanEval) is one case,
  `check(<entry_point>)`. They run on the trusted side (rewards.code.sandbox.run_judged): the setup and cases
  in the judge, the solution's functions in the sandbox, called through proxies with plain data.

The dataset column `tests` may hold the dict or its JSON string.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class StdioTests:
    """stdin/stdout cases: run the program once per input, compare its stdout with the output."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class AssertTests:
    """Assert-style cases: `setup` runs in the judge, then each case in the same namespace, where `names`
    (the entry point) and any other undefined function that a case calls are the solution's, by proxy."""

    setup: str
    cases: tuple[str, ...]
    names: tuple[str, ...] = ()


def _as_text(value, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(line, str) for line in value):
        return "\n".join(value)  # some datasets store an input or output as a list of lines
    raise ValueError(f"{what} must be a string or a list of lines, not {type(value).__name__}")


def _stdio_tests(spec: dict) -> StdioTests:
    if spec.get("fn_name"):
        raise ValueError("call-based tests (fn_name) are not supported; use stdin/stdout or assert tests")
    inputs = spec.get("inputs", spec.get("input"))
    outputs = spec.get("outputs", spec.get("output"))
    if not isinstance(inputs, (list, tuple)) or not isinstance(outputs, (list, tuple)):
        raise ValueError("inputs and outputs must be lists")
    if len(inputs) != len(outputs) or not inputs:
        raise ValueError(f"need as many inputs as outputs, at least one: got {len(inputs)} and {len(outputs)}")
    return StdioTests(
        tuple(_as_text(value, "an input") for value in inputs), tuple(_as_text(value, "an output") for value in outputs)
    )


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _assert_tests(spec: dict) -> AssertTests:
    setup_parts = [_as_text(spec.get(key) or "", key) for key in ("prompt", "test_imports", "test_setup_code")]
    if not _parses(setup_parts[0]):  # a prompt in words, not code: nothing the tests can call
        setup_parts[0] = ""
    setup = "\n".join(part for part in setup_parts if part.strip())
    entry_point = spec.get("entry_point")
    names = (entry_point,) if isinstance(entry_point, str) and entry_point.isidentifier() else ()
    test = spec.get("test", spec.get("test_list"))
    if isinstance(test, (list, tuple)):  # MBPP's test_list: one assert per element
        cases = tuple(case for case in test if isinstance(case, str) and case.strip())
        if not cases:
            raise ValueError("test_list holds no assert")
        return AssertTests(setup, cases, names)
    if not isinstance(test, str) or not test.strip():
        raise ValueError("test must be a non-empty string")
    try:
        tree = ast.parse(test)
    except SyntaxError as error:
        raise ValueError(f"the test code does not parse: {error}") from error
    cases, rest = [], []
    for node in tree.body:
        segment = ast.get_source_segment(test, node) or ast.unparse(node)
        (cases if isinstance(node, ast.Assert) else rest).append(segment)
    setup = "\n".join(part for part in (setup, *rest) if part.strip())
    if cases:
        return AssertTests(setup, tuple(cases), names)
    defines_check = any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in tree.body)
    if defines_check and names:
        return AssertTests(setup, (f"check({names[0]})",), names)
    return AssertTests("", (test,), names)  # a test we cannot split: it passes if it runs without raising


def parse_tests(tests) -> StdioTests | AssertTests:
    """The test cases of one row; ValueError (with the reason) for a value that is neither format."""
    if isinstance(tests, (str, bytes)):
        try:
            tests = json.loads(tests)
        except ValueError as error:
            raise ValueError(f"tests is not valid JSON: {error}") from error
    if not isinstance(tests, dict):
        raise ValueError(f"tests must be a dict or its JSON string, not {type(tests).__name__}")
    if any(key in tests for key in ("inputs", "outputs", "input", "output")):
        return _stdio_tests(tests)
    if "test" in tests or "test_list" in tests:
        return _assert_tests(tests)
    raise ValueError(f"tests has neither inputs/outputs nor test: keys {sorted(tests)}")


# What str.splitlines ends a line at; each is whitespace to str.split as well.
_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
_LINE_BREAK_SET = frozenset(_LINE_BREAKS)


def _tokens_close(actual: str, expected: str, tolerance: float) -> bool:
    if actual == expected:
        return True
    try:
        return math.isclose(float(actual), float(expected), rel_tol=tolerance, abs_tol=tolerance)
    except ValueError:
        return False


def _line_ends(text: str, tokens: list[str]) -> list[bool]:
    """For each token after the first of `text` (its tokens in order, as str.split gives them): whether a line
    ends between it and the one before, i.e. whether the whitespace between them holds a line break."""
    ends, position = [], 0
    for index, token in enumerate(tokens):
        start = text.find(token, position)  # only whitespace lies before it, so its first occurrence is it
        if index:
            gap = text[position:start]
            ends.append(gap in _LINE_BREAK_SET if len(gap) == 1 else any(mark in gap for mark in _LINE_BREAKS))
        position = start + len(token)
    return ends


def outputs_match(actual: str, expected: str, float_tolerance: float | None = None) -> bool:
    """Equal up to whitespace: the same non-blank lines with the same tokens, spacing ignored.

    With `float_tolerance`, tokens that both read as numbers may differ by that much (absolute or relative),
    for problems whose answers are real numbers printed to a precision the checker does not fix.

    The caller pays for this, outside every run's budget (issue 58), so what it costs is bounded by the
    expected output, not by what the program printed. The program's output is split into at most one token
    more than the expected output has (str.split with maxsplit, which stops there), so an output with more
    tokens is refused without being split whole; only when the tokens agree is the line structure compared,
    by the whitespace between them, with string searches. Every step is a C loop over the text at most once:
    the worst output under the 1 MB cap costs about what reading it costs. At b6ef81d the output was split
    whole into lines, then tokens: 499,999 short lines cost the trainer ~160-220 ms of CPU a case, 98x a short
    answer's; now 1.6x (scripts/bench/caller_cost.py measures it).
    """
    wanted = expected.split()
    got = actual.split(None, len(wanted))  # one element more than wanted: there are more tokens than wanted
    if len(got) != len(wanted):
        return False
    if got != wanted and (
        float_tolerance is None
        or not all(_tokens_close(a, e, float_tolerance) for a, e in zip(got, wanted, strict=True))
    ):
        return False
    return _line_ends(actual, got) == _line_ends(expected, wanted)
