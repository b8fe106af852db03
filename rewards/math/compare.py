"""How a gold and an answer compare: reading a gold once, the pairs that must hold, and the decisions made
without sympy (rewards.math sends the rest to math-verify).

Local decisions, each safe in one direction or exact:
* exact numbers (rewards.math.exact), multiple-choice letters, numerals in a base (`12_5` is not `12_6`:
  math-verify drops the subscript);
* rejections only: a number against an expression in variables (`5` vs `x + 1`), against several values
  (`5` vs `(8, 38)`), or constants far apart (rewards.math.approx: `1` vs `\\sqrt{29}`);
* acceptance only of an answer written as the gold (up to spacing), once the gold is known to parse whole.
Each says whether it holds only for a gold that math-verify reads as a whole (rewards.math checks that
once per gold before counting the decision).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from rewards.math.answers import answer_boxes, final_group, matching_braces, tidy, unwrap_text
from rewards.math.approx import constant_values, far_apart
from rewards.math.exact import exact_equal, exact_value, normalize

_OR_WORDS = re.compile(r"(?<![a-zA-Z\\])(?:or|and)(?![a-zA-Z])|\\lor(?![a-zA-Z])|\\vee(?![a-zA-Z])")
_PLUS_MINUS = re.compile(r"\\pm(?![a-zA-Z])|\\mp(?![a-zA-Z])|[\u00b1\u2213]")
_CHOICE = re.compile(r"^\(?([A-E])\)?$")
_EQUALS = re.compile(r"(?<![<>!\\])=(?!=)|\\approx(?![a-zA-Z])")
_VAR = r"\s*(?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?[a-zA-Z0-9]+\}?)?\s*"
_NOT_PLAIN = re.compile(r"\\\\|\$|\\[(\[]|matrix|array|\\text|\\quad|\\mbox")
_WORDS = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}")
_LONE_VARIABLE = re.compile(rf"^(?:{_VAR}|\s*\((?:{_VAR},)+{_VAR}\)\s*)$")  # x, \theta, a_1, (x, y)
_BASE_NUMERAL = re.compile(r"^(-?[0-9A-Z]+)(?:_\{?([0-9]+)\}?)?$")
_COMMAND = re.compile(r"\\[a-zA-Z]+")
_LETTER = re.compile(r"[a-zA-Z]")
_RELATION = re.compile(r"[<>=|]|\\(?:[lg]eq?|in|cup|cap|pm|mp|infty|neq|ne|\{|setminus)(?![a-zA-Z])")
_VARIABLE = re.compile(r"[a-df-hj-zA-Z]")  # a letter that is neither e nor i
_SPACE = re.compile(r"(?<![a-zA-Z])\s+|\s+(?![a-zA-Z])")
_GOLDS_LIMIT = 200_000


def clean(answer: str) -> str:
    """A canonical spelling used to tell repeated answers from distinct ones and to parse exact numbers."""
    return unwrap_text(normalize(answer))


def _top_level_separators(text: str) -> bool:
    """A comma or semicolon outside any brackets in a `_clean`ed answer (whose thousands commas are gone)."""
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in ",;" and depth <= 0:
            return True
    return False


def lists_alternatives(answer: str) -> bool:
    """Several values: "3 or 4", "41, 42, 43", "\\pm 2" (but "11,\\! 111" is one number)."""
    if _OR_WORDS.search(answer) or _PLUS_MINUS.search(answer):  # on the raw text: spaces delimit "or"
        return True
    return _top_level_separators(clean(answer))


def answer_key(answer: str):
    """Equal keys for spellings of the same answer: the exact value of a number, else the canonical text."""
    cleaned = clean(tidy(answer))
    value = exact_value(cleaned)
    return ("number", value) if value is not None else ("text", cleaned)


def distinct(answers: list[str]) -> list[str]:
    """The answers without repeats (in order of first appearance); linear in their number."""
    seen: dict = {}
    for answer in answers:
        seen.setdefault(answer_key(answer), answer)
    return list(seen.values())


def _spacing(text: str) -> str:
    """Whitespace that cannot change the meaning removed (kept between two letters: `\\pi r`)."""
    return _SPACE.sub("", text)


@dataclass(frozen=True)
class Gold:
    """A gold answer read once (every completion of a problem shares it): its tidied text and what is
    known about it without math-verify."""

    text: str
    unscorable: str | None  # the reason it cannot be scored, when known here
    single: bool  # one value, not a list
    choice: str | None  # "E" for a multiple-choice gold such as "\\text{(E)}"
    sides: tuple[str, str] | None  # an equation between two constants
    base: tuple[str, int] | None  # a numeral in a base, `1101_2`: compared digit by digit, base by base
    number: bool = False  # an exact number of ordinary size (`12`, `3/4`, `2^{10}`): `require_number` applies


_GOLDS: dict[str, Gold] = {}


def read_gold(raw) -> Gold:
    key = str(raw) if raw is not None else ""
    known = _GOLDS.get(key)
    if known is not None:
        return known
    text = key.strip()
    boxes = answer_boxes(text)
    if boxes:  # a worked solution ending in \\boxed{...}: its final answer
        text = ", ".join(distinct(final_group(text, boxes)))
    text = text.strip().strip("$").strip()
    if text.startswith("{") and matching_braces(text).get(0) == len(text) - 1:
        text = text[1:-1]  # "{1,2,3}": LaTeX grouping around a list of values
    text = tidy(text)
    sides = _top_sides(text)
    if len(sides) == 2 and _LONE_VARIABLE.match(sides[0]) and "=" in text and sides[1]:
        text = sides[1]  # "K = 8": the value 8 (an answer "K = 8" is read the same way)
    choice = _CHOICE.match(text)
    numeral = _base_numeral(text)
    sides = None
    parts = _top_sides(text)
    if len(parts) == 2 and all(part.strip() and not _LETTER.search(_COMMAND.sub("", part)) for part in parts):
        sides = (parts[0].strip(), parts[1].strip())
    gold = Gold(
        text=text,
        unscorable=None if text else "gold answer is empty",
        single=not lists_alternatives(text),
        choice=choice.group(1) if choice else None,
        sides=sides,
        base=numeral if numeral and numeral[1] is not None else None,
        number=choice is None and isinstance(exact_value(clean(text)), Fraction),
    )
    if len(_GOLDS) > _GOLDS_LIMIT:
        _GOLDS.clear()
    _GOLDS[key] = gold
    return gold


def _top_sides(text: str) -> list[str]:
    """`text` cut at its `=` / `\\approx` signs outside brackets."""
    sides, depth, start = [], 0, 0
    for match in re.finditer(r"[([{]|[)\]}]|" + _EQUALS.pattern, text):
        token = match.group()
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
        elif depth <= 0:
            sides.append(text[start : match.start()])
            start = match.end()
    return [side.strip() for side in [*sides, text[start:]]]


def _base_numeral(text: str) -> tuple[str, int | None] | None:
    """("1101", 2) for `1101_2` (digits valid in that base), ("28", None) for bare digits; else None."""
    match = _BASE_NUMERAL.match(text.replace(" ", ""))
    if not match:
        return None
    digits, base = match.group(1), int(match.group(2)) if match.group(2) else None
    if base is not None and not (2 <= base <= 36 and all(int(d, 36) < base for d in digits.lstrip("-"))):
        return None
    return digits, base


def comparisons(gold: Gold, answer: str) -> list[tuple[str, str]]:
    """The (gold, answer) pairs that must all be equal for this answer to equal the gold."""
    answer = tidy(answer)
    if gold.sides is not None:  # 0.56 = 56\\%: both sides, against the answer's sides or the answer itself
        parts = _top_sides(answer)
        given = parts if len(parts) == 2 else [answer, answer]
        return [(gold.sides[0], given[0]), (gold.sides[1], given[1])]
    if "=" in gold.text or "\\approx" in gold.text:
        return [(gold.text, answer)]  # math-verify compares equations (both sides, or x = ... as its value)
    sides = _top_sides(answer)
    if len(sides) > 1 and _LONE_VARIABLE.match(sides[0]):
        sides = sides[1:]  # "x = 5": the value of x
    # Every side of "2 + 3 = 5" must be the gold: "2x - y + 2z - 18 = 0" is not an answer of 0.
    return [(gold.text, side) for side in sides]


def local_decision(gold: Gold, gold_text: str, answer: str) -> tuple[bool | None, str, bool]:
    """A decision made here without sympy, or None when math-verify must decide; the last item says whether
    the decision holds only for a gold that math-verify reads as a whole (else the row is not scored)."""
    if gold.choice is not None:
        letter = _CHOICE.match(answer)
        return (letter is not None and letter.group(1) == gold.choice), "multiple-choice letter", False
    if gold.base is not None and gold_text == gold.text:
        numeral = _base_numeral(answer)  # 12_5 is not 12_6, though math-verify drops the subscript
        same = numeral is not None and numeral[0] == gold.base[0] and numeral[1] in (None, gold.base[1])
        return same, "numeral in base", False
    decided = exact_equal(clean(gold_text), clean(answer))
    if decided is not None:
        return decided, "exact number comparison", False
    numbers = [exact_value(clean(side)) is not None for side in (gold_text, answer)]
    # A number, or a constant (or a tuple of constants) of approx's small grammar, is read whole by any parser;
    # other golds must be known to parse before a decision made here counts.
    unknown = not numbers[0] and constant_values(gold_text) is None
    if numbers[0] != numbers[1]:  # a number against something else that is plainly not a number
        other = answer if numbers[0] else gold_text
        if _plain(other) and _VARIABLE.search(_COMMAND.sub("", other)) and not _WORDS.search(other):
            return False, "a number is not an expression in variables", unknown  # 5 vs x + 1: no need for sympy
        if _plain(other) and _items(other) > 1:
            return False, "one value against several", unknown  # 5 vs (8, 38)
    if far_apart(gold_text, answer):
        return False, "values far apart", unknown  # 1 vs \\sqrt{29}, 686\\pi vs 4: no need for sympy
    if _spacing(gold_text) == _spacing(answer):
        return True, "same text as a gold that math-verify reads", unknown
    return None, "", unknown


def _plain(text: str) -> bool:
    """Math without relations, sets, prose, matrices or math delimiters: its shape can be read off the text."""
    if _RELATION.search(text) or _OR_WORDS.search(text) or _NOT_PLAIN.search(text):
        return False
    return not clean(text).startswith("{")


def _items(text: str) -> int:
    """How many values a plain answer lists: "(8, 38)" and "1, 2" are two, "(1, 2]" too, "5" is one."""
    cleaned = clean(text)
    items = 1 + _flat(cleaned).count(",")
    bracketed = len(cleaned) > 1 and cleaned.startswith(("(", "[")) and cleaned.endswith((")", "]"))
    if items == 1 and bracketed and "(" not in _flat(cleaned[1:-1]):
        items = 1 + _flat(cleaned[1:-1]).count(",")  # one pair of brackets around a tuple or an interval
    return items


def _flat(text: str) -> str:
    """The text with everything inside brackets removed (its top level)."""
    out, depth = [], 0
    for char in text:
        depth += 1 if char in "([{" else 0
        if depth == 0:
            out.append(char)
        depth -= 1 if char in ")]}" and depth else 0
    return "".join(out)
