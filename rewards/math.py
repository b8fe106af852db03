"""Is this math completion correct? The verifier every stage shares, and the `math_accuracy` reward.

The GRPO reward, the pass-rate filter, rejection sampling and pass@k all call `verify` / `verify_batch`,
so a training signal and an evaluation number cannot disagree about what "correct" means.

Order of decisions for one completion:
1. extraction, after the last `</think>` (a reasoning that opens `<think>` and never closes it has no
   final answer): the boxes that state the final answer, by rewards.math_answers' rule: the last box
   and the boxes stated together with it; earlier boxes followed by more work are steps and do not count.
   Optional fallbacks ("Answer: ...", "the final answer is ...") are off by default;
2. anti-hacking, each with its reason: boxes stated together must all equal the gold *by value*, so
   "\\boxed{3} or \\boxed{4}" scores 0 whichever is right, while "\\boxed{-b+2}, or \\boxed{2 - b}" is
   one answer; alternatives inside one box when the gold is one value ("3 or 4", "41, 42, 43",
   "\\pm 2"), an empty or absurdly long answer, and look-alike (non-ASCII) digits are all incorrect;
3. local decisions, in this process and without sympy: exact numbers (integers, decimals, fractions,
   powers, factorials: rewards.exact; every AIME answer), multiple-choice letters, and an answer written
   exactly as a gold already known to parse;
4. everything else goes to math-verify (gold first, LaTeX wrapped in `$...$`) in worker processes with a
   hard deadline per item (rewards.math_pool), through a cache keyed on (gold, answer).

A gold is scored only when it parses *as a whole* once tidied (rewards.math_answers.tidy: `\\phantom`,
trailing punctuation, a `\\text{}` wrapper, a unit in words); otherwise `correct=None` with the reason,
never a comparison with a fragment of it (math-verify alone reads `2007 + \\frac\\pi 2` as "2").
An equation between two constants (`0.56 = 56\\%`) is compared side by side; other equations go to
math-verify, which compares both sides, or the right side when the left is a lone variable.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass

from rewards.approx import constant_values, far_apart
from rewards.exact import exact_equal, exact_value, normalize
from rewards.math_answers import answer_boxes, final_group, find_boxes, matching_braces, tidy, unwrap_text
from rewards.registry import register
from rewards.text import column, completion_text

logger = logging.getLogger(__name__)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
MAX_ANSWER_CHARS = 1_000  # no real answer is longer; a longer one is a dump, and costs the parser dearly
DEFAULT_TIMEOUT_S = 2.0

_FALLBACK = re.compile(r"(?:the final answer is|answer\s*:)", re.IGNORECASE)
_OR_WORDS = re.compile(r"(?<![a-zA-Z\\])(?:or|and)(?![a-zA-Z])|\\lor(?![a-zA-Z])|\\vee(?![a-zA-Z])")
_PLUS_MINUS = re.compile(r"\\pm(?![a-zA-Z])|\\mp(?![a-zA-Z])|[\u00b1\u2213]")
_ASSIGNMENT = re.compile(r"^\s*[a-zA-Z](?:_\{?[a-zA-Z0-9]+\}?)?\s*=(?!=)\s*")
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
MAX_STATED = 8  # more different values stated together than any single-valued answer needs


@dataclass(frozen=True)
class Verdict:
    """The verifier's decision on one completion.

    `correct` is None when the gold answer itself cannot be read: such a row cannot be scored and must
    never count as solved. `reason` says why, in words a log reader understands.
    """

    correct: bool | None
    extracted: str | None
    reason: str


# ---------------------------------------------------------------- extraction


def final_segment(text: str) -> str | None:
    """The part of a completion after its last `</think>`; all of it when it has no think tags;
    None when a `<think>` is opened and never closed (the model never reached an answer)."""
    cut = text.rfind(THINK_CLOSE)
    if cut >= 0:
        return text[cut + len(THINK_CLOSE) :]
    return None if THINK_OPEN in text else text


def boxed_answers(text: str) -> list[str]:
    """Contents of the outermost `\\boxed{}` / `\\fbox{}` / `\\framebox{}` with balanced braces, in order
    (a box nested in another counts once, as its outer box; `\\boxed{\\boxed{5}}` gives "5")."""
    return [box.content for box in find_boxes(text)]


def _fallback_answer(segment: str) -> str | None:
    matches = list(_FALLBACK.finditer(segment))
    if not matches:
        return None
    line = segment[matches[-1].end() :].split("\n", 1)[0]
    answer = line.strip().strip("$").strip().rstrip(".").strip().strip("$").strip()
    return answer or None


def extract_answer(text: str | None, fallbacks: bool = False) -> str | None:
    """The final answer of a completion (its last box), or None. With `fallbacks`, "Answer: X" /
    "the final answer is X" count when there is no box."""
    if not text:
        return None
    segment = final_segment(text)
    if segment is None:
        return None
    boxed = answer_boxes(segment)
    if boxed:
        return boxed[-1].content or None
    return _fallback_answer(segment) if fallbacks else None


# ---------------------------------------------------------------- anti-hacking


def _clean(answer: str) -> str:
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


def _lists_alternatives(answer: str) -> bool:
    """Several values: "3 or 4", "41, 42, 43", "\\pm 2" (but "11,\\! 111" is one number)."""
    if _OR_WORDS.search(answer) or _PLUS_MINUS.search(answer):  # on the raw text: spaces delimit "or"
        return True
    return _top_level_separators(_clean(answer))


def answer_key(answer: str):
    """Equal keys for spellings of the same answer: the exact value of a number, else the canonical text."""
    cleaned = _clean(tidy(answer))
    value = exact_value(cleaned)
    return ("number", value) if value is not None else ("text", cleaned)


def _distinct(answers: list[str]) -> list[str]:
    """The answers without repeats (in order of first appearance); linear in their number."""
    seen: dict = {}
    for answer in answers:
        seen.setdefault(answer_key(answer), answer)
    return list(seen.values())


def _spacing(text: str) -> str:
    """Whitespace that cannot change the meaning removed (kept between two letters: `\\pi r`)."""
    return _SPACE.sub("", text)


@dataclass(frozen=True)
class _Gold:
    """A gold answer read once (every completion of a problem shares it): its tidied text and what is
    known about it without math-verify."""

    text: str
    unscorable: str | None  # the reason it cannot be scored, when known here
    single: bool  # one value, not a list
    choice: str | None  # "E" for a multiple-choice gold such as "\\text{(E)}"
    sides: tuple[str, str] | None  # an equation between two constants
    base: tuple[str, int] | None  # a numeral in a base, `1101_2`: compared digit by digit, base by base


_GOLDS: dict[str, _Gold] = {}


def _read_gold(raw) -> _Gold:
    key = str(raw) if raw is not None else ""
    known = _GOLDS.get(key)
    if known is not None:
        return known
    text = key.strip()
    boxes = answer_boxes(text)
    if boxes:  # a worked solution ending in \\boxed{...}: its final answer
        text = ", ".join(_distinct(final_group(text, boxes)))
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
    gold = _Gold(
        text=text,
        unscorable=None if text else "gold answer is empty",
        single=not _lists_alternatives(text),
        choice=choice.group(1) if choice else None,
        sides=sides,
        base=numeral if numeral and numeral[1] is not None else None,
    )
    if len(_GOLDS) > _CACHE_LIMIT:
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


def _answer_problem(answer: str, gold: _Gold) -> str | None:
    """Why this answer is incorrect before any comparison, or None."""
    if not answer:
        return "empty answer"
    if len(answer) > MAX_ANSWER_CHARS:
        return f"answer longer than {MAX_ANSWER_CHARS} characters"
    if any(char.isdecimal() and not char.isascii() for char in answer):  # "４２", "٤٢"; not "m²"
        return "non-ASCII (look-alike) digits"
    if gold.single and _lists_alternatives(answer):
        return "lists alternatives for a single-valued answer"
    return None


def _comparisons(gold: _Gold, answer: str) -> list[tuple[str, str]]:
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


def _local(gold: _Gold, gold_text: str, answer: str) -> tuple[bool | None, str, bool]:
    """A decision made here without sympy, or None when math-verify must decide; the last item says whether
    the decision holds only for a gold that math-verify reads as a whole (else the row is not scored)."""
    if gold.choice is not None:
        letter = _CHOICE.match(answer)
        return (letter is not None and letter.group(1) == gold.choice), "multiple-choice letter", False
    if gold.base is not None and gold_text == gold.text:
        numeral = _base_numeral(answer)  # 12_5 is not 12_6, though math-verify drops the subscript
        same = numeral is not None and numeral[0] == gold.base[0] and numeral[1] in (None, gold.base[1])
        return same, "numeral in base", False
    decided = exact_equal(_clean(gold_text), _clean(answer))
    if decided is not None:
        return decided, "exact number comparison", False
    numbers = [exact_value(_clean(side)) is not None for side in (gold_text, answer)]
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
    return not _clean(text).startswith("{")


def _items(text: str) -> int:
    """How many values a plain answer lists: "(8, 38)" and "1, 2" are two, "(1, 2]" too, "5" is one."""
    cleaned = _clean(text)
    items = 1 + _flat(cleaned).count(",")
    if items == 1 and cleaned[:1] in "([" and cleaned[-1:] in ")]" and "(" not in _flat(cleaned[1:-1]):
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


@dataclass
class _Plan:
    """What remains to decide one completion: its answers (stated together), each a list of pairs."""

    shown: str
    checks: list[list[tuple[str, str]]]


def _precheck(gold: _Gold, completion: str, fallbacks: bool):
    """A Verdict when the completion is decided before any comparison, else a _Plan."""
    if gold.unscorable:
        return Verdict(None, None, gold.unscorable)
    segment = final_segment(completion) if completion else None
    if segment is None:
        reason = "empty completion" if not completion else "reasoning never closed with </think>"
        return Verdict(False, None, reason)
    boxes = answer_boxes(segment)
    if boxes:
        stated = [tidy(answer.replace("\\$", "")) for answer in final_group(segment, boxes)]
        distinct = _distinct(stated)
        if gold.single and len(distinct) > MAX_STATED:
            return Verdict(False, stated[-1], "two or more distinct boxed answers stated together")
        # A gold that lists several values may be answered one box per value: compare them as a list.
        answers = distinct if gold.single else [", ".join(distinct)]
    else:
        answer = _fallback_answer(segment) if fallbacks else None
        if answer is None:
            empty = find_boxes(segment)  # only blank or phantom boxes
            return Verdict(False, empty[-1].content if empty else None, "empty answer" if empty else "no boxed answer")
        answers = [tidy(answer.replace("\\$", ""))]
    for answer in answers:
        problem = _answer_problem(answer, gold)
        if problem:
            return Verdict(False, answer[:100] + ("..." if len(answer) > 100 else ""), problem)
    return _Plan(answers[-1], [_comparisons(gold, answer) for answer in answers])


# ---------------------------------------------------------------- verification


_CACHE: dict[tuple[str, str], dict] = {}
_CACHE_LIMIT = 200_000
_CACHE_LOCK = threading.Lock()
_GOLD_PARSES: dict[str, bool] = {}  # tidied gold -> whether math-verify reads it as a whole
_WARNED_GOLDS: set[str] = set()


def _pair_result(result: dict, timeout_s: float) -> tuple[bool | None, str]:
    if result.get("timeout"):
        return False, f"verification overran {timeout_s:g} s"
    if result.get("gold_ok") is False:
        return None, "gold answer cannot be parsed as a whole"
    if result.get("error"):
        return False, f"verifier error: {result['error']}"
    if not result.get("answer_ok", True):
        return False, "answer cannot be parsed"
    return bool(result.get("equal")), "math-verify"


def _combine(plan: _Plan, outcomes: list[list[tuple[bool | None, str]]]) -> Verdict:
    """All answers stated together must equal the gold; a gold that cannot be read scores nothing."""
    flat = [outcome for answer in outcomes for outcome in answer]
    unscorable = [reason for correct, reason in flat if correct is None]
    if unscorable:
        return Verdict(None, plan.shown, unscorable[0])
    last = outcomes[-1]
    failed = [reason for correct, reason in last if not correct]
    if failed:
        return Verdict(False, plan.shown, failed[0])
    if any(not correct for answer in outcomes[:-1] for correct, _ in answer):
        return Verdict(False, plan.shown, "two or more distinct boxed answers stated together")
    reasons = sorted({reason for _, reason in flat})
    return Verdict(True, plan.shown, " + ".join(reasons))


def verify_batch(
    golds: list,
    completions: list[str],
    ids: list | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fallbacks: bool = False,
    pool=None,
) -> list[Verdict]:
    """Verdicts for many completions; the comparisons math-verify must decide run in parallel in the pool."""
    if len(golds) != len(completions):
        raise ValueError(f"{len(golds)} gold answers for {len(completions)} completions")
    ids = ids if ids is not None else [None] * len(golds)
    verdicts: list[Verdict | None] = [None] * len(golds)
    plans: dict[int, tuple[_Plan, _Gold]] = {}
    for index, (raw, completion) in enumerate(zip(golds, completions, strict=True)):
        gold = _read_gold(raw)
        decided = _precheck(gold, completion if isinstance(completion, str) else "", fallbacks)
        if isinstance(decided, Verdict):
            verdicts[index] = decided
        else:
            plans[index] = (decided, gold)
    outcomes: dict[int, list[list]] = {}
    open_items = []  # comparisons not decided yet: (index, answer number, pair number, pair, local decision)
    for index, (plan, gold) in plans.items():
        outcomes[index] = [[None] * len(check) for check in plan.checks]
        for a, check in enumerate(plan.checks):
            for c, pair in enumerate(check):
                decided, reason, needs_gold = _local(gold, *pair)
                if decided is not None and not needs_gold:
                    outcomes[index][a][c] = (decided, reason)
                else:
                    open_items.append((index, a, c, pair, (decided, reason)))
    # Golds not yet known to parse: one real comparison each first (an answer written as the gold if there is
    # one, which the worker decides from the gold's parse alone); it tells whether the gold reads as a whole.
    probes: dict[str, tuple[str, str]] = {}
    for _, _, _, pair, _ in open_items:
        if pair[0] not in _GOLD_PARSES and (pair[0] not in probes or pair[1] == pair[0]):
            probes[pair[0]] = pair
    _learn(list(probes.values()), timeout_s, pool)
    pending: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for index, a, c, pair, local in open_items:
        parses = _GOLD_PARSES.get(pair[0])
        if parses is False:
            outcomes[index][a][c] = (None, "gold answer cannot be parsed as a whole")
        elif parses and local[0] is not None:
            outcomes[index][a][c] = local
        else:
            pending.setdefault(pair, []).append((index, a, c))
    pairs = list(pending)
    for pair, result in zip(pairs, _learn(pairs, timeout_s, pool), strict=True):
        for index, a, c in pending[pair]:
            outcomes[index][a][c] = _pair_result(result, timeout_s)
    for index, (plan, _) in plans.items():
        verdicts[index] = _combine(plan, outcomes[index])
    for index, verdict in enumerate(verdicts):
        if verdict.correct is None:
            key = f"row {ids[index]}" if ids[index] is not None else f"gold {golds[index]!r}"
            if key not in _WARNED_GOLDS:
                _WARNED_GOLDS.add(key)
                logger.warning("%s: %s (gold %r); it is not scored", key, verdict.reason, golds[index])
    return verdicts


def _learn(pairs: list[tuple[str, str]], timeout_s: float, pool) -> list[dict]:
    """_compare, remembering for each gold whether math-verify read it as a whole."""
    results = _compare(pairs, timeout_s, pool)
    for pair, result in zip(pairs, results, strict=True):
        if not result.get("timeout") and (result.get("gold_ok") is False or not result.get("error")):
            _GOLD_PARSES[pair[0]] = result.get("gold_ok") is not False
    return results


def _compare(pairs: list[tuple[str, str]], timeout_s: float, pool) -> list[dict]:
    """math-verify's results for these pairs, from the cache or the worker pool."""
    results: list[dict | None] = [None] * len(pairs)
    if not pairs:
        return []
    with _CACHE_LOCK:
        for position, pair in enumerate(pairs):
            results[position] = _CACHE.get(pair)
    missing = [position for position, result in enumerate(results) if result is None]
    if missing:
        from rewards.math_pool import shared_pool

        fresh = (pool or shared_pool()).compare([pairs[position] for position in missing], timeout_s)
        with _CACHE_LOCK:
            if len(_CACHE) > _CACHE_LIMIT:
                _CACHE.clear()
            for position, result in zip(missing, fresh, strict=True):
                results[position] = result
                if "verifier process died" not in str(result.get("error")):
                    _CACHE[pairs[position]] = result
    return results


def verify(
    gold: str,
    completion: str,
    row_id=None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fallbacks: bool = False,
) -> Verdict:
    """Score one completion against a gold answer."""
    return verify_batch([gold], [completion], [row_id], timeout_s=timeout_s, fallbacks=fallbacks)[0]


# ---------------------------------------------------------------- the reward


@register("math_accuracy")
def make_math_accuracy(timeout_s: float = DEFAULT_TIMEOUT_S, fallbacks: bool = False):
    """1.0 for a correct final answer, 0.0 otherwise, None for a row whose gold cannot be read."""

    def math_accuracy(completions, answer, **kwargs) -> list[float | None]:
        texts = [completion_text(completion) for completion in completions]
        ids = column(kwargs, "id", len(texts))
        verdicts = verify_batch(list(answer), texts, ids, timeout_s=timeout_s, fallbacks=fallbacks)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("math_accuracy reasons: %s", dict(Counter(verdict.reason for verdict in verdicts)))
        return [None if verdict.correct is None else float(verdict.correct) for verdict in verdicts]

    return math_accuracy


math_accuracy = make_math_accuracy()
