"""GRPO with the python tool through TRL's tool loop (`tools: [python]`): a scripted policy calls the tool on some
rows, the sandboxed interpreter answers, and the step counts only the model's tokens: the tool mask is 0 on exactly
the tool's result, `tokens/generated` and `tokens/trained` leave it out, and the log has the tool figures
(`tools/calls_per_completion`, `tools/failure_frac`, `tools/turns_mean`, `timing_s/tools`), worked out by hand.

The tiny model never writes a call by itself, so its first turn is scripted (the policy's `_generate_single_turn`,
which TRL's loop calls for every turn); everything after it, the parse, the tool, the masks, the loss, is the
trainer's own."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

CALLERS = (0, 2, 4)  # the rows (of 6: two groups of 3) whose first turn calls the tool


def _trainer(tmp_path, code: str, **options):
    from datasets import Dataset

    from eval.tools.chat_template import with_tool_template
    from eval.tools.registry import trainer_tools
    from recipes.common.model.loading import SHIPPED_COLD_START, load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    def reward(completions, answer, **kwargs):
        return [float(i % 2) for i, _ in enumerate(answer)]  # every group has variance

    defaults = dict(
        num_generations=3, per_device_train_batch_size=6, gradient_accumulation_steps=1, steps_per_generation=1,
        max_completion_length=200, learning_rate=0.01, optim="sgd", loss_type="dapo", beta=0.0, max_steps=1, seed=3,
        report_to=[], use_cpu=True, bf16=False, gradient_checkpointing=False, save_strategy="no", logging_steps=1,
        max_tool_calling_iterations=2,
    )  # fmt: skip
    tokenizer = with_tool_template(load_tokenizer(str(SHIPPED_COLD_START)))
    trainer = RLVRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START), reward_funcs=[reward],
        args=RLVRGRPOConfig(output_dir=str(tmp_path), **{**defaults, **options}),
        train_dataset=Dataset.from_list(generate_rows([1], 6, seed=0)), processing_class=tokenizer,
        **trainer_tools(["python"], timeout_s=2.0),
    )  # fmt: skip
    _script(trainer, tokenizer, code)
    return trainer, tokenizer


def _script(trainer, tokenizer, code: str) -> None:
    """The policy's turns: on the first, rows CALLERS call python(code), the others answer; after a tool result, an
    answer. Each token's sampling log-prob is -0.5."""
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": code}}}]}  # fmt: skip
    prompt = [{"role": "user", "content": "What is 6*7?"}]
    tools = [trainer.environments[0].python] if getattr(trainer, "environments", None) else None
    before = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=False)
    whole = tokenizer.apply_chat_template([*prompt, call], tools=tools, tokenize=False)
    call_ids = tokenizer(whole[len(before) :], add_special_tokens=False)["input_ids"]
    assert call_ids[-1] == tokenizer.eos_token_id, "the call's turn ends with EOS"

    def answer(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        first = "<tool_response>" not in tokenizer.decode(prompt_ids[0])
        if first:
            ids = [call_ids if row in CALLERS else answer("\\boxed{7}") for row in range(len(prompt_ids))]
        else:
            ids = [answer("so \\boxed{42}") for _ in prompt_ids]
        return ids, [[-0.5] * len(row) for row in ids]

    trainer._generate_single_turn = turn


def _run(trainer):
    generated = []
    generate = trainer._generate

    def keep(prompts):
        generated.append(generate(prompts))
        return generated[-1]

    trainer._generate = keep
    trainer.train()
    logged = {key: value for entry in trainer.state.log_history for key, value in entry.items()}
    return generated[0], logged


def test_the_tools_tokens_are_masked_and_counted_nowhere(tmp_path):
    trainer, tokenizer = _trainer(tmp_path, "print(6*7)")
    (prompt_ids, completion_ids, tool_mask, completions, *_), logged = _run(trainer)
    for row, (ids, mask) in enumerate(zip(completion_ids, tool_mask, strict=True)):
        tool = tokenizer.decode([token for token, kept in zip(ids, mask, strict=True) if not kept])
        model = tokenizer.decode([token for token, kept in zip(ids, mask, strict=True) if kept])
        if row in CALLERS:  # one tool result, the interpreter's 42, between the call and the answer
            assert "42" in tool and "print(6*7)" not in tool and "<tool_response>" in tool
            assert "print(6*7)" in model and model.rstrip().endswith("\\boxed{42}" + tokenizer.eos_token)
            zeros = [index for index, kept in enumerate(mask) if not kept]
            assert zeros == list(range(zeros[0], zeros[-1] + 1))  # one run: the result alone
        else:
            assert all(mask) and "\\boxed{7}" in model
    model_tokens = sum(sum(mask) for mask in tool_mask)
    assert logged["tokens/generated"] == model_tokens < sum(map(len, completion_ids))
    # the loss pass (share_prompts: each group's prompt once, then each row's last prompt token) counts the model's
    # completion tokens, not the tool's: one micro-batch of the 6 rows, two groups of 3
    prompts = sum(len(prompt_ids[first]) - 1 for first in (0, 3)) + len(prompt_ids)
    assert logged["tokens/trained"] == prompts + model_tokens
    # by hand: 3 calls over 6 completions, none failed; 3 completions of two turns, 3 of one
    assert logged["tools/calls_per_completion"] == pytest.approx(0.5)
    assert logged["tools/failure_frac"] == 0.0
    assert logged["tools/turns_mean"] == pytest.approx(1.5)
    assert logged["timing_s/tools"] > 0 and logged["tools/call_frequency"] == pytest.approx(0.5)  # TRL's own beside


def test_a_failed_call_counts_as_failed_and_its_error_reaches_the_model(tmp_path):
    trainer, tokenizer = _trainer(tmp_path, "print(1 / 0)")
    (_, completion_ids, tool_mask, *_), logged = _run(trainer)
    tool = tokenizer.decode([token for token, kept in zip(completion_ids[0], tool_mask[0], strict=True) if not kept])
    assert "ZeroDivisionError" in tool
    assert logged["tools/failure_frac"] == 1.0 and logged["tools/calls_per_completion"] == pytest.approx(0.5)


def test_the_sampler_correction_reads_no_tool_token():
    """TRL gives a tool result's tokens a sampling log-prob of 0; were they read, the mismatch would be huge."""
    from recipes.stages.grpo.sampler_correction import correct_for_sampler

    policy = torch.tensor([[-1.0, -2.0, -3.0, -1.5]])
    inputs = {
        "sampling_per_token_logps": torch.tensor([[-1.0, 0.0, 0.0, -1.5]]),  # tokens 1 and 2: a tool's result
        "completion_mask": torch.ones(1, 4),
        "tool_mask": torch.tensor([[1, 0, 0, 1]]),
    }
    metrics = correct_for_sampler(inputs, policy, "token_truncate", None, 3.0)
    assert metrics["sampling/sampling_logp_difference/max"] == 0.0
    assert inputs["importance_sampling_ratio"][0, [0, 3]].tolist() == [1.0, 1.0]


def test_tool_options_are_checked_when_the_recipe_is_parsed(tmp_path):
    from recipes.stages.grpo.arguments import GRPOScriptArguments

    with pytest.raises(ValueError, match="unknown tool 'pyhton'.*python"):
        GRPOScriptArguments(tools=["pyhton"])
    assert GRPOScriptArguments(tools=["python"], tool_options={"timeout_s": 1}).tools == ["python"]
