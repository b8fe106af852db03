"""Issue 37, the design rule: a program learns nothing about its answers while it runs.

At db84883 the judge stopped at the first failed comparison: after a wrong answer no further call came (a
HumanEval check, MBPP asserts under `code_binary`), and `code_binary` skipped the stdin/stdout runs after a
failed case. "How far did the calls get" told a program which answer was wrong; written down anywhere that
outlives the run, it let a program that computes nothing learn the answers run after run. Now every check
runs to its end and the answers are compared after the program has gone (rewards/code/sandbox/judge.py). A
program that logs every call it receives sees the same log for a right and a wrong answer: on HumanEval
(the built-in assert-style set), on the easy function set, and on every stdin/stdout set's rows, under both
code rewards.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from rewards import get_reward
from rewards.code.sandbox import run_judged
from rewards.code.tests_format import parse_tests
from tasks.code_sets import humaneval_problems, local_code_rows
from tests.support.sandbox_checks import require_namespaces

# A sample that includes the checks whose shape matters here: random inputs (38, 50), a helper from the
# prompt applied to the answer (32), assert messages that call the candidate again (77, 148), `and` in an
# assert (many); RLVR_HUMANEVAL_FULL=1 runs all 164.
SAMPLE = (0, 2, 12, 32, 38, 50, 77, 95, 107, 148, 161, 163)

LOGGER = """
import os as _log_os
_answer_of = {entry}

def {entry}(*args, **kwargs):
    _log_os.write(2, (repr((args, kwargs)) + "\\n").encode())
    answer = _answer_of(*args, **kwargs)
    return {returned}
"""
# A wrong answer of the same kind as the right one wherever that is easy, else None.
WRONG = "(not answer) if isinstance(answer, bool) else (answer + 1) if isinstance(answer, int) else None"


def _logged(problem: dict, wrong: bool) -> tuple[str, bool]:
    entry = problem["entry_point"]
    solution = problem["prompt"] + problem["canonical_solution"]
    solution += LOGGER.format(entry=entry, returned=WRONG if wrong else "answer")
    tests = parse_tests({"test": problem["test"], "entry_point": entry, "prompt": problem["prompt"]})
    result = run_judged(solution, tests.setup, tests.cases, tests.names, timeout_s=10.0)
    passed = bool(result.cases) and all(ok for ok, _ in result.cases.values())
    return result.stderr, passed


def _humaneval_sample() -> list[int]:
    return list(range(164)) if os.environ.get("RLVR_HUMANEVAL_FULL") else list(SAMPLE)


@pytest.mark.parametrize("index", _humaneval_sample())
def test_humaneval_calls_are_the_same_for_a_right_and_a_wrong_answer(index):
    require_namespaces()
    problem = humaneval_problems()[index]
    right_log, right_passed = _logged(problem, wrong=False)
    wrong_log, wrong_passed = _logged(problem, wrong=True)
    assert right_passed and not wrong_passed  # the logger itself changes nothing but the answer
    assert right_log.count("\n") >= 2
    if "random" in problem["test"]:  # inputs drawn anew in every run: the same calls, other strings
        assert wrong_log.count("\n") == right_log.count("\n")
    else:
        assert wrong_log == right_log


def test_mbpp_style_asserts_ask_every_case_after_a_wrong_answer():
    """Each top-level assert is a case of its own (the easy set, MBPP): a wrong first answer asks the rest."""
    require_namespaces()
    solution = (
        "import os\ndef add(a, b):\n    os.write(2, repr((a, b)).encode() + b'\\n')\n    return a + b + (a == 1)\n"
    )
    cases = ["assert add(1, 1) == 2", "assert add(2, 2) == 4 and add(3, 3) == 6", "assert add(0, 0) == 0"]
    result = run_judged(solution, "", cases, ["add"])
    assert result.cases == {0: (False, "AssertionError: "), 1: (True, ""), 2: (True, "")}
    assert result.stderr.splitlines() == ["(1, 1)", "(2, 2)", "(3, 3)", "(0, 0)"]


def test_a_short_circuit_in_an_assert_asks_what_a_right_answer_would():
    """`and` after a wrong answer, `all` over items: while the program runs every operand is asked; the verdict
    after the run is Python's own (a wrong first operand fails the assert)."""
    require_namespaces()
    solution = "import os\ndef f(x):\n    os.write(2, b'%d\\n' % x)\n    return -x if x == 2 else x\n"
    cases = ["assert f(1) == 1 and f(2) == 2 and f(3) == 3", "assert all(f(x) == x for x in (4, 2, 5))"]
    result = run_judged(solution, "", cases, ["f"])
    assert result.stderr.split() == ["1", "2", "3", "4", "2", "5"]
    assert [ok for ok, _ in result.cases.values()] == [False, False]


def test_a_test_whose_inputs_need_an_earlier_answer_fails_with_the_reason():
    """Such a call was never asked (it could not be, without showing the program an answer)."""
    require_namespaces()
    result = run_judged("def twice(x):\n    return 2 * x\n", "", ["assert twice(twice(3)) == 12"], ["twice"])
    assert result.cases[0][0] is False and "not asked during the run" in result.cases[0][1]


def test_random_inputs_are_drawn_alike_in_both_phases():
    require_namespaces()
    setup = "import random\nXS = [random.randrange(10**9) for _ in range(5)]\n"
    cases = ["for x in XS:\n    assert ident(x) == x\n", "assert ident(random.random()) >= 0"]
    result = run_judged("def ident(x):\n    return x\n", setup, cases, ["ident"])
    assert result.cases == {0: (True, ""), 1: (True, "")}


# ---------------------------------------------------------------- stdin/stdout sets: every case is a run


def _stdio_rows(tmp_path) -> list[dict]:
    inputs, outputs = ["1 2\n", "3 4\n", "5 6\n"], ["3\n", "7\n", "11\n"]
    files = {
        "apps": {"problem_id": 1, "question": "sum", "input_output": json.dumps({"inputs": inputs, "outputs": outputs})},
        "codecontests": {"name": "sum", "description": "sum", "public_tests": {"input": inputs[:1], "output": outputs[:1]},
                         "private_tests": {"input": inputs[1:], "output": outputs[1:]}},
        "livecodebench": {"question_id": "sum", "question_content": "sum", "public_test_cases": json.dumps(
            [{"input": i, "output": o, "testtype": "stdin"} for i, o in zip(inputs, outputs, strict=True)])},
    }  # fmt: skip
    rows = []
    for style, raw in files.items():
        path = tmp_path / f"{style}.jsonl"
        path.write_text(json.dumps(raw) + "\n")
        rows += local_code_rows(style, str(path))
    return rows


RIGHT = "```python\nimport sys\nprint(sum(map(int, sys.stdin.read().split())))\n```"
WRONG_FIRST = "```python\nimport sys\nn = sum(map(int, sys.stdin.read().split()))\nprint(n + (n == 3))\n```"


@pytest.mark.parametrize("reward_name", ["code_binary", "code_pass_rate"])
def test_every_stdio_case_runs_whatever_the_earlier_cases_answered(reward_name, tmp_path, monkeypatch):
    import rewards.code.verifier as code

    rows = _stdio_rows(tmp_path)
    assert len(rows) == 3
    runs: list[str] = []
    real = code.run_python

    def recording(program, stdin=None, **options):
        runs.append(stdin)
        return real(program, stdin=stdin, **options)

    monkeypatch.setattr(code, "run_python", recording)
    reward = get_reward(reward_name, timeout_s=5.0, max_concurrency=1)
    seen = {}
    for name, completion in (("right", RIGHT), ("wrong", WRONG_FIRST)):
        runs.clear()
        scores = reward([completion] * len(rows), tests=[row["tests"] for row in rows])
        seen[name] = (sorted(runs), scores)
    assert seen["right"][1] == [1.0] * 3
    assert seen["wrong"][1] == ([0.0] * 3 if reward_name == "code_binary" else [pytest.approx(2 / 3)] * 3)
    assert seen["wrong"][0] == seen["right"][0] == sorted(["1 2\n", "3 4\n", "5 6\n"] * 3)


def test_stop_on_first_failure_still_scores_only_the_cases_before_it():
    """A scoring rule, not a shortcut: the same score as before, with every case run."""
    tests = {"inputs": ["1 2\n", "3 4\n", "5 6\n"], "outputs": ["3\n", "7\n", "11\n"]}
    shuffled = random.Random(0).sample(range(3), 3)
    assert sorted(shuffled) == [0, 1, 2]
    reward = get_reward("code_pass_rate", timeout_s=5.0, stop_on_first_failure=True)
    assert reward([WRONG_FIRST, RIGHT], tests=[tests, tests]) == [0.0, 1.0]
