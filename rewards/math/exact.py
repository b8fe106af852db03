"""Exact arithmetic on the numeric answers of math problems, without sympy.

math-verify compares numbers after rounding to 6 digits, so it accepts `0.0010000001` for `0.001` and
`\\frac{1}{2006!}` for `\\frac{1}{2004!}`; and it hands every expression to sympy, which can hang on a
power tower such as `9^{9^{9^{9}}}`. Most gold answers of math sets are plain numbers (every AIME
answer is an integer), so this module evaluates numeric answers exactly with `Fraction`:

    integers, decimals, thousands separators (1,000), \\frac{a}{b} / \\dfrac / \\tfrac / a/b,
    + - * \\cdot \\times, parentheses and braces, powers a^{b} with integer exponents, factorials n!

An expression outside that grammar gives None (let math-verify decide). A power or factorial too large
to compute gives HUGE (at least 2**(MAX_BITS / 4)) when it is the whole expression, whose only use is
to say "this cannot equal a number of ordinary size"; inside a larger expression it gives None.
"""

from __future__ import annotations

import math
import operator
import re
from fractions import Fraction

from rewards.math.token_cursor import TokenCursor, scan

MAX_BITS = 200_000  # about 60,000 decimal digits
MAX_FACTORIAL = 10_000
MAX_TEXT = 1_000


class _Huge:
    """A number known to have more than MAX_BITS bits (|x| > 2**MAX_BITS), value otherwise unknown."""

    def __repr__(self) -> str:
        return "HUGE"


HUGE = _Huge()


class _NotExact(Exception):
    """The text is not an exact numeric expression of our grammar."""


_TOKEN = re.compile(
    r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"|(?P<command>\\[a-zA-Z]+)"
    r"|(?P<symbol>[-+*/^!(){}])",
    re.ASCII,
)
# Thousands separators: 1,000 and 11,\! 111 (a comma, then LaTeX thin space) are one number; "32, 349"
# (a comma and a plain space) is a list of two.
_LATEX_THOUSANDS = re.compile(r"(?<=[0-9]),\\[!,]\s*(?=[0-9]{3}(?![0-9]))")
_THOUSANDS = re.compile(r"(?<![0-9.])[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])")
_IGNORED = re.compile(r"\\left|\\right|\\displaystyle|\\\$|\\[!,;: ]|\$|\s+")
_FRACTIONS = {"\\frac", "\\dfrac", "\\tfrac"}
_TIMES = {"\\cdot", "\\times"}


def normalize(text: str) -> str:
    """A canonical spelling of a math answer: thousands separators and LaTeX spacing, sizing and dollar
    signs (delimiters and currency) removed, `{,}` dropped, \\dfrac and \\tfrac written \\frac."""
    text = _LATEX_THOUSANDS.sub(",", text.replace("{,}", ""))
    text = _THOUSANDS.sub(lambda match: match.group().replace(",", ""), text)
    return _IGNORED.sub("", text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def _tokenize(text: str) -> list[str]:
    tokens = scan(_TOKEN, normalize(text))  # normalize leaves no whitespace to skip
    if tokens is None:
        raise _NotExact(text)
    return tokens


class _Parser(TokenCursor):
    """Recursive descent over the tokens; each method returns a Fraction or HUGE."""

    error = _NotExact

    def __init__(self, tokens: list[str]):
        super().__init__(tokens)
        self.depth = 0  # nesting in braces and parentheses

    def parse(self):
        value = self.sum()
        if self.peek() is not None:
            raise _NotExact(f"unexpected {self.peek()!r}")
        return value

    def sum(self):
        value = self.product()
        while self.peek() in ("+", "-"):
            operation = operator.add if self.take() == "+" else operator.sub
            value = _combine(value, self.product(), operation)
        return value

    def product(self):
        value = self.unary()
        while self.peek() in ("*", "/", *_TIMES):
            symbol = self.take()
            right = self.unary()
            if symbol == "/":
                if right == 0:
                    raise _NotExact("division by zero")
                value = _combine(value, right, operator.truediv)
            else:
                value = _combine(value, right, operator.mul)
        return value

    def unary(self):
        if self.peek() in ("+", "-"):
            sign = self.take()
            value = self.unary()
            if value is HUGE:
                if sign == "-" and self.depth > 0:  # e.g. an exponent -HUGE: the sign decides everything
                    raise _NotExact("negated huge value inside an expression")
                return HUGE  # at the top level only the magnitude is used
            return -value if sign == "-" else value
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() != "^":
            return base
        self.take("^")
        if self.peek() == "{":
            exponent = self.group()
        elif self.peek() is not None and self.peek().isdigit() and len(self.peek()) == 1:
            exponent = Fraction(self.take())  # LaTeX: 2^3 raises to the single digit 3
        else:
            raise _NotExact("exponent must be braced or a single digit")  # 2^10 means 2^1 0 in LaTeX
        return _power(base, exponent)

    def postfix(self):
        value = self.atom()
        if self.peek() == "!":
            self.take("!")
            if self.peek() == "!":
                raise _NotExact("n!! is a double factorial or a factorial of a factorial: ambiguous")
            value = _factorial(value)
        return value

    def group(self, opening: str = "{", closing: str = "}"):
        """A sum between `opening` and `closing` (braces, or parentheses), one level deeper."""
        self.take(opening)
        self.depth += 1
        value = self.sum()
        self.depth -= 1
        self.take(closing)
        return value

    def atom(self):
        token = self.peek()
        if token is None:
            raise _NotExact("unexpected end")
        if token == "(":
            return self.group("(", ")")
        if token == "{":
            return self.group()
        if token in _FRACTIONS:
            self.take()
            digits = self.peek() or ""
            if digits.isdigit() and len(digits) == 2:  # \frac12 is one half
                self.take()
                return Fraction(int(digits[0]), int(digits[1])) if digits[1] != "0" else _division_by_zero()
            numerator, denominator = self._fraction_argument(), self._fraction_argument()
            if denominator == 0:
                raise _NotExact("division by zero")
            return _combine(numerator, denominator, operator.truediv)
        if token[0].isdigit() or token[0] == ".":
            self.take()
            return Fraction(token.replace(",", ""))
        raise _NotExact(f"unsupported {token!r}")

    def _fraction_argument(self):
        if self.peek() == "{":
            return self.group()
        token = self.take()  # \frac12: single-character arguments
        if len(token) == 1 and token.isdigit():
            return Fraction(token)
        if token[0].isdigit():  # \frac123 means \frac{1}{2}3: not worth supporting
            raise _NotExact("ambiguous unbraced \\frac argument")
        raise _NotExact(f"bad \\frac argument {token!r}")


def _division_by_zero():
    raise _NotExact("division by zero")


def _combine(left, right, operation):
    if left is HUGE or right is HUGE:
        raise _NotExact("huge operand inside an expression")
    return operation(left, right)


def _bits(value: Fraction) -> int:
    return max(value.numerator.bit_length(), value.denominator.bit_length())


def _power(base, exponent):
    if base is HUGE or exponent is HUGE:
        if base is HUGE or abs(base) > 1:
            return HUGE  # |base| > 1 to a power with more than MAX_BITS bits: astronomically large
        if base in (0, 1):
            return base  # 0 and 1 to any positive power
        raise _NotExact("huge exponent of a base in (-1, 1)")
    if exponent.denominator != 1:
        raise _NotExact("non-integer exponent")
    if base == 0 and exponent < 0:
        raise _NotExact("zero to a negative power")
    if abs(base) in (0, 1) or exponent == 0:
        return base ** int(exponent)
    if abs(exponent) * _bits(base) > MAX_BITS:
        if exponent > 0 and abs(base) > 1:
            return HUGE
        raise _NotExact("power too large to evaluate")
    return base ** int(exponent)


def _factorial(value):
    if value is HUGE or value.denominator != 1 or value < 0:
        raise _NotExact("factorial of a non-natural number")
    if value > MAX_FACTORIAL:
        return HUGE  # 10001! already has about 118,000 decimal digits
    return Fraction(math.factorial(int(value)))


def exact_value(text: str):
    """The exact value of a numeric answer (Fraction), HUGE, or None when it is not such an expression."""
    if not text or len(text) > MAX_TEXT:
        return None
    try:
        value = _Parser(_tokenize(text)).parse()
    except (_NotExact, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    if isinstance(value, Fraction) and _bits(value) > MAX_BITS * 2:
        return None  # exact but unwieldy (a product of large parts): let the slow path decide
    return value


def exact_equal(gold: str, answer: str) -> bool | None:
    """True/False when both sides are exact numbers we can compare; None when we cannot decide."""
    left, right = exact_value(gold), exact_value(answer)
    if left is None or right is None:
        return None
    if left is HUGE and right is HUGE:
        return None
    if left is HUGE or right is HUGE:
        other = right if left is HUGE else left
        return False if _bits(other) < MAX_BITS // 8 else None  # HUGE is at least 2**(MAX_BITS / 4)
    return left == right
