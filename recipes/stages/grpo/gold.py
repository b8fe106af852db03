"""Gold rewards beside the training reward: rule rewards (the verifier) scored on the very completions the policy
trains on, logged, and never part of the advantages or the loss.

A learned reward (a reward model, an LLM judge: rewards.learned.reward_models, rewards.learned.llm_judge) is a proxy; RL pushes the policy
to where the proxy is wrong (Gao et al. 2023). `gold_rewards: [math_accuracy]` measures that on every batch:
each log has `gold/<name>` (the mean gold reward) beside `proxy/<name>` and `proxy/reward` (the weighted sum
the advantages come from), and recipes.common.training.monitor warns, or stops the run, when they part.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


def gold_metrics(
    rewards_per_func: torch.Tensor,
    rewards: torch.Tensor,
    gold: torch.Tensor,
    reward_names: list[str],
    gold_names: list[str],
) -> dict[str, float]:
    """proxy/reward (the weighted sum the advantages come from), proxy/<name> per training reward and gold/<name>
    per gold reward: means over the batch's completions, a reward's None (NaN) left out.

    The gold rewards themselves are scored by TRL's own machinery (the same columns, None as NaN, async rewards,
    the gather across processes) with the trainer's reward list swapped for the gold one for the call
    (RLVRGRPOTrainer._calculate_rewards); nothing of them reaches the advantages or the loss."""
    metrics = {"proxy/reward": torch.nanmean(rewards).item()}
    for index, name in enumerate(reward_names):
        metrics[f"proxy/{name}"] = torch.nanmean(rewards_per_func[:, index]).item()
    for index, name in enumerate(gold_names):
        metrics[f"gold/{name}"] = torch.nanmean(gold[:, index]).item()
    return metrics


@contextmanager
def gold_in_place(trainer):
    """For the block, `trainer` (a GRPOTrainer) scores with its gold rewards in place of its training ones (the reward
    functions, their processing classes and names swapped, then put back): TRL's own scoring then gives the gold
    rewards of the very completions, gathered like the training ones."""
    saved = trainer.reward_funcs, trainer.reward_processing_classes, trainer.reward_func_names
    trainer.reward_funcs = trainer.gold_reward_funcs
    trainer.reward_processing_classes = [None] * len(trainer.gold_reward_funcs)
    trainer.reward_func_names = trainer.gold_reward_names
    try:
        yield
    finally:
        trainer.reward_funcs, trainer.reward_processing_classes, trainer.reward_func_names = saved
