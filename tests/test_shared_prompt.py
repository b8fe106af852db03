"""recipes.stages.grpo.shared_prompt: a loss pass that runs each prompt once per group gives the log-probs, entropies
and gradients of TRL's pass over every row whole, on the tiny cold start and on a LoRA model; the micro-batches
are regrouped so each group's rows sit together; the token counts match what the pass runs."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.trainer.utils import add_fused_lm_head

from recipes.common.model.loading import SHIPPED_COLD_START
from recipes.stages.grpo.shared_prompt import group_micro_batches, shared_prompt_logps, shared_token_counts


def left_right_batch(tokenizer, prompts: list[str], completions: list[str]):
    """TRL's layout: prompts left-padded, completions right-padded, one row per (prompt, completion)."""
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    completion_ids = [
        tokenizer(c, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for c in completions
    ]
    width_p, width_c, pad = max(map(len, prompt_ids)), max(map(len, completion_ids)), tokenizer.pad_token_id
    ids = torch.tensor(
        [
            [pad] * (width_p - len(p)) + p + c + [pad] * (width_c - len(c))
            for p, c in zip(prompt_ids, completion_ids, strict=True)
        ]
    )
    mask = torch.tensor(
        [
            [0] * (width_p - len(p)) + [1] * (len(p) + len(c)) + [0] * (width_c - len(c))
            for p, c in zip(prompt_ids, completion_ids, strict=True)
        ]
    )
    return ids, mask, width_c


def full_pass(model, ids, mask, keep):
    """TRL's own loss-pass forward (GRPOTrainer._get_per_token_logps_and_entropies, text model)."""
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -keep:], out.entropy[:, -keep:]


def trainable_grads(model, loss):
    model.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad and p.grad is not None}


@pytest.mark.parametrize("lora", [False, True])
def test_shared_pass_equals_the_full_pass(lora):
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_COLD_START)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    add_fused_lm_head(model, temperature=0.9, outputs=("log_probs", "entropy"))
    if lora:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(1)
        model = get_peft_model(
            model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
        )
    model.train()
    prompts = ["<|user|>What is 3+4?<|assistant|>"] * 3 + ["<|user|>Add 12 and 30, then double it.<|assistant|>"] * 2
    completions = ["7", "the sum is 7", "8", "84", "it is 84 I think"]
    ids, mask, keep = left_right_batch(tokenizer, prompts, completions)
    completion_mask = mask[:, -keep:].float()

    full_logps, full_entropy = full_pass(model, ids, mask, keep)
    full_grads = trainable_grads(model, (full_logps * completion_mask).sum())
    logps, entropy = shared_prompt_logps(model, ids, mask, keep, compute_entropy=True)
    shared_grads = trainable_grads(model, (logps * completion_mask).sum())

    on = completion_mask.bool()
    torch.testing.assert_close(logps[on], full_logps[on], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(entropy[on], full_entropy[on], atol=1e-5, rtol=1e-4)
    assert full_grads.keys() == shared_grads.keys() and len(full_grads) > 0
    for name, grad in full_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, atol=1e-4, rtol=1e-3, msg=name)
    if lora:  # the frozen base took no gradient; the adapter did
        assert all("lora_" in name for name in full_grads)


def test_under_gradient_checkpointing_the_callers_own_pass_runs():
    """A model that checkpoints its activations keeps no KV cache while training: the shared pass would run the
    completions without their prompts (log-probs off by nats, what GPU configs with gradient_checkpointing got);
    it must leave the pass to the caller instead."""
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_COLD_START)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model.gradient_checkpointing_enable()
    model.train()
    ids, mask, keep = left_right_batch(tokenizer, ["<|user|>What is 3+4?<|assistant|>"] * 2, ["7", "the sum is 7"])
    assert shared_prompt_logps(model, ids, mask, keep, compute_entropy=False) is None
    model.eval()  # no checkpointing outside training: the cache is kept and the pass is shared again
    logps, _ = shared_prompt_logps(model, ids, mask, keep, compute_entropy=False)
    full_logps, _ = full_pass(model, ids, mask, keep)
    on = mask[:, -keep:].bool()
    torch.testing.assert_close(logps[on], full_logps[on], atol=1e-5, rtol=1e-4)


def test_no_shared_prompt_means_the_callers_own_pass(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_COLD_START)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    add_fused_lm_head(model)
    ids, mask, keep = left_right_batch(tokenizer, ["<|user|>a<|assistant|>", "<|user|>b<|assistant|>"], ["1", "2"])
    assert shared_prompt_logps(model, ids, mask, keep, compute_entropy=False) is None
    assert shared_token_counts(ids[:, :-keep], mask[:, :-keep], mask[:, -keep:]) is None


def test_token_counts_by_hand():
    # rows 0-2 share a 3-token prompt (one left pad), row 3 has its own 4-token prompt; prefixes are the first 3
    # columns: distinct prefixes (0, 1, 1) and (1, 1, 1) -> 2 + 3 = 5 prefix tokens; every row then runs its last
    # prompt token (4) and its completion tokens (2 + 1 + 2 + 2 = 7): 16 tokens; positions 2 x 3 + 4 x (1 + 2) = 18
    prompt_ids = torch.tensor([[0, 5, 6, 7]] * 3 + [[8, 5, 6, 7]])
    prompt_mask = torch.tensor([[0, 1, 1, 1]] * 3 + [[1, 1, 1, 1]])
    completion_mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]])
    assert shared_token_counts(prompt_ids, prompt_mask, completion_mask) == (16, 18)


def test_micro_batches_are_regrouped_whole_groups_each():
    # 4 groups of 2 rows (prompts 10, 20, 30, 40), scattered over 2 micro-batches of 4 as TRL's shuffle leaves them
    order = [10, 30, 20, 40, 30, 10, 40, 20]
    rows = {
        "prompt_ids": torch.tensor([[0, p] for p in order]), "prompt_mask": torch.tensor([[0, 1]] * 8),
        "completion_ids": torch.arange(8).unsqueeze(1), "advantages": torch.arange(8.0), "num_items_in_batch": torch.tensor(11),
    }  # fmt: skip
    batches = [
        {k: (v[:4] if v.dim() else v) for k, v in rows.items()},
        {k: (v[4:] if v.dim() else v) for k, v in rows.items()},
    ]
    torch.manual_seed(0)
    regrouped = group_micro_batches(batches)
    assert len(regrouped) == 2
    for batch in regrouped:
        prompts = batch["prompt_ids"][:, 1].tolist()
        assert len(prompts) == 4 and prompts[0] == prompts[1] and prompts[2] == prompts[3]  # two whole groups
        assert batch["num_items_in_batch"] == 11
        for prompt, completion, advantage in zip(
            prompts, batch["completion_ids"][:, 0].tolist(), batch["advantages"].tolist(), strict=True
        ):
            assert order[completion] == prompt and advantage == completion  # every row moved whole
    assert sorted(c for b in regrouped for c in b["completion_ids"][:, 0].tolist()) == list(range(8))
