"""The synthetic task: answers correct by construction (checked by an independent solver), difficulty
that really rises with the level, disjoint splits, determinism, and the row schema."""

from __future__ import annotations

import random
import re

import pytest

from tasks import synthetic
from tasks.synthetic import generate_rows, make_problem, parse_levels

ASSIGNMENT = re.compile(r"^([a-z])=([a-z]|\d+)$")


def independent_solve(question: str) -> tuple[int, list[str]]:
    """Parse the question text alone and follow the asked variable to its number.

    Written separately from the generator: it sees only the text a model sees. Returns the value
    and the hops taken, and checks the assignment list is a well-formed acyclic map.
    """
    body, _, asked = question.rpartition(". Find ")
    assert asked.endswith(".") and len(asked) == 2, question
    query = asked[0]
    table: dict[str, str] = {}
    for token in body.split(" "):
        match = ASSIGNMENT.match(token)
        assert match, f"malformed assignment {token!r} in {question!r}"
        name, value = match.groups()
        assert name not in table, f"{name} assigned twice in {question!r}"
        table[name] = value
    hops, current = [], query
    while not table[current].isdigit():
        hops.append(f"{current}={table[current]}")
        current = table[current]
        assert len(hops) <= len(table), f"cycle in {question!r}"
    hops.append(f"{current}={table[current]}")
    return int(table[current]), hops


def every_row(levels=range(1, 9), n=150, seed=0):
    for split in ("train", "eval"):
        yield from generate_rows(list(levels), n, seed=seed, split=split)


def test_answers_are_correct_by_construction():
    rows = list(every_row())
    assert len(rows) == 2 * 8 * 150
    for row in rows:
        question = row["prompt"][-1]["content"]
        value, hops = independent_solve(question)
        assert row["answer"] == str(value), question
        assert len(hops) == row["difficulty"], question


def test_solution_follows_the_chain_and_boxes_the_answer():
    for row in every_row(n=60):
        question = row["prompt"][-1]["content"]
        _, hops = independent_solve(question)
        solution = row["solution"]
        match = re.fullmatch(r"<think>\n(.*)\n</think>\n\\boxed\{(\d+)\}", solution, flags=re.S)
        assert match, solution
        assert match.group(1).split("\n") == hops
        assert match.group(2) == row["answer"]


def test_number_of_distractors_is_fixed_so_difficulty_rises_with_level():
    rng = random.Random(3)
    for level in range(1, 12):
        for _ in range(50):
            problem = make_problem(rng, level, num_distractors=6)
            assert len(problem.assignments) == level + 6
            assert problem.level == level


def test_distractors_end_on_numbers_too_so_the_answer_is_not_the_only_number():
    # If the answer were the only number in the question, reading it off would need no reasoning.
    rows = generate_rows([1, 2, 3, 4], 300, seed=0)
    several_numbers = [len(re.findall(r"=\d+", row["prompt"][-1]["content"])) >= 2 for row in rows]
    assert sum(several_numbers) / len(rows) > 0.9


def test_answers_spread_over_0_to_99_so_guessing_rarely_works():
    answers = [int(row["answer"]) for row in generate_rows([1, 2, 3], 1000, seed=0)]
    assert min(answers) >= 0 and max(answers) <= 99
    assert len(set(answers)) >= 95
    most_common_share = max(answers.count(a) for a in set(answers)) / len(answers)
    assert most_common_share < 0.03


def test_splits_are_disjoint_by_construction():
    train = {row["prompt"][-1]["content"] for row in generate_rows([1, 2, 3], 2000, seed=0, split="train")}
    evals = {row["prompt"][-1]["content"] for row in generate_rows([1, 2, 3], 300, seed=5, split="eval")}
    assert train.isdisjoint(evals)
    assert all(synthetic.split_of(q) == "eval" for q in evals)


def test_generation_is_deterministic_and_seeded():
    first = generate_rows([2, 5], 50, seed=7)
    assert first == generate_rows([2, 5], 50, seed=7)
    other = generate_rows([2, 5], 50, seed=8)
    assert [r["id"] for r in first] != [r["id"] for r in other]


def test_rows_follow_the_schema_with_unique_stable_ids():
    rows = generate_rows([1, 3], 200, seed=0, system_prompt="Think.", user_template="Q: {problem}")
    assert len({row["id"] for row in rows}) == len(rows)
    for row in rows:
        assert set(row) >= {"prompt", "answer", "id", "verifier", "solution", "difficulty", "source", "require_number"}
        assert row["prompt"][0] == {"role": "system", "content": "Think."}
        assert row["prompt"][1]["role"] == "user" and row["prompt"][1]["content"].startswith("Q: ")
        assert row["verifier"] == "math" and isinstance(row["answer"], str)
        assert row["id"].startswith(f"synthetic-L{row['difficulty']}-")


@pytest.mark.parametrize(
    "name, levels",
    [("synthetic:3", [3]), ("synthetic:1-3", [1, 2, 3]), ("synthetic:1,4-5", [1, 4, 5]), ("synthetic:2,2", [2])],
)
def test_parse_levels(name, levels):
    assert parse_levels(name) == levels


@pytest.mark.parametrize("name", ["synthetic", "synthetic:", "synthetic:a", "synthetic:3-x", "math500"])
def test_parse_levels_rejects_bad_names_with_a_hint(name):
    with pytest.raises(ValueError, match="synthetic:"):
        parse_levels(name)


def test_impossible_requests_fail_clearly():
    with pytest.raises(ValueError, match="variable names"):
        make_problem(random.Random(0), level=25, num_distractors=6)
    with pytest.raises(ValueError, match="level must be"):
        make_problem(random.Random(0), level=0)
    with pytest.raises(ValueError, match="split"):
        generate_rows(1, 5, split="test")


def test_arithmetic_rows_are_right_distinct_and_split_by_question():
    """Each line of working recomputed here; the final box is the last line's result; train and eval never share."""
    import re

    from tasks.synthetic import generate_named

    train = generate_named("arithmetic:1-4", 40, seed=2, split="train")
    held_out = generate_named("arithmetic:1-4", 40, seed=2, split="eval")
    assert len(train) == len(held_out) == 160
    assert not {row["id"] for row in train} & {row["id"] for row in held_out}
    for row in train + held_out:
        lines = row["solution"].splitlines()
        steps = [re.fullmatch(r"(\d+) ([-+*/]) (\d+) = (\d+)", line) for line in lines[1:-1]]
        assert len(steps) == row["difficulty"] and all(steps)
        for step in steps:
            a, op, b, result = int(step[1]), step[2], int(step[3]), int(step[4])
            expected = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if a % b == 0 else None}[op]
            assert expected == result >= 0
        assert lines[-1] == f"\\boxed{{{row['answer']}}}" == f"\\boxed{{{steps[-1][4]}}}"
    assert generate_named("arithmetic:2", 5, seed=2) == generate_named("arithmetic:2", 5, seed=2)
