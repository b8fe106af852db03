"""Real human-written solutions as completions, for tests/test_math_solutions.py and scripts/bench/bench_rewards.py.

Each solution ends in its boxed final answer, so it is a correct completion for its own problem's gold.
Wrong completions are made from the same texts: the solution scored against another problem's gold, and the
solution with one character of its final box edited (a digit moved by one, else a letter moved by one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from rewards.math.answers import answer_boxes

_COMMAND = re.compile(r"\\[a-zA-Z]+")


@dataclass(frozen=True)
class Solution:
    id: str
    gold: str
    text: str


def math_solutions(data_dir: Path) -> list[Solution]:
    """math_train_solutions.jsonl matched to math_train.jsonl by problem text (its `answer` is the gold)."""
    golds = {}
    for line in (data_dir / "math_train.jsonl").read_text().splitlines():
        row = json.loads(line)
        golds[row["problem"]] = row["answer"]
    solutions = []
    for line in (data_dir / "math_train_solutions.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["problem"] in golds:
            solutions.append(Solution(row["unique_id"], str(golds[row["problem"]] or ""), row["solution"]))
    return solutions


def aime_solutions(data_dir: Path) -> list[Solution]:
    solutions = []
    for name in ("aime24.jsonl", "aime_1983_2023.jsonl"):
        for index, line in enumerate((data_dir / name).read_text().splitlines()):
            row = json.loads(line)
            if row.get("solution"):
                solutions.append(
                    Solution(f"{name.removesuffix('.jsonl')}:{index}", str(row["answer"]), row["solution"])
                )
    return solutions


def _edit_position(content: str) -> tuple[int, str] | None:
    """Where and how to change one character of an answer: its last digit, else its last letter that is
    not part of a LaTeX command."""
    for index in range(len(content) - 1, -1, -1):
        if content[index].isdigit():
            return index, str((int(content[index]) + 1) % 10)
    commands = [range(match.start(), match.end()) for match in _COMMAND.finditer(content)]
    for index in range(len(content) - 1, -1, -1):
        char = content[index]
        if char.isascii() and char.isalpha() and not any(index in span for span in commands):
            return index, "a" if char == "z" else "A" if char == "Z" else chr(ord(char) + 1)
    return None


def one_edit(text: str) -> str | None:
    """The solution with one character of its last box changed, or None when it has nothing to edit."""
    boxes = answer_boxes(text)
    if not boxes:
        return None
    box = boxes[-1]
    start = text.index("{", box.start) + 1
    content = text[start : box.end - 1]
    edit = _edit_position(content)
    if edit is None:
        return None
    index, char = edit
    return text[: start + index] + char + text[start + index + 1 :]


def other_gold_pairs(solutions: list[Solution]) -> list[tuple[Solution, str]]:
    """Each solution with the gold of the next problem whose gold is written differently."""
    pairs = []
    for position, solution in enumerate(solutions):
        for step in range(1, 50):
            other = solutions[(position + step) % len(solutions)].gold
            if "".join(other.split()) != "".join(solution.gold.split()):
                pairs.append((solution, other))
                break
    return pairs
