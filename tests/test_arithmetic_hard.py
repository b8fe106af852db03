"""The arithmetic task's harder split, `arithmetic-hard:<levels>` (tasks/arithmetic_hard.py), checked without its code:
every working line is re-read here and recomputed with Python's integers (operand digits, exact divisions, each
running total from 100 to 10^6, the box the last result), the question says each step's number in the task's
wording, the split follows the hash rule recomputed here, and no held-out question is among thousands of training
ones. The arithmetic task's own rows are pinned by hashes computed before the harder split existed, so adding it
changed none of them. The name resolves wherever `arithmetic:1-3` does (the recipes' loader, the evaluation sets,
sft.py's command line with the tool cold start), and a misspelling is one line naming the nearest family."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from tasks import arithmetic, arithmetic_hard
from tasks.synthetic import generate_named, is_synthetic_name, parse_levels

INSTRUCTION = "\nSolve the problem step by step, then write the final answer as \\boxed{N}."
LINE = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+)")
# What each operation's sentence says, with its number in place of {n} (the arithmetic task's wording).
SENTENCE = {
    "+": "{name} gets {n} more.",
    "-": "{name} gives {n} of them to a friend.",
    "*": "Then the number of {item} is multiplied by {n}.",
    "/": "{name} shares them equally among {n} boxes and keeps one box.",
}
DIGITS = {"+": (3, 4), "-": (3, 4), "*": (2, 3), "/": (2, 3)}


def digest(rows) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def question_of(row: dict) -> str:
    content = row["prompt"][-1]["content"]
    assert content.endswith(INSTRUCTION)
    return content.removesuffix(INSTRUCTION)


def test_the_arithmetic_tasks_rows_are_unchanged():
    """sha256 of the rows' JSON, computed on the tree before tasks/arithmetic_hard.py was added."""
    assert digest(arithmetic.generate_rows([1, 2, 3, 4], 5, seed=0)) == (
        "eedc984f3c41a19d8c304c11f7f78ea184fef7c18409bdc4270043cff650230c"
    )
    assert digest(arithmetic.generate_rows([1, 2, 3, 4], 5, seed=1, split="eval")) == (
        "e9bc459339670a14447703e3e375ae679f30b161629c2918be35acedd648830b"
    )
    assert digest(generate_named("arithmetic:1-3", 4, seed=7)) == (
        "6ea84f19dbb1a68ee7ada7ea9d21b4d4a6b67f5a2a80020b236fe3c71c78df2a"
    )
    options = {"system_prompt": "Be brief.", "user_template": "Q: {problem}"}
    assert digest(generate_named("arithmetic:2,4", 3, seed=0, split="eval", **options)) == (
        "f52c0693a4bbe3a5d3eef6a85632e277c1ce490e505714f27776297b8fe7ef04"
    )
    assert digest(generate_named("synthetic:1-3", 4, seed=2)) == (
        "0eb0499d275f885fcb2c269b3fb02c709e8b399b13e38607bf213e22444e86ce"
    )


@pytest.mark.parametrize("split", ["train", "eval"])
def test_every_working_line_recomputes_and_keeps_to_the_sizes(split):
    rows = generate_named("arithmetic-hard:1-4", 150, seed=3, split=split)
    assert len(rows) == 600 and {row["difficulty"] for row in rows} == {1, 2, 3, 4}
    operations = set()
    for row in rows:
        lines = row["solution"].split("\n")
        opening = re.fullmatch(r"(\w+) starts with (\d+) (\w+)\.", lines[0])
        assert opening, row["solution"]
        name, start, item = opening.group(1), int(opening.group(2)), opening.group(3)
        assert 3 <= len(str(start)) <= 4
        sentences, total = [], start
        for line in lines[1:-1]:
            a, op, b, value = LINE.fullmatch(line).groups()
            a, b, value = int(a), int(b), int(value)
            assert a == total, f"{line!r} does not start from {total}"
            low, high = DIGITS[op]
            assert low <= len(str(b)) <= high, f"{line!r}: {b} has the wrong number of digits"
            if op == "/":
                assert a % b == 0, f"{line!r} is not exact"
            expected = {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]
            assert value == expected and 100 <= value <= 10**6, line
            sentences.append(SENTENCE[op].format(name=name, item=item, n=b))
            operations.add(op)
            total = value
        assert len(lines) - 2 == row["difficulty"]
        assert lines[-1] == f"\\boxed{{{total}}}" and row["answer"] == str(total)
        question = question_of(row)
        assert question == f"{name} has {start} {item}. {' '.join(sentences)} How many {item} does {name} have now?"
        assert row["id"] == f"arithmetic-hard-L{row['difficulty']}-{hashlib.sha1(question.encode()).hexdigest()[:12]}"
        assert row["source"] == "arithmetic-hard" and row["verifier"] == "math" and row["require_number"] is True
    assert operations == set("+-*/")


def test_the_split_follows_the_hash_rule_and_no_held_out_question_is_in_train():
    train = generate_named("arithmetic-hard:1-4", 1000, seed=0)
    held_out = generate_named("arithmetic-hard:1-4", 100, seed=0, split="eval")
    held_out += generate_named("arithmetic-hard:1-4", 100, seed=1, split="eval")
    bucket = {row["id"]: int(hashlib.sha1(question_of(row).encode()).hexdigest(), 16) % 8 for row in train + held_out}
    assert all(bucket[row["id"]] != 0 for row in train)
    assert all(bucket[row["id"]] == 0 for row in held_out)
    train_questions = {question_of(row) for row in train}
    assert len(train_questions) == 4000
    assert not train_questions & {question_of(row) for row in held_out}
    easy = {question_of(row) for row in arithmetic.generate_rows([1, 2, 3, 4], 50, seed=0)}
    assert not easy & train_questions


def test_rows_are_deterministic_for_a_seed():
    first = arithmetic_hard.generate_rows([1, 2, 3, 4], 8, seed=3)
    assert first == generate_named("arithmetic-hard:1-4", 8, seed=3)
    assert [row["id"] for row in first] != [row["id"] for row in arithmetic_hard.generate_rows([1, 2, 3, 4], 8, seed=4)]
    with pytest.raises(ValueError, match=r"arithmetic-hard levels are 1\.\.4, got 5"):
        generate_named("arithmetic-hard:4-5", 2)


def test_the_name_resolves_where_arithmetic_does_and_a_misspelling_is_one_line():
    from tasks.datasets import default_user_template, load_eval_dataset
    from tasks.rows import PLAIN_USER_TEMPLATE
    from tasks.schema import DataArguments, DatasetNotFoundError, load_rows

    assert is_synthetic_name("arithmetic-hard:1-4") and parse_levels("arithmetic-hard:1-2,4") == [1, 2, 4]
    assert default_user_template("arithmetic-hard:1-4") == PLAIN_USER_TEMPLATE
    rows = load_rows(DataArguments(dataset_name="arithmetic-hard:2-3", dataset_num_rows=3, dataset_seed=5))
    assert rows.to_list() == arithmetic_hard.generate_rows([2, 3], 3, seed=5)
    held_out = load_eval_dataset("arithmetic-hard:1", num_rows=4, seed=5)
    assert held_out.to_list() == arithmetic_hard.generate_rows([1], 4, seed=5, split="eval")
    for name, meant in [("arithmetic-hrd:1-4", "arithmetic-hard"), ("arithmetc:1-3", "arithmetic")]:
        with pytest.raises(DatasetNotFoundError) as error:
            load_rows(DataArguments(dataset_name=name, dataset_num_rows=1))
        assert f"did you mean '{meant}'?" in str(error.value) and "\n" not in str(error.value)


def test_sft_tool_cold_start_parses_and_builds_its_conversations():
    """`recipes/sft.py --dataset_name arithmetic-hard:1-4 --tools python --tool_solutions one_call`: the command line
    parses, and its rows become tool conversations whose code computes each row's answer."""
    from recipes import sft
    from recipes.stages.sft.tools import tool_solution_conversations
    from tasks.schema import load_rows

    flags = ["--dataset_name", "arithmetic-hard:1-4", "--tools", "python", "--tool_solutions", "one_call"]
    script, *_ = sft.make_parser().parse_args([*flags, "--dataset_num_rows", "2"])
    assert (script.dataset_name, script.tools, script.tool_solutions) == ("arithmetic-hard:1-4", ["python"], "one_call")
    rows = load_rows(script)
    conversations = tool_solution_conversations(rows, script.tool_solutions)
    for row, conversation in zip(rows, conversations, strict=True):
        call, result, final = conversation["messages"][-3:]
        namespace: dict = {}
        exec(call["tool_calls"][0]["function"]["arguments"]["code"].replace("print(", "answer = ("), namespace)  # noqa: S102
        assert namespace["answer"] == int(row["answer"]) and result["content"] == f"{row['answer']}\n"
        assert final["content"].endswith(f"\\boxed{{{row['answer']}}}")
