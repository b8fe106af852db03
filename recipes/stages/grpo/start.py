"""The GRPO trainer's parts built and its options checked against one another, once TRL's own start-up has run
(RLVRGRPOTrainer.__init__ calls `start_parts`, then `check_trainer`): what the parts need of TRL's trainer (its
accelerator, reward names, DeepSpeed or FSDP) exists only then.

The parts, each a module of recipes/stages/grpo/: gold rewards, the sampling dtype, step timing, the reference for
the logged KL, the rollout worker (async_rollouts), partial rollouts, dynamic sampling and its stream of further
prompts, and the timed vLLM weight push.
"""

from __future__ import annotations

import logging
import os

import torch

from recipes.common import trl_private
from recipes.stages.grpo import compact_generation
from recipes.stages.grpo.async_rollouts import (
    AsyncRolloutCallback,
    AsyncRollouts,
    spare_cores,
    staleness_warnings,
    worker_conditions,
)
from recipes.stages.grpo.config import variance_reward_names
from recipes.stages.grpo.dynamic_sampling import DynamicSampler, ExtraPrompts
from recipes.stages.grpo.partial_rollouts import PartialRollouts, partial_rollout_problems
from recipes.stages.grpo.reference_kl import FrozenReference
from recipes.stages.grpo.sampling_dtype import resolve_sampling_dtype
from recipes.stages.grpo.step_timing import PHASES, StepTimer, StepTimingCallback
from rewards import accuracy_reward_names

logger = logging.getLogger(__name__)


def start_parts(trainer, gold_reward_funcs) -> None:
    """Give `trainer` (a GRPOTrainer just built by TRL) its parts, each from its options in trainer.args."""
    args = trainer.args
    sharded = trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled
    # gold rewards: scored on the same completions, logged, never in the loss (recipes.stages.grpo.gold)
    trainer.gold_reward_funcs = list(gold_reward_funcs)
    trainer.gold_reward_names = [function.__name__ for function in trainer.gold_reward_funcs]
    # what compact generation samples in (recipes.stages.grpo.sampling_dtype)
    trainer.sampling_dtype = resolve_sampling_dtype(args.sampling_dtype, sharded, trainer.accelerator.device.type)
    tools = trainer.tool_calls is not None  # the policy calls tools: their time is a phase of its own
    trainer.step_timing = StepTimer(trainer.accelerator.device, (*PHASES, "tools") if tools else PHASES)
    if tools:
        trainer.tool_calls.phase = lambda: trainer.step_timing.phase("tools")
    trainer.add_callback(StepTimingCallback(trainer.step_timing, trl_private.all_metrics(trainer)))
    trainer.frozen_reference = FrozenReference(trainer)  # log_reference_kl's, loaded on first use
    trainer.async_rollouts = _async_rollouts(trainer, sharded)
    trainer.partial = PartialRollouts(args.partial_rollout_tokens, trainer.num_generations)
    if args.partial_rollout_tokens:
        problems = partial_rollout_problems(
            args.dynamic_sampling, trainer._compact_generation_applies(), _has_tools(trainer),
            trainer.async_rollouts is not None, trainer.accelerator.num_processes,
        )  # fmt: skip
        if problems:
            raise ValueError(f"partial_rollout_tokens needs {'; '.join(problems)}")
    trainer.dynamic = DynamicSampler(
        args.dynamic_sampling_mode, args.dynamic_sampling_max_rounds, trainer.num_generations
    )
    trainer.extra_prompts = ExtraPrompts(args.seed, trainer.accelerator.process_index, trainer.num_generations)
    if trainer.use_vllm:  # the weight push, a cost of its own (verl's timing_s/update_weights)
        push = trainer.vllm_generation.sync_weights

        def timed_push():
            with trainer.step_timing.phase("update_weights"):
                return push()

        trainer.vllm_generation.sync_weights = timed_push
    trainer.variance_rewards = variance_reward_names(args.variance_rewards, trainer.reward_func_names)
    logger.info("a group's variance is read from %s", trainer.variance_rewards or "the weighted sum of all rewards")
    accuracy = accuracy_reward_names(trainer.reward_func_names)
    trainer.accuracy_reward = args.accuracy_reward or (accuracy[0] if accuracy else "math_accuracy")


def check_trainer(trainer) -> None:
    """The options that only the built trainer can check (its reward names, its group size)."""
    unknown = sorted(set(trainer.variance_rewards or ()) - set(trainer.reward_func_names))
    if unknown:
        raise ValueError(
            f"variance_rewards names {unknown}, which are not among the rewards {trainer.reward_func_names}"
        )
    check_server_context(trainer)
    if trainer.args.dynamic_sampling:
        local = trainer.args.per_device_train_batch_size * trainer.args.steps_per_generation
        if local % trainer.num_generations:
            raise ValueError(
                f"dynamic sampling filters whole groups per process: per_device_train_batch_size x "
                f"steps_per_generation ({local}) must be a multiple of num_generations ({trainer.num_generations})"
            )


def check_server_context(trainer, rows: int = 512) -> None:
    """With tools on a vLLM server: does the server's context hold a turn after a tool call? TRL asks for
    `max_completion_length` new tokens on every turn, after the prompt and the completion so far, so a server
    needs the longest prompt plus twice `max_completion_length`; a shorter one refuses the turn after the first call,
    mid-training, at the first turn that comes close. Checked here, at start, on the longest of the first `rows`
    prompts (as the tools' template renders them): a warning that says what to change (a warning, since a run whose
    turns stay short never meets the limit)."""
    args = trainer.args
    if not (_has_tools(trainer) and args.use_vllm and args.vllm_mode == "server"):
        return
    client = getattr(getattr(trainer, "vllm_generation", None), "vllm_client", None)
    if client is None:  # only the main process holds the client
        return
    try:
        max_model_len = int(client.get_server_info()["model_config"]["max_model_len"])
    except Exception as error:  # noqa: BLE001 - an older server without /server_info: the check is skipped
        logger.warning("could not read the vLLM server's max_model_len (%s); not checked against tool turns", error)
        return
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    dataset = trainer.train_dataset
    longest = 0
    for index in range(min(rows, len(dataset))):
        prompt = dataset[index]["prompt"]
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        text = tokenizer.apply_chat_template(prompt, tools=trainer.tools or None, add_generation_prompt=True,
                                             tokenize=False)  # fmt: skip
        longest = max(longest, len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    new_tokens = compact_generation.max_new_tokens(trainer)
    needed = longest + 2 * new_tokens
    if needed > max_model_len:
        fits = max_model_len - longest
        logger.warning(
            "the vLLM server's --max-model-len is %d, but a turn after a tool call may need up to %d tokens: the "
            "longest prompt (%d) plus twice max_completion_length (%d; TRL asks that many new tokens on every turn), "
            "and the server refuses a turn past its context, which stops the run. Restart the server with "
            "--max-model-len %d or more%s",
            max_model_len, needed, longest, new_tokens, needed,
            f", or set max_completion_length to {fits // 2} or less" if fits >= 2 else "",
        )  # fmt: skip


def _has_tools(trainer) -> bool:
    return bool(trainer.tools or trainer.environment_factories is not None or trainer.rollout_func is not None)


def _async_rollouts(trainer, sharded: bool) -> AsyncRollouts | None:
    """The rollout worker's part where max_staleness or rollout_worker asks for it (recipes.stages.grpo.async_rollouts),
    every reason it cannot serve the run refused in one line; None where the trainer samples."""
    args = trainer.args
    wanted = args.max_staleness > 0 if args.rollout_worker is None else args.rollout_worker
    if not wanted:
        if args.max_staleness > 0:
            raise ValueError(f"max_staleness {args.max_staleness} needs the rollout worker: rollout_worker: true")
        return None
    problems = worker_conditions(
        args, trainer._compact_generation_applies(), _has_tools(trainer), trainer.num_iterations, sharded
    )
    if problems:
        raise ValueError(
            "the rollout worker (max_staleness > 0 or rollout_worker: true) cannot serve this run: "
            + "; ".join(problems)
            + ". Set max_staleness: 0 to sample in the trainer."
        )
    for problem in staleness_warnings(args):
        logger.warning(problem)
    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", trainer.accelerator.num_processes))
    if not spare_cores(local_processes, torch.get_num_threads()):
        logger.warning(
            "the rollout worker shares the cores of %d trainer process(es) with %d thread(s) each: generation "
            "and training will slow each other down",
            local_processes,
            torch.get_num_threads(),
        )
    rollouts = AsyncRollouts(args.max_staleness, args.weight_sync_steps, args.gradient_accumulation_steps, args.seed)
    trainer.add_callback(AsyncRolloutCallback(rollouts, trl_private.all_metrics(trainer)))
    return rollouts
