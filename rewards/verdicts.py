"""Which verifier scores a row, and its verdict on a completion: the one owner of the row's `verifier` contract.

Every stage that asks "is this completion correct?" (evaluation, the pass-rate filter, rejection sampling,
trace collection) goes through `score_completions`, so a problem counts as solved by the same rule everywhere.
The task layer (tasks/schema.py) validates rows with `verifier_problem` defined here. Besides the built-in
`math` and `code`, a row's verifier may be any accuracy reward: a registered one, or the user's own outside the
repository (`path/to/file.py:name`, rewards/external.py). Its verdict is "correct" when it scores 1 (a
binary verifier's pass), None when it cannot score the row.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rewards.math.literal import REQUIRE_NUMBER

VERIFIERS = ("math", "code")
DEFAULT_VERIFIER = "math"  # a row with no `verifier` (or an empty one) is a math row


def verifier_problem(name) -> str | None:
    """None if `name` can be a row's verifier (math, code, an accuracy reward), else why not, in words."""
    if name in VERIFIERS:
        return None
    from rewards.registry import UnknownRewardError, _lookup, is_accuracy_reward

    try:
        _lookup(name)
    except UnknownRewardError as error:
        return f"is {name!r}, not a known verifier (math, code, or an accuracy reward): {error}"
    if not is_accuracy_reward(name):
        return (
            f"is {name!r}, a reward that is not an accuracy reward (register it with accuracy=True to verify with it)"
        )
    return None


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
    """The verdict of each row's own verifier (`verifier` column: "math", "code", an accuracy reward) on its completion.

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
    for name, indices in by_verifier.items():
        problem = verifier_problem(name)
        if problem:
            raise ValueError(f"row {rows[indices[0]].get('id')!r}: verifier {problem}")
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
        from rewards.code.verifier import verify_code_batch

        indices = by_verifier["code"]
        verdicts = verify_code_batch(
            [texts[i] for i in indices], [rows[i].get("tests") for i in indices], **(code_options or {})
        )
        for index, verdict in zip(indices, verdicts, strict=True):
            if verdict is None:
                scores[index] = Score(None, None, "row has no readable tests")
            else:
                scores[index] = Score(verdict.all_passed, None, verdict.reason)
    for name, indices in by_verifier.items():
        if name not in VERIFIERS:
            verdicts = _reward_verdicts(name, [rows[i] for i in indices], [texts[i] for i in indices])
            for index, verdict in zip(indices, verdicts, strict=True):
                scores[index] = verdict
    return scores


def _reward_verdicts(name: str, rows: list[dict], texts: list[str]) -> list[Score]:
    """An accuracy reward as a verifier: called as TRL calls it (the completions, in the prompts' form, and every
    column but the prompt as a keyword), each score 1 or more counting as correct; a failure scores nothing."""
    from rewards.guard import check_scores
    from rewards.registry import get_reward

    conversational = all(isinstance(row.get("prompt"), list) for row in rows)
    completions = [[{"role": "assistant", "content": text}] for text in texts] if conversational else list(texts)
    keys = sorted({key for row in rows for key in row} - {"prompt"})
    columns = {key: [row.get(key) for row in rows] for key in keys}
    try:
        raw = get_reward(name)(completions, prompts=[row.get("prompt") for row in rows], **columns)
        values, problem = check_scores(name, raw, len(rows), columns)
    except Exception as error:  # noqa: BLE001 - the user's verifier failed: nothing it was asked is scored
        values, problem = [None] * len(rows), f"{name} raised {type(error).__name__}: {error}"[:300]
    return [
        Score(None, None, problem or f"{name} could not score it")
        if value is None
        else Score(value >= 1.0, None, f"{name}: {value:g}")
        for value in values
    ]
