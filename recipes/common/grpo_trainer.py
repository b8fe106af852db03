"""TRL's GRPOTrainer with what DAPO and Kimi k1.5 add and TRL lacks: dynamic sampling and a curriculum.

Everything else (the GRPO / Dr. GRPO / DAPO losses, clip-higher, KL, vLLM, logging, checkpoints) is TRL's,
set from GRPOConfig. What this subclass adds:

* dynamic sampling (DAPO, Yu et al. 2025, section 3.2): a group whose rewards all agree has zero
  advantage and gives no gradient. Such groups are dropped and replaced by groups generated for further
  prompts, up to `dynamic_sampling_max_rounds` extra generation rounds per step; if that cap is hit, the
  batch is completed with zero-variance groups and the step logs `dynamic_sampling/cap_hit`. No
  zero-variance group reaches the loss otherwise. Groups are whole within a process (each process's
  generation batch must hold whole groups), so every process filters its own; all processes run the
  same number of rounds because generation gathers rewards across them;
* a curriculum (Kimi k1.5): prompts drawn with weight 1 - pass rate (data_filters.curriculum), the pass
  rates updated online from the accuracy reward of every generated group;
* which rewards define a group's variance (`variance_rewards`, by default the accuracy reward: DAPO's
  reference filters on the accuracy metric, not on the shaped sum);
* metrics for the monitor: `groups/std_mean` (the mean within-group std of those rewards, the earliest
  sign of entropy collapse) and `groups/zero_std_frac` (the share of groups without variance);
* its own state (curriculum estimates, the extra-prompt stream) saved in each checkpoint and restored
  with `resume_from_checkpoint`.
"""

from __future__ import annotations

import json
import logging
import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.trainer.utils import nanstd

logger = logging.getLogger(__name__)

STATE_FILE = "rlvr_state.json"
# Per-token tensors of the generation output: padded on the left (prompt) or on the right (completion).
LEFT_PADDED = {"prompt_ids", "prompt_mask"}
RIGHT_PADDED = {
    "completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps",
    "sampling_per_token_logps", "tool_mask",
}  # fmt: skip
PER_ROW = {"advantages"}


class RLVRGRPOTrainer(GRPOTrainer):
    """GRPOTrainer plus dynamic sampling and a pass-rate curriculum (see the module docstring)."""

    def __init__(
        self,
        *args,
        dynamic_sampling: bool = False,
        dynamic_sampling_max_rounds: int = 4,
        curriculum: dict | None = None,
        accuracy_reward: str = "math_accuracy",
        variance_rewards: list[str] | None = None,
        **kwargs,
    ):
        self.dynamic_sampling = dynamic_sampling
        self.dynamic_sampling_max_rounds = dynamic_sampling_max_rounds
        self.curriculum_options = curriculum
        self.curriculum = None
        self.accuracy_reward = accuracy_reward
        self.variance_rewards = list(variance_rewards) if variance_rewards else None
        self._extra_draws = 0  # prompts drawn for refills so far: the position in the extra-prompt stream
        self._last_group_std: torch.Tensor | None = None
        self.last_batch_group_ids: list = []
        super().__init__(*args, **kwargs)
        unknown = sorted(set(self.variance_rewards or ()) - set(self.reward_func_names))
        if unknown:
            raise ValueError(
                f"variance_rewards names {unknown}, which are not among the rewards {self.reward_func_names}"
            )
        if self.dynamic_sampling:
            local = self.args.per_device_train_batch_size * self.args.steps_per_generation
            if local % self.num_generations:
                raise ValueError(
                    f"dynamic sampling filters whole groups per process: per_device_train_batch_size x "
                    f"steps_per_generation ({local}) must be a multiple of num_generations ({self.num_generations})"
                )

    # ------------------------------------------------------------ prompt sampling

    def _get_train_sampler(self, dataset=None):
        if self.curriculum_options is None:  # {} is the curriculum with its default options
            return super()._get_train_sampler(dataset)
        from data_filters.curriculum import CurriculumSampler

        self.curriculum = CurriculumSampler.from_dataset(
            dataset if dataset is not None else self.train_dataset,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            seed=self.args.seed,
            **self.curriculum_options,
        )
        return self.curriculum

    def _extra_prompts(self, groups: int) -> list[dict]:
        """`groups` further prompts for this process, each repeated num_generations times (one group each).

        Drawn from a stream of the process's own (seed, rank, position), with the curriculum's weights when
        there is one, so that a resumed run draws what the interrupted one would have.
        """
        generator = torch.Generator().manual_seed(
            self.args.seed * 1_000_003 + self.accelerator.process_index * 7919 + self._extra_draws
        )
        if self.curriculum is not None:
            weights = self.curriculum.weights()
        else:
            weights = torch.ones(len(self.train_dataset))
        indices = torch.multinomial(weights, groups, replacement=True, generator=generator).tolist()
        self._extra_draws += groups
        return [self.train_dataset[index] for index in indices for _ in range(self.num_generations)]

    # ------------------------------------------------------------ rewards

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
        if self.model.training and self.num_generations > 1:
            group_std = self._group_spread(rewards_per_func, rewards)
            self._last_group_std = group_std
            mode = "train"
            self._metrics[mode]["groups/std_mean"].append(group_std.mean().item())
            self._metrics[mode]["groups/zero_std_frac"].append(
                torch.isclose(group_std, torch.zeros_like(group_std)).float().mean().item()
            )
            if self.curriculum is not None:
                self._update_curriculum(inputs, rewards_per_func, rewards)
        return rewards_per_func

    def _group_spread(self, rewards_per_func: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
        """Each group's reward spread, (num_groups,): what dynamic sampling and the monitor call its variance.

        With `variance_rewards` (by default the recipes pass the accuracy reward), the largest within-group std
        of those rewards alone; otherwise the std of the weighted sum. DAPO filters on accuracy: with a length
        or format reward in the sum, a group whose answers are all wrong still varies in length, keeps a
        "variance" and passes the filter, and the policy then trains on length alone.
        """
        g = self.num_generations
        if not self.variance_rewards:
            return torch.nan_to_num(nanstd(rewards.view(-1, g), dim=1), nan=0.0)
        columns = [self.reward_func_names.index(name) for name in self.variance_rewards]
        chosen = rewards_per_func[:, columns]  # (groups * g, len(columns))
        spread = nanstd(chosen.view(-1, g, len(columns)), dim=1)  # (groups, len(columns))
        return torch.nan_to_num(spread, nan=0.0).amax(dim=1)

    def _update_curriculum(self, inputs, rewards_per_func, rewards) -> None:
        """Every process applies the same (gathered) outcomes, so that all draw the same prompts."""
        from accelerate.utils import gather_object

        ids = gather_object([row.get("id") for row in inputs])
        if self.accuracy_reward in self.reward_func_names:
            outcomes = rewards_per_func[:, self.reward_func_names.index(self.accuracy_reward)]
        else:
            outcomes = (rewards > 0).float()
        self.curriculum.update(ids, [None if torch.isnan(value) else float(value) for value in outcomes])

    # ------------------------------------------------------------ dynamic sampling

    def _generate_and_score_completions(self, inputs):
        if not (self.dynamic_sampling and self.model.training):
            return super()._generate_and_score_completions(inputs)
        g = self.num_generations
        target = len(inputs) // g
        kept, zero_variance = [], []  # (batch, local group index, the group's row id)
        generated, rounds = 0, 0
        batch_inputs = inputs
        while True:
            batch = super()._generate_and_score_completions(batch_inputs)
            local_groups = len(batch_inputs) // g
            first = self.accelerator.process_index * local_groups  # this process's groups in the gathered tensor
            stds = self._last_group_std[first : first + local_groups]
            for group in range(local_groups):
                entry = (batch, group, batch_inputs[group * g].get("id"))
                (kept if stds[group] > 1e-6 else zero_variance).append(entry)
            generated += local_groups
            short = torch.tensor([float(len(kept) < target)], device=self.accelerator.device)
            if self.accelerator.gather(short).max().item() == 0 or rounds >= self.dynamic_sampling_max_rounds:
                break
            rounds += 1
            batch_inputs = self._extra_prompts(target)
        cap_hit = len(kept) < target
        if cap_hit:
            logger.warning(
                "dynamic sampling: %d of %d groups have reward variance after %d extra rounds (the cap); "
                "%d zero-variance groups complete the batch",
                len(kept), target, rounds, target - len(kept),
            )  # fmt: skip
        chosen = (kept + zero_variance)[:target]
        self.last_batch_group_ids = [row_id for _, _, row_id in chosen]  # what reaches the loss, for inspection
        totals = self.accelerator.gather(
            torch.tensor([generated, min(len(kept), target)], device=self.accelerator.device)
        )
        totals = totals.view(-1, 2).sum(dim=0).tolist()
        metrics = self._metrics["train"]
        metrics["dynamic_sampling/groups_generated"].append(totals[0])
        metrics["dynamic_sampling/groups_kept_with_variance"].append(totals[1])
        metrics["dynamic_sampling/extra_rounds"].append(rounds)
        metrics["dynamic_sampling/cap_hit"].append(float(cap_hit))
        return self._assemble(chosen, g)

    def _assemble(self, chosen: list, g: int) -> dict:
        """One generation output from whole groups of several, re-padded to common lengths."""
        unsupported = (
            set(chosen[0][0])
            - LEFT_PADDED
            - RIGHT_PADDED
            - PER_ROW
            - {"num_items_in_batch", "importance_sampling_ratio"}
        )
        if unsupported:
            raise ValueError(
                f"dynamic sampling cannot merge generation outputs holding {sorted(unsupported)} (multimodal inputs)"
            )
        out = {}
        for key in chosen[0][0]:
            if key == "num_items_in_batch":
                continue
            pieces = [batch[key][group * g : (group + 1) * g] for batch, group, _ in chosen]
            if (
                key in LEFT_PADDED
                or key in RIGHT_PADDED
                or (key == "importance_sampling_ratio" and pieces[0].dim() == 2 and pieces[0].shape[1] > 1)
            ):
                width = max(piece.shape[1] for piece in pieces)
                value = self._tokenizer.pad_token_id if key in ("prompt_ids", "completion_ids") else 0
                side = "left" if key in LEFT_PADDED else "right"
                pieces = [_pad(piece, width, value, side) for piece in pieces]
            out[key] = torch.cat(pieces, dim=0)
        loss_mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return out

    # ------------------------------------------------------------ checkpoints

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            state = {"extra_draws": self._extra_draws}
            if self.curriculum is not None:
                state["curriculum"] = self.curriculum.state_dict()
            with open(os.path.join(folder, STATE_FILE), "w") as handle:
                json.dump(state, handle)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, STATE_FILE) if checkpoint else None
        if path and os.path.exists(path):
            with open(path) as handle:
                state = json.load(handle)
            self._extra_draws = state.get("extra_draws", 0)
            if self.curriculum is not None and "curriculum" in state:
                self.curriculum.load_state_dict(state["curriculum"])
            logger.info("restored dynamic-sampling and curriculum state from %s", path)


def _pad(tensor: torch.Tensor, width: int, value, side: str) -> torch.Tensor:
    missing = width - tensor.shape[1]
    if missing <= 0:
        return tensor
    filler = torch.full((tensor.shape[0], missing), value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([filler, tensor] if side == "left" else [tensor, filler], dim=1)
