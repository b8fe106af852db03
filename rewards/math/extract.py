"""Extraction: the final answer of a math completion, after its last `</think>`, by the boxes that state it.

A reasoning that opens `<think>` and never closes it has no final answer. Which boxes state the final answer
(the last box and the boxes stated together with it) is rewards.math.answers' rule; the unboxed "the answer is
X" statements are rewards.math.statements'.
"""

from __future__ import annotations

from rewards.math.answers import answer_boxes, find_boxes
from rewards.math.statements import last_statement

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


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
