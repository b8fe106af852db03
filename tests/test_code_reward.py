"""rewards.code.verifier: code extraction, the two test formats, and the code_pass_rate / code_binary rewards."""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time

import pytest

from rewards import get_reward
from rewards.code.tests_format import AssertTests, StdioTests, outputs_match, parse_tests
from rewards.code.verifier import code_binary, code_pass_rate, extract_code, verify_code, verify_code_batch

FAST = {"timeout_s": 1.0}


def fenced(code: str, language: str = "python") -> str:
    return f"Here is my solution.\n```{language}\n{code}\n```\nDone."


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    "text, expected",
    [
        ("```python\na = 1\n```", "a = 1\n"),
        ("```python\nfirst\n```\ntext\n```python\nsecond\n```", "second\n"),
        ("```python\nwanted\n```\n```bash\nls\n```", "wanted\n"),  # the last block of the language
        ("```bash\nls\n```\n```\nplain\n```", "plain\n"),  # none of the language: the last block
        ("```py\nshort tag\n```", "short tag\n"),
        ("~~~python\ntildes\n~~~", "tildes\n"),
        ("````python\nhas ``` inside\n````", "has ``` inside\n"),
        ("```python\n```", ""),
        ("no code at all", None),
        ("```python\ncut off at the length limit", None),
        ("", None),
    ],
)
def test_extract_code(text, expected):
    assert extract_code(text) == expected


def test_extract_code_takes_linear_time_on_fences_that_never_close():
    text = "`````x\n" * 50_000 + "```python\nprint(1)\n```\n"  # all inside one unclosed five-backtick fence
    start = time.monotonic()
    assert extract_code(text) is None
    assert time.monotonic() - start < 1.0


def test_extract_code_from_chat_messages():
    messages = [{"role": "assistant", "content": fenced("print(1)")}]
    assert extract_code(messages) == "print(1)\n"


# ---------------------------------------------------------------- test formats


def test_parse_stdio_tests_from_dict_or_json():
    spec = {"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7"]}
    expected = StdioTests(("1 2\n", "3\n4"), ("3\n", "7"))
    assert parse_tests(spec) == expected
    assert parse_tests(json.dumps(spec)) == expected
    assert parse_tests({"input": ["1"], "output": ["1"]}) == StdioTests(("1",), ("1",))  # CodeContests' keys


def test_parse_assert_tests_splits_top_level_asserts():
    test = "import math\nassert f(1) == 2\nHELPER = 3\nassert f(\n    HELPER\n) == 4\n"
    assert parse_tests({"test": test}) == AssertTests(
        "import math\nHELPER = 3", ("assert f(1) == 2", "assert f(\n    HELPER\n) == 4")
    )


def test_parse_humaneval_check_is_one_case():
    test = "METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
    parsed = parse_tests({"test": test, "entry_point": "inc"})
    assert parsed.cases == ("check(inc)",) and "def check" in parsed.setup


def test_parse_mbpp_test_list():
    parsed = parse_tests({"test_list": ["assert f(1) == 1", "assert f(2) == 4"], "test_imports": ["import math"]})
    assert parsed == AssertTests("import math", ("assert f(1) == 1", "assert f(2) == 4"))


@pytest.mark.parametrize(
    "tests, message",
    [
        ({"inputs": ["1"], "outputs": []}, "as many inputs"),
        ({"inputs": [[1, 2]], "outputs": [3], "fn_name": "add"}, "call-based"),
        ({"test": "def broken(:"}, "does not parse"),
        ({"prompt": "x"}, "neither"),
        ("{not json", "not valid JSON"),
        (["assert True"], "must be a dict"),
    ],
)
def test_parse_rejects_what_it_cannot_read(tests, message):
    with pytest.raises(ValueError, match=message):
        parse_tests(tests)


@pytest.mark.parametrize(
    "actual, expected, tolerance, match",
    [
        ("1 2\n3\n", "1 2\n3", None, True),
        ("1   2 \r\n\n3\n\n", "1 2\n3\n", None, True),
        ("1 2 3", "1 2\n3", None, False),  # line structure matters
        ("Yes", "yes", None, False),
        ("0.3333333", "0.333333333", None, False),
        ("0.3333333", "0.333333333", 1e-6, True),
        ("0.33", "0.333333333", 1e-6, False),
        ("abc 1.0", "abd 1.0", 1e-6, False),
    ],
)
def test_outputs_match(actual, expected, tolerance, match):
    assert outputs_match(actual, expected, tolerance) is match


def _whole_split_match(actual: str, expected: str, tolerance: float | None) -> bool:
    """The comparison as it was written at b6ef81d (split both texts whole, then compare): the reference."""
    actual_lines = [line.split() for line in actual.splitlines() if line.strip()]
    expected_lines = [line.split() for line in expected.splitlines() if line.strip()]
    if actual_lines == expected_lines:
        return True
    if tolerance is None or len(actual_lines) != len(expected_lines):
        return False
    for actual_line, expected_line in zip(actual_lines, expected_lines, strict=True):
        if len(actual_line) != len(expected_line):
            return False
        for a, e in zip(actual_line, expected_line, strict=True):
            try:
                if a != e and not math.isclose(float(a), float(e), rel_tol=tolerance, abs_tol=tolerance):
                    return False
            except ValueError:
                return False
    return True


def test_outputs_match_agrees_with_splitting_both_texts_whole():
    """Issue 58 made the comparison lazy; on 20,000 random texts built from every kind of whitespace that
    str.split and str.splitlines know (line breaks, CRLF, form feeds, unit separators, Unicode spaces) it
    decides as the whole split did, with and without a float tolerance."""
    rng = random.Random(58)
    alphabet = ["1", "2", "1.0", "1.0000001", "x", "-0", " ", "  ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c",
                "\x1c", "\x1f", "\x85", "\u2028", "\u3000", "\xa0"]  # fmt: skip
    decided = set()
    for _ in range(20_000):
        expected = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        if rng.random() < 0.5:  # the same tokens, other whitespace: the interesting half
            actual = "".join(
                piece if piece.strip() else rng.choice(alphabet[6:]) for piece in re.split(r"(\s+)", expected)
            )
        else:
            actual = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        for tolerance in (None, 1e-6):
            want = _whole_split_match(actual, expected, tolerance)
            assert outputs_match(actual, expected, tolerance) is want, (actual, expected, tolerance)
            decided.add(want)
    assert decided == {True, False}


class _CountedOutput(str):
    """A program's output that counts what the comparison makes of it: the pieces split off, the searches."""

    def split(self, sep=None, maxsplit=-1):
        pieces = super().split(sep, maxsplit)
        self.pieces.append(len(pieces))
        return pieces

    def find(self, *args):
        self.searches += 1
        return super().find(*args)

    def splitlines(self, *args):
        raise AssertionError("the program's output was split into lines")


def _counted(text: str) -> _CountedOutput:
    output = _CountedOutput(text)
    output.pieces, output.searches = [], 0
    return output


@pytest.mark.parametrize("tolerance", [None, 1e-6])
def test_comparing_a_flood_of_output_takes_one_token_more_than_the_expected_output(tolerance):
    """The caller pays for the comparison (issue 58): a program's output is split into at most one token more
    than the expected output holds, never into all its lines, and its line structure is read only when its
    tokens agree. Counted, not timed (the timing is scripts/bench/caller_cost.py's)."""
    flood = _counted("7\n" * 499_999)
    assert outputs_match(flood, "7\n7\n", tolerance) is False
    assert (flood.pieces, flood.searches) == ([3], 0)  # "7", "7", and the rest in one piece
    blank = _counted("7" + " \n" * 499_999 + "8")
    assert outputs_match(blank, "7\n8\n", tolerance) is True
    assert (blank.pieces, blank.searches) == ([2], 2)  # the two tokens, then one search each
    assert outputs_match("7\n" * 499_999, "7\n" * 499_999, tolerance) is True  # the expected output is the bound


# ---------------------------------------------------------------- stdin/stdout problems

SUM_TESTS = {"inputs": ["1 2\n", "10 -3\n", "0 0\n"], "outputs": ["3\n", "7\n", "0\n"]}
SUM_PROGRAMS = {
    "passing": "a, b = map(int, input().split())\nprint(a + b)",
    "wrong_on_one": "a, b = map(int, input().split())\nprint(a + b if a != 10 else 0)",
    "crashing": "a, b = map(int, input().split())\nprint(a / 0)",
    "timing_out": "while True:\n    pass",
}


@pytest.mark.parametrize(
    "program, pass_rate, binary",
    [("passing", 1.0, 1.0), ("wrong_on_one", 2 / 3, 0.0), ("crashing", 0.0, 0.0), ("timing_out", 0.0, 0.0)],
)
def test_stdio_rewards(program, pass_rate, binary):
    completions = [fenced(SUM_PROGRAMS[program])]
    rate = get_reward("code_pass_rate", **FAST)(completions, tests=[SUM_TESTS])
    assert rate == [pytest.approx(pass_rate)]
    assert get_reward("code_binary", **FAST)(completions, tests=[json.dumps(SUM_TESTS)]) == [binary]


def test_stdio_reasons():
    verdict = verify_code(fenced(SUM_PROGRAMS["wrong_on_one"]), SUM_TESTS, **FAST)
    assert (verdict.passed, verdict.total, verdict.reason) == (2, 3, "case 1: wrong answer")
    verdict = verify_code(fenced(SUM_PROGRAMS["timing_out"]), SUM_TESTS, **FAST)
    assert verdict.reason.startswith("case 0: timeout")


def test_stop_on_first_failure_counts_only_the_cases_before_it():
    tests = {"inputs": ["10 -3\n", "1 2\n", "0 0\n"], "outputs": ["7\n", "3\n", "0\n"]}  # case 0 fails
    completion = fenced(SUM_PROGRAMS["wrong_on_one"])
    for concurrency in (1, 3):  # the score must not depend on the order in which a pool runs the cases
        stopped = verify_code(completion, tests, stop_on_first_failure=True, max_concurrency=concurrency, **FAST)
        assert (stopped.passed, stopped.total) == (0, 3)
    assert verify_code(completion, tests, stop_on_first_failure=False, **FAST).passed == 2


# ---------------------------------------------------------------- assert-style problems

MBPP_LIKE = {"test": "assert square(2) == 4\nassert square(3) == 9\nassert square(-1) == 1\n", "entry_point": "square"}
HUMANEVAL_LIKE = {
    "test": "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-1) == 1\n",
    "entry_point": "square",
}
SQUARE_PROGRAMS = {
    "passing": "def square(x):\n    return x * x",
    "wrong_for_negative": "def square(x):\n    return x * x if x > 0 else -1",
    "crashing_at_import": "raise RuntimeError('no')\ndef square(x):\n    return x * x",
    "timing_out": "def square(x):\n    while True:\n        pass",
    "wrong_name": "def sq(x):\n    return x * x",
}


@pytest.mark.parametrize(
    "program, mbpp_rate, humaneval_binary",
    [
        ("passing", 1.0, 1.0),
        ("wrong_for_negative", 2 / 3, 0.0),
        ("crashing_at_import", 0.0, 0.0),
        ("timing_out", 0.0, 0.0),
        ("wrong_name", 0.0, 0.0),
    ],
)
def test_assert_rewards(program, mbpp_rate, humaneval_binary):
    completions = [fenced(SQUARE_PROGRAMS[program])]
    assert get_reward("code_pass_rate", **FAST)(completions, tests=[MBPP_LIKE]) == [pytest.approx(mbpp_rate)]
    assert get_reward("code_binary", **FAST)(completions, tests=[HUMANEVAL_LIKE]) == [humaneval_binary]


def test_a_timeout_keeps_the_cases_that_finished_before_it():
    tests = {"test": "assert slow(1) == 1\nassert slow(2) == 2\nassert slow(0) == 0\n"}
    code = "def slow(x):\n    while x == 0:\n        pass\n    return x"
    verdict = verify_code(fenced(code), tests, **FAST)
    assert (verdict.passed, verdict.total) == (2, 3) and "timeout" in verdict.reason


@pytest.mark.parametrize(
    "hack",
    [
        "import sys\nsys.exit(0)",  # leave before the tests run
        "import os\nos._exit(0)",
        "exit()",
        "print('\\n' + '0' * 32 + ' [0, True, \"\"]')\nimport os\nos._exit(0)",  # forge a report line
        "import sys\nsys.stdout.close()\ndef square(x):\n    return x * x",  # but the solution is right...
    ],
)
def test_leaving_early_or_forging_reports_earns_nothing(hack):
    verdict = verify_code(fenced(hack), MBPP_LIKE, **FAST)
    if "return x * x" in hack:  # closing stdout does not silence the judge: the right answer still counts
        assert verdict.all_passed
    else:
        assert verdict.passed == 0, verdict


# ---------------------------------------------------------------- the reward functions in TRL's form


def test_no_code_block_scores_zero_with_a_logged_reason(caplog):
    with caplog.at_level(logging.INFO, logger="rewards.code.verifier"):
        scores = code_binary(["I would print the sum."], tests=[SUM_TESTS])
    assert scores == [0.0]
    assert any("no python code block" in record.getMessage() for record in caplog.records)


def test_rows_without_readable_tests_are_not_scored(caplog):
    completions = [fenced(SUM_PROGRAMS["passing"])] * 4
    with caplog.at_level(logging.WARNING, logger="rewards.code.verifier"):
        scores = code_pass_rate(completions, tests=[None, "", "{broken", SUM_TESTS])
    assert scores == [None, None, None, 1.0]
    assert any("cannot be scored" in record.getMessage() for record in caplog.records)
    assert code_pass_rate(completions[:2]) == [None, None]  # a dataset without a tests column


def test_conversational_completions_and_mixed_batches():
    completions = [
        [{"role": "assistant", "content": fenced(SUM_PROGRAMS["passing"])}],
        [{"role": "assistant", "content": fenced(SQUARE_PROGRAMS["wrong_for_negative"])}],
        [{"role": "assistant", "content": "no code"}],
    ]
    reward = get_reward("code_pass_rate", max_concurrency=2, **FAST)
    assert reward.__name__ == "code_pass_rate"
    assert reward(completions, tests=[SUM_TESTS, MBPP_LIKE, SUM_TESTS], prompts=["a", "b", "c"]) == [
        1.0,
        pytest.approx(2 / 3),
        0.0,
    ]


def test_batch_verdicts_do_not_depend_on_concurrency():
    completions = [fenced(program) for program in SUM_PROGRAMS.values()]
    tests = [SUM_TESTS] * len(completions)
    one = verify_code_batch(completions, tests, max_concurrency=1, stop_on_first_failure=True, **FAST)
    many = verify_code_batch(completions, tests, max_concurrency=4, stop_on_first_failure=True, **FAST)
    assert [(v.passed, v.total) for v in one] == [(v.passed, v.total) for v in many]


def test_float_tolerance_parameter():
    tests = {"inputs": [""], "outputs": ["0.333333333\n"]}
    completion = [fenced("print(round(1 / 3, 7))")]
    assert get_reward("code_binary", **FAST)(completion, tests=[tests]) == [0.0]
    assert get_reward("code_binary", float_tolerance=1e-6, **FAST)(completion, tests=[tests]) == [1.0]
