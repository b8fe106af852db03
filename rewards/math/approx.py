"""Approximate values of constant answers (`8\\sqrt{2}`, `\\frac{\\pi}{3}`, `30^\\circ`), used only to *reject*.

A wrong answer of a GRPO group is often a number against a constant expression (`1` against `\\sqrt{29}`,
`686\\pi` against `4`). math-verify decides each in a worker through sympy (5-20 ms); a float evaluation
tells in microseconds that the two values are far apart. rewards.math rejects a pair only when both sides
evaluate and differ by more than 0.1% (math-verify itself never equates values that far apart); close
values, and everything outside this small grammar, still go to math-verify, so this never accepts.

Grammar: numbers, + - * / \\cdot \\times, parentheses and braces, \\frac / \\dfrac / \\tfrac, \\sqrt{x},
\\sqrt[n]{x}, \\pi, powers with a braced or one-digit exponent, implicit products (`2\\sqrt{3}`, `3\\pi`;
but `15\\frac{39}{40}`, a mixed number, is left out),
and `^\\circ` (a degree reads as its number, as math-verify reads it).
"""

from __future__ import annotations

import math
import re

from rewards.math.token_cursor import TokenCursor, scan

_TOKEN = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)|(?P<command>\\[a-zA-Z]+)|(?P<symbol>[-+*/^(){}\[\]])")
_IGNORED = re.compile(r"\\left|\\right|\\displaystyle|\\[,;!: ]|\^\s*\{?\\circ\}?")
_FRACTIONS = {"\\frac", "\\dfrac", "\\tfrac"}
MAX_TEXT = 300
MAX_MAGNITUDE = 1e300


class _Unknown(Exception):
    pass


class _Parser(TokenCursor):
    error = _Unknown

    def sum(self) -> float:
        value = self.product()
        while self.peek() in ("+", "-"):
            value = value + self.product() if self.take() == "+" else value - self.product()
        return value

    def product(self) -> float:
        value = self.unary()
        while True:
            token = self.peek()
            if token in ("*", "/", "\\cdot", "\\times"):
                self.take()
                right = self.unary()
                if token == "/":
                    if right == 0:
                        raise _Unknown("division by zero")
                    value /= right
                else:
                    value *= right
            elif token is not None and (token[0].isdigit() or token in ("(", "{", "\\pi", "\\sqrt", *_FRACTIONS)):
                value *= self.power()  # implicit product: 2\\sqrt{3}, 3\\pi, 2(3)
            else:
                return value

    def unary(self) -> float:
        if self.peek() in ("+", "-"):
            sign = -1.0 if self.take() == "-" else 1.0
            return sign * self.unary()
        return self.power()

    def power(self) -> float:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take("^")
        if self.peek() == "{":
            exponent = self.group("{", "}")
        elif (self.peek() or "").isdigit() and len(self.peek()) == 1:
            exponent = float(self.take())
        else:
            raise _Unknown("exponent")
        if base < 0 and exponent != int(exponent):
            raise _Unknown("complex power")
        if base == 0 and exponent < 0:
            raise _Unknown("zero to a negative power")
        if abs(exponent) * math.log10(abs(base) + 1) > 300:
            raise _Unknown("overflow")
        return base**exponent

    def group(self, opening: str, closing: str) -> float:
        self.take(opening)
        value = self.sum()
        self.take(closing)
        return value

    def atom(self) -> float:
        token = self.peek()
        if token is None:
            raise _Unknown("end")
        if token == "(":
            return self.group("(", ")")
        if token == "{":
            return self.group("{", "}")
        if token == "\\pi":
            self.take()
            return math.pi
        if token == "\\sqrt":
            self.take()
            degree = self.group("[", "]") if self.peek() == "[" else 2.0
            radicand = self.group("{", "}") if self.peek() == "{" else self.atom()
            if radicand < 0 or degree == 0:
                raise _Unknown("root")
            return radicand ** (1.0 / degree)
        if token in _FRACTIONS:
            self.take()
            numerator, denominator = self._argument(), self._argument()
            if denominator == 0:
                raise _Unknown("division by zero")
            return numerator / denominator
        if token[0].isdigit() or token[0] == ".":
            self.take()
            return float(token)
        raise _Unknown(token)

    def _argument(self) -> float:
        if self.peek() == "{":
            return self.group("{", "}")
        token = self.take()
        if len(token) == 1 and token.isdigit():
            return float(token)
        if token == "\\pi":
            return math.pi
        raise _Unknown(token)


def approximate(text: str) -> float | None:
    """A float close to the value of a constant answer, or None outside the grammar."""
    if not text or len(text) > MAX_TEXT:
        return None
    tokens = scan(_TOKEN, _IGNORED.sub(" ", text))
    if tokens is None:
        return None
    if any(a[0].isdigit() and b in _FRACTIONS for a, b in zip(tokens, tokens[1:], strict=False)):
        return None  # 15\\frac{39}{40} is a mixed number in competition answers, not a product
    try:
        parser = _Parser(tokens)
        value = parser.sum()
        if parser.peek() is not None:
            return None
    except (_Unknown, OverflowError, ValueError, ZeroDivisionError, RecursionError):
        return None
    return value if math.isfinite(value) and abs(value) < MAX_MAGNITUDE else None


def _elements(text: str) -> tuple[str, list[str]] | None:
    """("()", ["1", "2"]) for `(1, 2)` / `\\left( 1, 2 \\right)`, ("", ["5"]) for `5`; None for a set or
    anything with unbalanced or nested top-level brackets."""
    text = _IGNORED.sub(" ", text).strip()
    brackets = ""
    if len(text) > 1 and text.startswith(("(", "[")) and text.endswith((")", "]")):
        brackets, text = text[0] + text[-1], text[1:-1]
    parts, depth, start = [], 0, 0
    for position, char in enumerate(text):
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth < 0:
            return None  # "(1)(2)": not one pair of brackets
        if char == "," and depth == 0:
            parts.append(text[start:position])
            start = position + 1
    parts.append(text[start:])
    return brackets, parts


def constant_values(text: str) -> tuple[str, list[float]] | None:
    """The brackets and approximate values of a constant or a tuple / interval of constants, else None."""
    if not text.strip() or "\\{" in text or len(text) > MAX_TEXT:
        return None
    elements = _elements(text)
    if elements is None:
        return None
    values = [approximate(part) for part in elements[1]]
    return None if None in values else (elements[0], values)


def far_apart(left: str, right: str) -> bool:
    """Both sides are constants (or tuples / intervals of constants with the same brackets and length) and
    some pair of values differs by more than 0.1%: certainly not equal."""
    a, b = constant_values(left), constant_values(right)
    if a is None or b is None or a[0] != b[0] or len(a[1]) != len(b[1]):
        return False
    if not a[0] and len(a[1]) > 1:
        return False  # "1, 2" and "2, 1" may be the same set: order matters only inside brackets
    return any(abs(x - y) > 1e-3 * max(1.0, abs(x), abs(y)) for x, y in zip(a[1], b[1], strict=True))
