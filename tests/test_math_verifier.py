"""rewards.math: extraction, anti-hacking rules, exact numbers, unreadable golds, the reward function,
and calls from threads and from daemonic worker processes."""

from __future__ import annotations

import logging
import multiprocessing
import threading

import pytest

from rewards import get_reward
from rewards.math import boxed_answers, extract_answer, math_accuracy, verify, verify_batch


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so \\boxed{42}", "42"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\fbox{7}", "7"),
        ("\\boxed {7}", "7"),
        ("\\boxed{\\boxed{5}}", "5"),
        ("\\boxed{ \\boxed{5} }", "5"),
        ("<think>\\boxed{3}</think> The answer is \\boxed{5}", "5"),
        ("<think>\\boxed{3}</think> no box after thinking", None),
        ("<think>\\boxed{3} never closed", None),
        ("\\boxed{}", None),
        ("\\boxed{unbalanced", None),
        ("no answer", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_fallbacks_are_off_by_default_and_read_the_last_answer_line_when_on():
    text = "Answer: 3\nWait, let me redo it.\nThe final answer is $12$."
    assert extract_answer(text) is None
    assert extract_answer(text, fallbacks=True) == "12"
    assert verify("12", text, fallbacks=True).correct is True
    assert verify("12", text).correct is False


def test_nested_boxes_count_once_as_the_outer_box():
    assert boxed_answers("\\boxed{\\boxed{1}+\\boxed{2}} and \\fbox{x}") == ["\\boxed{1}+\\boxed{2}", "x"]


@pytest.mark.parametrize(
    "gold, completion, correct, reason",
    [
        ("7", "<think>\nt=v\nv=7\n</think>\n\\boxed{7}", True, "exact"),
        ("7", "\\boxed{07}", True, "exact"),
        ("7", "\\boxed{8}", False, "exact"),
        ("1000", "\\boxed{1,000}", True, "exact"),
        ("1000", "\\boxed{1{,}000}", True, "exact"),
        ("32349", "\\boxed{32,\\! 349}", True, "exact"),
        ("0.001", "\\boxed{0.0010000001}", False, "exact"),  # math-verify rounds to 6 digits and accepts it
        ("\\frac{1}{2004!}", "\\boxed{\\frac{1}{2006!}}", False, "exact"),  # accepted by math-verify too
        ("\\frac12", "\\boxed{0.5}", True, "exact"),  # bare LaTeX gold
        ("3/4", "\\boxed{\\dfrac{3}{4}}", True, "exact"),
        ("5", "\\boxed{x = 5}", True, "exact"),
        ("16386.17", "worth \\boxed{\\$16,386.17}", True, "exact"),
        ("\\sqrt{2}", "\\boxed{\\sqrt 2}", True, "math-verify"),
        ("\\sqrt{2}", "\\boxed{\\sqrt 3}", False, "far apart"),  # constants far apart: decided without sympy
        ("(1,2)", "\\boxed{(1, 2)}", True, "math-verify"),
        ("x^2+1", "\\boxed{1 + x^{2}}", True, "math-verify"),
    ],
)
def test_verify(gold, completion, correct, reason):
    verdict = verify(gold, completion)
    assert verdict.correct is correct, verdict
    assert reason in verdict.reason


@pytest.mark.parametrize(
    "gold, completion, reason",
    [
        ("4", "first \\boxed{3}, then \\boxed{4}", "distinct boxed"),
        ("4", "\\boxed{3 \\text{ or } 4}", "alternatives"),
        ("42", "\\boxed{41, 42, 43}", "alternatives"),
        ("2", "\\boxed{\\pm 2}", "alternatives"),
        ("3", "\\boxed{x = 3 \\lor x = 4}", "alternatives"),
        ("32349", "\\boxed{32, 349}", "alternatives"),  # a comma and a plain space: a list, not thousands
        ("42", "\\boxed{\uff14\uff12}", "look-alike"),
        ("42", "\\boxed{}", "empty answer"),
        ("42", "the answer is 42", "no boxed answer"),
        ("42", "\\boxed{" + "9" * 2000 + "}", "longer than"),
    ],
)
def test_hacks_score_zero_with_a_reason(gold, completion, reason):
    verdict = verify(gold, completion)
    assert verdict.correct is False
    assert reason in verdict.reason


def test_repeating_the_same_answer_is_fine_even_in_other_spellings():
    assert verify("7", "\\boxed{7} so \\boxed{7}").correct is True
    assert verify("\\frac{1}{2}", "\\boxed{\\frac12} i.e. \\boxed{0.5}").correct is True


def test_a_multi_valued_gold_may_be_answered_one_box_per_value():
    assert verify("(2, 2), (6, 2)", "\\boxed{(2, 2)} and \\boxed{(6, 2)}").correct is True
    assert verify("1, 2", "\\boxed{1}, \\boxed{2}, \\boxed{3}").correct is False


def test_gold_from_a_worked_solution_uses_its_boxed_answer():
    assert verify("so the total is $\\boxed{12}$.", "\\boxed{12}").correct is True


def test_unreadable_gold_is_never_scored_and_warns_once_per_row(caplog):
    caplog.set_level(logging.WARNING, logger="rewards.math")
    golds = ["", "", None]
    verdicts = verify_batch(golds, ["\\boxed{1}"] * 3, ids=["bad-row", "bad-row", "other-row"])
    assert [verdict.correct for verdict in verdicts] == [None, None, None]
    messages = [record.getMessage() for record in caplog.records]
    assert sum("bad-row" in message for message in messages) == 1
    assert sum("other-row" in message for message in messages) == 1
    assert math_accuracy(["\\boxed{1}"], answer=[""]) == [None]


def test_unparsable_gold_text_is_none_not_one():
    verdict = verify("\\begin{}", "\\boxed{\\begin{}}")
    assert verdict.correct is None


def test_reward_accepts_text_and_chat_completions():
    completions = ["\\boxed{3}", [{"role": "assistant", "content": "<think>a</think>\\boxed{4}"}], None]
    assert math_accuracy(completions, answer=["3", "3", "3"], id=["a", "b", "c"]) == [1.0, 0.0, 0.0]
    configured = get_reward("math_accuracy", timeout_s=1.0)
    assert configured.__name__ == "math_accuracy"
    assert configured(["\\boxed{\\sqrt{4}}"], answer=["2"]) == [1.0]


def _reward_in_child(queue) -> None:
    queue.put(math_accuracy(["\\boxed{\\frac{\\sqrt{8}}{2}}", "\\boxed{5}"], answer=["\\sqrt{2}", "5"]))


def test_reward_from_a_thread_and_from_a_daemonic_process():
    results = []
    thread = threading.Thread(target=lambda: results.append(math_accuracy(["\\boxed{\\sqrt{9}}"], answer=["3"])))
    thread.start()
    thread.join(timeout=60)
    assert results == [[1.0]]

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_reward_in_child, args=(queue,), daemon=True)  # may not have mp children
    process.start()
    assert queue.get(timeout=120) == [1.0, 1.0]
    process.join(timeout=30)
    assert process.exitcode == 0


def test_batch_results_do_not_depend_on_order_or_duplicates():
    golds = ["\\sqrt{2}", "\\pi", "7", "\\sqrt{2}"]
    completions = ["\\boxed{\\sqrt{2}}", "\\boxed{3.14}", "\\boxed{7}", "\\boxed{2^{1/2}}"]
    forward = [verdict.correct for verdict in verify_batch(golds, completions)]
    backward = [verdict.correct for verdict in verify_batch(golds[::-1], completions[::-1])][::-1]
    assert forward == backward == [True, False, True, True]


@pytest.mark.parametrize(
    "gold, completion",
    [
        ("0.001", "\\boxed{0.0010000001}"),
        ("\\frac{1}{2004!}", "\\boxed{\\frac{1}{2006!}}"),
    ],
)
def test_plain_math_verify_accepts_these_and_we_do_not(gold, completion):
    """Why exact comparison: math-verify alone rounds to 6 digits."""
    from math_verify import parse
    from math_verify import verify as plain_verify

    assert plain_verify(parse(f"${gold}$"), parse(completion)) is True
    assert verify(gold, completion).correct is False


# ---------------------------------------------------------------- answer statements (fallbacks)


@pytest.mark.parametrize(
    "text",
    [
        "Adding them up gives 172 in all.\nSo, the answer is 172.",
        "So the answer is $172$.",
        "the answer is: 172",
        "THE ANSWER IS 172",
        "Final answer: 172",
        "**Final Answer:** 172",
        "**Answer**: $172$",
        "answer = 172",
        "My answer is \\(172\\).",
        "The final answer is:\n\n$$172$$",
        "So, the answer is 172. Let me know if you need more detail.",
        "Final Answer: The final answer is $172$. I hope it is correct.",
        "Answer: 5\nWait, that was wrong: 172 is right.\nSo the answer is 172.",
    ],
)
def test_fallbacks_read_the_last_answer_statement(text):
    assert extract_answer(text, fallbacks=True) == "172"
    assert verify("172", text, fallbacks=True).correct is True
    off = verify("172", text)
    assert off.correct is False and off.reason == "no boxed answer"  # fallbacks stay off by default


@pytest.mark.parametrize(
    "text",
    [
        "So the answer is 5 or 6.",
        "The answer is either 5 or 6.",
        "The answer is maybe 5.",
        "The answer is probably 5.",
        "The answer is about 5.",
        "The answer is not 6, it is 5",
        "The answer is 5. Or maybe 6.",
        "Answer: 5 (or 6)",
        "The answer is 5 if n is odd",
    ],
)
def test_a_hedged_answer_statement_scores_zero(text):
    verdict = verify("5", text, fallbacks=True)
    assert verdict.correct is False
    assert verdict.reason == "hedged answer statement"
    assert extract_answer(text, fallbacks=True) is None


def test_listed_statement_answers_are_alternatives():
    verdict = verify("5", "The answer is 5, 6", fallbacks=True)
    assert verdict.correct is False and "alternatives" in verdict.reason


def test_a_box_still_wins_over_a_statement():
    assert verify("4", "The answer is 3.\n\\boxed{4}", fallbacks=True).correct is True


def test_without_a_box_or_a_statement_the_reason_names_both():
    verdict = verify("172", "I think we add them: 172", fallbacks=True)
    assert verdict.correct is False
    assert verdict.reason == "no boxed answer and no 'the answer is' statement"
    assert verify("172", "I think we add them: 172").reason == "no boxed answer"


# ---------------------------------------------------------------- require_number

SMUGGLED = [  # (gold, completion): an expression that evaluates to the gold, accepted without the option
    ("12", "\\boxed{7+5}"),
    ("12", "\\boxed{7 + 5}"),
    ("12", "\\boxed{3*4}"),
    ("12", "\\boxed{3 \\times 4}"),
    ("12", "\\boxed{2 \\cdot 6}"),
    ("12", "\\boxed{3×4}"),  # a unicode operator
    ("12", "\\boxed{24/2}"),
    ("12", "\\boxed{\\frac{24}{2}}"),
    ("12", "\\boxed{\\dfrac{24}{2}}"),
    ("12", "\\boxed{12/1}"),
    ("12", "\\boxed{2^2*3}"),
    ("12", "\\boxed{12^1}"),
    ("12", "\\boxed{\\sqrt{144}}"),
    ("12", "\\boxed{(7+5)}"),
    ("12", "\\boxed{\\left(7+5\\right)}"),
    ("12", "\\boxed{{7}+{5}}"),
    ("12", "\\boxed{\\displaystyle 7+5}"),
    ("12", "\\boxed{\\text{7+5}}"),
    ("12", "\\boxed{10+2=12}"),
    ("12", "\\boxed{12 = 7+5}"),
    ("12", "\\boxed{x = 7+5}"),
    ("12", "\\boxed{--12}"),
    ("12", "\\boxed{1.2 \\times 10^1}"),
    ("12", "\\boxed{12!/11!}"),
    ("12", "\\boxed{12} or \\boxed{7+5}"),  # one box a number, the other stated with it not
    ("12", "\\boxed{7+5}, \\boxed{12}"),
    ("3/4", "\\boxed{6/8}"),
    ("3/4", "\\boxed{\\frac{6}{8}}"),
    ("-3", "\\boxed{-(3)}"),
    ("402", "\\boxed{17 * 23 + 11}"),  # the case: "Compute 17 * 23 + 11." copied into the box
]


@pytest.mark.parametrize("gold, completion", SMUGGLED)
def test_require_number_rejects_an_expression_that_evaluates_to_the_gold(gold, completion):
    assert verify(gold, completion).correct is True  # the attack works without the option
    verdict = verify(gold, completion, require_number=True)
    assert verdict.correct is False
    assert verdict.reason == "an expression, not a number"


def test_require_number_rejects_a_statement_of_an_expression():
    verdict = verify("12", "So the answer is 7 + 5.", fallbacks=True, require_number=True)
    assert verdict.correct is False and verdict.reason == "an expression, not a number"


def test_require_number_says_not_a_number_for_other_text():
    verdict = verify("12", "\\boxed{1 2}", require_number=True)
    assert verdict.correct is False and verdict.reason == "not a number"


@pytest.mark.parametrize(
    "gold, completion",
    [
        ("12", "\\boxed{12}"),
        ("12", "\\boxed{ 12 }"),
        ("12", "\\boxed{12.0}"),
        ("12", "\\boxed{+12}"),
        ("12", "\\boxed{{12}}"),
        ("12", "\\boxed{\\mathbf{12}}"),
        ("12", "\\boxed{\\$12}"),
        ("12", "\\$\\boxed{12}"),
        ("12", "\\boxed{12\\%}"),
        ("12", "\\boxed{12 \\text{ apples}}"),
        ("12", "\\boxed{x = 12}"),
        ("12", "So, the answer is 12."),
        ("-3", "\\boxed{-3}"),
        ("-3", "\\boxed{\u22123}"),  # a unicode minus sign
        ("3/4", "\\boxed{\\frac{3}{4}}"),
        ("3/4", "\\boxed{\\dfrac{3}{4}}"),
        ("3/4", "\\boxed{\\tfrac34}"),
        ("3/4", "\\boxed{3/4}"),
        ("3/4", "\\boxed{0.75}"),
        ("\\frac{3}{4}", "\\boxed{3/4}"),
        ("-3/4", "\\boxed{-\\frac{3}{4}}"),
        ("-3/4", "\\boxed{\\frac{-3}{4}}"),
        ("0.5", "\\boxed{.5}"),
        ("1000", "\\boxed{1,000}"),
        ("1000", "\\boxed{1{,}000}"),
        ("1000", "\\boxed{1\\,000}"),
        ("32349", "\\boxed{32,\\! 349}"),
        ("16386.17", "worth \\boxed{\\$16,386.17}"),
        ("30", "\\boxed{30^\\circ}"),
        ("2^{10}", "\\boxed{2^{10}}"),  # written as the gold: no policy can know that spelling otherwise
        ("2^{10}", "\\boxed{1024}"),
        ("7", "<think>\nt=v\nv=7\n</think>\n\\boxed{7}"),
    ],
)
def test_require_number_accepts_honest_number_forms(gold, completion):
    verdict = verify(gold, completion, fallbacks=True, require_number=True)
    assert verdict.correct is True, verdict


@pytest.mark.parametrize(
    "gold, completion",
    [
        ("x^2+1", "\\boxed{1 + x^{2}}"),
        ("\\sqrt{2}", "\\boxed{\\frac{\\sqrt{8}}{2}}"),
        ("(1,2)", "\\boxed{(1, 2)}"),
        ("12\\%", "\\boxed{12\\%}"),
    ],
)
def test_require_number_leaves_golds_that_are_not_numbers_alone(gold, completion):
    assert verify(gold, completion, require_number=True).correct is True


def test_require_number_per_completion_and_off_by_default():
    golds, completions = ["12", "12", "12"], ["\\boxed{7+5}"] * 3
    verdicts = verify_batch(golds, completions, require_number=[True, False, None])
    assert [verdict.correct for verdict in verdicts] == [False, True, True]
    assert verify("12", "\\boxed{7+5}").correct is True  # real sets (MATH, AIME) keep today's verdicts
    with pytest.raises(ValueError, match="require_number"):
        verify_batch(golds, completions, require_number=[True])


def test_the_reward_follows_each_rows_column_unless_configured():
    completions = ["\\boxed{7+5}", "\\boxed{7+5}", "\\boxed{12}"]
    columns = {"answer": ["12", "12", "12"], "require_number": [True, False, True]}
    assert math_accuracy(completions, **columns) == [0.0, 1.0, 1.0]
    assert math_accuracy(completions, answer=columns["answer"]) == [1.0, 1.0, 1.0]  # rows without the column
    strict = get_reward("math_accuracy", require_number=True)
    assert strict(completions, answer=columns["answer"]) == [0.0, 0.0, 1.0]
    lenient = get_reward("math_accuracy", require_number=False)
    assert lenient(completions, **columns) == [1.0, 1.0, 1.0]
    text_column = {"answer": ["12", "12"], "require_number": ["false", "true"]}  # as a CSV would hold it
    assert math_accuracy(completions[:2], **text_column) == [1.0, 0.0]
