"""An unboxed final answer stated in words: the math verifier's optional fallbacks (`fallbacks=True`,
`eval.evaluate --answer-fallbacks`).

Instruct models that were never taught to box end with "So, the answer is 172." or "Final answer: 172". With
fallbacks on, and only when a completion's final segment has no box, the verifier reads the *last* such
statement:

    the answer is X        So, the final answer is: X        My answer is X
    Answer: X              Final Answer: X                   **Answer:** X           answer = X

case-insensitive. X is the rest of that sentence (cut at a full stop that ends it, not a decimal point); a
statement that ends its line ("The answer is:") takes the next non-empty line. Math delimiters (`$`, `\\(`,
`\\[`) and markdown bold around X are removed.

Strict against hedges, as boxes are (a hedged answer scores 0): X must not hedge ("5 or 6", "maybe 5",
"about 5", "not 5", "either 5 or 6", "5 unless ..."), and the rest of its line must not offer another
candidate ("The answer is 5. Or maybe 6."). Lists ("5, 6") are caught by the verifier's own rule on
alternatives afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STATEMENT = re.compile(r"\banswer\s*(?:\*\*)?\s*(?:is\b\s*:?|:|=(?!=))\s*(?:\*\*)?", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?=\s|$)")
# Words that make a stated answer a hedge, not an answer; in the statement itself, and (fewer) after it.
_HEDGE = re.compile(
    r"(?<![A-Za-z\\])(?:or|maybe|perhaps|possibly|probably|likely|either|unless|not|approximately|about|around|"
    r"roughly|nearly|almost|between|guess|unsure|but|if)(?![A-Za-z])",
    re.IGNORECASE,
)
_TAIL_HEDGE = re.compile(
    r"(?<![A-Za-z\\])(?:or|maybe|perhaps|possibly|probably|unless|alternatively|not sure)(?![A-Za-z])", re.IGNORECASE
)
_DELIMITERS = re.compile(r"^(?:\s|\*\*|\$|\\[(\[])+|(?:\s|\*\*|\$|\\[)\]]|[.;])+$")

HEDGED = "hedged answer statement"


def hedges_inside(answer: str, gold: str) -> bool:
    """True when a boxed answer hedges in words (`12 \\text{ or so}`, `12 \\text{ maybe}`): the tidy step strips
    trailing text as if it were a unit, so without this check the hedge vanished and the number was credited.
    A word that the gold itself has is not a hedge. `\\approx` is not one either: a rounded answer is written
    `\\approx 8.24` where the problem asks for the nearest hundredth (MATH's own solutions do)."""

    def marks(text: str) -> set[str]:
        return {match.group(0).lower() for match in _HEDGE.finditer(text)}

    return bool(marks(answer) - marks(gold))


NOT_FOUND = "no boxed answer and no 'the answer is' statement"


@dataclass(frozen=True)
class Statement:
    """The last answer statement of a segment: what it states, and whether it hedges."""

    answer: str
    hedged: bool


def _clean(text: str) -> str:
    """`$172$.` -> `172`, `**12**` -> `12`, `\\(x\\)` -> `x`: delimiters and closing punctuation removed."""
    previous = None
    while previous != text:
        previous, text = text, _DELIMITERS.sub("", text)
    return text.strip()


def last_statement(segment: str) -> Statement | None:
    """The last "the answer is X" / "Answer: X" of a final segment, or None when it states none."""
    matches = list(_STATEMENT.finditer(segment))
    if not matches:
        return None
    rest = segment[matches[-1].end() :]
    line, _, following = rest.partition("\n")
    if not _clean(line):  # "The final answer is:\n\n$$172$$"
        line = next((candidate for candidate in following.split("\n") if _clean(candidate)), "")
    end = _SENTENCE_END.search(line)
    stated, tail = (line[: end.start()], line[end.end() :]) if end else (line, "")
    answer = _clean(stated)
    if not answer:
        return None
    return Statement(answer, bool(_HEDGE.search(answer) or _TAIL_HEDGE.search(tail)))
