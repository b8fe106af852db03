"""RLVRGRPOTrainer: TRL's GRPOTrainer with what DAPO, Kimi k1.5 and this repository add, read here in the order a
step runs it. Its options are RLVRGRPOConfig's (recipes.stages.grpo.config: trl.GRPOConfig plus ours, each
documented there); a bare script builds it as it builds TRL's: `RLVRGRPOTrainer(model=..., reward_funcs=...,
args=RLVRGRPOConfig(...), train_dataset=...)`. What is not named below (the losses, clipping, the KL term, vLLM,
logging, checkpoints) is TRL's. Each addition is a module of recipes/stages/grpo/ that takes explicit inputs; this
class holds the overrides of TRL's and transformers.Trainer's methods and calls them, in this order:

1. Prompts: `_get_train_sampler` draws by pass rate with a curriculum (data_filters.curriculum); `_extra_prompts`
   draws dynamic sampling's further prompts from a stream a resumed run repeats.
2. A generation batch, `_generate_and_score_completions`: the rollout worker is asked for the next one
   (async_rollouts); TRL's generation, or dynamic sampling's rounds that replace groups whose rewards all agree
   (dynamic_sampling); on TRL's vLLM path the sampler correction is deferred to the loss pass where it can be
   (sampler_correction); the reference's log-probs for the logged KL (reference_kl).
   - `_generate` (timed; the model's tokens counted, not its tools') -> `_generate_single_turn`: compact
     generation, in bf16 where asked (compact_generation, sampling_dtype), partial rollouts (partial_rollouts), or
     the rollout worker's batch; with tools, TRL's tool loop between turns (`_tool_call_loop`: each turn's calls
     started side by side before TRL makes them), each call counted and timed as `tools` (eval.tools.stats);
   - `_calculate_rewards` (timed): TRL's rewards; gold rewards logged beside them (gold); in evaluation, pass@1
     per problem (held_out); each group's spread on the accuracy rewards (dynamic_sampling.group_spread, logged
     for the monitor) and the curriculum's pass rates.
3. The micro-batch, `_prepare_inputs`: a fresh batch regrouped so a group's prompt runs once (shared_prompt); rows
   with zero advantage left out where they add nothing (zero_advantage); padding trimmed (compact_generation).
4. The loss pass, `training_step` (timed) -> `compute_loss` (tokens counted; a micro-batch with no row left is a
   zero loss) -> `_compute_loss` (marks what its forward does) -> `_get_per_token_logps_and_entropies`: the
   shared-prompt forward, then from its log-probs the sampler correction's ratio and mismatch metrics
   (sampler_correction) and the KL to the reference (reference_kl). Gradient-free calls are timed as `logprobs`.
5. `log`: an evaluation's record gets held-out pass@1 and its interval (held_out); every step's timing and token
   counts come from step_timing's callback.
6. Checkpoints, `_save_checkpoint` / `_load_optimizer_and_scheduler`: this trainer's own state beside TRL's
   (checkpoint_state), so that a resumed run draws and buffers as the uninterrupted one would have.
"""

from __future__ import annotations

import logging
import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from eval.tools.stats import ToolCalls, batch_tool_metrics
from recipes.common import trl_private
from recipes.stages.grpo import checkpoint_state, compact_generation, reference_kl, sampler_correction, zero_advantage
from recipes.stages.grpo.async_rollouts import WorkerIO, ids_key
from recipes.stages.grpo.config import RLVRGRPOConfig
from recipes.stages.grpo.dynamic_sampling import RoundIO
from recipes.stages.grpo.gold import gold_in_place, gold_metrics
from recipes.stages.grpo.held_out import HeldOutScores
from recipes.stages.grpo.outcomes import curriculum_outcomes, group_spread
from recipes.stages.grpo.sampling_dtype import cast_for_sampling
from recipes.stages.grpo.shared_prompt import group_micro_batches, shared_prompt_logps, shared_token_counts
from recipes.stages.grpo.start import check_trainer, start_parts

logger = logging.getLogger(__name__)


class RLVRGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with the additions the module docstring lists in the step's order, every option read from
    `args`, an RLVRGRPOConfig. Its parts (dynamic, partial, async_rollouts, extra_prompts, ...) are built by
    recipes.stages.grpo.start.start_parts."""

    def __init__(self, model, reward_funcs, args: RLVRGRPOConfig | None = None, *rest, gold_reward_funcs=(), **kwargs):
        if not isinstance(args, RLVRGRPOConfig):
            raise TypeError(
                "RLVRGRPOTrainer reads its options (dynamic sampling, the curriculum, ...) from args: pass "
                f"args=recipes.stages.grpo.config.RLVRGRPOConfig(...), got {type(args).__name__}"
            )
        # {} is the curriculum with its default options; None: TRL's shuffle
        self.curriculum_options = (args.curriculum or {}) if args.sampler == "pass_rate_weighted" else None
        self.curriculum = None
        self._last_group_std: torch.Tensor | None = None  # the last scored batch's group spreads, every process's
        self._loss_pass: tuple[dict, bool, bool] | None = None  # _compute_loss -> its forward: (inputs, correct, kl)
        self.held_out = HeldOutScores()  # recipes.stages.grpo.held_out: pass@1 per problem over an evaluation
        self.tool_calls = None  # eval.tools.stats: where the policy has tools, their calls counted and timed
        if kwargs.get("tools") or kwargs.get("environment_factory") is not None:
            self.tool_calls = ToolCalls()
            kwargs.update(self.tool_calls.instrument(kwargs.get("tools"), kwargs.get("environment_factory")))
        if args.use_vllm and not torch.cuda.is_available():
            from recipes.stages.grpo.vllm_cpu import adapt_for_cpu

            adapt_for_cpu()  # TRL's weight pushes cannot reach vLLM's CPU kernels: vLLM's own reload can
        super().__init__(model, reward_funcs, args, *rest, **kwargs)
        trl_private.check(self)  # the private names of TRL this trainer reads: one line when an upgrade drops one
        start_parts(self, gold_reward_funcs)  # the parts and their options (recipes.stages.grpo.start)
        check_trainer(self)

    # ------------------------------------------------------------ 1. prompts

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
        """`groups` further prompts for this process (dynamic_sampling.ExtraPrompts), the curriculum's weights on."""
        weights = self.curriculum.weights() if self.curriculum is not None else None
        return self.extra_prompts.draw(groups, self.train_dataset, weights, peek)

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        if self.async_rollouts is None:
            return super().get_batch_samples(epoch_iterator, num_batches, device)
        samples = self.async_rollouts.batch_samples(epoch_iterator, num_batches)  # read ahead for the worker
        return samples, trl_private.num_items_in_batch(self, samples, device)

    # ------------------------------------------------------------ 2. a generation batch

    def _generate_and_score_completions(self, inputs):
        training = self.model.training
        if self.async_rollouts is not None and training:  # recipes.stages.grpo.async_rollouts
            self.async_rollouts.prepare(inputs, self._worker_io(), self)
        defer = sampler_correction.defer_to_loss_pass(
            self.use_vllm, self.vllm_importance_sampling_correction, training,
            self.args.gradient_accumulation_steps, self.args.steps_per_generation, self.num_iterations,
        )  # fmt: skip
        if defer:  # TRL's generation then computes neither pi_old nor the ratio: the loss pass does
            self.vllm_importance_sampling_correction = False
        try:
            if not (self.args.dynamic_sampling and training):
                batch = super()._generate_and_score_completions(inputs)
            else:
                batch = self.dynamic.sample(inputs, self._round_io())  # recipes.stages.grpo.dynamic_sampling
                if self.async_rollouts is not None and self.dynamic.mode == "batch" and self.dynamic.max_rounds >= 1:
                    groups = self.args.per_device_train_batch_size * self.args.steps_per_generation
                    next_rows = lambda: self._extra_prompts(groups // self.num_generations, peek=True)  # noqa: E731
                    self.async_rollouts.request_next_extra_round(next_rows, self._worker_io())
        finally:
            if defer:
                self.vllm_importance_sampling_correction = True
        self._attach_reference_logps(batch)  # recipes.stages.grpo.reference_kl, with log_reference_kl
        return batch

    def _round_io(self) -> RoundIO:
        def generate(rows):
            return super(RLVRGRPOTrainer, self)._generate_and_score_completions(rows), self._last_group_std

        def policy_logps(batch):  # the current policy's log-probs of a merged batch's completions
            from trl.models.utils import disable_gradient_checkpointing

            ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
            mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
            with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
                return trl_private.per_token_logps_and_entropies(
                    self, self.model, ids, mask, batch["completion_ids"].size(1),
                    batch_size=self.args.per_device_train_batch_size,
                )[0]  # fmt: skip

        return RoundIO(
            generate, self._extra_prompts, self.accelerator.gather, self.accelerator.device,
            self.accelerator.process_index, policy_logps, trl_private.pad_token_id(self), trl_private.metrics(self),
            self.partial, self.state.global_step,
        )  # fmt: skip

    def _worker_io(self) -> WorkerIO:
        def key_of(rows):
            return ids_key(trl_private.tokenize_prompts(self, [row["prompt"] for row in rows])[0])

        return WorkerIO(
            self._policy_as_it_samples, self.sampling_dtype, lambda: self.step_timing.phase("update_weights"),
            key_of, self._sampling_limits(), self._sampling_distribution(), self.state.global_step,
        )  # fmt: skip

    def _generate(self, prompts):
        with self.step_timing.phase("generate"):
            result = super()._generate(prompts)
        completion_ids, tool_mask = result[1], result[2]  # the tool mask: 0 on tools' tokens (None without tools)
        model_tokens = [len(ids) for ids in completion_ids] if tool_mask is None else [sum(m) for m in tool_mask]
        self.step_timing.count("generated", sum(model_tokens))  # the model's tokens, not its tools'
        if self.tool_calls is not None:  # calls, failures and turns per completion (eval.tools.stats)
            metrics = trl_private.metrics(self, "train" if self.model.training else "eval")
            gather, device = self.accelerator.gather, self.accelerator.device
            for name, value in batch_tool_metrics(
                self.tool_calls, len(model_tokens), tool_mask, gather, device
            ).items():
                metrics[name].append(value)
        return result

    def _tool_call_loop(self, prompts, prompt_ids, completion_ids, completions, *rest):
        # each turn's calls started side by side before TRL makes them (eval.tools.stats.ToolCalls.ahead_of)
        with self.tool_calls.ahead_of(completions, self.environments):
            return super()._tool_call_loop(prompts, prompt_ids, completion_ids, completions, *rest)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if self.async_rollouts is not None:  # the rollout worker's batch, where it sampled this one in time
            taken = self.async_rollouts.take(prompt_ids, self.state.global_step, trl_private.metrics(self))
            if taken is not None:
                return taken
        if not self._compact_generation_applies(images, multimodal_fields):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images
            )
        limits, distribution = self._sampling_limits(), self._sampling_distribution()
        with (
            self._policy_as_it_samples(merge=self.args.merge_adapter_for_generation) as merged,
            cast_for_sampling(merged, self.sampling_dtype) as model,  # recipes.stages.grpo.sampling_dtype
        ):
            continued = self.partial.sample(model, prompt_ids, limits, distribution, self.model.training)
            return continued or compact_generation.sample_compact(model, prompt_ids, limits, distribution)

    def _compact_generation_applies(self, images=None, multimodal_fields=None) -> bool:
        return compact_generation.compact_generation_applies(
            self.args.compact_generation, self.use_vllm, self.use_transformers_continuous_batching, images,
            multimodal_fields, self.min_p, self.repetition_penalty, self.args.generation_kwargs, self.temperature,
        )  # fmt: skip

    def _policy_as_it_samples(self, merge: bool = True):
        return compact_generation.policy_as_it_samples(
            self.model_wrapped, self.accelerator, trl_private.distributed(self), self.args.ds3_gather_for_generation,
            self.args.gradient_checkpointing_kwargs, merge,
        )  # fmt: skip

    def _sampling_limits(self) -> dict:
        return compact_generation.sampling_limits(self)

    def _sampling_distribution(self) -> tuple[float, float, int | None]:
        """(temperature, top_p, top_k) the sampler draws with: the trainer's own."""
        return self.temperature, self.top_p, self.top_k

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        with self.step_timing.phase("rewards"):
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            gold = None
            if self.gold_reward_funcs:  # TRL's scoring with the gold rewards in place (recipes.stages.grpo.gold)
                with gold_in_place(self):
                    gold = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
        training, names = self.model.training, self.reward_func_names
        metrics = trl_private.metrics(self, "train" if training else "eval")
        if gold is not None:  # recipes.stages.grpo.gold: logged beside the proxy, never in the loss
            for name, value in gold_metrics(rewards_per_func, rewards, gold, names, self.gold_reward_names).items():
                metrics[name].append(value)
        # in evaluation only: recipes.stages.grpo.held_out
        self.held_out.record(rewards_per_func, names, self.accuracy_reward, self.num_generations_eval, training)
        if training and self.num_generations > 1:  # recipes.stages.grpo.outcomes
            spread = group_spread(rewards_per_func, rewards, names, self.variance_rewards, self.num_generations)
            self._last_group_std = spread
            metrics["groups/std_mean"].append(spread.mean().item())
            metrics["groups/zero_std_frac"].append(
                torch.isclose(spread, torch.zeros_like(spread)).float().mean().item()
            )
            if self.curriculum is not None:  # every process applies the same (gathered) outcomes: the same prompts
                from accelerate.utils import gather_object

                unfinished = self.partial.unfinished_rows()  # partial rollouts: still generating, no outcome yet
                outcomes = curriculum_outcomes(rewards_per_func, rewards, names, self.accuracy_reward, unfinished)
                self.curriculum.update(gather_object([row.get("id") for row in inputs]), outcomes)
        return rewards_per_func

    def _attach_reference_logps(self, batch: dict) -> None:
        """batch["ref_per_token_logps"]: the reference's log-prob of every completion token, with log_reference_kl."""
        on = reference_kl.reference_kl_on(self.args.log_reference_kl, self.beta, self.model.training)
        if not on or batch.get(reference_kl.REF_LOGPS) is not None:
            return
        chunk = self.args.per_device_train_batch_size

        def logps_of(model, ids, mask, keep):
            return trl_private.per_token_logps_and_entropies(self, model, ids, mask, keep, batch_size=chunk)[0]

        batch[reference_kl.REF_LOGPS] = reference_kl.reference_logps(
            batch, logps_of, self.model, self.accelerator.unwrap_model(self.model), self.frozen_reference
        )

    # ------------------------------------------------------------ 3. the micro-batch, 4. the loss pass

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
        if self.args.share_prompts and self.model.training and fresh is not buffered:  # a fresh generation batch
            trl_private.set_buffered_inputs(self, group_micro_batches(fresh))
            inputs = trl_private.buffered_inputs(self)[trl_private.micro_step(self) % self.args.steps_per_generation]
        droppable = zero_advantage.zero_rows_droppable(
            self.args.skip_zero_advantage, self.loss_type, self.beta, trl_private.entropy_bonus_enabled(self),
            self.top_entropy_quantile, getattr(self, "aux_loss_enabled", False),
        )  # fmt: skip
        if self.model.training and droppable:  # recipes.stages.grpo.zero_advantage
            inputs, dropped = zero_advantage.rows_to_train(
                inputs, self.accelerator.num_processes, self.is_deepspeed_enabled or self.is_fsdp_enabled
            )
            if dropped is not None:
                trl_private.metrics(self)["loss_pass/zero_advantage_rows_skipped"].append(dropped)
        if self.args.trim_padding and self.model.training:
            inputs = compact_generation.trim_micro_batch(inputs)
        return inputs

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        if torch.is_grad_enabled():  # the loss pass's own forward: part of forward_backward
            shared = self._shared_prompt_pass(*args, **kwargs) if self.args.share_prompts else None
            result = shared if shared is not None else super()._get_per_token_logps_and_entropies(*args, **kwargs)
            inputs, correct, kl = self._loss_pass or (None, False, False)
            self._loss_pass = None  # once per loss pass
            if correct:  # recipes.stages.grpo.sampler_correction
                for name, value in sampler_correction.correct_for_sampler(
                    inputs, result[0], self.vllm_importance_sampling_mode, self.vllm_importance_sampling_clip_min,
                    self.vllm_importance_sampling_clip_max,
                ).items():  # fmt: skip
                    trl_private.metrics(self)[name].append(value)
            if kl:  # recipes.stages.grpo.reference_kl
                reduce_sum = lambda totals: self.accelerator.reduce(totals, reduction="sum")  # noqa: E731
                trl_private.metrics(self)["kl"].append(reference_kl.reference_kl(result[0], inputs, reduce_sum))
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
        if zero_advantage.no_rows_left(inputs):  # skip_zero_advantage left no row: nothing to run
            return zero_advantage.zero_loss(model)
        if self.step_timing.active and torch.is_grad_enabled():
            masks = (inputs["prompt_mask"], inputs["completion_mask"] * inputs.get("tool_mask", 1))  # not tools' tokens
            # share_prompts: the tokens the shared pass runs, each prompt once (recipes.stages.grpo.shared_prompt)
            counts = shared_token_counts(inputs["prompt_ids"], *masks) if self.args.share_prompts else None
            if counts is None:
                counts = (sum(int(mask.sum().item()) for mask in masks), sum(mask.numel() for mask in masks))
            self.step_timing.count("trained", counts[0])
            self.step_timing.count("positions", counts[1])
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def _compute_loss(self, model, inputs):
        # What the loss pass's own forward (_get_per_token_logps_and_entropies) does with its log-probs: correct
        # for the sampler, measure the KL to the reference.
        correct = sampler_correction.correction_applies(
            self.vllm_importance_sampling_correction, inputs, self.model.training
        )
        kl = reference_kl.reference_kl_on(self.args.log_reference_kl, self.beta, self.model.training)
        kl = kl and inputs.get(reference_kl.REF_LOGPS) is not None
        self._loss_pass = (inputs, correct, kl)
        # TRL multiplies the loss by inputs["importance_sampling_ratio"] on its vLLM path only (the one place its
        # loss reads use_vllm); for the length of the loss the flag says that the sampler was another engine.
        was_vllm, self.use_vllm = self.use_vllm, self.use_vllm or correct
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self.use_vllm = was_vllm
            self._loss_pass = None

    # ------------------------------------------------------------ 5. logs, 6. checkpoints

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        folder = os.path.join(trl_private.output_dir(self, trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        state = {"extra_draws": self.extra_prompts.draws, "zero_std_estimate": self.dynamic.zero_std_estimate}
        if self.curriculum is not None:
            state["curriculum"] = self.curriculum.state_dict()
        checkpoint_state.save_rlvr_state(  # recipes.stages.grpo.checkpoint_state
            folder, state if self.args.should_save else None, self.accelerator.process_index,
            {"buffer": self.dynamic.buffer, "carried": self.partial.carried},
        )  # fmt: skip

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        self._restore_rlvr_state(checkpoint)

    def _restore_rlvr_state(self, checkpoint) -> None:
        """This trainer's own state from `checkpoint` (a folder), where it was saved."""
        state, buffers = checkpoint_state.load_rlvr_state(
            checkpoint, self.accelerator.process_index, self.accelerator.device
        )
        if state is not None:
            self.extra_prompts.draws = state.get("extra_draws", 0)
            self.dynamic.zero_std_estimate = state.get("zero_std_estimate")
            if self.curriculum is not None and "curriculum" in state:
                self.curriculum.load_state_dict(state["curriculum"])
        if buffers is not None:
            self.dynamic.buffer, self.partial.carried = buffers["buffer"], buffers["carried"]

    def log(self, logs: dict, start_time: float | None = None) -> None:
        self.held_out.into(logs, self.model.training)  # an evaluation's record gets eval_pass@1 and its interval
        return super().log(logs, start_time)
