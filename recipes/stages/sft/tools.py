"""SFT on conversations that call tools (recipes/sft.py's `tools` and `tool_solutions` options): the tokenizer's tool
template, each conversation's `tools` column, and the arithmetic task's tool-using worked solutions as SFT data.

What TRL's SFTTrainer does itself, and this module leaves to it: a conversation's assistant turns that carry
`tool_calls`, and its `tool` messages, are rendered by the chat template with the row's `tools` column (a JSON string
of the tools' schemas) as `tools=`; with `assistant_only_loss` the `{% generation %}` markers of the template mark
the assistant's content, calls and end of turn as trained, and everything else (the prompt, each tool result) gets
label -100. What it adds:

- `tool_template(tokenizer)`: eval.tools.chat_template.with_tool_template, whose templates all carry the generation
  markers (the model's own where TRL knows it, TRL's Qwen2.5 training template for ChatML, ours for the tiny model);
  the tokenizer is saved with the model, so that GRPO (`tools: [python]`) and a vLLM server render the same;
- `tool_schemas(names)`: the schemas of the tools `names` name, exactly as GRPO shows them to the policy (TRL renders
  a tool function, or each public method of an environment but `reset`, through transformers' `get_json_schema`), so
  the cold start trains on the system text RL will show;
- `tool_solution_conversations(rows, style)`: the arithmetic rows as tasks.tool_solutions' conversations (the prompt,
  then the assistant's calls, the tool's results and the final answer), the data of the tool cold start.
"""

from __future__ import annotations

import functools
import inspect
import json
import types

from recipes.common.training.sft_step import ChatTemplateError
from tasks.schema import SchemaError

TOOL_SOLUTION_STYLES = ("one_call", "per_step")  # tasks.tool_solutions.tool_conversation: one call, or one per step
TOOLS_COLUMN = "tools"  # TRL's SFTTrainer renders each row with its own `tools` (a list, or a JSON string of one)


class ToolSolutionError(SchemaError):
    """A row has no worked solution that tasks.tool_solutions can turn into tool calls."""


def tool_template(tokenizer):
    """The tokenizer, changed in place to render tool calls and tool results with the loss markers
    (eval.tools.chat_template); ChatTemplateError (one line, exit code 2) when no template fits it."""
    from eval.tools.chat_template import with_tool_template

    try:
        return with_tool_template(tokenizer)
    except ValueError as error:
        raise ChatTemplateError(f"tools: {error}") from None


def tool_schemas(names: list[str]) -> list[dict]:
    """The JSON schemas of the tools `names` (eval.tools.registry's names), in the order GRPO shows them: the plain
    functions, then the environment's tool methods by name. ValueError for an unknown tool or one TRL cannot show."""
    from transformers.utils import get_json_schema

    from eval.tools.registry import RESERVED_METHODS, trainer_tools

    built = trainer_tools(names)
    tools = list(built["tools"])
    environment = built["environment_factory"]
    if environment is not None:
        cls = environment.func if isinstance(environment, functools.partial) else environment
        tools += [
            types.MethodType(function, object())  # bound, so that `self` is not an argument, as TRL binds it
            for name, function in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not name.startswith("_") and name not in RESERVED_METHODS
        ]
    return [get_json_schema(tool) for tool in tools]


def with_tools_column(conversations, schemas: list[dict]):
    """`conversations` with a `tools` column: every row shown `schemas` (a JSON string, so that Arrow keeps each
    schema as written rather than one struct for all)."""
    text = json.dumps(schemas)
    if TOOLS_COLUMN in conversations.column_names:
        conversations = conversations.remove_columns(TOOLS_COLUMN)
    return conversations.add_column(TOOLS_COLUMN, [text] * len(conversations))


def tool_solution_conversations(rows, style: str = "one_call"):
    """The rows (arithmetic rows: a `prompt` and a worked `solution`) as `{"messages": prompt + tool turns}`, the tool
    turns built by tasks.tool_solutions (`style`: one call for the problem, or one call per step).
    ToolSolutionError, naming the row, for a row whose solution is not an arithmetic worked solution."""
    from datasets import Dataset

    from tasks.tool_solutions import COLUMN, tool_messages_column

    if style not in TOOL_SOLUTION_STYLES:
        raise ValueError(f"tool_solutions must be one of {', '.join(TOOL_SOLUTION_STYLES)}, got {style!r}")
    conversations = []
    for row in rows:
        try:
            turns = tool_messages_column(row, per_step=style == "per_step")[COLUMN]
        except ValueError as error:
            raise ToolSolutionError(
                f"tool_solutions: {error}. Only the arithmetic task's rows (dataset_name: arithmetic:<levels>) "
                "have worked solutions a tool can compute"
            ) from None
        conversations.append({"messages": [*row["prompt"], *turns]})
    if not conversations:
        raise ToolSolutionError("tool_solutions: the dataset has no rows")
    return Dataset.from_list(conversations)
