"""The foundation's math verifier: boxed-answer extraction and exact number comparison."""

from __future__ import annotations

import pytest

from rewards.math import extract_answer, parse_exact_number, verify


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so \\boxed{42}", "42"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\fbox{7}", "7"),
        ("\\boxed {7}", "7"),
        ("<think>\\boxed{3}</think> The answer is \\boxed{5}", "5"),
        ("<think>\\boxed{3}</think> no box after thinking", None),
        ("\\boxed{}", None),
        ("\\boxed{unbalanced", None),
        ("no answer", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "gold, completion, correct",
    [
        ("7", "<think>\nt=v\nv=7\n</think>\n\\boxed{7}", True),
        ("7", "\\boxed{07}", True),
        ("7", "\\boxed{8}", False),
        ("0.001", "\\boxed{0.0010000001}", False),  # exact, not rounded to 6 digits
        ("\\frac{1}{2}", "\\boxed{0.5}", True),
        ("3/4", "\\boxed{\\dfrac{3}{4}}", True),
        ("7", "no box", False),
    ],
)
def test_verify_numbers_exactly(gold, completion, correct):
    assert verify(gold, completion).correct is correct


def test_unreadable_gold_is_never_scored_correct():
    verdict = verify("", "\\boxed{1}")
    assert verdict.correct is None


def test_math_verify_fallback_for_expressions():
    assert verify("\\sqrt{2}", "\\boxed{\\sqrt 2}").correct is True
    assert verify("\\sqrt{2}", "\\boxed{\\sqrt 3}").correct is False


@pytest.mark.parametrize("text, value", [("12", 12), ("-3", -3), ("2.50", 2.5), ("\\frac{3}{6}", 0.5), ("1/0", None)])
def test_parse_exact_number(text, value):
    parsed = parse_exact_number(text)
    assert (parsed is None) if value is None else parsed == value
