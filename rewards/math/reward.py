"""The `math_accuracy` reward: the math verifier's verdicts in TRL's form."""

from __future__ import annotations

import logging
from collections import Counter

from basics.option_values import is_yes
from rewards.math.literal import REQUIRE_NUMBER
from rewards.math.verify import DEFAULT_TIMEOUT_S, verify_batch
from rewards.registry import register
from rewards.text import column, completion_text

logger = logging.getLogger("rewards.math")


def row_require_number(columns: dict, size: int) -> list[bool]:
    """Each row's `require_number` choice from a batch's columns (TRL's reward keyword arguments); False
    where the column is absent or empty."""
    return [is_yes(choice) for choice in column(columns, REQUIRE_NUMBER, size, default=False)]


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
