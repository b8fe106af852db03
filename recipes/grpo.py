"""Reinforcement learning with verifiable rewards: GRPO, Dr. GRPO and DAPO on TRL's GRPOTrainer.

    python recipes/grpo.py                                   # embedded default: DAPO on the tiny cold-start model
    accelerate launch recipes/grpo.py --config recipes/configs/demo/grpo.yaml
    accelerate launch --config_file recipes/accelerate/zero2.yaml recipes/grpo.py \\
        --config recipes/configs/qwen2.5-math-1.5b/dapo.yaml

The three algorithms are three YAML files for this one script: they differ in GRPOConfig's `loss_type`,
`scale_rewards`, `beta` and `epsilon_high`, and in our `dynamic_sampling`. Top to bottom: parse the
config, load the model (for the demo, run the cold start first if its model is missing), load the rows,
build the rewards from the registry, train (recipes.common.grpo_trainer adds dynamic sampling and the
curriculum to TRL's trainer; recipes.common.monitor watches for collapse), save the model, the
tokenizer and a run card.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

if __package__ in (None, ""):  # run as a script: make the repo's packages importable without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recipes.common.checkpoints import resume_point
from recipes.common.config import RecipeParser
from recipes.common.model import load_model, load_tokenizer, resolve_model_path, save_for_inference
from recipes.common.run_card import write_run_card
from tasks.schema import DataArguments, load_rows

logger = logging.getLogger("recipes.grpo")

DEFAULT_CONFIG = "demo/dapo.yaml"
SAMPLERS = ("random", "pass_rate_weighted")
VARIANCE_FROM_SUM = "sum"  # variance_rewards: [sum] reads a group's variance from the weighted sum of all rewards


@dataclass
class GRPOScriptArguments(DataArguments):
    rewards: list[dict] = field(
        default_factory=lambda: [{"name": "math_accuracy", "weight": 1.0}],
        metadata={"help": "Rewards from the registry: a YAML list of {name, weight, **parameters}."},
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={"help": "DAPO's dynamic sampling: replace zero-variance groups with groups of further prompts."},
    )
    dynamic_sampling_max_rounds: int = field(
        default=4, metadata={"help": "Extra generation rounds per step before zero-variance groups are let through."}
    )
    sampler: str = field(
        default="random",
        metadata={
            "help": "'random' (TRL's shuffle) or 'pass_rate_weighted' (Kimi's curriculum, weight 1 - pass rate)."
        },
    )
    curriculum: dict = field(
        default_factory=dict,
        metadata={
            "help": "Options of data_filters.curriculum.CurriculumSampler: floor, estimator (ema or mean), ema_alpha, "
            "unknown_pass_rate, prior_weight, num_samples."
        },
    )
    merge_lora: bool = field(
        default=False,
        metadata={"help": "With use_peft: save the LoRA adapter merged into the base weights (what vLLM loads)."},
    )
    variance_rewards: list[str] | None = field(
        default=None,
        metadata={
            "help": "Rewards whose within-group spread is a group's variance, for dynamic sampling and the monitor. "
            "Default: the accuracy rewards among `rewards` (math_accuracy, code_pass_rate, code_binary), as DAPO "
            "filters on accuracy; with none of them, the weighted sum of all rewards. `sum` alone: the weighted "
            "sum of all rewards even when there is an accuracy reward (the filter DAPO's paper does not use, "
            "for the ablation)."
        },
    )
    monitor_std_threshold: float = field(
        default=0.05, metadata={"help": "Warn of entropy collapse when the mean group reward std stays below this."}
    )
    monitor_patience: int = field(default=3, metadata={"help": "... for this many consecutive logs."})
    cold_start_if_missing: bool = field(
        default=False,
        metadata={
            "help": "If model_name_or_path is missing and is the demo's own cold-start path (artifacts/demo/sft), "
            "first run recipes/sft.py's embedded default to build it (any other missing path is an error)."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if not isinstance(self.rewards, list) or not all(isinstance(r, dict) and "name" in r for r in self.rewards):
            raise ValueError(f"rewards must be a list of {{name, weight, ...}} mappings, got {self.rewards!r}")
        if not isinstance(self.curriculum, dict):
            raise ValueError(f"curriculum must be a mapping of CurriculumSampler options, got {self.curriculum!r}")
        if isinstance(self.variance_rewards, str):
            self.variance_rewards = [self.variance_rewards]
        if VARIANCE_FROM_SUM in (self.variance_rewards or ()) and len(self.variance_rewards) > 1:
            raise ValueError(
                f"variance_rewards {self.variance_rewards}: `{VARIANCE_FROM_SUM}` (the weighted sum of all rewards) "
                "stands alone; give either it or reward names"
            )
        unknown = sorted(set(self.variance_rewards or ()) - {r["name"] for r in self.rewards} - {VARIANCE_FROM_SUM})
        if unknown:
            raise ValueError(
                f"variance_rewards names {unknown}, which are not among the rewards; set it to reward names"
            )


def variance_reward_names(script_args: GRPOScriptArguments) -> list[str] | None:
    """The rewards whose spread is a group's variance, as the trainer takes them: None is the weighted sum."""
    from rewards import accuracy_reward_names

    if script_args.variance_rewards == [VARIANCE_FROM_SUM]:
        return None
    return script_args.variance_rewards or accuracy_reward_names(script_args.rewards) or None


def distributed_setup(accelerator) -> dict:
    """How the processes shared the work (for the run card): DDP, DeepSpeed with its ZeRO stage, FSDP, or none."""
    setup = {"type": str(accelerator.distributed_type.value), "device": str(accelerator.device.type)}
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    if plugin is not None:
        setup["zero_stage"] = plugin.zero_stage
    return setup


def use_kv_cache(training_args) -> None:
    """transformers 5 trainers switch the KV cache off for training (TrainingArguments.use_cache=False), and
    TRL's generation inherits that: every new token would recompute the whole sequence (10x slower here)."""
    training_args.generation_kwargs = {"use_cache": True, **(training_args.generation_kwargs or {})}


class BuiltTrainer(NamedTuple):
    trainer: object  # RLVRGRPOTrainer
    monitor: object  # RLVRMonitor
    model_path: str
    tokenizer: object
    rows: object


def build_trainer(script_args: GRPOScriptArguments, training_args, model_args, callbacks: tuple = ()) -> BuiltTrainer:
    """The recipe's trainer, ready to train, with its monitor (first callback) and `callbacks` after it.

    The GRPO overhead benchmark times this very trainer against a bare trl.GRPOTrainer.
    """
    from trl import get_peft_config

    from recipes.common.grpo_trainer import RLVRGRPOTrainer
    from recipes.common.monitor import RLVRMonitor
    from rewards import accuracy_reward_names, build_rewards

    path = model_args.model_name_or_path
    model_path = resolve_model_path(path, if_missing="cold_start" if script_args.cold_start_if_missing else None)
    tokenizer = load_tokenizer(model_path, model_args.model_revision, getattr(model_args, "trust_remote_code", False))
    use_kv_cache(training_args)

    rows = load_rows(script_args)
    reward_functions, weights = build_rewards(script_args.rewards)
    training_args.reward_weights = weights
    logger.info(
        "training on %d prompts from %s with rewards %s",
        len(rows), script_args.dataset_name, [(f.__name__, w) for f, w in zip(reward_functions, weights, strict=True)],
    )  # fmt: skip

    accuracy = accuracy_reward_names(script_args.rewards)
    variance_rewards = variance_reward_names(script_args)
    logger.info("a group's variance is read from %s", variance_rewards or "the weighted sum of all rewards")
    monitor = RLVRMonitor(
        training_args.output_dir,
        script_args.monitor_std_threshold,
        script_args.monitor_patience,
        accuracy_rewards=accuracy,
    )
    trainer = RLVRGRPOTrainer(
        model=load_model(model_path, model_args, training_args),
        reward_funcs=reward_functions,
        args=training_args,
        train_dataset=rows,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        callbacks=[monitor, *callbacks],
        dynamic_sampling=script_args.dynamic_sampling,
        dynamic_sampling_max_rounds=script_args.dynamic_sampling_max_rounds,
        curriculum=(script_args.curriculum or {}) if script_args.sampler == "pass_rate_weighted" else None,
        accuracy_reward=accuracy[0] if accuracy else "math_accuracy",
        variance_rewards=variance_rewards,
    )
    return BuiltTrainer(trainer, monitor, model_path, tokenizer, rows)


def main(script_args: GRPOScriptArguments, training_args, model_args) -> Path:
    from transformers import set_seed

    set_seed(training_args.seed)
    trainer, monitor, model_path, tokenizer, rows = build_trainer(script_args, training_args, model_args)
    trainer.train(resume_from_checkpoint=resume_point(training_args, training_args.output_dir))

    save_for_inference(
        trainer, training_args.output_dir, tokenizer, merge_lora=script_args.merge_lora, started_from=model_path
    )
    if trainer.accelerator.is_main_process:
        write_run_card(
            training_args.output_dir,
            {"script": script_args, "training": training_args, "model": model_args},
            datasets={"train": rows},
            extra={
                "recipe": "grpo",
                "base_model": model_path,
                "rewards": script_args.rewards,
                "monitor_warnings": monitor.warnings,
                "final_step": trainer.state.global_step,
                "processes": trainer.accelerator.num_processes,
                "distributed": distributed_setup(trainer.accelerator),
            },
        )
    logger.info("saved to %s", training_args.output_dir)
    return Path(training_args.output_dir)


def make_parser() -> RecipeParser:
    """This recipe's command line: its dataclasses, its default config and the errors that are the user's."""
    from trl import GRPOConfig, ModelConfig

    return RecipeParser((GRPOScriptArguments, GRPOConfig, ModelConfig), DEFAULT_CONFIG)


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/grpo.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
