"""`log_reference_kl`: the KL of the policy to its starting model, logged as `kl` with beta 0 (TRL logs it only with a
KL term). The estimator by hand; the reference's log-probs equal those of the starting weights loaded afresh (full
fine-tuning: a frozen copy; LoRA: the adapter disabled) after the policy has moved; the logged figure is 0 before
the first update and grows after."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from recipes.common.model.loading import SHIPPED_COLD_START
from recipes.stages.grpo.reference_kl import REF_LOGPS, k3_kl, reference_kl
from tests.test_sampler_correction import _trainer, three_completions


def test_the_k3_estimator_by_hand():
    policy = torch.tensor([[-1.0, -2.0, -9.0]])
    reference = torch.tensor([[-1.5, -1.0, 0.0]])
    total, count = k3_kl(policy, reference, torch.tensor([[1, 1, 0]]))  # the third token is padding
    # r = reference - policy = -0.5 and 1: (e^-0.5 + 0.5 - 1) + (e^1 - 1 - 1)
    assert float(total) == pytest.approx(math.exp(-0.5) - 0.5 + math.exp(1) - 2)
    assert float(count) == 2
    same, _ = k3_kl(policy, policy, torch.ones(1, 3))
    assert float(same) == 0.0


def _steps(trainer) -> list[dict]:
    trainer.train()
    return [entry for entry in trainer.state.log_history if "loss" in entry]


@pytest.mark.parametrize("lora", [False, True])
def test_the_reference_is_the_starting_model_and_the_logged_kl_is_its_k3(tmp_path, lora):
    # temperature 2: the tiny model's tokens are near-certain at 1, and its gradients then too small to move it
    options = dict(log_reference_kl=True, max_steps=3, learning_rate=1.0, temperature=2.0)
    if lora:
        from peft import LoraConfig

        trainer = _trainer_with_peft(tmp_path, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"), **options)
    else:
        trainer = _trainer(tmp_path, **options)
    steps = _steps(trainer)
    kl = [entry["kl"] for entry in steps]
    assert len(kl) == 3 and kl[0] == pytest.approx(0.0, abs=1e-6)  # no update yet: the policy is the reference
    assert kl[-1] > 1e-6  # the policy has moved
    assert (trainer.frozen_reference.model is None) == lora  # LoRA: the adapter disabled, no copy in memory

    # after training: the reference's log-probs of three completions are the starting weights' own
    _, prompt_ids, completion_ids, completion_mask, moved = three_completions(trainer, temperature=2.0)
    fresh = _trainer(tmp_path / "fresh", temperature=2.0)
    *_, start = three_completions(fresh, temperature=2.0)
    batch = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
             "completion_mask": completion_mask}  # fmt: skip
    trainer.model.train()
    trainer._attach_reference_logps(batch)
    real = completion_mask.bool()
    assert torch.allclose(batch[REF_LOGPS][real], start[real], atol=1e-4)
    assert not torch.allclose(moved[real], start[real], atol=1e-3)  # ... and the policy's are not

    # the figure the loss pass logs for that batch: k3 of the policy's log-probs against those, by hand
    logged = reference_kl(moved, batch, lambda totals: trainer.accelerator.reduce(totals, reduction="sum"))
    r = (start - moved)[real]
    assert logged == pytest.approx(float((torch.exp(r) - r - 1).mean()), rel=1e-3)


def _trainer_with_peft(tmp_path, peft_config, **options):
    """_trainer's run with a LoRA adapter made by TRL from `peft_config` (as recipes/grpo.py builds it)."""
    from datasets import Dataset

    from recipes.common.model.loading import load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    def reward(completions, answer, **kwargs):
        return [float(i % 2) for i, _ in enumerate(answer)]

    defaults = dict(
        num_generations=3, per_device_train_batch_size=3, gradient_accumulation_steps=1, steps_per_generation=1,
        max_completion_length=16, optim="sgd", loss_type="dapo", beta=0.0, seed=3, report_to=[], use_cpu=True,
        bf16=False, gradient_checkpointing=False, save_strategy="no", logging_steps=1,
    )  # fmt: skip
    return RLVRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START), reward_funcs=[reward],
        args=RLVRGRPOConfig(output_dir=str(tmp_path), **{**defaults, **options}),
        train_dataset=Dataset.from_list(generate_rows([1], 6, seed=0)),
        processing_class=load_tokenizer(str(SHIPPED_COLD_START)), peft_config=peft_config,
    )  # fmt: skip


def test_without_the_option_nothing_more_is_computed_or_logged(tmp_path):
    steps = _steps(_trainer(tmp_path, max_steps=1))
    assert "kl" not in steps[0]
