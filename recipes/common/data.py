"""Turning schema rows into what TRL's trainers take."""

from __future__ import annotations

import hashlib
import logging
import re

from tasks.schema import SchemaError

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


def to_sft_conversations(
    dataset,
    source: str,
    assistant_template: str | None = None,
    no_think_fraction: float = 0.0,
    thinking_switch: bool = False,
):
    """Rows with `prompt` + `solution` become conversational rows `{"messages": [...]}` for SFTTrainer.

    Rows that already hold `messages` pass through. `assistant_template` builds the assistant's turn from
    several columns instead of `solution`, e.g. "<think>\\n{deepseek_thinking_trajectory}\\n</think>\\n{deepseek_attempt}"
    for s1K-1.1, whose reasoning and answer are separate columns. A row without a solution cannot be
    trained on: the error names it and says what to add.

    `no_think_fraction` and `thinking_switch` mix thinking and non-thinking examples (see `with_thinking_modes`).
    """
    if no_think_fraction or thinking_switch or "thinking_mode" in dataset.column_names:
        modes = thinking_modes(dataset, no_think_fraction)
        plain = dataset.remove_columns([name for name in ("thinking_mode",) if name in dataset.column_names])
        return with_thinking_modes(to_sft_conversations(plain, source, assistant_template), modes, thinking_switch)
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


# ---------------------------------------------------------------- thinking modes (Qwen3's thinking mode fusion)

THINK_MODES = ("think", "no_think")
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
EMPTY_THINKING = "<think>\n\n</think>"  # what Qwen3's template writes for a non-thinking answer


def thinking_modes(dataset, no_think_fraction: float = 0.0) -> list[str]:
    """Each row's mode: its own `thinking_mode` column when it has one, else "no_think" for a stable share
    `no_think_fraction` of rows (chosen by a hash of the row's id, so a resumed or sharded run agrees)."""
    if "thinking_mode" in dataset.column_names:
        modes = list(dataset["thinking_mode"])
        bad = sorted({mode for mode in modes if mode not in THINK_MODES}, key=str)
        if bad:
            raise ValueError(f"thinking_mode must be one of {THINK_MODES}; found {bad}")
        return modes
    if not 0.0 <= no_think_fraction <= 1.0:
        raise ValueError(f"no_think_fraction must be in [0, 1], got {no_think_fraction}")
    ids = dataset["id"] if "id" in dataset.column_names else [str(index) for index in range(len(dataset))]
    buckets = [int(hashlib.sha1(str(key).encode()).hexdigest()[:8], 16) / 0x100000000 for key in ids]
    return ["no_think" if bucket < no_think_fraction else "think" for bucket in buckets]


def with_thinking_modes(conversations, modes: list[str], thinking_switch: bool = False):
    """Conversations with a `thinking_mode` column and the mode applied, as Qwen3's cold start mixed them:
    a no_think row's thinking is emptied to "<think>\n\n</think>" (the answer after it stays); with
    `thinking_switch`, its last user turn ends with "/think" or "/no_think". A `chat_template_kwargs` column
    ({"enable_thinking": ...}) reaches templates that read it: TRL's SFTTrainer passes it to the template."""

    def apply(row, index):
        mode = modes[index]
        messages = [dict(message) for message in row["messages"]]
        users = [i for i, message in enumerate(messages) if message["role"] == "user"]
        if thinking_switch and users:
            messages[users[-1]]["content"] += " /think" if mode == "think" else " /no_think"
        if mode == "no_think":
            for message in messages:
                if message["role"] == "assistant":
                    message["content"] = _THINK_BLOCK.sub(EMPTY_THINKING, message["content"], count=1)
        return {
            "messages": messages,
            "thinking_mode": mode,
            "chat_template_kwargs": {"enable_thinking": mode == "think"},
        }

    return conversations.map(apply, with_indices=True, desc="thinking modes")


def kept_rows_as_conversations(kept: list[dict], source: str):
    """The rows a recipe kept of its own samples (recipes.common.traces) as SFTTrainer's conversational dataset."""
    from datasets import Dataset

    if any(row.get("messages") for row in kept):  # sampled with tools: the conversations as they were, and the
        # tools' schemas (JSON) in SFTTrainer's `tools` column, so that its template renders them as sampling did
        return Dataset.from_list([{"messages": row["messages"], "tools": row.get("tools")} for row in kept])
    dataset = Dataset.from_list(
        [{"id": row["id"], "prompt": row["prompt"], "solution": row["solution"]} for row in kept]
    )
    return to_sft_conversations(dataset, source)
