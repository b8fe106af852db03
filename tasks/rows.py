"""Helpers on single rows of the schema (tasks/schema.py): a stable id, a chat prompt from a question, the bare
question of a row, and a column set on a dataset. The filters compare and tag rows through these.
"""

from __future__ import annotations

import hashlib

# The instruction the recipes' configs give math problems, and the default prompt of a math row (training and
# evaluation alike): without it a model has no reason to box its answer, and the verifier, which reads boxes,
# scores every sample 0 ("no boxed answer").
BOX_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
MATH_USER_TEMPLATE = "{problem}\n\n" + BOX_INSTRUCTION
PLAIN_USER_TEMPLATE = "{problem}"


def row_id(text: str, prefix: str = "row") -> str:
    """A stable id from a question's text (used when the source has none)."""
    return f"{prefix}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def build_prompt(question: str, system_prompt: str | None = None, user_template: str = "{problem}") -> list[dict]:
    """Chat messages for one question. `{problem}` is replaced literally, so templates may hold LaTeX braces
    (R1's "put your final answer within \\boxed{}") without being read as format fields."""
    prompt = [{"role": "user", "content": user_template.replace("{problem}", question)}]
    if system_prompt:
        prompt.insert(0, {"role": "system", "content": system_prompt})
    return prompt


def question_text(row: dict, question_field: str = "problem") -> str:
    """The bare question of a row (no template): its question column, else its last user message.

    Filters compare questions, never templated prompts: a shared system prompt would make every row look
    like a duplicate of every other, and like a copy of every evaluation problem.
    """
    value = row.get(question_field)
    if isinstance(value, str) and value.strip():
        return value
    messages = row.get("prompt") or row.get("messages")
    if isinstance(messages, str):
        return messages
    for message in reversed(messages or []):
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def set_column(dataset, name: str, values: list, dtype: str | None = None, is_list: bool = False):
    """The dataset with column `name` set to `values` (replaced if present). `dtype` ("string", "float64",
    "bool", ...) fixes the Arrow type, which Arrow cannot infer from a column of only None or only []."""
    from datasets import List, Value

    if name in dataset.column_names:
        dataset = dataset.remove_columns(name)
    feature = None if dtype is None else (List(Value(dtype)) if is_list else Value(dtype))
    return dataset.add_column(name, values, feature=feature)
