"""TRL's GRPOTrainer with what DAPO and Kimi k1.5 add and TRL lacks: dynamic sampling and a curriculum.

Everything else (the GRPO / Dr. GRPO / DAPO losses, clip-higher, KL, vLLM, logging, checkpoints) is TRL's,
set from GRPOConfig. What this subclass adds:

* dynamic sampling (DAPO, Yu et al. 2025, section 3.2): a group whose rewards all agree has zero
  advantage and gives no gradient. Such groups are dropped and replaced by groups generated for further
  prompts, up to `dynamic_sampling_max_rounds` extra generation rounds per step; if that cap is hit, the
  batch is completed with zero-variance groups and the step logs `dynamic_sampling/cap_hit`. No
  zero-variance group reaches the loss otherwise. `dynamic_sampling_mode` says how much an extra round
  generates: `batch` (a whole batch, the surplus discarded), `reference` (verl's DAPO recipe: generation
  batches of 3x the train batch, accumulated, then truncated) or `adaptive` (missing / (1 - zero-variance
  share) groups, the surplus kept for the next step with its sampling log-probs);
  recipes.common.dynamic_sampling has the loops, the staleness argument and the metrics. Groups are whole
  within a process (each process's generation batch must hold whole groups), so every process filters
  its own; all processes run the same rounds of the same size because generation gathers across them;
* a curriculum (Kimi k1.5): prompts drawn with weight 1 - pass rate (data_filters.curriculum), the pass
  rates updated online from the accuracy reward of every generated group;
* which rewards define a group's variance (`variance_rewards`, by default the accuracy reward: DAPO's
  reference filters on the accuracy metric, not on the shaped sum);
* metrics for the monitor: `groups/std_mean` (the mean within-group std of those rewards, the earliest
  sign of entropy collapse) and `groups/zero_std_frac` (the share of groups without variance);
* its own state (curriculum estimates, the extra-prompt stream, adaptive sampling's buffer and estimate)
  saved in each checkpoint and restored with `resume_from_checkpoint`;
* where each step's time goes (recipes.common.step_timing): thin overrides of TRL's methods open a timed
  phase around the parent's call (`_generate`, `_calculate_rewards`, gradient-free
  `_get_per_token_logps_and_entropies`, `training_step`) and count the tokens generated and trained, so
  that every step logs `timing_s/*`, `tokens/*` and `perf/*` without a line of TRL's code copied;
* cheaper rollouts on the transformers path (issue 25's measurements, docs/benchmarks.md "Where a GRPO
  step's time goes"): `compact_generation` samples with eval.decoding, where a finished row leaves the batch
  and a group's prompt is prefilled once (TRL's `generate` runs every row until the slowest stops), and
  `trim_padding` cuts each micro-batch to its own longest prompt and completion (TRL pads every micro-batch
  to the longest of the whole generation batch).
"""

from __future__ import annotations

import json
import logging
import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.trainer.utils import nanstd

from recipes.common.dynamic_sampling import DynamicSamplingMixin, Group
from recipes.common.step_timing import StepTimer, StepTimingCallback

logger = logging.getLogger(__name__)

STATE_FILE = "rlvr_state.json"
BUFFER_FILE = "rlvr_buffer_rank{rank}.pt"  # adaptive dynamic sampling's buffer, one file per process


class RLVRGRPOTrainer(DynamicSamplingMixin, GRPOTrainer):
    """GRPOTrainer plus dynamic sampling and a pass-rate curriculum (see the module docstring)."""

    def __init__(
        self,
        *args,
        dynamic_sampling: bool = False,
        dynamic_sampling_max_rounds: int = 4,
        dynamic_sampling_mode: str = "batch",
        curriculum: dict | None = None,
        accuracy_reward: str = "math_accuracy",
        variance_rewards: list[str] | None = None,
        compact_generation: bool = False,
        trim_padding: bool = False,
        share_prompts: bool = False,
        **kwargs,
    ):
        self.compact_generation = compact_generation
        self.trim_padding = trim_padding
        self.share_prompts = share_prompts
        self.dynamic_sampling = dynamic_sampling
        self._init_dynamic_sampling(dynamic_sampling_mode, dynamic_sampling_max_rounds)
        self.curriculum_options = curriculum
        self.curriculum = None
        self.accuracy_reward = accuracy_reward
        self.variance_rewards = list(variance_rewards) if variance_rewards else None
        self._extra_draws = 0  # prompts drawn for refills so far: the position in the extra-prompt stream
        self._last_group_std: torch.Tensor | None = None
        super().__init__(*args, **kwargs)
        self.step_timing = StepTimer(self.accelerator.device)
        self.add_callback(StepTimingCallback(self.step_timing, self._metrics))
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
        with self.step_timing.phase("rewards"):
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
        return self._sample_dynamically(inputs)  # recipes.common.dynamic_sampling

    # ------------------------------------------------------------ step timing (recipes.common.step_timing)

    def training_step(self, model, inputs, num_items_in_batch):
        # The loss pass and its backward; what input preparation does inside it (generation, rewards,
        # log-probs) is timed as its own phases and left out of this one.
        with self.step_timing.phase("forward_backward"):
            return super().training_step(model, inputs, num_items_in_batch)

    def _prepare_inputs(self, generation_batch):
        buffered = self._buffered_inputs
        with self.step_timing.phase("prepare"):  # bookkeeping around generation: not a phase of the log
            inputs = super()._prepare_inputs(generation_batch)
        if self.share_prompts and self.model.training and self._buffered_inputs is not buffered:
            from recipes.common.shared_prompt import group_micro_batches

            self._buffered_inputs = group_micro_batches(self._buffered_inputs)  # a fresh generation batch
            inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
        if self.trim_padding and self.model.training:
            inputs = trim_micro_batch(inputs)
        return inputs

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if not self._compact_generation_applies(images, multimodal_fields):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images
            )
        from trl.models import unwrap_model_for_generation

        from eval.decoding import global_sampler, sample_tokens

        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            completion_ids = sample_tokens(
                unwrapped_model,
                prompt_ids,
                max_new_tokens=self.max_completion_length,
                stop_ids=set(self.eos_token_ids),
                pad_id=self._tokenizer.pad_token_id,
                pick=global_sampler(self.temperature, self.top_p, self.top_k),
            )
        return completion_ids, None  # no sampling log-probs, as TRL's own transformers path

    def _compact_generation_applies(self, images, multimodal_fields) -> bool:
        """eval.decoding serves plain-text sampling with temperature, top-p and top-k; anything else is TRL's."""
        return (
            self.compact_generation
            and not self.use_vllm
            and not self.use_transformers_continuous_batching
            and not images
            and not multimodal_fields
            and self.min_p is None
            and self.repetition_penalty == 1.0
            and not self.args.generation_kwargs
            and self.temperature > 0
        )

    def _generate(self, prompts):
        with self.step_timing.phase("generate"):
            result = super()._generate(prompts)
        self.step_timing.count("generated", sum(len(ids) for ids in result[1]))  # result[1]: completion ids
        return result

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        if torch.is_grad_enabled():  # the loss pass's own forward: part of forward_backward
            shared = self._shared_prompt_pass(*args, **kwargs) if self.share_prompts else None
            if shared is not None:
                return shared
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)
        with self.step_timing.phase("logprobs"):  # old / reference / buffered sampling log-probs
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)

    def _shared_prompt_pass(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
        compute_aux_loss=False, **multimodal,
    ):  # fmt: skip
        """recipes.common.shared_prompt for a text model's loss pass; None where TRL's own pass must run."""
        if compute_aux_loss or any(value is not None for value in multimodal.values()):
            return None
        from recipes.common.shared_prompt import shared_prompt_logps

        result = shared_prompt_logps(
            model, input_ids, attention_mask, logits_to_keep, compute_entropy,
            prefix_model=self.accelerator.unwrap_model(model),
        )  # fmt: skip
        return None if result is None else (*result, None)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.step_timing.active and torch.is_grad_enabled():
            masks = (inputs["prompt_mask"], inputs["completion_mask"])
            counts = None
            if self.share_prompts:  # the tokens the shared pass runs: each prompt once (recipes.common.shared_prompt)
                from recipes.common.shared_prompt import shared_token_counts

                counts = shared_token_counts(inputs["prompt_ids"], *masks)
            if counts is None:
                counts = (sum(int(mask.sum().item()) for mask in masks), sum(mask.numel() for mask in masks))
            self.step_timing.count("trained", counts[0])
            self.step_timing.count("positions", counts[1])
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    # ------------------------------------------------------------ checkpoints

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            state = {"extra_draws": self._extra_draws, "zero_std_estimate": self._zero_std_estimate}
            if self.curriculum is not None:
                state["curriculum"] = self.curriculum.state_dict()
            with open(os.path.join(folder, STATE_FILE), "w") as handle:
                json.dump(state, handle)
        if self._buffer:  # every process saves its own buffer
            folder = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            os.makedirs(folder, exist_ok=True)
            rank = self.accelerator.process_index
            torch.save([vars(group) for group in self._buffer], os.path.join(folder, BUFFER_FILE.format(rank=rank)))

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, STATE_FILE) if checkpoint else None
        if path and os.path.exists(path):
            with open(path) as handle:
                state = json.load(handle)
            self._extra_draws = state.get("extra_draws", 0)
            self._zero_std_estimate = state.get("zero_std_estimate")
            if self.curriculum is not None and "curriculum" in state:
                self.curriculum.load_state_dict(state["curriculum"])
            logger.info("restored dynamic-sampling and curriculum state from %s", path)
        buffer = (
            os.path.join(checkpoint, BUFFER_FILE.format(rank=self.accelerator.process_index)) if checkpoint else None
        )
        if buffer and os.path.exists(buffer):
            saved = torch.load(buffer, map_location=self.accelerator.device, weights_only=False)
            self._buffer = [Group(**fields) for fields in saved]


# The per-token tensors of a GRPO micro-batch: prompt columns (left-padded) and completion columns (right-padded).
PROMPT_COLUMNS = ("prompt_ids", "prompt_mask")
COMPLETION_COLUMNS = (
    "completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps", "sampling_per_token_logps",
    "importance_sampling_ratio", "tool_mask",
)  # fmt: skip


def trim_micro_batch(inputs: dict) -> dict:
    """The micro-batch with the prompt columns that are padding in every row cut from the left and the completion
    columns that are padding in every row cut from the right; the loss is unchanged (the cut columns are masked).

    Left untouched when the batch holds a per-token tensor of another kind (a multimodal model's), whose layout
    this does not know.
    """
    if any(
        isinstance(value, torch.Tensor) and value.dim() >= 2 and key not in PROMPT_COLUMNS + COMPLETION_COLUMNS
        for key, value in inputs.items()
    ):
        return inputs
    trimmed = dict(inputs)
    prompt_mask, completion_mask = inputs["prompt_mask"], inputs["completion_mask"]
    first = int(prompt_mask.any(dim=0).int().argmax()) if prompt_mask.any() else 0
    used = completion_mask.any(dim=0).nonzero()
    width = int(used[-1]) + 1 if len(used) else 1
    for key in PROMPT_COLUMNS:
        trimmed[key] = inputs[key][:, first:]
    for key in COMPLETION_COLUMNS:
        value = inputs.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[1] == completion_mask.shape[1]:
            trimmed[key] = value[:, :width]
    return trimmed
