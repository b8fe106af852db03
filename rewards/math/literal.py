"""Is an answer a number *literal*? The grammar behind the math verifier's `require_number` option.

The verifier compares values, so `\\boxed{7+5}` equals a gold of 12 exactly. On a task whose question is an
expression ("Compute 17 * 23 + 11."), that pays a policy for copying the question into the box. Where the gold
is a number and a row asks for it (`require_number`), the answer must itself be one number, written as:

    an integer, with or without thousands separators     12, -3, 1,000, 1{,}000, 32,\\! 349, 1\\,000
    a decimal                                           12.0, 0.75, .5, -0.25
    a fraction of two integers in lowest terms          3/4, \\frac{3}{4}, \\dfrac34, -\\frac{3}{4}, \\frac{-3}{4}
    with what the verifier already tolerates around it  \\$12, 12\\%, 12^\\circ, "x = 12", 12 \\text{ apples}

(the dollar sign, a unit in words and a leading `\\approx` are gone before this check: rewards.math removes
`\\$` and rewards.math.answers.tidy the rest). Anything else is "an expression, not a number": operators
(`7+5`, `3*4`, `2\\cdot 6`, `3 \\times 4`, `2^2*3`, unicode `×` `÷` `＋`), commands (`\\sqrt{144}`), brackets
(`(12)`, `\\left(7+5\\right)`), an equation other than a lone variable's value (`12 = 7+5`, `7+5 = 12`),
a fraction that is not in lowest terms or is an integer (`24/2`, `\\frac{24}{2}`, `6/8`, `12/1`), scientific
notation (`1.2 \\times 10^1`, `1.2e1`) and double signs (`--12`). Spaces do not hide an operator: the text is
read token by token, never with whitespace or LaTeX spacing removed between digits, except as a thousands
separator followed by exactly three digits.

An answer written exactly as its gold (up to spacing) always passes: a gold such as `2^{10}` may be answered
as given, and no policy can know the gold's spelling without knowing the answer.
"""

from __future__ import annotations

import math
import re

from rewards.math.answers import matching_braces

# A math row's column that asks for a number literal where its gold is a number (this module's rule).
REQUIRE_NUMBER = "require_number"

MAX_LITERAL_CHARS = 1_000  # as rewards.math's longest answer: longer text is not read, so it costs nothing
_LATEX_SPACE = ("\\ ", "\\,", "\\;", "\\:", "\\!")
# A thousands separator: a comma (optionally with LaTeX thin spaces around it), `{,}`, or a thin space alone.
_SEPARATOR = r"(?:(?:\\!)?(?:\{,\}|,)(?:\\[!,])?\s*|\\,)"
_INTEGER = rf"(?:[0-9]{{1,3}}(?:{_SEPARATOR}[0-9]{{3}})+|[0-9]+)"
_DECIMAL = rf"(?:{_INTEGER}(?:\.[0-9]*)?|\.[0-9]+)"
_FRACTION = (
    r"\\[dt]?frac(?:\{(?P<fn>[-\u2212]?[0-9]+)\}\{(?P<fd>[0-9]+)\}|(?P<fn1>[0-9])(?P<fd1>[0-9]))"
    r"|(?P<sn>[0-9]+)/(?P<sd>[0-9]+)"
)
_SUFFIX = r"(?:(?:\s|\\[ ,;:!])*(?:\\%|%|\^\s*\{\s*\\circ\s*\}|\^\s*\\circ))"
# Read on text already trimmed of spacing at both ends (see _trim), so no part of it can match the same spaces
# two ways: the match is linear, whatever an adversary puts in the box.
_LITERAL = re.compile(rf"(?P<sign>[-+\u2212])?\s*(?:(?P<fraction>{_FRACTION})|{_DECIMAL}){_SUFFIX}?")
_DISPLAY = re.compile(r"\\(?:displaystyle|textstyle)(?![a-zA-Z])")
_LABEL = re.compile(r"(?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?[a-zA-Z0-9]+\}?)?\s*=(?!=)")
# What makes a rejected answer an expression rather than some other text ("12 apples", "twelve").
_OPERATOR = re.compile(r"[-+*/^!=()\[\]{}\\<>|]|[^\x00-\x7f]")
_AROUND_SYMBOL = re.compile(r"\s*([^\w\s])\s*")

EXPRESSION = "an expression, not a number"
NOT_A_NUMBER = "not a number"


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """`text[start:end]` without whitespace and LaTeX spacing (`\\,`, `\\!`, ...) at either end."""
    while start < end:
        if text[start].isspace():
            start += 1
        elif text.startswith(_LATEX_SPACE, start, end):
            start += 2
        else:
            break
    while end > start:
        if text[end - 1].isspace():
            end -= 1
        elif end - start >= 2 and text[end - 2 : end] in _LATEX_SPACE and (end < 3 or text[end - 3] != "\\"):
            end -= 2
        else:
            break
    return start, end


def _unwrap(text: str) -> str:
    """`{12}` -> `12`, `\\displaystyle 12` -> `12`: wrappers around the whole answer that show the same number.
    One pass over the text, however deep the braces."""
    braces = matching_braces(text) if "{" in text else {}
    start, end = _trim(text, 0, len(text))
    while start < end:
        display = _DISPLAY.match(text, start, end)
        if display:
            start, end = _trim(text, display.end(), end)
        elif text[start] == "{" and braces.get(start) == end - 1:
            start, end = _trim(text, start + 1, end - 1)
        else:
            break
    return text[start:end]


def is_number_literal(text: str) -> bool:
    """Whether `text` (a tidied answer) is one number written out, by the grammar above."""
    if len(text) > MAX_LITERAL_CHARS:
        return False
    value = _unwrap(text)
    label = _LABEL.match(value)
    if label and "=" not in value[label.end() :]:
        value = _unwrap(value[label.end() :])  # "x = 12": the value of a lone variable
    match = _LITERAL.fullmatch(value)
    if match is None:
        return False
    if match.group("fraction") is None:
        return True
    numerator = match.group("fn") or match.group("fn1") or match.group("sn")
    denominator = match.group("fd") or match.group("fd1") or match.group("sd")
    if match.group("sign") and numerator[0] in "-\u2212":
        return False  # -\frac{-3}{4}: a double sign
    top, bottom = abs(int(numerator.replace("\u2212", "-"))), int(denominator)
    return bottom > 1 and top > 0 and math.gcd(top, bottom) == 1  # 24/2, 6/8, 12/1, 0/5 are expressions


def _spaced(text: str) -> str:
    """`text` with whitespace that cannot matter removed: next to a symbol (`2 ^ {10}`), never between two
    digits or letters (`1 2` is not `12`)."""
    return _AROUND_SYMBOL.sub(r"\1", " ".join(text.split()))


def literal_problem(answer: str, gold_text: str) -> str | None:
    """Why `answer` is not accepted as a number where the gold `gold_text` is one, or None when it is.

    An answer spelled as the gold (up to whitespace) passes whatever the gold's form.
    """
    if _spaced(answer) == _spaced(gold_text) or is_number_literal(answer):
        return None
    return EXPRESSION if _OPERATOR.search(answer) else NOT_A_NUMBER
