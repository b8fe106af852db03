"""The math verifier's decisions before any comparison, and the Verdict every decision ends in.

`precheck` decides a completion that needs no comparison (an unreadable gold, no final answer, a hedged answer,
the anti-hacking rules: alternatives for a single-valued gold, too many values stated together, an empty or
absurdly long answer, look-alike digits), else returns the `Plan` of what remains to compare.
"""

from __future__ import annotations

from dataclasses import dataclass

from rewards.math.answers import answer_boxes, final_group, find_boxes, tidy
from rewards.math.compare import Gold, comparisons, distinct, lists_alternatives
from rewards.math.extract import final_segment
from rewards.math.literal import literal_problem
from rewards.math.statements import HEDGED, NOT_FOUND, hedges_inside, last_statement

MAX_ANSWER_CHARS = 1_000  # no real answer is longer; a longer one is a dump, and costs the parser dearly
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
class Plan:
    """What remains to decide one completion: its answers (stated together), each a list of pairs."""

    shown: str
    checks: list[list[tuple[str, str]]]
    not_a_number: str | None = None  # with require_number: why an answer that equals the gold still fails


def precheck(gold: Gold, completion: str, fallbacks: bool, require_number: bool = False):
    """A Verdict when the completion is decided before any comparison, else a Plan."""
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
    plan = Plan(answers[-1], [comparisons(gold, answer) for answer in answers])
    if require_number and gold.number:  # every answer stated, not one per value: `\\boxed{12}, \\boxed{7+5}`
        plan.not_a_number = next(filter(None, (literal_problem(answer, gold.text) for answer in stated)), None)
    return plan
