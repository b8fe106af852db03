"""Which verifier scores a row, and its verdict on a completion: the one owner of the row's `verifier` contract.

Every stage that asks "is this completion correct?" (evaluation, the pass-rate filter, rejection sampling,
trace collection) goes through `score_completions`, so a problem counts as solved by the same rule everywhere.
The task layer (tasks/schema.py) validates rows against `VERIFIERS` defined here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rewards.options import REQUIRE_NUMBER, choice_of, is_choice  # noqa: F401  (the row contract names them)

VERIFIERS = ("math", "code")
DEFAULT_VERIFIER = "math"  # a row with no `verifier` (or an empty one) is a math row


def verifier_of(row: dict) -> str:
    """The verifier that scores `row`: its `verifier` column, or the default when that is missing or empty."""
    return row.get("verifier") or DEFAULT_VERIFIER


@dataclass(frozen=True)
class Score:
    """One completion's verdict in the terms every consumer needs, whatever the verifier."""

    correct: bool | None  # None: the row cannot be scored (unreadable gold, missing tests)
    extracted: str | None
    reason: str


def score_completions(
    rows: list[dict], texts: list[str], code_options: dict | None = None, math_options: dict | None = None
) -> list[Score]:
    """The verdict of each row's own verifier (`verifier` column: "math" or "code") on its completion.

    One batch per verifier: the math verifier runs its sympy cases in parallel worker processes, the
    code verifier its programs in parallel sandboxes. A dataset may mix math and code rows.
    `math_options` go to the math verifier, e.g. `{"fallbacks": True}` to read an unboxed "Answer: X".
    A math row's own `require_number` column (True on the `arithmetic:` and `synthetic:` tasks) asks for a
    number literal where the gold is a number, so `\\boxed{7+5}` does not solve "Compute 7 + 5" here, in the
    GRPO reward (rewards.math.math_accuracy reads the same column) or anywhere else; `math_options`'
    `require_number` (True/False) overrides it for every row, None leaves it to the rows.
    """
    scores: list[Score | None] = [None] * len(rows)
    by_verifier: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        by_verifier[verifier_of(row)].append(index)
    unknown = sorted(set(by_verifier) - set(VERIFIERS))
    if unknown:
        raise ValueError(
            f"rows name verifier(s) {unknown}; known: 'math', 'code' (row {rows[by_verifier[unknown[0]][0]].get('id')!r})"
        )
    if by_verifier.get("math"):
        from rewards.math import verify_batch

        indices = by_verifier["math"]
        options = dict(math_options or {})
        if options.get(REQUIRE_NUMBER) is None:
            options[REQUIRE_NUMBER] = [rows[i].get(REQUIRE_NUMBER) for i in indices]
        verdicts = verify_batch(
            [rows[i]["answer"] for i in indices],
            [texts[i] for i in indices],
            [rows[i].get("id") for i in indices],
            **options,
        )
        for index, verdict in zip(indices, verdicts, strict=True):
            scores[index] = Score(verdict.correct, verdict.extracted, verdict.reason)
    if by_verifier.get("code"):
        from rewards.code import verify_code_batch

        indices = by_verifier["code"]
        verdicts = verify_code_batch(
            [texts[i] for i in indices], [rows[i].get("tests") for i in indices], **(code_options or {})
        )
        for index, verdict in zip(indices, verdicts, strict=True):
            if verdict is None:
                scores[index] = Score(None, None, "row has no readable tests")
            else:
                scores[index] = Score(verdict.all_passed, None, verdict.reason)
    return scores
