"""Is this math completion correct? The verifier every stage shares, and the `math_accuracy` reward.

The GRPO reward, the pass-rate filter, rejection sampling and pass@k all call `verify` / `verify_batch`,
so a training signal and an evaluation number cannot disagree about what "correct" means.

Order of decisions for one completion:
1. extraction: the last `\\boxed{...}` / `\\fbox{...}` with balanced braces, looking only after the last
   `</think>` (a reasoning that opens `<think>` and never closes it has no final answer); optional
   fallbacks ("Answer: ...", "the final answer is ...") off by default;
2. anti-hacking, each with its reason: two or more distinct boxed answers, alternatives listed when
   the gold is one value ("3 or 4", "41, 42, 43", "\\pm 2"), an empty or absurdly long answer, and
   look-alike (non-ASCII) digits are all incorrect. Repeating the same answer is fine;
3. exact numbers: integers, decimals, fractions, powers and factorials compare exactly
   (rewards.exact), in this process, with no sympy: every AIME answer takes this path;
4. everything else goes to math-verify (gold first, bare LaTeX wrapped in `$...$`) in worker processes
   with a hard deadline per item (rewards.math_pool), through a cache keyed on (gold, answer).

A gold answer that cannot be parsed gives `correct=None` (TRL then ignores the row), never a reward.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass

from rewards.exact import exact_equal, exact_value, normalize
from rewards.registry import register
from rewards.text import column, completion_text

logger = logging.getLogger(__name__)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
MAX_ANSWER_CHARS = 1_000  # no real answer is longer; a longer one is a dump, and costs the parser dearly
DEFAULT_TIMEOUT_S = 2.0

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"[{}]")
_FALLBACK = re.compile(r"(?:the final answer is|answer\s*:)", re.IGNORECASE)
_OR_WORDS = re.compile(r"(?<![a-zA-Z\\])(?:or|and)(?![a-zA-Z])|\\lor(?![a-zA-Z])|\\vee(?![a-zA-Z])")
_PLUS_MINUS = re.compile(r"\\pm(?![a-zA-Z])|\\mp(?![a-zA-Z])|[\u00b1\u2213]")
_ASSIGNMENT = re.compile(r"^\s*[a-zA-Z](?:_\{?[a-zA-Z0-9]+\}?)?\s*=(?!=)\s*")
_TEXT_WRAPPER = re.compile(r"^\\(?:text|mathrm|textbf|mathbf)\{(.*)\}$", re.DOTALL)


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


def _matching_braces(text: str) -> dict[int, int]:
    """Position of each `{` -> position of its matching `}`, in one pass (linear even for 1 MB of braces)."""
    matches, stack = {}, []
    for match in _BRACE.finditer(text):
        if match.group() == "{":
            stack.append(match.start())
        elif stack:
            matches[stack.pop()] = match.start()
    return matches


def boxed_answers(text: str) -> list[str]:
    """Contents of the outermost `\\boxed{}` / `\\fbox{}` with balanced braces, in order.

    A box nested in another counts once, as its outer box, and a box that only wraps another box is
    unwrapped (`\\boxed{\\boxed{5}}` gives "5"). Linear in the text, whatever the nesting depth.
    """
    matches = None
    found, covered_until = [], -1
    for match in _BOX_OPEN.finditer(text):
        if match.start() < covered_until:
            continue  # inside the previous box
        if matches is None:
            matches = _matching_braces(text)
        close = matches.get(match.end() - 1)
        if close is None:
            continue  # unbalanced: not an answer
        covered_until = close
        start, end = match.end(), close
        while True:  # unwrap \\boxed{\\boxed{...}}, using the positions already matched
            first = start
            while first < end and text[first].isspace():
                first += 1
            inner = _BOX_OPEN.match(text, first, end)
            inner_close = matches.get(inner.end() - 1) if inner else None
            if inner_close is None or text[inner_close + 1 : end].strip():
                break
            start, end = inner.end(), inner_close
        found.append(text[start:end].strip())
    return found


def _fallback_answer(segment: str) -> str | None:
    matches = list(_FALLBACK.finditer(segment))
    if not matches:
        return None
    line = segment[matches[-1].end() :].split("\n", 1)[0]
    answer = line.strip().strip("$").strip().rstrip(".").strip().strip("$").strip()
    return answer or None


def extract_answer(text: str | None, fallbacks: bool = False) -> str | None:
    """The final answer of a completion, or None. With `fallbacks`, "Answer: X" / "the final answer is X"
    count when there is no box."""
    if not text:
        return None
    segment = final_segment(text)
    if segment is None:
        return None
    boxed = boxed_answers(segment)
    if boxed:
        return boxed[-1] or None
    return _fallback_answer(segment) if fallbacks else None


# ---------------------------------------------------------------- anti-hacking


def _clean(answer: str) -> str:
    """A canonical spelling used to tell repeated answers from distinct ones and to parse exact numbers."""
    answer = normalize(answer)
    wrapped = _TEXT_WRAPPER.match(answer)
    return wrapped.group(1) if wrapped else answer


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


def _is_single_value(gold: str) -> bool:
    return not _lists_alternatives(gold)


def answer_key(answer: str):
    """Equal keys for spellings of the same answer: the exact value of a number, else the canonical text."""
    cleaned = _clean(answer)
    value = exact_value(cleaned)
    return ("number", value) if value is not None else ("text", cleaned)


def _distinct(answers: list[str]) -> list[str]:
    """The answers without repeats (in order of first appearance); linear in their number."""
    seen: dict = {}
    for answer in answers:
        seen.setdefault(answer_key(answer), answer)
    return list(seen.values())


def _clean_gold(gold: str) -> str:
    """The answer part of a gold string: the content of its boxes when it has any (a worked solution
    ending in \\boxed{...}), the text itself otherwise."""
    gold = gold.strip()
    distinct = _distinct(boxed_answers(gold))
    if distinct:
        gold = ", ".join(distinct)
    gold = gold.strip().strip("$").strip()
    if gold.startswith("{") and _matching_braces(gold).get(0) == len(gold) - 1:
        gold = gold[1:-1]  # "{1,2,3}": LaTeX grouping around a list of values
    return gold


def _precheck(gold, completion: str, fallbacks: bool):
    """A Verdict when the completion is decided without math-verify, else the (gold, answer) pair to compare."""
    if gold is None or not str(gold).strip():
        return Verdict(None, None, "gold answer is empty")
    gold = _clean_gold(str(gold))
    segment = final_segment(completion) if completion else None
    if segment is None:
        reason = "empty completion" if not completion else "reasoning never closed with </think>"
        return Verdict(False, None, reason)
    boxed = boxed_answers(segment)
    if boxed:
        distinct = _distinct(boxed)
        if len(distinct) > 1 and _is_single_value(gold):
            return Verdict(False, boxed[-1], "two or more distinct boxed answers")
        # A gold that lists several values may be answered one box per value: compare them as a list.
        answer = ", ".join(distinct)
    else:
        answer = _fallback_answer(segment) if fallbacks else None
        if answer is None:
            return Verdict(False, None, "no boxed answer")
    answer = answer.replace("\\$", "").strip()  # currency: \\$16,386.17 is 16386.17
    if not answer:
        return Verdict(False, answer, "empty answer")
    if len(answer) > MAX_ANSWER_CHARS:
        return Verdict(False, answer[:100] + "...", f"answer longer than {MAX_ANSWER_CHARS} characters")
    if any(char.isdecimal() and not char.isascii() for char in answer):  # "４２", "٤٢"; not "m²"
        return Verdict(False, answer, "non-ASCII (look-alike) digits")
    if _is_single_value(gold) and _lists_alternatives(answer):
        return Verdict(False, answer, "lists alternatives for a single-valued answer")
    comparable = answer if "=" in gold else _ASSIGNMENT.sub("", answer, count=1)
    decided = exact_equal(_clean(gold), _clean(comparable))
    if decided is not None:
        return Verdict(decided, answer, "exact number comparison")
    return gold, answer


# ---------------------------------------------------------------- verification


_CACHE: dict[tuple[str, str], dict] = {}
_CACHE_LIMIT = 200_000
_CACHE_LOCK = threading.Lock()
_WARNED_GOLDS: set[str] = set()


def _verdict_from(result: dict, answer: str, timeout_s: float) -> Verdict:
    if result.get("timeout"):
        return Verdict(False, answer, f"verification overran {timeout_s:g} s")
    if result.get("gold_ok") is False:
        return Verdict(None, answer, "gold answer cannot be parsed")
    if result.get("error"):
        return Verdict(False, answer, f"verifier error: {result['error']}")
    if not result.get("answer_ok", True):
        return Verdict(False, answer, "answer cannot be parsed")
    return Verdict(bool(result.get("equal")), answer, "math-verify")


def verify_batch(
    golds: list,
    completions: list[str],
    ids: list | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fallbacks: bool = False,
    pool=None,
) -> list[Verdict]:
    """Verdicts for many completions; the ones math-verify must decide run in parallel in the worker pool."""
    if len(golds) != len(completions):
        raise ValueError(f"{len(golds)} gold answers for {len(completions)} completions")
    ids = ids if ids is not None else [None] * len(golds)
    verdicts: list[Verdict | None] = [None] * len(golds)
    pending: dict[tuple[str, str], list[int]] = {}
    for index, (gold, completion) in enumerate(zip(golds, completions, strict=True)):
        decided = _precheck(gold, completion if isinstance(completion, str) else "", fallbacks)
        if isinstance(decided, Verdict):
            verdicts[index] = decided
            continue
        with _CACHE_LOCK:
            cached = _CACHE.get(decided)
        if cached is not None:
            verdicts[index] = _verdict_from(cached, decided[1], timeout_s)
        else:
            pending.setdefault(decided, []).append(index)
    if pending:
        from rewards.math_pool import shared_pool

        pairs = list(pending)
        results = (pool or shared_pool()).compare(pairs, timeout_s)
        with _CACHE_LOCK:
            if len(_CACHE) > _CACHE_LIMIT:
                _CACHE.clear()
            for pair, result in zip(pairs, results, strict=True):
                if "verifier process died" not in str(result.get("error")):
                    _CACHE[pair] = result
        for pair, result in zip(pairs, results, strict=True):
            for index in pending[pair]:
                verdicts[index] = _verdict_from(result, pair[1], timeout_s)
    for index, verdict in enumerate(verdicts):
        if verdict.correct is None:
            key = f"row {ids[index]}" if ids[index] is not None else f"gold {golds[index]!r}"
            if key not in _WARNED_GOLDS:
                _WARNED_GOLDS.add(key)
                logger.warning("%s: %s (gold %r); it is not scored", key, verdict.reason, golds[index])
    return verdicts


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
