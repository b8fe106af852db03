"""Tool-using worked solutions of the arithmetic task: a problem's own steps as a conversation that computes with a
`python` tool, in the Hugging Face / TRL message format, so that a cold start can learn the call format before RL.

    solution (tasks.arithmetic):  "Mia starts with 14 marbles.\\n14 - 5 = 9\\n9 * 3 = 27\\n\\boxed{27}"
    tool_conversation(solution):
        {"role": "assistant", "content": "Mia starts with 14 marbles.", "tool_calls": [{"type": "function",
         "function": {"name": "python", "arguments": {"code": "start = 14\\nstep_1 = start - 5\\n..."}}}]}
        {"role": "tool", "name": "python", "content": "27\\n"}
        {"role": "assistant", "content": "Mia has 27 marbles now.\\n\\boxed{27}"}

Nothing here is written by a model or found by running code: the steps are the lines of working the task wrote
(each `tasks.arithmetic.Step.working`, "a op b = c", recomputed and checked here), and a tool message holds what
its code prints, computed from those numbers (a division is exact, and the code writes it `//`, so it prints an
integer). `per_step=True` makes one call per step, each code self-contained (the number it starts from is the
previous tool message's), as a multi-turn rollout of the RL loop does; the default is one call for the problem.
The final message ends as the task's solutions end (`\\boxed{N}`, no other box), so the math verifier
(rewards.verdicts.score_completions) scores it, alone or joined with the other assistant turns, as correct.

A row carries it as a column `tool_messages` (the assistant and tool turns after its `prompt`):
`add_tool_messages(rows)` for a list of rows, `tool_messages_column` for `datasets.Dataset.map`; the SFT
conversation is `row["prompt"] + row["tool_messages"]`, with `PYTHON_TOOL` given to the chat template as `tools`.
"""

from __future__ import annotations

import operator
import re

TOOL_NAME = "python"
COLUMN = "tool_messages"
# The tool's definition, as a chat template's `tools=[...]` and TRL take a JSON schema.
PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Run Python code and return what it prints.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python code to run."}},
            "required": ["code"],
        },
    },
}

_START = re.compile(r"(?P<name>\S+) starts with (?P<start>\d+) (?P<item>\S+)\.")
_WORKING = re.compile(r"(?P<a>\d+) (?P<op>[-+*/]) (?P<b>\d+) = (?P<value>\d+)")
_BOXED = re.compile(r"\\boxed\{(?P<value>\d+)\}")
_OPERATIONS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.floordiv}
_CODE_OPERATORS = {"+": "+", "-": "-", "*": "*", "/": "//"}  # exact division, printed as an integer


def parse_solution(solution: str) -> tuple[str, str, int, list[tuple[int, str, int, int]]]:
    """(name, item, start, steps) of an arithmetic worked solution, each step `(a, op, b, value)` as the task wrote
    it; ValueError when the text is not one (a line out of format, a step that does not recompute or does not start
    from the previous result, a box that is not the last result)."""
    lines = solution.splitlines() if isinstance(solution, str) else []
    if len(lines) < 3:
        raise ValueError(f"not an arithmetic worked solution (a start, steps, a box): {solution!r}")
    start_line = _START.fullmatch(lines[0])
    boxed = _BOXED.fullmatch(lines[-1])
    if not start_line or not boxed:
        raise ValueError(f"not an arithmetic worked solution (first line or box out of format): {solution!r}")
    total = int(start_line["start"])
    steps = []
    for line in lines[1:-1]:
        working = _WORKING.fullmatch(line)
        if not working:
            raise ValueError(f"line {line!r} is not a step 'a op b = c' in {solution!r}")
        a, op, b, value = int(working["a"]), working["op"], int(working["b"]), int(working["value"])
        if a != total or (op == "/" and (b == 0 or a % b)) or _OPERATIONS[op](a, b) != value:
            raise ValueError(f"step {line!r} does not follow from {total} in {solution!r}")
        steps.append((a, op, b, value))
        total = value
    if int(boxed["value"]) != total:
        raise ValueError(f"the box {lines[-1]!r} is not the last result {total} in {solution!r}")
    return start_line["name"], start_line["item"], int(start_line["start"]), steps


def _call(content: str, code: str) -> dict:
    """An assistant turn that calls the python tool with `code`."""
    call = {"type": "function", "function": {"name": TOOL_NAME, "arguments": {"code": code}}}
    return {"role": "assistant", "content": content, "tool_calls": [call]}


def _result(printed: str) -> dict:
    return {"role": "tool", "name": TOOL_NAME, "content": printed}


def tool_conversation(solution: str, per_step: bool = False) -> list[dict]:
    """The assistant and tool turns that solve an arithmetic problem with the python tool, from its worked
    `solution` (the `solution` column of tasks.arithmetic's rows): one call whose code names every intermediate
    result (`start`, `step_1`, ...) and prints the last, or with `per_step` one call per step, each printing its
    step's result; then a final answer `\\boxed{N}`. Each tool message is exactly what its code prints."""
    name, item, start, steps = parse_solution(solution)
    opening = f"{name} starts with {start} {item}."
    messages = []
    if per_step:
        for index, (a, op, b, value) in enumerate(steps, start=1):
            code = f"step_{index} = {a} {_CODE_OPERATORS[op]} {b}\nprint(step_{index})\n"
            messages += [_call(opening if index == 1 else "", code), _result(f"{value}\n")]
    else:
        lines = [f"start = {start}"]
        for index, (_, op, b, _) in enumerate(steps, start=1):
            lines.append(f"step_{index} = {'start' if index == 1 else f'step_{index - 1}'} {_CODE_OPERATORS[op]} {b}")
        lines.append(f"print(step_{len(steps)})")
        messages += [_call(opening, "\n".join(lines) + "\n"), _result(f"{steps[-1][3]}\n")]
    total = steps[-1][3]
    messages.append({"role": "assistant", "content": f"{name} has {total} {item} now.\n\\boxed{{{total}}}"})
    return messages


def tool_messages_column(row: dict, per_step: bool = False) -> dict:
    """`{"tool_messages": [...]}` for one arithmetic row (for `datasets.Dataset.map`); ValueError naming the row
    when its solution is not an arithmetic worked solution or does not end on its answer."""
    try:
        messages = tool_conversation(row.get("solution"), per_step=per_step)
    except ValueError as error:
        raise ValueError(f"row {row.get('id')!r}: {error}") from error
    if "answer" in row and str(row["answer"]).strip() != str(messages[-2]["content"]).strip():
        raise ValueError(f"row {row.get('id')!r}: its solution ends on {messages[-2]['content']!r}, not its answer")
    return {COLUMN: messages}


def add_tool_messages(rows: list[dict], per_step: bool = False) -> list[dict]:
    """The rows, each with the column `tool_messages` (its tool-using worked solution) added; the rows are unchanged
    otherwise, so they stay deterministic for the seed that drew them."""
    return [{**row, **tool_messages_column(row, per_step=per_step)} for row in rows]
