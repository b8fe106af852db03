"""One SFT run, shared by every recipe that fine-tunes on conversations: sft.py (the cold start),
rejection_sampling.py (each round) and distill.py (the student).

`train_sft(model_path, conversations, training_args, model_args, ...)`: check that the chat template ends
an assistant turn with EOS, load the model, train with TRL's SFTTrainer (loss on assistant tokens only
when the config says so, packing and LoRA as the config says), resume from a checkpoint when asked,
save a model that generates with its KV cache (merged when LoRA was used and a plain model is wanted),
the tokenizer and a run card. Every logged number goes to `<output_dir>/metrics.jsonl` through the GRPO
runs' monitor (recipes.common.training.monitor), so `python -m recipes.plot_curves` draws an SFT run whatever
`save_strategy` and `report_to` say.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from recipes.common.checkpoints.resume import train_resuming
from recipes.common.model.loading import load_model, load_tokenizer, save_trainer_for_inference
from recipes.common.run_card import write_run_card

logger = logging.getLogger(__name__)


class ChatTemplateError(ValueError):
    """The chat template cannot serve this SFT run; the message says what to set."""


class EOSTemplateError(ChatTemplateError):
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


class LossMaskError(ChatTemplateError):
    """assistant_only_loss is asked for, but the chat template cannot mark the assistant's tokens."""


def check_loss_mask(tokenizer, assistant_only_loss: bool) -> None:
    """Fail in seconds when `assistant_only_loss` cannot work with this chat template, saying what to set.

    TRL masks the loss to the assistant's tokens through `{% generation %}` markers in the chat template,
    and swaps in a marked copy for the templates it knows (Qwen, Llama 3, Gemma, ...). Any other template
    (SmolLM2's, most fine-tunes') fails inside TRL's data preparation, after the model loaded, or in
    rejection sampling after all its sampling. The check asks TRL's own function, before anything runs.
    """
    if not assistant_only_loss:
        return
    from trl.chat_template_utils import get_training_chat_template

    try:
        get_training_chat_template(tokenizer)
    except ValueError:
        raise LossMaskError(
            "assistant_only_loss: true needs a chat template with {% generation %} markers, and this tokenizer's "
            "template has none (nor does TRL know a training version of it). Set assistant_only_loss: false: the "
            "recipes then train on prompt/completion pairs with the loss on the assistant's answer only (TRL's "
            "completion_only_loss), which works with any template."
        ) from None


def check_chat_template(tokenizer, training_args) -> None:
    """Both template checks of an SFT run: the assistant turn ends with EOS, and the loss mask can be built."""
    check_eos_guarantee(tokenizer, training_args.eos_token)
    check_loss_mask(tokenizer, getattr(training_args, "assistant_only_loss", False))


def as_prompt_completion(conversations, training_args):
    """`{"messages"}` rows -> `{"prompt", "completion"}` rows, when the loss is not masked by the template.

    Without assistant_only_loss, SFTTrainer would train on every token of a `messages` row, system prompt
    and question included. Split at the last assistant turn, the same rows train on the answer only
    (TRL's completion_only_loss, on by default for prompt/completion data) with any chat template.
    `completion_only_loss: false` keeps the whole conversation in the loss.
    """
    if getattr(training_args, "assistant_only_loss", False) or training_args.completion_only_loss is False:
        return conversations
    if "messages" not in conversations.column_names:
        return conversations

    def split(row):
        messages = row["messages"]
        if not messages or messages[-1]["role"] != "assistant":
            raise ValueError(f"a conversation to train on must end with an assistant turn; got {messages[-1:]}")
        return {"prompt": messages[:-1], "completion": messages[-1:]}

    return conversations.map(split, remove_columns=conversations.column_names, desc="to prompt/completion")


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

    from recipes.common.training.library_noise import quiet_library_noise
    from recipes.common.training.monitor import RLVRMonitor

    quiet_library_noise()
    if output_dir is not None:
        training_args = copy.copy(training_args)
        training_args.output_dir = str(output_dir)
    output_dir = str(training_args.output_dir)
    set_seed(training_args.seed)
    if tokenizer is None:
        tokenizer = load_tokenizer(
            model_path, model_args.model_revision, getattr(model_args, "trust_remote_code", False)
        )
        check_chat_template(tokenizer, training_args)
    if len(conversations) == 0:
        raise ValueError(f"no conversations to train {output_dir} on")
    conversations = as_prompt_completion(conversations, training_args)

    trainer = SFTTrainer(
        model=load_model(model_path, model_args, training_args, config_overrides),
        args=training_args,
        train_dataset=conversations,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        callbacks=[RLVRMonitor(output_dir)],  # metrics.jsonl; its GRPO checks need GRPO's metrics and stay quiet
    )
    logger.info("SFT of %s on %d conversations -> %s", model_path, len(conversations), output_dir)
    train_resuming(trainer, training_args, output_dir)

    save_trainer_for_inference(trainer, output_dir, tokenizer, merge_lora, started_from=model_path)
    if trainer.accelerator.is_main_process:
        write_run_card(
            output_dir,
            card_configs or {"training": training_args, "model": model_args},
            datasets=card_datasets or {"train": conversations},
            extra={"base_model": model_path, "final_step": trainer.state.global_step, **(card_extra or {})},
        )
    logger.info("saved to %s", output_dir)
    return Path(output_dir)
