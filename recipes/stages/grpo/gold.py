"""Gold rewards beside the training reward: rule rewards (the verifier) scored on the very completions the policy
trains on, logged, and never part of the advantages or the loss.

A learned reward (a reward model, an LLM judge: rewards.learned.reward_models, rewards.learned.llm_judge) is a proxy; RL pushes the policy
to where the proxy is wrong (Gao et al. 2023). `gold_rewards: [math_accuracy]` measures that on every batch:
each log has `gold/<name>` (the mean gold reward) beside `proxy/<name>` and `proxy/reward` (the weighted sum
the advantages come from), and recipes.common.monitor warns, or stops the run, when they part.
"""

from __future__ import annotations

import torch

from recipes.common import trl_private


class GoldRewardsMixin:
    """For RLVRGRPOTrainer: `gold_reward_funcs` scored with TRL's own machinery, logged as gold/* and proxy/*."""

    gold_reward_funcs: list = []
    gold_reward_names: list[str] = []

    def _gold_rewards(self, inputs, prompts, completions, completion_ids_list) -> torch.Tensor | None:
        """The gold rewards of these completions, gathered like the training ones: (rows, gold rewards), or None.

        TRL's own scoring runs them (the same columns, None as NaN, async rewards, the gather across processes)
        with the reward list swapped for the gold one; nothing of it reaches the advantages or the loss.
        """
        if not self.gold_reward_funcs:
            return None
        saved = self.reward_funcs, self.reward_processing_classes, self.reward_func_names
        self.reward_funcs = self.gold_reward_funcs
        self.reward_processing_classes = [None] * len(self.gold_reward_funcs)
        self.reward_func_names = self.gold_reward_names
        try:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self.reward_funcs, self.reward_processing_classes, self.reward_func_names = saved

    def _log_gold(self, rewards_per_func: torch.Tensor, rewards: torch.Tensor, gold: torch.Tensor) -> None:
        """proxy/reward (the weighted sum), proxy/<name> and gold/<name>: means over the batch's completions."""
        mode = "train" if self.model.training else "eval"
        trl_private.metrics(self, mode)["proxy/reward"].append(torch.nanmean(rewards).item())
        for index, name in enumerate(self.reward_func_names):
            trl_private.metrics(self, mode)[f"proxy/{name}"].append(torch.nanmean(rewards_per_func[:, index]).item())
        for index, name in enumerate(self.gold_reward_names):
            trl_private.metrics(self, mode)[f"gold/{name}"].append(torch.nanmean(gold[:, index]).item())
