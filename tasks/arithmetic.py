"""A second embedded task, for real pretrained models: arithmetic word problems with integer answers.

    question:  "Mia has 14 marbles. She gives 5 of them to a friend. How many marbles does Mia have now?"
    solution:  "Mia starts with 14 marbles. She gives away 5: 14 - 5 = 9.\\n\\boxed{9}"

The level is the number of operations (1 to 4): each adds a sentence and a line of working. Why this task:
the tiny model's lookup task is in a language of its own, but a 135 M instruct model (SmolLM2) already
reads English and does small sums; what it lacks is the format (it copies `\\boxed{}` literally and writes
the number outside it) and reliability on two or more steps. That is what a cold start and RL can fix in
minutes on a CPU, which is what `make demo-real` shows. Numbers stay small (results 0..200, products of
one-digit factors), so the task is one of reasoning in steps, not of long arithmetic.

`arithmetic-hard:<levels>` (tasks.arithmetic_hard) is the same task with 3- and 4-digit numbers, where a tool that
computes matters; it shares `worded` and `family_rows` with this module, and draws no row of this one.

Splits are disjoint by construction, as in tasks.synthetic: a question is in the eval split exactly
when a hash of its text falls in the eval bucket.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tasks.generation import draw_rows

NAMES = ("Mia", "Tom", "Ana", "Leo", "Sara", "Ben", "Ivy", "Omar", "Lena", "Raj", "Nora", "Eli", "Zoe", "Max")
ITEMS = ("apples", "marbles", "stickers", "books", "coins", "pencils", "cards", "shells", "cookies", "stamps")
MAX_LEVEL = 4
INSTRUCTION = "Solve the problem step by step, then write the final answer as \\boxed{N}."


@dataclass(frozen=True)
class Step:
    sentence: str  # what the question says
    working: str  # the line of the solution
    value: int  # the running total after it


def added(name: str, total: int, n: int) -> Step:
    return Step(f"{name} gets {n} more.", f"{total} + {n} = {total + n}", total + n)


def given_away(name: str, total: int, n: int) -> Step:
    return Step(f"{name} gives {n} of them to a friend.", f"{total} - {n} = {total - n}", total - n)


def multiplied(item: str, total: int, n: int) -> Step:
    return Step(f"Then the number of {item} is multiplied by {n}.", f"{total} * {n} = {total * n}", total * n)


def shared_out(name: str, total: int, d: int) -> Step:
    return Step(f"{name} shares them equally among {d} boxes and keeps one box.", f"{total} / {d} = {total // d}",
                total // d)  # fmt: skip


def _step(rng: random.Random, total: int, name: str, item: str) -> Step:
    """One operation on the running total, drawn so that the result stays a small non-negative integer."""
    kinds = ["add", "sub", "mul", "div"] if total > 0 else ["add"]
    while True:
        kind = rng.choice(kinds)
        if kind == "add":
            return added(name, total, rng.randint(2, 20))
        if kind == "sub" and total >= 3:
            return given_away(name, total, rng.randint(1, total - 1))
        if kind == "mul" and total <= 25:
            return multiplied(item, total, rng.randint(2, 5))
        if kind == "div":
            divisors = [d for d in (2, 3, 4, 5) if total % d == 0 and total // d > 0]
            if divisors:
                return shared_out(name, total, rng.choice(divisors))


def make_problem(rng: random.Random, level: int) -> tuple[str, str, int]:
    """(question, worked solution, answer) with `level` operations."""
    return drawn_problem("arithmetic", rng, level, (3, 30), _step)


def drawn_problem(family: str, rng: random.Random, level: int, start: tuple[int, int], step) -> tuple[str, str, int]:
    """A family's problem: a name, an item and a start drawn in that order, then `level` draws of
    `step(rng, total, name, item)`, worded."""
    if not 1 <= level <= MAX_LEVEL:
        raise ValueError(f"{family} levels are 1..{MAX_LEVEL}, got {level}")
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    total = rng.randint(*start)
    steps = []
    for _ in range(level):
        steps.append(step(rng, total, name, item))
        total = steps[-1].value
    return worded(name, item, steps)


def worded(name: str, item: str, steps: list[Step]) -> tuple[str, str, int]:
    """(question, worked solution, answer) of `steps` on `name`'s `item`: the question's sentences, then the
    solution's working lines (`a op b = c`, as tasks.tool_solutions reads them) and the boxed last result."""
    start = steps[0].working.split(" ")[0]
    question = f"{name} has {start} {item}. " + " ".join(s.sentence for s in steps)
    question += f" How many {item} does {name} have now?"
    working = "\n".join(s.working for s in steps)
    total = steps[-1].value
    solution = f"{name} starts with {start} {item}.\n{working}\n\\boxed{{{total}}}"
    return question, solution, total


def generate_rows(
    levels: list[int],
    num_per_level: int,
    seed: int = 0,
    split: str = "train",
    system_prompt: str | None = None,
    user_template: str = "{problem}",
    require_number: bool = True,
) -> list[dict]:
    """`num_per_level` distinct problems per level, as schema rows (deterministic for seed, split, level).

    `require_number` (on by default) is why `\\boxed{14 - 5}` does not solve "Mia has 14 ... gives 5": the
    rows ask every stage that scores them for a number literal (tasks.generation.draw_rows)."""
    return family_rows(
        "arithmetic", make_problem, levels, num_per_level, seed, split, system_prompt, user_template, require_number
    )


def family_rows(
    family: str,
    make,
    levels: list[int],
    num_per_level: int,
    seed: int,
    split: str,
    system_prompt: str | None,
    user_template: str,
    require_number: bool,
) -> list[dict]:
    """The rows of an arithmetic family (`make(rng, level)` draws one problem), each level's stream keyed by
    `family:seed:split:level`; the question shown ends with the instruction to box the answer."""
    if "{problem}" not in user_template:
        raise ValueError(f"user_template must contain '{{problem}}', got {user_template!r}")

    def draw(rng: random.Random, level: int) -> tuple[str, str, str, int]:
        question, solution, answer = make(rng, level)
        return question, f"{question}\n{INSTRUCTION}", solution, answer

    return draw_rows(
        family, list(levels), num_per_level, split, draw, lambda level: f"{family}:{seed}:{split}:{level}",
        system_prompt, user_template, require_number,
    )  # fmt: skip
