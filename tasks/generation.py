"""The loop every generated task shares (tasks.synthetic, tasks.arithmetic): distinct problems per level, each
in the split its question hashes to, as rows of the schema (tasks/schema.py)."""

from __future__ import annotations

import hashlib
import random

from rewards.verdicts import REQUIRE_NUMBER

_EVAL_BUCKETS = 8  # one question in 8 belongs to the eval split


def split_of(question: str) -> str:
    """The split a question belongs to, from a hash of its text (stable across processes and runs)."""
    bucket = int(hashlib.sha1(question.encode()).hexdigest(), 16) % _EVAL_BUCKETS
    return "eval" if bucket == 0 else "train"


def draw_rows(
    family: str,
    levels: list[int],
    num_per_level: int,
    split: str,
    draw,
    rng_key,
    system_prompt: str | None,
    user_template: str,
    require_number: bool = True,
) -> list[dict]:
    """The loop every generated task shares: `num_per_level` distinct problems per level, each in `split`.

    `draw(rng, level)` makes one problem, `(question, text shown to the model, solution, answer)`; the level's
    random stream is seeded by `rng_key(level)`, so rows are deterministic and a question is in the eval split
    exactly when `split_of` says so. Rows follow the schema of tasks/schema.py.

    Every answer is an integer, so rows carry `require_number` (rewards.verdicts.REQUIRE_NUMBER), True by
    default: an answer must be a number, not an expression that evaluates to it. Without it, a policy that
    copies "14 - 5" from the question into the box is paid as if it had computed 9, by the GRPO reward and
    every other stage that scores the row (they all read the row's column).
    """
    rows = []
    for level in levels:
        rng = random.Random(rng_key(level))
        seen: set[str] = set()
        attempts = 0
        while len(seen) < num_per_level:
            attempts += 1
            if attempts > 50 * num_per_level + 1000:
                raise ValueError(
                    f"could not draw {num_per_level} distinct level-{level} {family} problems for split {split!r}; "
                    "ask for fewer rows"
                )
            question, shown, solution, answer = draw(rng, level)
            if question in seen or split_of(question) != split:
                continue
            seen.add(question)
            # replace, not format: a template may hold LaTeX braces ("\\boxed{}")
            prompt = [{"role": "user", "content": user_template.replace("{problem}", shown)}]
            if system_prompt:
                prompt.insert(0, {"role": "system", "content": system_prompt})
            rows.append(
                {
                    "id": f"{family}-L{level}-{hashlib.sha1(question.encode()).hexdigest()[:12]}",
                    "prompt": prompt,
                    "answer": str(answer),
                    "solution": solution,
                    "difficulty": level,
                    "verifier": "math",
                    "source": family,
                    REQUIRE_NUMBER: require_number,
                }
            )
    return rows
