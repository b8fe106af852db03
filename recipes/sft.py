"""Supervised fine-tuning: the cold start of the R1 pipeline (and the SFT step of rejection sampling and distillation).

    python recipes/sft.py                                      # embedded default: tiny model, synthetic levels 1-3
    accelerate launch recipes/sft.py --config recipes/configs/demo/sft.yaml --max_steps 50

Top to bottom: parse the config, load the model and tokenizer, check that an assistant turn ends with
EOS, load the rows and turn them into conversations, train with TRL's SFTTrainer (loss on the
assistant's tokens only, EOS included), save the model, the tokenizer and a run card.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo's packages importable without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_filters.schema import DataArguments, load_rows
from recipes.common.config import parse_recipe_args, run_recipe, setup_logging
from recipes.common.data import to_sft_conversations
from recipes.common.model import load_model, load_tokenizer, resolve_model_path
from recipes.common.run_card import write_run_card

logger = logging.getLogger("recipes.sft")

DEFAULT_CONFIG = "demo/sft.yaml"


@dataclass
class SFTScriptArguments(DataArguments):
    build_tiny_model: bool = field(
        default=False,
        metadata={"help": "Build the tiny embedded model at model_name_or_path if that folder does not exist yet."},
    )


class EOSTemplateError(ValueError):
    """The chat template does not end an assistant turn with the EOS token, so a trained model would never stop."""


def check_eos_guarantee(tokenizer, eos_token: str | None = None) -> None:
    """Fail before training when an assistant turn, rendered by the chat template, does not end with EOS.

    An SFT'd model learns to stop only if its training text ends the assistant's turn with the token that
    generation stops on. Base models often ship `<|endoftext|>` as EOS while their template closes turns
    with `<|im_end|>`: such a model never stops. The fix is the `eos_token` option of SFTConfig.
    """
    eos = eos_token or tokenizer.eos_token
    if eos is None:
        raise EOSTemplateError("the tokenizer has no EOS token; set `eos_token` in the SFT config")
    if not getattr(tokenizer, "chat_template", None):
        raise EOSTemplateError(
            "the tokenizer has no chat template, so conversational SFT cannot render turns; use a model that "
            "ships one or set tokenizer.chat_template"
        )
    marker = "Answer: 42"
    messages = [{"role": "user", "content": "Question?"}, {"role": "assistant", "content": marker}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    after = rendered[rendered.rfind(marker) + len(marker) :].lstrip()
    if not after.startswith(eos):
        following = after[:20] or "(nothing: the template leaves the turn open)"
        raise EOSTemplateError(
            f"the chat template ends an assistant turn with {following!r}, not with the EOS token {eos!r}: "
            "the trained model would never stop generating. Set `eos_token` in the SFT config to the template's "
            "end-of-turn token (for Qwen templates: eos_token: '<|im_end|>')."
        )


def main(script_args: SFTScriptArguments, training_args, model_args) -> Path:
    from transformers import set_seed
    from transformers.trainer_utils import get_last_checkpoint
    from trl import SFTTrainer, get_peft_config

    set_seed(training_args.seed)
    model_path = resolve_model_path(model_args.model_name_or_path, build_tiny_if_missing=script_args.build_tiny_model)
    tokenizer = load_tokenizer(model_path, model_args.model_revision, getattr(model_args, "trust_remote_code", False))
    check_eos_guarantee(tokenizer, training_args.eos_token)

    rows = load_rows(script_args)
    train_dataset = to_sft_conversations(rows, script_args.dataset_name)
    logger.info("training on %d conversations from %s", len(train_dataset), script_args.dataset_name)

    model = load_model(model_path, model_args, training_args)
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
    )

    resume = training_args.resume_from_checkpoint
    if isinstance(resume, str) and resume.lower() in ("true", "last"):
        resume = get_last_checkpoint(training_args.output_dir)
        logger.info("resuming from %s", resume)
    elif resume is None and Path(training_args.output_dir).is_dir() and get_last_checkpoint(training_args.output_dir):
        logger.warning(
            "%s holds checkpoints; this run starts afresh. Pass --resume_from_checkpoint true to continue instead.",
            training_args.output_dir,
        )
    trainer.train(resume_from_checkpoint=resume)

    trainer.model.config.use_cache = True  # training turned the KV cache off; the saved model is for generation
    trainer.save_model(training_args.output_dir)  # the model and, as processing_class, the tokenizer
    write_run_card(
        training_args.output_dir,
        {"script": script_args, "training": training_args, "model": model_args},
        datasets={"train": rows},
        extra={"recipe": "sft", "base_model": model_path},
    )
    logger.info("saved to %s", training_args.output_dir)
    return Path(training_args.output_dir)


if __name__ == "__main__":
    from trl import ModelConfig, SFTConfig

    setup_logging()
    parsed = parse_recipe_args((SFTScriptArguments, SFTConfig, ModelConfig), DEFAULT_CONFIG)
    run_recipe(main, parsed, user_errors=(EOSTemplateError,))
