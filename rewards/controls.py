"""Control rewards for the spurious-reward check of the seed checklist.

If a run trained with `random` improves as much as one trained with `math_accuracy`, the gain came from
something other than the reward (format learning, entropy changes, a contaminated evaluation set).
"""

from __future__ import annotations

import hashlib

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
