"""Reinforcement learning with verifiable rewards: GRPO, Dr. GRPO and DAPO on TRL's GRPOTrainer.

    python recipes/grpo.py                                   # embedded default: DAPO on the tiny cold-start model
    accelerate launch recipes/grpo.py --config recipes/configs/demo/grpo.yaml
    accelerate launch --config_file recipes/accelerate/zero2.yaml recipes/grpo.py \\
        --config recipes/configs/qwen2.5-math-1.5b/dapo.yaml

The three algorithms are three YAML files for this one script: they differ in GRPOConfig's `loss_type`,
`scale_rewards`, `beta` and `epsilon_high`, and in our `dynamic_sampling`. Top to bottom: parse the
config (this recipe's own options: recipes.stages.grpo.arguments.GRPOScriptArguments; the trainer's:
recipes.stages.grpo.config.RLVRGRPOConfig), build the trainer (recipes.stages.grpo.setup: the model, the demo's
shipped cold start copied into place if it is missing, the rows, the rewards from the registry and the gold
rewards watched beside them, the monitor), train (recipes.stages.grpo.trainer adds dynamic sampling and the
curriculum to TRL's trainer, cheaper rollouts, and times each step's phases; with stop_on_reward_hacking, a
run the monitor stops goes back to its last checkpoint from before the divergence), save the model, the
tokenizer and a run card (with `timing`: mean seconds per phase, tokens and FLOP/s over the run).
"""

from __future__ import annotations

import logging
from pathlib import Path

if __package__ in (None, ""):  # run by path: this checkout on sys.path, with or without the venv
    import _checkout  # noqa: F401  (recipes/_checkout.py, beside this file)

from recipes.common.checkpoints.resume import restore_before_divergence, train_resuming
from recipes.common.command_line.config import RecipeParser
from recipes.common.model.loading import save_trainer_for_inference
from recipes.common.run_card import write_run_card
from recipes.stages.grpo.arguments import GRPOScriptArguments
from recipes.stages.grpo.held_out import kept_checkpoint
from recipes.stages.grpo.setup import build_trainer, distributed_setup

logger = logging.getLogger("recipes.grpo")

DEFAULT_CONFIG = "demo/dapo.yaml"


def main(script_args: GRPOScriptArguments, training_args, model_args) -> Path:
    """Train and save; returns the output folder."""
    from transformers import set_seed

    set_seed(training_args.seed)
    trainer, monitor, model_path, tokenizer, rows = build_trainer(script_args, training_args, model_args)
    train_resuming(trainer, training_args, training_args.output_dir)
    hacking = monitor.hacking  # the first suspected reward hacking (gold_rewards), or None
    if hacking and script_args.stop_on_reward_hacking:
        hacking["restored_checkpoint"] = restore_before_divergence(trainer, training_args.output_dir, hacking)

    save_trainer_for_inference(
        trainer, training_args.output_dir, tokenizer, merge_lora=script_args.merge_lora, started_from=model_path
    )
    if trainer.accelerator.is_main_process:
        write_run_card(
            training_args.output_dir,
            {"script": script_args, "training": training_args, "model": model_args},
            datasets={"train": rows, **({"held_out": trainer.eval_dataset} if trainer.eval_dataset else {})},
            extra={
                "recipe": "grpo",
                "base_model": model_path,
                "rewards": script_args.rewards,
                "monitor_warnings": monitor.warnings,
                "gold_rewards": script_args.gold_rewards,
                "reward_hacking": hacking,
                "final_step": trainer.state.global_step,
                "kept_checkpoint": kept_checkpoint(training_args, trainer.state),  # recipes.stages.grpo.held_out
                "sampling_dtype": str(trainer.sampling_dtype).removeprefix("torch."),  # what compact generation ran in
                "processes": trainer.accelerator.num_processes,
                "distributed": distributed_setup(trainer.accelerator),
                "timing": trainer.step_timing.summary(),  # recipes.stages.grpo.step_timing: this process's steps
            },
        )
    logger.info("saved to %s", training_args.output_dir)
    return Path(training_args.output_dir)


def make_parser() -> RecipeParser:
    """This recipe's command line: its dataclasses, its default config and the errors that are the user's."""
    from trl import ModelConfig

    from recipes.stages.grpo.config import RLVRGRPOConfig  # trl.GRPOConfig with the trainer's own options

    return RecipeParser((GRPOScriptArguments, RLVRGRPOConfig, ModelConfig), DEFAULT_CONFIG, description=__doc__)


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/grpo.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
