"""Turning schema rows into what TRL's trainers take."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def to_sft_conversations(dataset, source: str):
    """Rows with `prompt` + `solution` become conversational rows `{"messages": [...]}` for SFTTrainer.

    Rows that already hold `messages` pass through. A row without a solution cannot be trained on:
    the error names it and says what to add.
    """
    columns = set(dataset.column_names)
    if "messages" in columns:
        return dataset.select_columns(["messages"])
    if "solution" not in columns:
        raise ValueError(
            f"{source}: SFT needs a 'solution' column (the reference reasoning and answer) or a 'messages' column; "
            f"found {sorted(columns)}"
        )

    def convert(row, index):
        solution = row["solution"]
        if not isinstance(solution, str) or not solution.strip():
            raise ValueError(f"{source}: row {index} (id {row.get('id')!r}): 'solution' is empty; drop or fix the row")
        return {"messages": [*row["prompt"], {"role": "assistant", "content": solution}]}

    return dataset.map(convert, with_indices=True, remove_columns=sorted(columns), desc="to conversations")
