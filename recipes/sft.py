"""Supervised fine-tuning: the cold start of the R1 pipeline (and the SFT step of rejection sampling and distillation).

    python recipes/sft.py                                      # embedded default: tiny model, synthetic levels 1-4
    accelerate launch recipes/sft.py --config recipes/configs/demo/sft.yaml --max_steps 50
    accelerate launch --config_file recipes/accelerate/zero3.yaml recipes/sft.py \\
        --config recipes/configs/qwen2.5-math-1.5b/sft_cold_start.yaml

Top to bottom: parse the config (this recipe's own options: recipes.stages.sft.arguments.SFTScriptArguments),
load the tokenizer and check that an assistant turn ends with EOS, load the rows and turn them into
conversations, train with TRL's SFTTrainer (loss on the assistant's tokens only, EOS included; `packing:
true` packs short conversations into full rows; `use_peft: true` trains a LoRA adapter), save the model,
the tokenizer and a run card. The training step itself is recipes.common.training.sft_step.train_sft, which
rejection_sampling.py and distill.py call too.

With `tools: [python]` the conversations may call tools: the tokenizer gets a template that renders calls and
results (saved with the model), each row is shown the tools as GRPO shows them, and the loss is on the assistant's
turns only, never on a tool's result (recipes.stages.sft.tools). `tool_solutions: one_call` makes the rows the
arithmetic task's tool-using worked solutions: the tool cold start (recipes/configs/demo/sft_tools.yaml).
"""

from __future__ import annotations

import logging
from pathlib import Path

if __package__ in (None, ""):  # run by path: this checkout on sys.path, with or without the venv
    import _checkout  # noqa: F401  (recipes/_checkout.py, beside this file)

from recipes.common.command_line.config import RecipeParser
from recipes.common.data import to_sft_conversations
from recipes.common.model.loading import load_tokenizer, resolve_model_path
from recipes.common.training.sft_step import ChatTemplateError, check_chat_template, train_sft
from recipes.stages.sft.arguments import SFTScriptArguments
from recipes.stages.sft.tools import tool_schemas, tool_solution_conversations, tool_template, with_tools_column
from tasks.schema import load_rows

logger = logging.getLogger("recipes.sft")

DEFAULT_CONFIG = "demo/sft.yaml"


def main(script_args: SFTScriptArguments, training_args, model_args) -> Path:
    """Fine-tune and save; returns the output folder."""
    from transformers import set_seed

    set_seed(training_args.seed)
    if_missing = script_args.missing_model_fallback()
    model_path = resolve_model_path(model_args.model_name_or_path, if_missing=if_missing)
    tokenizer = load_tokenizer(model_path, model_args.model_revision, getattr(model_args, "trust_remote_code", False))
    if script_args.tools:  # a template that renders tool calls and results, saved with the model
        tokenizer = tool_template(tokenizer)
    check_chat_template(tokenizer, training_args)  # EOS ends a turn, the loss mask works: fail in seconds

    rows = load_rows(script_args)
    if script_args.tool_solutions:  # the tool cold start: the arithmetic task's worked solutions as tool calls
        train_dataset = tool_solution_conversations(rows, script_args.tool_solutions)
    else:
        train_dataset = to_sft_conversations(
            rows,
            script_args.dataset_name,
            script_args.assistant_template,
            no_think_fraction=script_args.no_think_fraction,
            thinking_switch=script_args.thinking_switch,
        )
    if script_args.tools:  # each row shown the tools as GRPO shows them (TRL renders a row's own `tools`)
        train_dataset = with_tools_column(train_dataset, tool_schemas(script_args.tools))
    logger.info("training on %d conversations from %s", len(train_dataset), script_args.dataset_name)
    return train_sft(
        model_path,
        train_dataset,
        training_args,
        model_args,
        tokenizer=tokenizer,
        merge_lora=script_args.merge_lora,
        config_overrides=script_args.model_config_overrides,
        card_configs={"script": script_args, "training": training_args, "model": model_args},
        card_datasets={"train": rows},
        card_extra={"recipe": "sft"},
    )


def make_parser() -> RecipeParser:
    """This recipe's command line: its dataclasses (TRL's imported here, when it is built), its default config and
    the errors that are the user's."""
    from trl import ModelConfig, SFTConfig

    return RecipeParser((SFTScriptArguments, SFTConfig, ModelConfig), DEFAULT_CONFIG, (ChatTemplateError,), __doc__)


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/sft.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
