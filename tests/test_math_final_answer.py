"""Which boxes are the final answer, golds read as a whole or not at all, and the spellings found in real
written solutions (issue 14). The snippets are taken from MATH and AIME solutions."""

from __future__ import annotations

import math

import pytest

from rewards.math import verify, verify_batch
from rewards.math.answers import final_group, tidy
from rewards.math.approx import approximate, far_apart

LONG_DIVISION = (
    "\\[\n\\begin{array}{c|cc cc}\n\\multicolumn{2}{r}{x^2} & -5 \\\\\n\\cline{2-5}\nx^2+2 & x^4 & +0x^3 & -3x^2 \\\\\n"
    "\\multicolumn{2}{r}{x^4} & & +2x^2 \\\\\n\\cline{2-4}\n\\multicolumn{2}{r}{0} & \\boxed{\\phantom{09}} & -5x^2 \\\\\n"
    "\\multicolumn{2}{r}{} & \\boxed{\\phantom{25}} & -10 \\\\\n\\end{array}\n\\]"
    "So the quotient is $x^2 - 5$, and its constant term is $\\boxed{-5}$."
)
ASYMPTOTE = (
    "[asy]\nfor (int i = 0; i <= 9; ++i) {\n  n = choose(i + j,i);\n"
    '  if (n % 2 == 0) {label("$\\boxed{" + string(n) + "}$", i*(-1,-1));}\n}\n[/asy]\n\n'
    "Thus, the number of even numbers is $1 + 3 + 2 + 3 + 7 + 6 = \\boxed{22}.$"
)
CLAIMS = (
    "$\\boxed{\\textrm{Claim 1: } O \\textrm{ is the gravity center } \\ \\tfrac {1}{4}(\\vec A + \\vec B)}$\n"
    "Let $G$ be the gravity center; then $GA + GB = 0$ and the same holds for the other pairs.\n"
    "$\\boxed{\\textrm{Claim 2: The gravity center } O \\textrm{ coincides with the circumcenter.}}$\n"
    "Since $OA = OB = OC = OD$, the volume is $\\frac{1}{3} \\cdot 48 \\cdot 42.625 = 682$, so the answer is "
    "$\\boxed{682}$."
)

SOLUTIONS_WITH_STEP_BOXES = [
    ("4", "$\\log_24=\\boxed{2}$, so $\\log_2(4^2) = \\log_2((2^2)^2) = \\log_2 (2^4) = \\boxed{4}$"),
    (
        "12",
        "its area is \\[ \\frac{1}{2}(8)(12+24)=\\boxed{144}. \\]\n\nSince $XY$ cuts $AD$ and $BC$ each in half, "
        "each of the two smaller trapezoids has height 4. Thus, the ratio of their areas is $60:84=5:7$.\n"
        "Our answer is then $5+7=\\boxed{12}$.",
    ),
    ("-5", LONG_DIVISION),
    ("22", ASYMPTOTE),
    ("682", CLAIMS),
    ("2 - b", "Dividing this by two, we have $\\frac{-2b +4}{2}$. This yields $\\boxed{-b+2}$, or $\\boxed{2 - b}$."),
    ("\\frac{639}{40}", "So he needs $\\boxed{15\\frac{39}{40}}$, i.e. $\\boxed{\\frac{639}{40}}$ cups."),
    ("204", "Lastly, $\\frac{9}{3} + 0.4 = 3.4$ hours, or $\\framebox{204}$ minutes"),
]


@pytest.mark.parametrize("gold, solution", SOLUTIONS_WITH_STEP_BOXES, ids=lambda value: str(value)[:20])
def test_boxes_that_are_steps_do_not_count_and_the_same_value_twice_is_one_answer(gold, solution):
    verdict = verify(gold, solution)
    assert verdict.correct is True, verdict


@pytest.mark.parametrize(
    "gold, completion",
    [
        ("4", "\\boxed{3} or \\boxed{4}"),
        ("3", "\\boxed{3} or \\boxed{4}"),
        ("4", "first \\boxed{3}, then \\boxed{4}"),
        ("-\\frac{5}{2}", "Hence $t = \\boxed{\\frac{1}{3}}$ or $t = \\boxed{-\\frac{5}{2}}$."),
        ("(8,38)", "the points of intersection are $\\boxed{(-2,18)}$ and $\\boxed{(8,38)}$."),
        ("4", "so the answer is \\boxed{4} or maybe it is really \\boxed{5}"),
        ("4", "\\boxed{4}\n\nHmm, wait: let me redo it. 2 + 3 = 5, so it is \\boxed{5}."),  # only the last counts
    ],
)
def test_several_different_final_answers_score_zero(gold, completion):
    assert verify(gold, completion).correct is False


def test_boxing_every_candidate_earns_no_more_than_the_last_box():
    golds = [str(n) for n in range(10)]
    spread = "".join(f"Try {n}: $2 \\cdot {n} = {2 * n}$ gives \\boxed{{{n}}}.\n" for n in range(10))
    verdicts = verify_batch(golds, [spread] * 10)
    assert [verdict.correct for verdict in verdicts] == [False] * 9 + [True]  # 9 is the last box
    stated = "The answer is " + " or ".join(f"\\boxed{{{n}}}" for n in range(10))
    assert all(verdict.correct is False for verdict in verify_batch(golds, [stated] * 10))


def test_final_group_keeps_boxes_stated_together():
    assert final_group("$\\boxed{1}$ and $\\boxed{9}$.") == ["1", "9"]
    assert final_group("$k = \\boxed{5}$ or $k = \\boxed{-3}$") == ["5", "-3"]
    assert final_group("$\\boxed{30^\\circ}.$ The other two angles must be equal, so they are $\\boxed{75}$") == ["75"]


@pytest.mark.parametrize(
    "gold, fragment, whole",
    [
        (
            "\\begin{pmatrix} 1 & -1 \\\\ 1 & \\phantom -1 \\end{pmatrix}",
            "\\boxed{-1}",
            "\\boxed{\\begin{pmatrix} 1 & -1 \\\\ 1 & 1 \\end{pmatrix}}",
        ),
        ("2007 + \\frac\\pi 2", "\\boxed{2}", "\\boxed{2007 + \\frac{\\pi}{2}}"),
        ("2s", "\\boxed{2}", "\\boxed{2s}"),
        (
            "\\begin{pmatrix} 2 & 0 \\\\ 0 & -1 \\end{pmatrix}.",
            "\\boxed{-1}",
            "\\boxed{\\begin{pmatrix} 2 & 0 \\\\ 0 & -1 \\end{pmatrix}}",
        ),
        ("0.56 = 56\\%", "\\boxed{99 = 56\\%}", "\\boxed{0.56 = 56\\%}"),
        ("\\dfrac23 \\approx 0.67", "\\boxed{\\dfrac23 \\approx 0.68}", "\\boxed{\\frac{2}{3} \\approx 0.67}"),
        ("0", "\\boxed{2x - y + 2z - 18 = 0}", "\\boxed{x = 0}"),
        ("12_5", "\\boxed{12_6}", "\\boxed{12_5}"),
        ("1101001_2", "\\boxed{1101001_3}", "\\boxed{1101001}"),
    ],
)
def test_a_gold_is_compared_as_a_whole_never_as_a_fragment(gold, fragment, whole):
    assert verify(gold, fragment).correct is False
    assert verify(gold, whole).correct is True


@pytest.mark.parametrize("gold", ["\\frac{1}{2", "5 \\unknowncommand", "x \\mapsto"])
def test_a_gold_that_does_not_parse_as_a_whole_is_not_scored(gold):
    verdict = verify(gold, "\\boxed{5}")
    assert verdict.correct is None
    assert "as a whole" in verdict.reason


@pytest.mark.parametrize(
    "gold, right, wrong",
    [
        ("a + b + c", "\\boxed{a+b+c}", "\\boxed{a+b}"),
        ("\\sin^2 t", "\\boxed{\\sin^2 t}", "\\boxed{\\cos^2 t}"),
        ("4\\sqrt{2}", "\\boxed{4\\sqrt(2)}", "\\boxed{4\\sqrt(3)}"),
        ("10", "\\boxed{10\\text{ cm}}", "\\boxed{11 \\text{ cm}}"),
        ("\\text{(E)},", "\\boxed{\\textbf{(E)}}", "\\boxed{\\text{(D)}}"),
        ("-\\frac{5}{3}.", "\\boxed{-\\frac53}", "\\boxed{\\frac53}"),
    ],
)
def test_golds_with_letters_units_and_shorthand_are_scored(gold, right, wrong):
    assert verify(gold, right).correct is True
    assert verify(gold, wrong).correct is False


def test_tidy_removes_only_what_does_not_change_the_value():
    assert tidy("$4\\sqrt(2)$.") == "4\\sqrt{2}"
    assert tidy("15\\mbox{ cm}^2") == "15"
    assert tidy("\\frac\\pi 2") == "\\frac{\\pi}{2}"
    assert tidy("Answer $9$") == "Answer $9$"  # dollars inside prose delimit its math


@pytest.mark.parametrize(
    "text, value",
    [
        ("8\\sqrt{2}", 8 * 2**0.5),
        ("\\frac{\\sqrt{5} - 1}{2}", (5**0.5 - 1) / 2),
        ("686\\pi", 686 * math.pi),
        ("-\\frac{\\pi}{3}", -math.pi / 3),
        ("\\sqrt[3]{8} + 2(3)", 8.0),
        ("\\left(3\\right)^{2} \\cdot 30^\\circ", 270.0),
        ("x + 1", None),
        ("\\sqrt{-1}", None),
        ("(1, 2)", None),
        ("2^10", None),  # LaTeX: 2^1 followed by 0, not a constant we read
    ],
)
def test_approximate_values_of_constants(text, value):
    result = approximate(text)
    assert result == pytest.approx(value) if value is not None else result is None


def test_far_apart_only_rejects():
    assert far_apart("1", "\\sqrt{29}") and far_apart("686\\pi", "4")
    assert not far_apart("\\sqrt{2}", "1.41421356")  # close: math-verify decides
    assert not far_apart("x", "5")  # not constants: math-verify decides
    assert verify("\\sqrt{29}", "\\boxed{1}").correct is False
    assert verify("2\\sqrt{2}", "\\boxed{\\sqrt{8}}").correct is True  # equal values still reach math-verify


def test_a_mixed_number_is_not_read_as_a_product():
    assert approximate("15\\frac{39}{40}") is None


def test_tuples_of_constants_are_compared_element_by_element_only_when_ordered():
    assert far_apart("(-4, -4)", "(-4, -5)") and far_apart("\\left( 1, \\sqrt{2} \\right)", "(1, 2)")
    assert not far_apart("1, 2", "2, 1")  # may be one set: math-verify decides
    assert not far_apart("(1, 2)", "[1, 2]")  # an open and a closed interval: math-verify decides
    assert verify("1, 2", "\\boxed{2, 1}").correct is True


EDGE_TEXTS = [
    "",
    " ",
    "=",
    "x =",
    "= 5",
    "(",
    ")",
    "()",
    "[]",
    ",",
    "$",
    "$$",
    "\\sqrt",
    "\\frac",
    "^",
    "(,)",
    "{",
    "}",
]


def test_odd_answers_and_golds_never_raise():
    completions = [f"\\boxed{{{text}}}" for text in EDGE_TEXTS] + [
        f"\\boxed{{{text}}} or \\boxed{{5}}" for text in EDGE_TEXTS
    ]
    for gold in ["5", "(1, 2)", "x + 1", "\\sqrt{2}", "=", "(", "\\frac{1}{2} = 0.5"]:
        verdicts = verify_batch([gold] * len(completions), completions)
        assert all(verdict.correct in (True, False, None) for verdict in verdicts)
    for text in EDGE_TEXTS:
        assert approximate(text) is None or isinstance(approximate(text), float)
        assert far_apart(text, "1") in (True, False) and far_apart("(1, 2)", text) in (True, False)
