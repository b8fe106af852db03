"""The arithmetic task's harder split (`arithmetic-hard:<levels>`): the same word problems, with numbers a 135 M model
cannot work out in its head, so that a tool that computes is worth calling.

    question:  "Leo has 7542 marbles. Leo shares them equally among 18 boxes and keeps one box. Leo gets 643 more.
                How many marbles does Leo have now?"
    solution:  "Leo starts with 7542 marbles.\\n7542 / 18 = 419\\n419 + 643 = 1062\\n\\boxed{1062}"

What changes from tasks.arithmetic is the numbers alone: the start and every added or subtracted number have 3 or 4
digits (100..9999), every factor and divisor 2 or 3 (10..999), every division is exact, and every running total is
an integer from 100 to 10^6 (a result that would leave that range is not drawn), so both operands of an addition or
a subtraction have at least 3 digits. The levels (1 to 4 operations), the wording of the question and of the
worked solution (one `a op b = c` line a step, then `\\boxed{N}`), the instruction, the row schema and the split
rule are the task's own: a question is held out exactly when its hash falls in the eval bucket
(tasks.generation.split_of). The rows' `source` and the prefix of their `id` are `arithmetic-hard`, and each level
draws from a stream of its own (`arithmetic-hard:seed:split:level`), so no row of `arithmetic:<levels>` changes.
tasks.tool_solutions turns each worked solution into python-tool turns unchanged (`one_call` or `per_step`): the
text-only solution is the row's `solution`, the tool-using one its tool turns (`add_tool_messages`).
"""

from __future__ import annotations

import random

from tasks.arithmetic import (
    Step,
    added,
    drawn_problem,
    family_rows,
    given_away,
    multiplied,
    shared_out,
)

FAMILY = "arithmetic-hard"
TERM = (100, 9999)  # the start and each added or subtracted number: 3 or 4 digits
FACTOR = (10, 999)  # each factor and divisor: 2 or 3 digits
MIN_RESULT, MAX_RESULT = 100, 10**6  # every running total: 3 to 7 digits, so add/sub operands have 3 or more
_KINDS = ("add", "sub", "mul", "div")


def _divisors(total: int) -> list[int]:
    """The 2- and 3-digit divisors of `total` that leave a quotient of at least MIN_RESULT."""
    return [d for d in range(FACTOR[0], min(FACTOR[1], total // MIN_RESULT) + 1) if total % d == 0]


def _step(rng: random.Random, total: int, name: str, item: str) -> Step:
    """One operation on the running total (MIN_RESULT..MAX_RESULT), drawn among those whose result stays in range.

    Adding is possible up to MAX_RESULT - 100 and subtracting from MIN_RESULT + 100, so one of them always is."""
    divisors = None
    while True:
        kind = rng.choice(_KINDS)
        if kind == "add" and total + TERM[0] <= MAX_RESULT:
            return added(name, total, rng.randint(TERM[0], min(TERM[1], MAX_RESULT - total)))
        if kind == "sub" and total - TERM[0] >= MIN_RESULT:
            return given_away(name, total, rng.randint(TERM[0], min(TERM[1], total - MIN_RESULT)))
        if kind == "mul" and total * FACTOR[0] <= MAX_RESULT:
            return multiplied(item, total, rng.randint(FACTOR[0], min(FACTOR[1], MAX_RESULT // total)))
        if kind == "div":
            divisors = _divisors(total) if divisors is None else divisors
            if divisors:
                return shared_out(name, total, rng.choice(divisors))


def make_problem(rng: random.Random, level: int) -> tuple[str, str, int]:
    """(question, worked solution, answer) with `level` operations on 3- and 4-digit numbers."""
    return drawn_problem(FAMILY, rng, level, TERM, _step)


def generate_rows(
    levels: list[int],
    num_per_level: int,
    seed: int = 0,
    split: str = "train",
    system_prompt: str | None = None,
    user_template: str = "{problem}",
    require_number: bool = True,
) -> list[dict]:
    """`num_per_level` distinct problems per level, as schema rows (deterministic for seed, split, level), as
    tasks.arithmetic.generate_rows makes them."""
    return family_rows(
        FAMILY, make_problem, levels, num_per_level, seed, split, system_prompt, user_template, require_number
    )
