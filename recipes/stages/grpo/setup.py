"""How recipes/grpo.py puts its trainer together: tokenizer, rows, rewards, the collapse monitor, the model.

The trainer and its options are recipes.stages.grpo.trainer's (`RLVRGRPOTrainer` reads them from its config,
`RLVRGRPOConfig`, which recipes/grpo.py parses); this module adds what the recipe's own options give it.

`build_trainer` is the recipe's trainer ready to train, so that the script reads as its story (parse, build,
train, save) and the GRPO overhead benchmark (scripts/bench/grpo_overhead.py) times this very trainer
against a bare trl.GRPOTrainer. `distributed_setup` is what the run card records of the launch.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from recipes.common.model.loading import load_model, load_tokenizer, resolve_model_path, with_kv_cache
from recipes.stages.grpo.arguments import GRPOScriptArguments
from recipes.stages.grpo.held_out import held_out_data_args, without_training_problems
from tasks.schema import load_rows

logger = logging.getLogger(__name__)


def distributed_setup(accelerator) -> dict:
    """How the processes shared the work (for the run card): DDP, DeepSpeed with its ZeRO stage, FSDP, or none."""
    setup = {"type": str(accelerator.distributed_type.value), "device": str(accelerator.device.type)}
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    if plugin is not None:
        setup["zero_stage"] = plugin.zero_stage
    return setup


def set_generation_kv_cache(training_args) -> None:
    """Generate with the KV cache during GRPO training (see recipes.common.model.loading.with_kv_cache). Not with vLLM:
    TRL hands generation_kwargs to vLLM's SamplingParams, which refuses `use_cache` (and always caches)."""
    if not training_args.use_vllm:
        training_args.generation_kwargs = with_kv_cache(training_args.generation_kwargs)


def prepare_learned_rewards(functions, tokenizer, device) -> None:
    """Load each learned reward (reward_model, llm_judge: rewards.learned) onto the policy's device, after checking
    it against the policy's tokenizer; a reward model that cannot score this policy's text is a RewardConfigError
    (one line, exit 2) here, before training. Rule rewards have nothing to prepare."""
    for function in functions:
        prepare = getattr(function, "prepare", None)
        if prepare is not None:
            prepare(tokenizer, device)


def warn_if_checkpoints_too_few(training_args, patience: int) -> None:
    """stop_on_reward_hacking goes back to a checkpoint from `patience` logs before the stop: say so when the run
    saves none, or keeps too few of them for that one to be left."""
    if str(getattr(training_args.save_strategy, "value", training_args.save_strategy)) != "steps":
        logger.warning("stop_on_reward_hacking: save_strategy is not 'steps', so there is no checkpoint to go back to")
        return
    span = patience * training_args.logging_steps  # steps between the divergence's first log and the stop
    needed = span // max(1, int(training_args.save_steps)) + 1
    limit = training_args.save_total_limit
    if limit is not None and limit < needed:
        logger.warning(
            "stop_on_reward_hacking: save_total_limit %d keeps fewer checkpoints than the %d that span the monitor's "
            "window (%d steps); the one from before a divergence may be deleted. Raise save_total_limit.",
            limit, needed, span,
        )  # fmt: skip


def with_chat_prompts(rows, script_args):
    """Rows whose `prompt` is plain text (a source's own prompt column, as DAPO-Math-17k's) with it as chat messages,
    `system_prompt` and `user_template` applied as the schema applies them to a question: TRL's tool loop appends
    the calls and their results to a conversation, so it needs one. Chat prompts are returned as they are."""
    if rows is None or len(rows) == 0 or not isinstance(rows[0]["prompt"], str):
        return rows
    from tasks.rows import build_prompt

    template = script_args.user_template or "{problem}"
    return rows.map(lambda row: {"prompt": build_prompt(row["prompt"], script_args.system_prompt, template)})


class BuiltTrainer(NamedTuple):
    """The trainer and what recipes/grpo.py needs of the build after training (saving, the run card)."""

    trainer: object  # RLVRGRPOTrainer
    monitor: object  # RLVRMonitor
    model_path: str
    tokenizer: object
    rows: object


def build_trainer(script_args: GRPOScriptArguments, training_args, model_args, callbacks: tuple = ()) -> BuiltTrainer:
    """The recipe's trainer, ready to train, with its monitor (first callback) and `callbacks` after it;
    `training_args` is an RLVRGRPOConfig, whose trainer options the trainer reads itself.

    The GRPO overhead benchmark times this very trainer against a bare trl.GRPOTrainer.
    """
    from trl import get_peft_config

    from recipes.common.training.library_noise import quiet_library_noise
    from recipes.common.training.monitor import RLVRMonitor
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from rewards import accuracy_reward_names, build_rewards

    quiet_library_noise()  # before anything loads or saves a model (a cold start built on demand does both)
    path = model_args.model_name_or_path
    model_path = resolve_model_path(path, if_missing=script_args.missing_model_fallback())
    tokenizer = load_tokenizer(model_path, model_args.model_revision, getattr(model_args, "trust_remote_code", False))
    set_generation_kv_cache(training_args)

    rows = load_rows(script_args)
    reward_functions, weights = build_rewards(script_args.rewards)
    gold_functions, _ = build_rewards(script_args.gold_rewards, "gold_rewards")
    prepare_learned_rewards([*reward_functions, *gold_functions], tokenizer, training_args.device)
    training_args.reward_weights = weights
    logger.info(
        "training on %d prompts from %s with rewards %s",
        len(rows), script_args.dataset_name, [(f.__name__, w) for f, w in zip(reward_functions, weights, strict=True)],
    )  # fmt: skip

    if script_args.stop_on_reward_hacking:
        warn_if_checkpoints_too_few(training_args, script_args.monitor_patience)
    monitor = RLVRMonitor(
        training_args.output_dir,
        script_args.monitor_std_threshold,
        script_args.monitor_patience,
        accuracy_rewards=accuracy_reward_names(script_args.rewards),
        gold_rewards=[function.__name__ for function in gold_functions],
        hacking_margin=script_args.monitor_hacking_margin,
        stop_on_hacking=script_args.stop_on_reward_hacking,
        reward_functions=reward_functions,
    )
    held_out = None
    if script_args.held_out is not None:
        held_out = without_training_problems(load_rows(held_out_data_args(script_args, script_args.held_out)), rows)
        logger.info("held out: %d problems, evaluated every %s steps", len(held_out), training_args.eval_steps)
    tools = {}
    if script_args.tools:  # eval/tools: the tools, and a template that renders their calls and results
        from eval.tools.chat_template import with_tool_template
        from eval.tools.registry import trainer_tools

        tokenizer = with_tool_template(tokenizer)
        tools = trainer_tools(script_args.tools, **script_args.tool_options)
        rows = with_chat_prompts(rows, script_args)
        held_out = with_chat_prompts(held_out, script_args)
        logger.info(
            "tools: %s, at most %s calls a completion", script_args.tools, training_args.max_tool_calling_iterations
        )
    trainer = RLVRGRPOTrainer(
        model=load_model(model_path, model_args, training_args),
        reward_funcs=reward_functions,
        args=training_args,
        train_dataset=rows,
        eval_dataset=held_out,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        callbacks=[monitor, *callbacks],
        gold_reward_funcs=gold_functions,
        **tools,
    )
    return BuiltTrainer(trainer, monitor, model_path, tokenizer, rows)
