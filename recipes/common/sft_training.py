"""One SFT run, shared by every recipe that fine-tunes on conversations: sft.py (the cold start),
rejection_sampling.py (each round) and distill.py (the student).

`train_sft(model_path, conversations, training_args, model_args, ...)`: check that the chat template ends
an assistant turn with EOS, load the model, train with TRL's SFTTrainer (loss on assistant tokens only
when the config says so, packing and LoRA as the config says), resume from a checkpoint when asked,
save a model that generates with its KV cache (merged when LoRA was used and a plain model is wanted),
the tokenizer and a run card.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from recipes.common.model import load_model, load_tokenizer
from recipes.common.run_card import write_run_card

logger = logging.getLogger(__name__)


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


def _resume_point(training_args, output_dir: str) -> str | None:
    """`resume_from_checkpoint`: a path, or "true"/"last" for the newest checkpoint in `output_dir`."""
    from transformers.trainer_utils import get_last_checkpoint

    resume = training_args.resume_from_checkpoint
    has_checkpoint = Path(output_dir).is_dir() and get_last_checkpoint(output_dir) is not None
    if isinstance(resume, str) and resume.lower() in ("true", "last"):
        if not has_checkpoint:
            logger.info("resume_from_checkpoint=%s: %s holds no checkpoint yet, starting afresh", resume, output_dir)
            return None
        resume = get_last_checkpoint(output_dir)
        logger.info("resuming from %s", resume)
        return resume
    if resume is None and has_checkpoint:
        logger.warning(
            "%s holds checkpoints; this run starts afresh. Pass --resume_from_checkpoint true to continue instead.",
            output_dir,
        )
    return resume


def train_sft(
    model_path: str,
    conversations,
    training_args,
    model_args,
    *,
    output_dir: str | Path | None = None,
    tokenizer=None,
    merge_lora: bool = False,
    config_overrides: dict | None = None,
    card_configs: dict | None = None,
    card_datasets: dict | None = None,
    card_extra: dict | None = None,
) -> Path:
    """Fine-tune `model_path` on `conversations` (a Dataset of `{"messages": [...]}`) and save it.

    `output_dir` overrides `training_args.output_dir` (the arguments are copied, not changed), so one parsed
    config can train several models (rounds, students). With LoRA (`model_args.use_peft`) the adapter is
    saved, or, with `merge_lora`, merged into the base weights and saved as a plain model, which is what a
    later sampling stage loads. `config_overrides` change the model's config as it loads (e.g. a longer
    context: max_position_embeddings and rope_parameters). Returns the output folder.
    """
    from transformers import set_seed
    from trl import SFTTrainer, get_peft_config

    if output_dir is not None:
        training_args = copy.copy(training_args)
        training_args.output_dir = str(output_dir)
    output_dir = str(training_args.output_dir)
    set_seed(training_args.seed)
    if tokenizer is None:
        tokenizer = load_tokenizer(
            model_path, model_args.model_revision, getattr(model_args, "trust_remote_code", False)
        )
        check_eos_guarantee(tokenizer, training_args.eos_token)
    if len(conversations) == 0:
        raise ValueError(f"no conversations to train {output_dir} on")

    trainer = SFTTrainer(
        model=load_model(model_path, model_args, training_args, config_overrides),
        args=training_args,
        train_dataset=conversations,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
    )
    logger.info("SFT of %s on %d conversations -> %s", model_path, len(conversations), output_dir)
    trainer.train(resume_from_checkpoint=_resume_point(training_args, output_dir))

    model = trainer.model
    model.config.use_cache = True  # training turned the KV cache off; the saved model is for generation
    if merge_lora and hasattr(model, "merge_and_unload"):
        merged = trainer.accelerator.unwrap_model(model).merge_and_unload()
        if trainer.accelerator.is_main_process:
            merged.save_pretrained(output_dir)
            tokenizer.save_pretrained(output_dir)
        logger.info("LoRA adapter merged into the base weights")
    else:
        trainer.save_model(output_dir)  # the model (or its adapter) and, as processing_class, the tokenizer
    if trainer.accelerator.is_main_process:
        write_run_card(
            output_dir,
            card_configs or {"training": training_args, "model": model_args},
            datasets=card_datasets or {"train": conversations},
            extra={"base_model": model_path, "final_step": trainer.state.global_step, **(card_extra or {})},
        )
    logger.info("saved to %s", output_dir)
    return Path(output_dir)
