"""Every loss TRL 1.16 offers runs through RLVRGRPOTrainer with this repository's additions on (issue 35, item 5):
on one fixed batch, its loss and gradient equal TRL's own GRPOTrainer's, for each `loss_type` and each
`importance_sampling_level` (TRL warns of some pairs, e.g. sequence-level ratios with a loss that sums per-token
terms, and runs them: so do we)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from recipes.common.model.loading import SHIPPED_COLD_START

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
LEVELS = ("token", "sequence")


def _config(cls, tmp_path, loss_type: str, level: str, **extra):
    extra = {"gradient_checkpointing": False, **extra}
    return cls(
        output_dir=str(tmp_path), num_generations=3, per_device_train_batch_size=3, gradient_accumulation_steps=1,
        steps_per_generation=1, max_completion_length=8, temperature=0.8, loss_type=loss_type,
        importance_sampling_level=level, beta=0.04, epsilon_high=0.28, report_to=[], use_cpu=True, bf16=False,
        save_strategy="no", **extra,
    )  # fmt: skip


def _build(trainer_cls, config_cls, tmp_path, loss_type, level, **extra):
    from datasets import Dataset

    from recipes.common.model.loading import load_tokenizer
    from tasks.synthetic import generate_rows

    def reward(completions, **kwargs):
        return [0.0] * len(completions)

    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    return trainer_cls(
        model=model, reward_funcs=[reward], args=_config(config_cls, tmp_path, loss_type, level, **extra),
        train_dataset=Dataset.from_list(generate_rows([1], 6, seed=0)),
        processing_class=load_tokenizer(str(SHIPPED_COLD_START)),
    )  # fmt: skip


def _batch(trainer) -> dict:
    """Three completions of one prompt, their old and reference log-probs the policy's own moved by up to 0.3
    nats, so that the ratio, the clip and the KL term all matter (far from the policy every token would be
    clipped, and a wrong log-prob would not show); advantages of both signs."""
    tokenizer = trainer.processing_class
    torch.manual_seed(5)
    prompt = tokenizer("<|user|>b = 5. What is b?<|assistant|>", add_special_tokens=False)["input_ids"]
    texts = ("5", "b is 5", "it is 6 I think")
    completions = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    width = max(map(len, completions))
    pad = tokenizer.pad_token_id
    completion_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids in completions])
    completion_mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in completions])
    prompt_ids = torch.tensor([prompt] * 3)
    with torch.no_grad():
        logits = trainer.model(torch.cat([prompt_ids, completion_ids], 1)).logits[:, len(prompt) - 1 : -1]
        policy = torch.log_softmax(logits.float() / trainer.args.temperature, -1)
        policy = policy.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return {
        "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
        "completion_mask": completion_mask, "advantages": torch.tensor([1.2, -0.4, -0.8]),
        "num_items_in_batch": completion_mask.sum(), "old_per_token_logps": policy + 0.3 * (2 * torch.rand(3, width) - 1),
        "ref_per_token_logps": policy + 0.3 * (2 * torch.rand(3, width) - 1),
    }  # fmt: skip


def _loss_and_grads(trainer, inputs):
    trainer.current_gradient_accumulation_steps = 1
    model = trainer.model
    model.train()
    model.zero_grad()
    loss = trainer._compute_loss(model, {key: value.clone() for key, value in inputs.items()})
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("level", LEVELS)
def test_each_loss_equals_trls_own_on_a_fixed_batch(loss_type, level, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    ours = _build(
        RLVRGRPOTrainer, RLVRGRPOConfig, tmp_path / "ours", loss_type, level,
        dynamic_sampling=True, share_prompts=True, trim_padding=True, skip_zero_advantage=True,
    )  # fmt: skip
    theirs = _build(GRPOTrainer, GRPOConfig, tmp_path / "trl", loss_type, level)
    inputs = _batch(ours)
    our_loss, our_grads = _loss_and_grads(ours, inputs)
    their_loss, their_grads = _loss_and_grads(theirs, inputs)
    assert torch.isfinite(their_loss) and their_loss.abs() > 1e-6, "a batch whose loss is 0 shows nothing"
    torch.testing.assert_close(our_loss, their_loss, atol=1e-5, rtol=1e-4)
    assert our_grads.keys() == their_grads.keys() and our_grads
    for name, grad in their_grads.items():
        torch.testing.assert_close(our_grads[name], grad, atol=1e-5, rtol=1e-3, msg=name)


@pytest.mark.parametrize("loss_type", ("dapo", "grpo"))
def test_the_loss_equals_trls_under_gradient_checkpointing_too(loss_type, tmp_path):
    """What the GPU configs set: the shared-prompt pass must not change the loss there either."""
    from trl import GRPOConfig, GRPOTrainer

    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    ours = _build(RLVRGRPOTrainer, RLVRGRPOConfig, tmp_path / "ours", loss_type, "token", gradient_checkpointing=True)
    theirs = _build(GRPOTrainer, GRPOConfig, tmp_path / "trl", loss_type, "token", gradient_checkpointing=True)
    for trainer in (ours, theirs):  # as Trainer.train() turns it on
        trainer.model.gradient_checkpointing_enable(trainer.args.gradient_checkpointing_kwargs)
    inputs = _batch(ours)
    our_loss, _ = _loss_and_grads(ours, inputs)
    their_loss, _ = _loss_and_grads(theirs, inputs)
    torch.testing.assert_close(our_loss, their_loss, atol=1e-5, rtol=1e-4)
