"""Control rewards for the spurious-reward check of the seed checklist.

If a run trained with `random` improves as much as one trained with `math_accuracy`, the gain came from
something other than the reward (format learning, entropy changes, a contaminated evaluation set).
`format_only` isolates format learning: it pays for a final answer the verifier can read, right or wrong,
so a run trained on it shows how much of a gain "answer in a box" alone buys.
"""

from __future__ import annotations

import hashlib

from rewards.math import MAX_ANSWER_CHARS, final_segment
from rewards.math.answers import answer_boxes, final_group, tidy
from rewards.math.compare import distinct, lists_alternatives
from rewards.registry import register
from rewards.text import column, completion_text


def bernoulli(p: float, seed: int, key: str, text: str) -> float:
    """1.0 with probability p, decided by a hash of (seed, row key, completion): the same inputs always
    draw the same value, in any process and any order."""
    digest = hashlib.blake2b(f"{seed}\0{key}\0{text}".encode(), digest_size=8).digest()
    return float(int.from_bytes(digest, "big") / 2**64 < p)


@register("random")
def make_random(p: float = 0.5, seed: int = 0):
    """Bernoulli(p) rewards, independent of correctness, deterministic for a seed and (row id, completion)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")

    def random(completions, **kwargs) -> list[float]:
        ids, prompts = column(kwargs, "id", len(completions)), column(kwargs, "prompts", len(completions))
        keys = [
            str(row_id) if row_id is not None else repr(prompt) for row_id, prompt in zip(ids, prompts, strict=True)
        ]
        return [bernoulli(p, seed, key, completion_text(c)) for key, c in zip(keys, completions, strict=True)]

    return random


@register("constant")
def make_constant(value: float = 0.0):
    """The same reward for every completion: every GRPO group has zero variance, so no update happens."""

    def constant(completions, **kwargs) -> list[float]:
        return [float(value)] * len(completions)

    return constant


def readable_answer(text: str) -> str | None:
    """The one final answer math_accuracy would compare with a gold, or None when it would mark the completion
    wrong before any comparison: reasoning never closed, no box or an empty one, different values boxed
    together, alternatives in one box ("3 or 4"), an absurdly long answer, look-alike (non-ASCII) digits.

    The same extraction as the verifier's (rewards.math), with every check that does not need the gold.
    """
    segment = final_segment(text) if text else None
    if segment is None:
        return None
    boxes = answer_boxes(segment)
    if not boxes:
        return None
    stated = distinct([tidy(answer.replace("\\$", "")) for answer in final_group(segment, boxes)])
    if len(stated) != 1:
        return None
    answer = stated[0]
    if not answer.strip() or len(answer) > MAX_ANSWER_CHARS or lists_alternatives(answer):
        return None
    if any(char.isdecimal() and not char.isascii() for char in answer):
        return None
    return answer


@register("format_only")
def make_format_only():
    """1.0 for a completion with a readable boxed final answer (`readable_answer`), whatever its value, else 0.0.

    It never sees the gold: the control for "the gain came from answering in the expected format".
    """

    def format_only(completions, **kwargs) -> list[float]:
        return [float(readable_answer(completion_text(completion)) is not None) for completion in completions]

    return format_only
