"""The token cursor of rewards.math's two little expression parsers: rewards.math.exact (exact values) and
rewards.math.approx (approximate values) read a math answer the same way, one regex token after another, then
walk the tokens with `peek` and `take`; only their grammars differ."""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s*")


def scan(token: re.Pattern, text: str) -> list[str] | None:
    """The tokens of `text`: matches of `token`, one after another, whitespace between them skipped; None when
    some of the text is no token."""
    tokens, position = [], 0
    while (position := _SPACE.match(text, position).end()) < len(text):
        match = token.match(text, position)
        if not match or match.end() == position:
            return None
        tokens.append(match.group())
        position = match.end()
    return tokens


class TokenCursor:
    """A recursive-descent parser's place in its tokens. A parser subclasses it and sets `error`, the exception
    that means "not in this grammar"; `take` raises it at the end or at a token other than the one expected."""

    error: type[Exception] = ValueError

    def __init__(self, tokens: list[str]):
        self.tokens, self.position = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise self.error(f"expected {expected!r}, found {token!r}")
        self.position += 1
        return token
