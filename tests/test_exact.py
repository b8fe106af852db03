"""rewards/math/exact.py against an independent evaluation: random expressions are written both in LaTeX (for
the parser) and as Python over Fraction (evaluated by Python itself)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from rewards.math.exact import HUGE, exact_equal, exact_value


def random_expression(rng: random.Random, depth: int) -> tuple[str, str]:
    """(LaTeX, Python) renderings of one random expression."""
    if depth == 0 or rng.random() < 0.3:
        kind = rng.choice(["int", "decimal", "fact"])
        if kind == "int":
            n = rng.randint(0, 999)
            return str(n), f"Fraction({n})"
        if kind == "decimal":
            whole, frac = rng.randint(0, 99), rng.randint(0, 999)
            return f"{whole}.{frac:03d}", f"Fraction('{whole}.{frac:03d}')"
        n = rng.randint(0, 12)
        return f"{n}!", f"Fraction(math.factorial({n}))"
    op = rng.choice(["+", "-", "*", "/", "frac", "pow", "neg", "paren"])
    a_tex, a_py = random_expression(rng, depth - 1)
    b_tex, b_py = random_expression(rng, depth - 1)
    if op in "+-":
        return f"{a_tex} {op} ({b_tex})", f"({a_py}) {op} ({b_py})"
    if op == "*":
        return f"{{{a_tex}}} \\cdot {{{b_tex}}}", f"({a_py}) * ({b_py})"
    if op == "/":
        return f"({a_tex}) / ({b_tex})", f"({a_py}) / ({b_py})"
    if op == "frac":
        return f"\\frac{{{a_tex}}}{{{b_tex}}}", f"({a_py}) / ({b_py})"
    if op == "pow":
        k = rng.randint(-3, 4)
        return f"\\left({a_tex}\\right)^{{{k}}}", f"({a_py}) ** {k}"
    if op == "neg":
        return f"-({a_tex})", f"-({a_py})"
    return f"({a_tex})", f"({a_py})"


def test_random_expressions_match_python_fraction_arithmetic():
    rng = random.Random(0)
    checked = 0
    for _ in range(3000):
        tex, python = random_expression(rng, depth=3)
        try:
            expected = eval(python, {"Fraction": Fraction, "math": math})  # our own generated text only
        except ZeroDivisionError:
            assert exact_value(tex) is None, tex
            continue
        assert exact_value(tex) == expected, (tex, python)
        checked += 1
    assert checked > 2500


@pytest.mark.parametrize(
    "text, value",
    [
        ("42", Fraction(42)),
        ("-3", Fraction(-3)),
        ("1,000", Fraction(1000)),
        ("11,\\! 111,\\! 100", Fraction(11111100)),
        ("4{,}000", Fraction(4000)),
        ("\\frac12", Fraction(1, 2)),
        ("\\dfrac{3}{4}", Fraction(3, 4)),
        ("\\frac{1}{2004!}", Fraction(1, math.factorial(2004))),
        ("10^{-3}", Fraction(1, 1000)),
        ("2^3", Fraction(8)),
        ("1^{9^{9^{9}}}", Fraction(1)),
        ("\\$16.17", Fraction("16.17")),
    ],
)
def test_values(text, value):
    assert exact_value(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "2^10",  # LaTeX reads 2^1 followed by 0: ambiguous, left to math-verify
        "\\frac123",
        "5!!",  # double factorial or factorial of a factorial
        "3/0",
        "0^{-1}",
        "(-1)^{9^{9^{9}}}",
        "2^{-9^{9^{9}}}",  # tiny, not huge: the sign of a huge exponent matters
        "\\sqrt{2}",
        "x",
        "32, 349",
        "\uff14\uff12",  # fullwidth digits are not digits here
        "1" * 1001,
    ],
)
def test_not_exact(text):
    assert exact_value(text) is None


def test_huge_values_are_never_computed_and_never_equal_an_ordinary_number():
    for text in ("9^{9^{9^{9}}}", "100000!", "2^{2^{20}}", "-9^{9^{9^{9}}}"):
        assert exact_value(text) is HUGE
    assert exact_equal("7", "9^{9^{9^{9}}}") is False
    assert exact_equal("9^{9^{9^{9}}}", "9^{9^{9^{9}}}") is None  # undecidable here: left to the slow path
    assert exact_equal("0.001", "0.0010000001") is False
    assert exact_equal("\\frac{1}{2004!}", "\\frac{1}{2006!}") is False
    assert exact_equal("0.5", "\\frac{1}{2}") is True
