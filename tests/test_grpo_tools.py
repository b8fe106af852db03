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


def _policy_logps(model, prompt_ids, completion_ids) -> torch.Tensor:
    """Each completion token's log-prob under `model`, from a plain forward pass (not the trainer's)."""
    with torch.no_grad():
        logits = model(input_ids=torch.cat([prompt_ids, completion_ids], dim=1)).logits.float()
    logits = logits[:, prompt_ids.shape[1] - 1 : -1]
    return torch.log_softmax(logits, dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)


def _loss_and_gradients(trainer, batch: dict) -> tuple[float, dict, dict]:
    """RLVRGRPOTrainer.compute_loss on a copy of `batch` (the trainer's loss pass, its sampler correction included),
    then backward: the loss, every parameter's gradient, and what the loss pass put into the batch."""
    model = trainer.model
    model.train()
    model.zero_grad(set_to_none=True)
    inputs = dict(batch)
    loss = trainer.compute_loss(model, inputs)
    loss.backward()
    gradients = {name: parameter.grad.detach().clone() for name, parameter in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return loss.item(), gradients, inputs


def test_a_tool_results_text_changes_neither_the_loss_nor_any_gradient(tmp_path):
    """Two hand-built batches differ only in the token ids of a tool's result, which ends row 0 after the model's
    last turn (a completion cut at its length right after a result): what conditions on the result is not in the
    completion, so an honest loss is the same for both, and so is each parameter's gradient, exactly. The loss
    runs through RLVRGRPOTrainer.compute_loss with the sampler correction on in a sequence mode with no clip (a
    tool token read into the sequence's ratio would move it). Two controls show that the comparison can fail: a
    model token changed moves the loss, and with a tool mask of ones the two results give two losses."""
    trainer, tokenizer = _trainer(
        tmp_path, "print(6*7)", vllm_importance_sampling_correction=True,
        vllm_importance_sampling_mode="sequence_truncate", vllm_importance_sampling_clip_max=1e30,
    )  # fmt: skip
    prompt = [{"role": "user", "content": "What is 6*7?"}]
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": "print(6*7)"}}}]}  # fmt: skip
    result = {"role": "tool", "name": "python", "content": "42"}
    texts = [
        tokenizer.apply_chat_template(messages, add_generation_prompt=add, tokenize=False)
        for messages, add in ((prompt, True), ([*prompt, call], False), ([*prompt, call, result], True))
    ]
    assert texts[1].startswith(texts[0]) and texts[2].startswith(texts[1])

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    prompt_ids, call_ids = ids(texts[0]), ids(texts[1][len(texts[0]) :])
    tool_ids = ids(texts[2][len(texts[1]) :])  # the result and the next turn's header: what TRL appends, masked
    answer_ids = ids("\\boxed{7}") + [tokenizer.eos_token_id]
    assert "42" in tokenizer.decode(tool_ids) and len(call_ids) + len(tool_ids) > len(answer_ids)
    width = len(call_ids) + len(tool_ids)
    pad = width - len(answer_ids)
    shift = torch.tensor([0.03, -0.01, 0.02]).repeat(width)[:width]
    vocabulary = trainer.model.get_input_embeddings().weight.shape[0]
    other_tool_ids = [(token + 1 + index) % vocabulary for index, token in enumerate(tool_ids)]  # every id changed
    assert all(a != b for a, b in zip(tool_ids, other_tool_ids, strict=True))

    def batch(tool, model_turn=call_ids, tool_mask_value=0):
        completion = torch.tensor([model_turn + tool, answer_ids + [tokenizer.pad_token_id] * pad])
        prompts = torch.tensor([prompt_ids, prompt_ids])
        completion_mask = torch.tensor([[1] * width, [1] * len(answer_ids) + [0] * pad])
        tool_mask = torch.tensor([[1] * len(model_turn) + [tool_mask_value] * len(tool), [1] * width])
        # the sampler's log-probs: the policy's own, moved a little on each model token (a ratio other than 1);
        # TRL records 0 on a tool's tokens; padding is 0 too
        sampling = (_policy_logps(trainer.model, prompts, completion) + shift) * completion_mask * tool_mask
        return {
            "prompt_ids": prompts, "prompt_mask": torch.ones_like(prompts), "completion_ids": completion,
            "completion_mask": completion_mask, "tool_mask": tool_mask, "advantages": torch.tensor([1.0, -0.5]),
            "sampling_per_token_logps": sampling, "num_items_in_batch": (completion_mask * tool_mask).sum(),
        }  # fmt: skip

    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before a loss pass
    loss, gradients, inputs = _loss_and_gradients(trainer, batch(tool_ids))
    other_loss, other_gradients, other_inputs = _loss_and_gradients(trainer, batch(other_tool_ids))
    # the sampler correction ran, per sequence, over the model's tokens alone: pi_old / pi_sampler is exp(-shift)
    # summed over them (a tool token read into it, its recorded 0 against the policy's log-prob, would sink it)
    ratio, model_tokens = inputs["importance_sampling_ratio"], inputs["completion_mask"] * inputs["tool_mask"]
    expected = torch.exp(-(shift * model_tokens).sum(-1))
    assert ratio.shape == (2, 1) and ratio.squeeze(1).tolist() == pytest.approx(expected.tolist(), rel=1e-4)
    assert not torch.allclose(expected, torch.ones(2), atol=1e-3)
    assert torch.equal(ratio, other_inputs["importance_sampling_ratio"])
    assert loss != 0.0 and any(gradient.abs().sum() > 0 for gradient in gradients.values())
    assert other_loss == loss
    assert gradients.keys() == other_gradients.keys()
    unequal = [name for name in gradients if not torch.equal(gradients[name], other_gradients[name])]
    assert not unequal, f"a tool result's text moved the gradient of {unequal}"

    # controls: the comparison sees a changed model token, and would see the tool's tokens were they trained on
    changed_turn = list(call_ids)
    changed_turn[len(changed_turn) // 2] = (changed_turn[len(changed_turn) // 2] + 1) % vocabulary
    assert _loss_and_gradients(trainer, batch(tool_ids, changed_turn))[0] != loss
    read = [_loss_and_gradients(trainer, batch(tokens, tool_mask_value=1))[0] for tokens in (tool_ids, other_tool_ids)]
    assert read[0] != read[1]


def test_a_batchs_calls_run_side_by_side_inside_trls_loop_and_the_phase_is_their_wall_time(
    tmp_path, monkeypatch, two_sandbox_runs
):
    """TRL's loop makes the calls one rollout after another; each turn's calls are started ahead (eval.tools.stats.
    ToolCalls.ahead_of): the 3 calls, each sleeping 0.3 s in the sandbox, overlap, each ran once, and
    `timing_s/tools` covers them all yet is less than the sum of their runs (the phase's wall time, not a sum)."""

    from tests.support.tool_runs import record_tool_runs

    runs = record_tool_runs(monkeypatch)
    code = "import time\nstart = time.time()\ntime.sleep(0.3)\nprint(start, time.time())"
    trainer, _ = _trainer(tmp_path, code, max_completion_length=600)  # room for the call and its result
    (_, _, _, completions, *_), logged = _run(trainer)
    replies = [message["content"] for row in CALLERS for message in completions[row] if message["role"] == "tool"]
    spans = sorted(tuple(map(float, reply.split())) for reply in replies)
    assert len(spans) == len(runs) == len(CALLERS)  # each call ran once, ahead of TRL asking for it
    assert spans[1][0] < spans[0][1], spans  # the first two overlapped
    assert max(end for _, end in runs) - min(start for start, _ in runs) <= logged["timing_s/tools"]
    assert logged["timing_s/tools"] < sum(end - start for start, end in runs)
    assert logged["tools/calls_per_completion"] == pytest.approx(0.5) and logged["tools/failure_frac"] == 0.0
    assert all(not environment.prefetcher.prefetched for environment in trainer.environments)


@pytest.mark.parametrize("short", [0, 1], ids=["fits", "one_token_short"])
def test_a_vllm_server_too_short_for_a_turn_after_a_call_is_named_at_start(tiny_model_dir, caplog, short):
    """recipes.stages.grpo.start.check_server_context: a turn after a call needs the longest prompt (as the tools'
    template renders it) plus twice max_completion_length; a server with less is named at start, with the fix."""
    import logging
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from eval.tools import PythonEnvironment
    from eval.tools.chat_template import with_tool_template
    from recipes.stages.grpo.start import check_server_context

    tokenizer = with_tool_template(AutoTokenizer.from_pretrained(tiny_model_dir))
    tools = [PythonEnvironment().python]
    prompts = [[{"role": "user", "content": "What is 6*7?"}], [{"role": "user", "content": "x " * 60}], "plain 1+1"]
    messages = [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts]
    rendered = [
        tokenizer.apply_chat_template(m, tools=tools, add_generation_prompt=True, tokenize=False) for m in messages
    ]
    longest = max(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in rendered)
    assert longest > 60  # the long prompt, with the tool's schema in the template
    needed = longest + 2 * 100
    client = SimpleNamespace(get_server_info=lambda: {"model_config": {"max_model_len": needed - short}})
    trainer = SimpleNamespace(
        args=SimpleNamespace(use_vllm=True, vllm_mode="server"), max_completion_length=100,
        vllm_generation=SimpleNamespace(vllm_client=client), processing_class=tokenizer,
        train_dataset=[{"prompt": prompt} for prompt in prompts], tools=tools, environment_factories=None,
        rollout_func=None,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="recipes.stages.grpo.start"):
        check_server_context(trainer)
    warned = f"--max-model-len {needed} or more" in caplog.text
    assert warned == bool(short) and (
        not short or f"max_completion_length to {(needed - 1 - longest) // 2}" in caplog.text
    )
