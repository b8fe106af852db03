"""Is this math completion correct? The verifier every stage shares, and the `math_accuracy` reward.

The GRPO reward, the pass-rate filter, rejection sampling and pass@k all call `verify` / `verify_batch`,
so a training signal and an evaluation number cannot disagree about what "correct" means.

Order of decisions for one completion:
1. extraction, after the last `</think>` (a reasoning that opens `<think>` and never closes it has no
   final answer): the boxes that state the final answer, by rewards.math.answers' rule: the last box
   and the boxes stated together with it; earlier boxes followed by more work are steps and do not count.
   Optional fallbacks, off by default: the last unboxed "the answer is X" / "Answer: X" statement, with
   hedged statements scoring 0 (rewards.math.statements);
2. anti-hacking, each with its reason: boxes stated together must all equal the gold *by value*, so
   "\\boxed{3} or \\boxed{4}" scores 0 whichever is right, while "\\boxed{-b+2}, or \\boxed{2 - b}" is
   one answer; alternatives inside one box when the gold is one value ("3 or 4", "41, 42, 43",
   "\\pm 2"), an empty or absurdly long answer, and look-alike (non-ASCII) digits are all incorrect;
   with `require_number` (per row, or for a whole batch), an answer to a gold that is a number must be a
   number literal, not an expression that evaluates to it (rewards.math.literal): `\\boxed{7+5}` for 12 is
   incorrect, "an expression, not a number" (checked after the comparison, so a wrong answer keeps its reason);
3. local decisions, in this process and without sympy (rewards.math.compare): exact numbers (integers,
   decimals, fractions, powers, factorials: rewards.exact; every AIME answer), multiple-choice letters,
   numerals in a base, rejections of a number against variables, several values or a constant far from
   it (rewards.approx), and an answer written as a gold known to parse (a gold's first real comparison
   tells, once per gold);
4. everything else goes to math-verify (gold first, LaTeX wrapped in `$...$`) in worker processes with a
   hard deadline per item (rewards.math.pool), through a cache keyed on (gold, answer).

A gold is scored only when it parses *as a whole* once tidied (rewards.math.answers.tidy: `\\phantom`,
trailing punctuation, a `\\text{}` wrapper, a unit in words); otherwise `correct=None` with the reason,
never a comparison with a fragment of it (math-verify alone reads `2007 + \\frac\\pi 2` as "2").
An equation between two constants (`0.56 = 56\\%`) is compared side by side; other equations go to
math-verify, which compares both sides, or the right side when the left is a lone variable.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rewards.math.answers import answer_boxes, final_group, find_boxes, tidy
from rewards.math.compare import (
    Gold,
    answer_key,  # noqa: F401 - part of this module's interface (eval.voting groups answers with it)
    comparisons,
    distinct,
    lists_alternatives,
    local_decision,
    read_gold,
)
from rewards.math.literal import literal_problem
from rewards.math.statements import HEDGED, NOT_FOUND, hedges_inside, last_statement
from rewards.options import REQUIRE_NUMBER, choice_of
from rewards.registry import register
from rewards.text import column, completion_text

logger = logging.getLogger(__name__)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
MAX_ANSWER_CHARS = 1_000  # no real answer is longer; a longer one is a dump, and costs the parser dearly
DEFAULT_TIMEOUT_S = 2.0
STARTUP_WAIT_S = 60.0
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


def extract_answer(text: str | None, fallbacks: bool = False) -> str | None:
    """The final answer of a completion (its last box), or None. With `fallbacks`, the last "the answer is X"
    / "Answer: X" statement counts when there is no box (rewards.math.statements; a hedged one is None)."""
    if not text:
        return None
    segment = final_segment(text)
    if segment is None:
        return None
    boxed = answer_boxes(segment)
    if boxed:
        return boxed[-1].content or None
    statement = last_statement(segment) if fallbacks else None
    return statement.answer if statement and not statement.hedged else None


def _answer_problem(answer: str, gold: Gold) -> str | None:
    """Why this answer is incorrect before any comparison, or None."""
    if not answer:
        return "empty answer"
    if len(answer) > MAX_ANSWER_CHARS:
        return f"answer longer than {MAX_ANSWER_CHARS} characters"
    if any(char.isdecimal() and not char.isascii() for char in answer):  # "４２", "٤٢"; not "m²"
        return "non-ASCII (look-alike) digits"
    if gold.single and lists_alternatives(answer):
        return "lists alternatives for a single-valued answer"
    return None


@dataclass
class _Plan:
    """What remains to decide one completion: its answers (stated together), each a list of pairs."""

    shown: str
    checks: list[list[tuple[str, str]]]
    not_a_number: str | None = None  # with require_number: why an answer that equals the gold still fails


def _precheck(gold: Gold, completion: str, fallbacks: bool, require_number: bool = False):
    """A Verdict when the completion is decided before any comparison, else a _Plan."""
    if gold.unscorable:
        return Verdict(None, None, gold.unscorable)
    segment = final_segment(completion) if completion else None
    if segment is None:
        reason = "empty completion" if not completion else "reasoning never closed with </think>"
        return Verdict(False, None, reason)
    boxes = answer_boxes(segment)
    if boxes:
        raw = final_group(segment, boxes)
        hedged = next((answer for answer in raw if hedges_inside(answer, gold.text)), None)
        if hedged is not None and not (
            gold.single and lists_alternatives(tidy(hedged))
        ):  # that has its reason  # before tidying, which strips a trailing `\text{ or so}` as if it were a unit
            return Verdict(False, hedged[:100], "hedged answer")
        stated = [tidy(answer.replace("\\$", "")) for answer in raw]
        different = distinct(stated)
        if gold.single and len(different) > MAX_STATED:
            return Verdict(False, stated[-1], "two or more distinct boxed answers stated together")
        # A gold that lists several values may be answered one box per value: compare them as a list.
        answers = different if gold.single else [", ".join(different)]
    else:
        statement = last_statement(segment) if fallbacks else None
        if statement is None:
            empty = find_boxes(segment)  # only blank or phantom boxes
            reason = "empty answer" if empty else NOT_FOUND if fallbacks else "no boxed answer"
            return Verdict(False, empty[-1].content if empty else None, reason)
        if statement.hedged:
            return Verdict(False, statement.answer[:100], HEDGED)
        answers = stated = [tidy(statement.answer.replace("\\$", ""))]
    for answer in answers:
        problem = _answer_problem(answer, gold)
        if problem:
            return Verdict(False, answer[:100] + ("..." if len(answer) > 100 else ""), problem)
    plan = _Plan(answers[-1], [comparisons(gold, answer) for answer in answers])
    if require_number and gold.number:  # every answer stated, not one per value: `\\boxed{12}, \\boxed{7+5}`
        plan.not_a_number = next(filter(None, (literal_problem(answer, gold.text) for answer in stated)), None)
    return plan


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
    if plan.not_a_number:  # the right value, written as an expression (`\\boxed{7+5}`): a wrong one keeps its reason
        return Verdict(False, plan.shown, plan.not_a_number)
    reasons = sorted({reason for _, reason in flat})
    return Verdict(True, plan.shown, " + ".join(reasons))


def verify_batch(
    golds: list,
    completions: list[str],
    ids: list | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fallbacks: bool = False,
    pool=None,
    require_number: bool | Sequence[bool | None] | None = False,
    warn_unscorable: bool = True,
) -> list[Verdict]:
    """Verdicts for many completions; the comparisons math-verify must decide run in parallel in the pool.

    `require_number`: one choice for the batch, or one per completion (a row's `require_number` column, None
    read as False): where the gold is a number, the answer must be a number literal, not an expression.
    `warn_unscorable=False`: no warning for a gold that cannot be read, for callers whose "golds" are not a
    dataset's (maj@k voting compares samples' answers with each other).
    """
    if len(golds) != len(completions):
        raise ValueError(f"{len(golds)} gold answers for {len(completions)} completions")
    ids = ids if ids is not None else [None] * len(golds)
    literal = per_completion(require_number, len(golds))
    verdicts: list[Verdict | None] = [None] * len(golds)
    plans: dict[int, tuple[_Plan, Gold]] = {}
    for index, (raw, completion) in enumerate(zip(golds, completions, strict=True)):
        gold = read_gold(raw)
        decided = _precheck(gold, completion if isinstance(completion, str) else "", fallbacks, literal[index])
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
                decided, reason, needs_gold = local_decision(gold, *pair)
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
        if verdict.correct is None and warn_unscorable:
            key = f"row {ids[index]}" if ids[index] is not None else f"gold {golds[index]!r}"
            if key not in _WARNED_GOLDS:
                _WARNED_GOLDS.add(key)
                logger.warning("%s: %s (gold %r); it is not scored", key, verdict.reason, golds[index])
    return verdicts


def per_completion(require_number: bool | Sequence[bool | None] | None, size: int) -> list[bool]:
    """`require_number` as one bool per completion: a single choice repeated, or a column checked for length."""
    if require_number is None or isinstance(require_number, (bool, int, str)):
        return [choice_of(require_number)] * size
    choices = [choice_of(choice) for choice in require_number]
    if len(choices) != size:
        raise ValueError(f"require_number has {len(choices)} values for {size} completions")
    return choices


def _learn(pairs: list[tuple[str, str]], timeout_s: float, pool) -> list[dict]:
    """_compare, remembering for each gold whether math-verify read it as a whole."""
    results = _compare(pairs, timeout_s, pool)
    if len(_GOLD_PARSES) > _CACHE_LIMIT:
        _GOLD_PARSES.clear()
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
        from rewards.math.pool import shared_pool

        fresh = (pool or shared_pool()).compare([pairs[position] for position in missing], timeout_s)
        with _CACHE_LOCK:
            if len(_CACHE) > _CACHE_LIMIT:
                _CACHE.clear()
            for position, result in zip(missing, fresh, strict=True):
                results[position] = result
                if "verifier process died" not in str(result.get("error")):
                    _CACHE[pairs[position]] = result
    return results


def start_workers(pool=None) -> None:
    """Boot the math-verify worker processes now (a one-time cost of a second or two), e.g. before timing;
    otherwise the first comparison that needs them starts them."""
    from rewards.math.pool import shared_pool

    (pool or shared_pool()).compare([("1", "1")], STARTUP_WAIT_S)


def verify(
    gold: str,
    completion: str,
    row_id=None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fallbacks: bool = False,
    require_number: bool = False,
) -> Verdict:
    """Score one completion against a gold answer (`require_number`: see verify_batch)."""
    options = {"timeout_s": timeout_s, "fallbacks": fallbacks, "require_number": require_number}
    return verify_batch([gold], [completion], [row_id], **options)[0]


# ---------------------------------------------------------------- the reward


def row_require_number(columns: dict, size: int) -> list[bool]:
    """Each row's `require_number` choice from a batch's columns (TRL's reward keyword arguments); False
    where the column is absent or empty."""
    return [choice_of(choice) for choice in column(columns, REQUIRE_NUMBER, size, default=False)]


@register("math_accuracy", accuracy=True)
def make_math_accuracy(
    timeout_s: float = DEFAULT_TIMEOUT_S, fallbacks: bool = False, require_number: bool | None = None
):
    """1.0 for a correct final answer, 0.0 otherwise, None for a row whose gold cannot be read.

    `require_number`: None (the default) follows each row's `require_number` column, as every other stage that
    scores the row does (the `arithmetic:` and `synthetic:` rows carry True); True or False sets it for all rows.
    """

    def math_accuracy(completions, answer, **kwargs) -> list[float | None]:
        texts = [completion_text(completion) for completion in completions]
        ids = column(kwargs, "id", len(texts))
        literal = row_require_number(kwargs, len(texts)) if require_number is None else require_number
        options = {"timeout_s": timeout_s, "fallbacks": fallbacks, "require_number": literal}
        verdicts = verify_batch(list(answer), texts, ids, **options)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("math_accuracy reasons: %s", dict(Counter(verdict.reason for verdict in verdicts)))
        return [None if verdict.correct is None else float(verdict.correct) for verdict in verdicts]

    return math_accuracy


math_accuracy = make_math_accuracy()
