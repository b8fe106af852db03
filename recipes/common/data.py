"""Turning schema rows into what TRL's trainers take."""

from __future__ import annotations

import logging
import re

from data_filters.schema import SchemaError

logger = logging.getLogger(__name__)


_COLUMN = re.compile(r"\{(\w+)\}")


def render_assistant(template: str, row: dict, source: str, index: int) -> str:
    """`template` with each `{column}` replaced by that column of `row` (other braces, e.g. LaTeX, stay)."""

    def value(match):
        name = match.group(1)
        if name not in row:
            return match.group(0)
        text = row[name]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(
                f"{source}: row {index} (id {row.get('id')!r}): column {name!r} of assistant_template is empty; "
                "drop or fix the row"
            )
        return text

    return _COLUMN.sub(value, template)


def to_sft_conversations(dataset, source: str, assistant_template: str | None = None):
    """Rows with `prompt` + `solution` become conversational rows `{"messages": [...]}` for SFTTrainer.

    Rows that already hold `messages` pass through. `assistant_template` builds the assistant's turn from
    several columns instead of `solution`, e.g. "<think>\\n{deepseek_thinking_trajectory}\\n</think>\\n{deepseek_attempt}"
    for s1K-1.1, whose reasoning and answer are separate columns. A row without a solution cannot be
    trained on: the error names it and says what to add.
    """
    columns = set(dataset.column_names)
    if assistant_template is not None:
        missing = sorted(set(_COLUMN.findall(assistant_template)) - columns)
        if not _COLUMN.search(assistant_template) or missing:
            raise SchemaError(
                f"{source}: assistant_template {assistant_template!r} names columns the rows lack ({missing}) or "
                f"none at all; columns: {sorted(columns)}"
            )

        def render(row, index):
            return {
                "messages": [
                    *row["prompt"],
                    {"role": "assistant", "content": render_assistant(assistant_template, row, source, index)},
                ]
            }

        return dataset.map(render, with_indices=True, remove_columns=sorted(columns), desc="to conversations")
    if "messages" in columns:
        return dataset.select_columns(["messages"])
    if "solution" not in columns:
        raise SchemaError(
            f"{source}: SFT needs a 'solution' column (the reference reasoning and answer) or a 'messages' column; "
            f"found {sorted(columns)}. Map yours with field_map (e.g. --field_map '{{solution: reasoning}}') or "
            "build the turn with assistant_template"
        )

    def convert(row, index):
        solution = row["solution"]
        if not isinstance(solution, str) or not solution.strip():
            raise ValueError(f"{source}: row {index} (id {row.get('id')!r}): 'solution' is empty; drop or fix the row")
        return {"messages": [*row["prompt"], {"role": "assistant", "content": solution}]}

    return dataset.map(convert, with_indices=True, remove_columns=sorted(columns), desc="to conversations")
