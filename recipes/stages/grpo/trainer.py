"""TRL's GRPOTrainer with what DAPO and Kimi k1.5 add and TRL lacks, and its config: `RLVRGRPOConfig` is
trl.GRPOConfig plus this trainer's own options, and `RLVRGRPOTrainer` reads every one of them from `args`, so a
bare script builds it as it builds TRL's: `RLVRGRPOTrainer(model=..., reward_funcs=..., args=RLVRGRPOConfig(...),
train_dataset=...)`. recipes/grpo.py parses the config from the same YAML as its own options (the rewards, the
data, the monitor: recipes.stages.grpo.arguments.GRPOScriptArguments).

Everything else (the GRPO / Dr. GRPO / DAPO losses, clip-higher, KL, vLLM, logging, checkpoints) is TRL's,
set from GRPOConfig. What this subclass adds:

* dynamic sampling (DAPO, Yu et al. 2025, section 3.2): groups whose rewards all agree (zero advantage, no
  gradient) are dropped and replaced by groups generated for further prompts, up to
  `dynamic_sampling_max_rounds` extra generation rounds per step; past that cap zero-variance groups complete
  the batch and the step logs `dynamic_sampling/cap_hit`. `dynamic_sampling_mode` says how much an extra round
  generates (`batch`, `reference`, `adaptive`); recipes.stages.grpo.dynamic_sampling has the loops, the staleness
  argument and the metrics. Each process filters its own whole groups; all run the same rounds of the same size
  because generation gathers across them;
* a curriculum (Kimi k1.5, `sampler: pass_rate_weighted`): prompts drawn with weight 1 - pass rate
  (data_filters.curriculum), the pass rates updated online from the accuracy reward of every generated group;
* which rewards define a group's variance (`variance_rewards`, by default the accuracy rewards: DAPO's
  reference filters on the accuracy metric, not on the shaped sum), and the metrics the monitor reads:
  `groups/std_mean` (the earliest sign of entropy collapse) and `groups/zero_std_frac`;
* its own state (curriculum estimates, the extra-prompt stream, adaptive sampling's buffer and estimate)
  saved in each checkpoint and restored with `resume_from_checkpoint`;
* where each step's time goes (recipes.stages.grpo.step_timing): thin overrides of TRL's methods open a timed
  phase around the parent's call (`_generate`, `_calculate_rewards`, gradient-free
  `_get_per_token_logps_and_entropies`, `training_step`) and count the tokens generated and trained;
* held-out pass@1 every `eval_steps` with its interval (recipes.stages.grpo.held_out), on TRL's evaluation;
* KL to the starting model logged as `kl` with `beta: 0` too (`log_reference_kl`, recipes.stages.grpo.reference_kl);
* gold rewards (`gold_reward_funcs`, recipes.stages.grpo.gold): rule rewards scored on the same completions and
  logged as `gold/<name>` beside `proxy/*`, never in the loss, so that a learned reward can be watched against
  the verifier (recipes.common.monitor warns of reward hacking from them);
* asynchronous generation (`max_staleness`, recipes.stages.grpo.async_rollouts): a rollout worker process samples
  the next batches while the trainer trains, its log-probs correcting the loss;
* partial rollouts (Kimi k1.5, `partial_rollout_tokens`, recipes.stages.grpo.partial_rollouts): a completion
  samples a segment a step, and its group is trained once every member has finished;
* cheaper steps on the transformers path: `compact_generation`, `merge_adapter_for_generation`, `trim_padding`
  and `skip_zero_advantage` (recipes.stages.grpo.compact_generation), `share_prompts` (recipes.stages.grpo.shared_prompt: a
  group's prompt runs once in the loss pass);
* the sampler's log-probs (recipes.stages.grpo.sampler_correction): compact generation records the log-prob each
  token was drawn with; the loss pass logs the mismatch with its own (`sampling/sampling_logp_difference/*`,
  `sampling/importance_sampling_ratio/*`, `training/rollout_probs_diff_*`) and corrects the loss by TRL's
  `vllm_importance_sampling_*` options, as TRL does on its vLLM path.
"""

from __future__ import annotations

import logging

import torch
from trl import GRPOTrainer
from trl.trainer.utils import nanstd

from recipes.common import trl_private
from recipes.stages.grpo.async_rollouts import AsyncRolloutMixin
from recipes.stages.grpo.checkpoint_state import RLVRStateMixin
from recipes.stages.grpo.compact_generation import CompactGenerationMixin, trim_micro_batch
from recipes.stages.grpo.config import RLVRGRPOConfig, variance_reward_names
from recipes.stages.grpo.dynamic_sampling import DynamicSamplingMixin
from recipes.stages.grpo.gold import GoldRewardsMixin
from recipes.stages.grpo.held_out import HeldOutMixin
from recipes.stages.grpo.partial_rollouts import PartialRolloutMixin
from recipes.stages.grpo.reference_kl import ReferenceKLMixin
from recipes.stages.grpo.sampler_correction import SamplerCorrectionMixin
from recipes.stages.grpo.sampling_dtype import resolve_sampling_dtype
from recipes.stages.grpo.shared_prompt import group_micro_batches, shared_prompt_logps, shared_token_counts
from recipes.stages.grpo.step_timing import StepTimer, StepTimingCallback
from recipes.stages.grpo.zero_advantage import ZeroAdvantageMixin
from rewards import accuracy_reward_names

logger = logging.getLogger(__name__)


class RLVRGRPOTrainer(
    AsyncRolloutMixin,
    PartialRolloutMixin,
    CompactGenerationMixin,
    ZeroAdvantageMixin,
    ReferenceKLMixin,
    SamplerCorrectionMixin,
    DynamicSamplingMixin,
    RLVRStateMixin,
    GoldRewardsMixin,
    HeldOutMixin,
    GRPOTrainer,
):
    """GRPOTrainer plus dynamic sampling and a pass-rate curriculum, every option read from `args`, an
    RLVRGRPOConfig (see the module docstring)."""

    def __init__(self, model, reward_funcs, args: RLVRGRPOConfig | None = None, *rest, gold_reward_funcs=(), **kwargs):
        if not isinstance(args, RLVRGRPOConfig):
            raise TypeError(
                "RLVRGRPOTrainer reads its options (dynamic sampling, the curriculum, ...) from args: pass "
                f"args=recipes.stages.grpo.config.RLVRGRPOConfig(...), got {type(args).__name__}"
            )
        self.compact_generation = args.compact_generation
        self.trim_padding = args.trim_padding
        self.share_prompts = args.share_prompts
        self.dynamic_sampling = args.dynamic_sampling
        self._init_dynamic_sampling(args.dynamic_sampling_mode, args.dynamic_sampling_max_rounds)
        # {} is the curriculum with its default options; None: TRL's shuffle
        self.curriculum_options = (args.curriculum or {}) if args.sampler == "pass_rate_weighted" else None
        self.curriculum = None
        self._extra_draws = 0  # prompts drawn for refills so far: the position in the extra-prompt stream
        self._last_group_std: torch.Tensor | None = None
        if args.use_vllm and not torch.cuda.is_available():
            from recipes.stages.grpo.vllm_cpu import adapt_for_cpu

            adapt_for_cpu()  # TRL's weight pushes cannot reach vLLM's CPU kernels: vLLM's own reload can
        super().__init__(model, reward_funcs, args, *rest, **kwargs)
        trl_private.check(self)  # the private names of TRL this trainer reads: one line when an upgrade drops one
        # gold rewards: scored on the same completions, logged, never in the loss (see _calculate_rewards)
        self.gold_reward_funcs = list(gold_reward_funcs)
        self.gold_reward_names = [function.__name__ for function in self.gold_reward_funcs]
        self.sampling_dtype = resolve_sampling_dtype(
            args.sampling_dtype, self.is_deepspeed_enabled or self.is_fsdp_enabled, self.accelerator.device.type
        )  # recipes.stages.grpo.sampling_dtype: what compact generation samples in
        self.step_timing = StepTimer(self.accelerator.device)
        self.add_callback(StepTimingCallback(self.step_timing, trl_private.all_metrics(self)))
        self._init_async_rollouts()  # recipes.stages.grpo.async_rollouts: generation beside training
        self._init_partial_rollouts()  # recipes.stages.grpo.partial_rollouts: long completions across steps
        if self.use_vllm:  # the weight push, a cost of its own (verl's timing_s/update_weights)
            push = self.vllm_generation.sync_weights

            def timed_push():
                with self.step_timing.phase("update_weights"):
                    return push()

            self.vllm_generation.sync_weights = timed_push
        self.variance_rewards = variance_reward_names(args.variance_rewards, self.reward_func_names)
        logger.info("a group's variance is read from %s", self.variance_rewards or "the weighted sum of all rewards")
        accuracy = accuracy_reward_names(self.reward_func_names)
        self.accuracy_reward = args.accuracy_reward or (accuracy[0] if accuracy else "math_accuracy")
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

    def _extra_prompts(self, groups: int, peek: bool = False) -> list[dict]:
        """`groups` further prompts for this process, each repeated num_generations times (one group each).

        Drawn from a stream of the process's own (seed, rank, position), with the curriculum's weights when
        there is one, so that a resumed run draws what the interrupted one would have. `peek`: the prompts the
        next draw would give (with today's curriculum weights), the stream left where it is.
        """
        generator = torch.Generator().manual_seed(
            self.args.seed * 1_000_003 + self.accelerator.process_index * 7919 + self._extra_draws
        )
        if self.curriculum is not None:
            weights = self.curriculum.weights()
        else:
            weights = torch.ones(len(self.train_dataset))
        indices = torch.multinomial(weights, groups, replacement=True, generator=generator).tolist()
        self._extra_draws += 0 if peek else groups
        return [self.train_dataset[index] for index in indices for _ in range(self.num_generations)]

    # ------------------------------------------------------------ rewards

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        with self.step_timing.phase("rewards"):
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            gold = self._gold_rewards(inputs, prompts, completions, completion_ids_list)
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
        if gold is not None:
            self._log_gold(rewards_per_func, rewards, gold)  # recipes.stages.grpo.gold
        self._record_held_out(rewards_per_func)  # in evaluation only: recipes.stages.grpo.held_out
        if self.model.training and self.num_generations > 1:
            group_std = self._group_spread(rewards_per_func, rewards)
            self._last_group_std = group_std
            mode = "train"
            trl_private.metrics(self, mode)["groups/std_mean"].append(group_std.mean().item())
            trl_private.metrics(self, mode)["groups/zero_std_frac"].append(
                torch.isclose(group_std, torch.zeros_like(group_std)).float().mean().item()
            )
            if self.curriculum is not None:
                self._update_curriculum(inputs, rewards_per_func, rewards)
        return rewards_per_func

    def _group_spread(self, rewards_per_func: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
        """Each group's reward spread, (num_groups,): what dynamic sampling and the monitor call its variance.

        With `variance_rewards` (by default the accuracy rewards), the largest within-group std
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
        values = [None if torch.isnan(value) else float(value) for value in outcomes]
        unfinished = self._unfinished_rows()  # recipes.stages.grpo.partial_rollouts: no outcome yet
        if len(unfinished) == len(values):
            values = [None if still else value for value, still in zip(values, unfinished, strict=True)]
        self.curriculum.update(ids, values)

    # ------------------------------------------------------------ dynamic sampling

    def _generate_and_score_completions(self, inputs):
        if self.use_rollout_worker and self.model.training:  # recipes.stages.grpo.async_rollouts
            self._prepare_requests(inputs)
        with self._sampler_correction_in_the_loss():  # recipes.stages.grpo.sampler_correction
            if not (self.dynamic_sampling and self.model.training):
                batch = super()._generate_and_score_completions(inputs)
            else:
                batch = self._sample_dynamically(inputs)  # recipes.stages.grpo.dynamic_sampling
                if self.use_rollout_worker:
                    self._request_next_extra_round()
        self._attach_reference_logps(batch)  # recipes.stages.grpo.reference_kl, with log_reference_kl
        return batch

    # ------------------------------------------------------------ step timing (recipes.stages.grpo.step_timing)

    def training_step(self, model, inputs, num_items_in_batch):
        # The loss pass and its backward; what input preparation does inside it (generation, rewards,
        # log-probs) is timed as its own phases and left out of this one.
        with self.step_timing.phase("forward_backward"):
            return super().training_step(model, inputs, num_items_in_batch)

    def _prepare_inputs(self, generation_batch):
        buffered = trl_private.buffered_inputs(self)
        with self.step_timing.phase("prepare"):  # bookkeeping around generation: not a phase of the log
            inputs = super()._prepare_inputs(generation_batch)
        fresh = trl_private.buffered_inputs(self)
        if self.share_prompts and self.model.training and fresh is not buffered:  # a fresh generation batch
            trl_private.set_buffered_inputs(self, group_micro_batches(fresh))
            inputs = trl_private.buffered_inputs(self)[trl_private.micro_step(self) % self.args.steps_per_generation]
        if self.model.training and self._zero_rows_droppable():
            inputs = self._drop_zero_advantage_rows(inputs)
        if self.trim_padding and self.model.training:
            inputs = trim_micro_batch(inputs)
        return inputs

    def _generate(self, prompts):
        with self.step_timing.phase("generate"):
            result = super()._generate(prompts)
        self.step_timing.count("generated", sum(len(ids) for ids in result[1]))  # result[1]: completion ids
        return result

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        if torch.is_grad_enabled():  # the loss pass's own forward: part of forward_backward
            shared = self._shared_prompt_pass(*args, **kwargs) if self.share_prompts else None
            result = shared if shared is not None else super()._get_per_token_logps_and_entropies(*args, **kwargs)
            self._correct_for_sampler(result[0])  # recipes.stages.grpo.sampler_correction, when it applies
            self._measure_reference_kl(result[0])  # recipes.stages.grpo.reference_kl, with log_reference_kl
            return result
        with self.step_timing.phase("logprobs"):  # old / reference / buffered sampling log-probs
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)

    def _shared_prompt_pass(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
        compute_aux_loss=False, **multimodal,
    ):  # fmt: skip
        """recipes.stages.grpo.shared_prompt for a text model's loss pass; None where TRL's own pass must run."""
        if compute_aux_loss or any(value is not None for value in multimodal.values()):
            return None
        result = shared_prompt_logps(
            model, input_ids, attention_mask, logits_to_keep, compute_entropy,
            prefix_model=self.accelerator.unwrap_model(model),
        )  # fmt: skip
        return None if result is None else (*result, None)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.step_timing.active and torch.is_grad_enabled():
            masks = (inputs["prompt_mask"], inputs["completion_mask"])
            counts = None
            if (
                self.share_prompts
            ):  # the tokens the shared pass runs: each prompt once (recipes.stages.grpo.shared_prompt)
                counts = shared_token_counts(inputs["prompt_ids"], *masks)
            if counts is None:
                counts = (sum(int(mask.sum().item()) for mask in masks), sum(mask.numel() for mask in masks))
            self.step_timing.count("trained", counts[0])
            self.step_timing.count("positions", counts[1])
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
