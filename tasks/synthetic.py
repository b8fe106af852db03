"""The embedded reasoning task: multi-hop variable lookup with integer answers written `\\boxed{N}`.

A problem lists single-letter assignments in random order and asks for one variable's value:

    question:  "v=7 u=j w=7 j=l k=w t=v c=0 l=0. Find t."
    solution:  "<think>\\nt=v\\nv=7\\n</think>\\n\\boxed{7}"

The difficulty knob `level` is the number of hops from the asked variable to its number (the number of
reasoning lines). Every problem carries the same number of distractor assignments whatever its level,
so a higher level is strictly more work, never a shorter list to search; distractors form their own
chains and may lead into the main chain or end on the same number, so "the only number in sight" is
never a shortcut. Answers are drawn from 0..99, so a guess is rarely right.

Why this task: a 1 M parameter model learns the one-hop lookup from SFT on easy levels and then gets
longer chains right only sometimes, which is what RL needs: GRPO groups with reward variance, and a
pass@1 that RL can raise (measured in docs/demo.md). Arithmetic chains were not learnable at that size.

Train and eval splits are disjoint by construction: a question belongs to the eval split exactly when
a hash of its text falls in the eval bucket, so separate calls can never leak eval problems into train.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass

from basics.did_you_mean import nearest_name, unknown_names_message
from tasks.generation import draw_rows, split_of  # noqa: F401  (split_of: a question's split)

DEFAULT_DISTRACTORS = 6
DEFAULT_MAX_VALUE = 99
SPLITS = ("train", "eval")
_VARIABLES = string.ascii_lowercase
# Generated task families by name: `synthetic:<levels>` (this module), `arithmetic:<levels>` (tasks.arithmetic, word
# problems for real pretrained models) and `arithmetic-hard:<levels>` (tasks.arithmetic_hard, its numbers too large
# to work out in one's head).
FAMILIES = ("synthetic", "arithmetic", "arithmetic-hard")
_NAME = re.compile(rf"^(?P<family>{'|'.join(FAMILIES)})(?::(?P<levels>[0-9,\- ]+))?$")
_LIKE_A_NAME = re.compile(r"^(?P<family>[A-Za-z][\w-]*):[0-9,\- ]+$")  # `<word>:<levels>`: no Hub id has a colon


@dataclass(frozen=True)
class SyntheticProblem:
    """One problem: the assignments in the order shown, the asked variable, its chain and its value."""

    assignments: tuple[tuple[str, str], ...]  # (variable, value-or-variable), in question order
    query: str
    chain: tuple[tuple[str, str], ...]  # the hops from `query` to the number, in reasoning order
    answer: int

    @property
    def level(self) -> int:
        return len(self.chain)

    @property
    def question(self) -> str:
        listed = " ".join(f"{name}={value}" for name, value in self.assignments)
        return f"{listed}. Find {self.query}."

    @property
    def solution(self) -> str:
        """Chain of thought, one hop a line, inside `<think>`; the answer boxed after it (R1's format)."""
        steps = "\n".join(f"{name}={value}" for name, value in self.chain)
        return f"<think>\n{steps}\n</think>\n\\boxed{{{self.answer}}}"


def make_problem(
    rng: random.Random,
    level: int,
    num_distractors: int = DEFAULT_DISTRACTORS,
    max_value: int = DEFAULT_MAX_VALUE,
) -> SyntheticProblem:
    """Draw one problem with `level` hops and exactly `num_distractors` other assignments."""
    if level < 1:
        raise ValueError(f"level must be >= 1, got {level}")
    if level + num_distractors > len(_VARIABLES):
        raise ValueError(
            f"level {level} + {num_distractors} distractors needs more than {len(_VARIABLES)} variable names; "
            "lower the level or the number of distractors"
        )
    names = rng.sample(_VARIABLES, level + num_distractors)
    chain_vars, distractor_vars = names[:level], names[level:]
    answer = rng.randint(0, max_value)
    # The main chain: x0 = x1, x1 = x2, ..., x_{L-1} = answer.
    chain = [(chain_vars[i], chain_vars[i + 1]) for i in range(level - 1)] + [(chain_vars[-1], str(answer))]
    # Distractors point to a number or to a variable defined before them (a chain variable or an
    # earlier distractor), so the assignment graph stays acyclic and the chain's value is unchanged.
    distractors = []
    for index, name in enumerate(distractor_vars):
        targets = chain_vars + distractor_vars[:index]
        if rng.random() < 0.5:
            distractors.append((name, str(rng.randint(0, max_value))))
        else:
            distractors.append((name, rng.choice(targets)))
    assignments = chain + distractors
    rng.shuffle(assignments)
    return SyntheticProblem(tuple(assignments), chain_vars[0], tuple(chain), answer)


def parse_levels(name: str) -> list[int]:
    """Levels from a dataset name: `synthetic:3` -> [3], `synthetic:1-3` -> [1, 2, 3], `synthetic:1,4` -> [1, 4]."""
    match = _NAME.match(name.strip())
    if not match:
        raise ValueError(f"not a generated dataset name: {name!r}; expected e.g. 'synthetic:1-3' or 'arithmetic:1-2'")
    spec = match.group("levels")
    if not spec:
        raise ValueError(f"{name!r} names no level; write e.g. 'synthetic:1-3' or 'synthetic:4'")
    levels: list[int] = []
    for part in spec.replace(" ", "").split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"bad level range {part!r} in {name!r}; use e.g. '1-3' or '2,4'")
        levels.extend(range(int(low), int(high or low) + 1))
    return sorted(set(levels))


def is_synthetic_name(name: str) -> bool:
    """A generated task's name: `synthetic:<levels>`, `arithmetic:<levels>` or `arithmetic-hard:<levels>`."""
    return bool(_NAME.match(name.strip()))


def misspelled_name_message(name: str) -> str | None:
    """For a name written as a generated task's (`<word>:<levels>`) whose word is near a family's but none, the
    one line that says so and names the nearest (`arithmetc:1-3`: did you mean 'arithmetic'?); else None."""
    match = _LIKE_A_NAME.match(name.strip())
    if not match or is_synthetic_name(name) or nearest_name(match.group("family"), FAMILIES) is None:
        return None
    return f"dataset {name!r}: " + unknown_names_message([match.group("family")], FAMILIES, "generated task")


def generate_named(name: str, num_per_level: int, seed: int = 0, split: str = "train", **options) -> list:
    """Rows of the generated task `name` (`synthetic:1-3`, `arithmetic:1-2`, `arithmetic-hard:1-4`); options:
    system_prompt, user_template, require_number."""
    levels = parse_levels(name)
    family = _NAME.match(name.strip()).group("family")
    if family == "arithmetic":
        from tasks import arithmetic

        return arithmetic.generate_rows(levels, num_per_level, seed=seed, split=split, **options)
    if family == "arithmetic-hard":
        from tasks import arithmetic_hard

        return arithmetic_hard.generate_rows(levels, num_per_level, seed=seed, split=split, **options)
    return generate_rows(levels, num_per_level, seed=seed, split=split, **options)


def generate_rows(
    levels: list[int] | int,
    num_per_level: int,
    seed: int = 0,
    split: str = "train",
    num_distractors: int = DEFAULT_DISTRACTORS,
    max_value: int = DEFAULT_MAX_VALUE,
    system_prompt: str | None = None,
    user_template: str = "{problem}",
    require_number: bool = True,
) -> list[dict]:
    """`num_per_level` distinct problems for each level, as rows of the schema (tasks/schema.py).

    Deterministic for (seed, split, level). Rows: `prompt` (chat messages), `answer` (str), `solution`
    (chain of thought), `id`, `difficulty` (the level), `verifier` ("math"), `source` ("synthetic"),
    `require_number` (see draw_rows).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if "{problem}" not in user_template:
        raise ValueError(f"user_template must contain '{{problem}}', got {user_template!r}")
    levels = [levels] if isinstance(levels, int) else list(levels)

    def draw(rng: random.Random, level: int) -> tuple[str, str, str, int]:
        problem = make_problem(rng, level, num_distractors, max_value)
        return problem.question, problem.question, problem.solution, problem.answer

    return draw_rows(
        "synthetic", levels, num_per_level, split, draw,
        lambda level: f"synthetic:{seed}:{split}:{level}:{num_distractors}:{max_value}",
        system_prompt, user_template, require_number,
    )  # fmt: skip
