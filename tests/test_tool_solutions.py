"""Tool-using worked solutions of the arithmetic task (tasks/tool_solutions.py): the exact messages of one small
problem by hand; for many problems of every level, of the task and of its harder split (`arithmetic-hard`), the code
run here with exec prints exactly the tool message, the final answer verifies with the repository's verifier (and an
answer off by one does not), per-step mode makes one call per step, and the rows are deterministic for a seed."""

from __future__ import annotations

import contextlib
import io
from functools import partial

import pytest

from rewards.text import completion_text
from rewards.verdicts import score_completions
from tasks import arithmetic_hard
from tasks.arithmetic import MAX_LEVEL, generate_rows
from tasks.tool_solutions import (
    COLUMN,
    PYTHON_TOOL,
    TOOL_NAME,
    add_tool_messages,
    parse_solution,
    tool_conversation,
    tool_messages_column,
)

SOLUTION = "Mia starts with 14 marbles.\n14 - 5 = 9\n9 * 3 = 27\n27 / 3 = 9\n\\boxed{9}"


def call(content: str, code: str) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"type": "function", "function": {"name": "python", "arguments": {"code": code}}}],
    }


def printed(code: str) -> str:
    """What `code` prints, run here in a namespace of its own (the code is the test's subject, written by us)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {})  # noqa: S102 - generated from the task's own numbers, and run only in this test
    return out.getvalue()


# The arithmetic task's rows and its harder split's (3- and 4-digit numbers): the same solutions' format
FAMILIES = pytest.mark.parametrize("generate", [generate_rows, arithmetic_hard.generate_rows], ids=["easy", "hard"])


def rows_of_every_level(num_per_level: int = 40, seed: int = 5, generate=generate_rows) -> list[dict]:
    levels = list(range(1, MAX_LEVEL + 1))
    return generate(levels, num_per_level, seed=seed) + generate(levels, 10, seed=seed, split="eval")


def test_one_small_problem_by_hand():
    """The exact turns, in both modes, of "14, take 5, times 3, share among 3 boxes"."""
    final = {"role": "assistant", "content": "Mia has 9 marbles now.\n\\boxed{9}"}
    one_call = "start = 14\nstep_1 = start - 5\nstep_2 = step_1 * 3\nstep_3 = step_2 // 3\nprint(step_3)\n"
    assert tool_conversation(SOLUTION) == [
        call("Mia starts with 14 marbles.", one_call),
        {"role": "tool", "name": "python", "content": "9\n"},
        final,
    ]
    assert tool_conversation(SOLUTION, per_step=True) == [
        call("Mia starts with 14 marbles.", "step_1 = 14 - 5\nprint(step_1)\n"),
        {"role": "tool", "name": "python", "content": "9\n"},
        call("", "step_2 = 9 * 3\nprint(step_2)\n"),
        {"role": "tool", "name": "python", "content": "27\n"},
        call("", "step_3 = 27 // 3\nprint(step_3)\n"),
        {"role": "tool", "name": "python", "content": "9\n"},
        final,
    ]
    assert printed(one_call) == "9\n"  # the division prints an integer, as the task's answer is one
    assert PYTHON_TOOL["function"]["name"] == TOOL_NAME == "python"
    assert PYTHON_TOOL["function"]["parameters"]["required"] == ["code"]


@FAMILIES
def test_the_code_prints_the_tool_message_and_the_answer_verifies_at_every_level(generate):
    """One call: its code prints the tool message; the final turn, alone or joined with the other assistant turns
    (as rewards read a conversation), is correct for the math verifier, with the rows' require_number; one more
    or one less is not."""
    rows = add_tool_messages(rows_of_every_level(generate=generate))
    assert {row["difficulty"] for row in rows} == set(range(1, MAX_LEVEL + 1))
    for row in rows:
        first, result, final = row[COLUMN]
        assert [message["role"] for message in row[COLUMN]] == ["assistant", "tool", "assistant"]
        (tool_call,) = first["tool_calls"]
        assert tool_call["type"] == "function" and tool_call["function"]["name"] == "python"
        code = tool_call["function"]["arguments"]["code"]
        assert code.count("\nstep_") == row["difficulty"]  # every intermediate result has a name
        assert printed(code) == result["content"] == f"{row['answer']}\n"
        assert result == {"role": "tool", "name": "python", "content": result["content"]}
        assert "tool_calls" not in final and final["content"].endswith(f"\\boxed{{{row['answer']}}}")
    answers = [int(row["answer"]) for row in rows]
    texts = [row[COLUMN][-1]["content"] for row in rows]
    assert all(score.correct for score in score_completions(rows, texts)), "a final answer did not verify"
    joined = [completion_text(row[COLUMN]) for row in rows]
    assert all(score.correct for score in score_completions(rows, joined)), "a conversation did not verify"
    for shift in (1, -1):
        wrong = [text.replace(f"{{{n}}}", f"{{{n + shift}}}") for text, n in zip(texts, answers, strict=True)]
        assert all(bad != text for bad, text in zip(wrong, texts, strict=True))
        assert all(score.correct is False for score in score_completions(rows, wrong)), f"off by {shift} verified"


@FAMILIES
def test_per_step_mode_makes_one_call_per_step(generate):
    """Per step: a call and its result for each step, each code self-contained (run alone, it prints its result,
    and starts from the previous tool message's number), the last result the answer, the final turn verified."""
    rows = add_tool_messages(rows_of_every_level(generate=generate), per_step=True)
    for row in rows:
        messages, level = row[COLUMN], row["difficulty"]
        _, _, start, steps = parse_solution(row["solution"])
        assert len(messages) == 2 * level + 1
        calls, results = messages[0:-1:2], messages[1:-1:2]
        assert [len(message["tool_calls"]) for message in calls] == [1] * level
        assert all(message["role"] == "tool" and message["name"] == "python" for message in results)
        previous = f"{start}\n"
        for index, (message, result, step) in enumerate(zip(calls, results, steps, strict=True), start=1):
            code = message["tool_calls"][0]["function"]["arguments"]["code"]
            assert code.startswith(f"step_{index} = {previous.strip()} ")
            assert printed(code) == result["content"] == f"{step[3]}\n"
            previous = result["content"]
        assert previous == f"{row['answer']}\n"
        assert "tool_calls" not in messages[-1]
    texts = [row[COLUMN][-1]["content"] for row in rows]
    assert all(score.correct for score in score_completions(rows, texts))
    joined = [completion_text(row[COLUMN]) for row in rows]
    assert all(score.correct for score in score_completions(rows, joined))


def test_rows_are_deterministic_for_a_seed_and_otherwise_unchanged():
    first = add_tool_messages(generate_rows([1, 2, 3, 4], 10, seed=3), per_step=True)
    again = add_tool_messages(generate_rows([1, 2, 3, 4], 10, seed=3), per_step=True)
    other = add_tool_messages(generate_rows([1, 2, 3, 4], 10, seed=4), per_step=True)
    assert first == again
    assert [row[COLUMN] for row in first] != [row[COLUMN] for row in other]
    assert [{k: v for k, v in row.items() if k != COLUMN} for row in first] == generate_rows([1, 2, 3, 4], 10, seed=3)


def test_a_dataset_carries_the_column_through_map():
    """`tool_messages_column` is what `Dataset.map` takes; the turns come back as they went in."""
    from datasets import Dataset

    rows = generate_rows([1, 3], 3, seed=1)
    for per_step in (False, True):
        mapped = Dataset.from_list(rows).map(partial(tool_messages_column, per_step=per_step))
        assert mapped[COLUMN] == [row[COLUMN] for row in add_tool_messages(rows, per_step=per_step)]


@pytest.mark.parametrize(
    ("solution", "match"),
    [
        ("<think>\nt=v\nv=7\n</think>\n\\boxed{7}", "not an arithmetic worked solution"),  # a synthetic row
        ("Mia starts with 14 marbles.\n14 - 5 = 8\n\\boxed{8}", "does not follow"),  # a step that does not recompute
        ("Mia starts with 14 marbles.\n13 - 5 = 8\n\\boxed{8}", "does not follow"),  # not from the running total
        ("Mia starts with 14 marbles.\n14 / 4 = 3\n\\boxed{3}", "does not follow"),  # an inexact division
        ("Mia starts with 14 marbles.\n14 - 5 = 9\n\\boxed{8}", "is not the last result"),
        ("Mia starts with 14 marbles.\n14 - 5 is 9\n\\boxed{9}", "is not a step"),
    ],
)
def test_a_solution_out_of_format_is_refused(solution, match):
    with pytest.raises(ValueError, match=match):
        tool_conversation(solution)


def test_a_row_whose_solution_does_not_end_on_its_answer_is_named():
    row = {"id": "arithmetic-L1-x", "solution": "Mia starts with 14 marbles.\n14 - 5 = 9\n\\boxed{9}", "answer": "8"}
    with pytest.raises(ValueError, match="arithmetic-L1-x.*not its answer"):
        tool_messages_column(row)
    with pytest.raises(ValueError, match="'synthetic-L1-y'"):
        tool_messages_column({"id": "synthetic-L1-y", "solution": "<think>\nt=7\n</think>\n\\boxed{7}"})
