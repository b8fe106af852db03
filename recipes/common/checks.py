"""Checks a recipe runs before any expensive work: how it was launched, and the whole config.

Why: a mistake found after the model loads and the first generation costs minutes on a 7B model, and a
launch that silently runs as one process (or as N independent trainings writing into one folder) costs a
whole run. Every check here ends in a `ConfigError` whose message names the option and the fix; the
command line turns it into one line and exit code 2 (recipes.common.config.run_recipe_cli).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A value of the config (YAML or flag) is wrong; the message names the option and how to fix it."""


# Values TRL accepts but only checks deep inside the trainer, after the model has loaded and generated
# (trl 1.16, GRPOConfig's field docs and GRPOTrainer's loss code).
CHOICES = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
    "importance_sampling_level": ("token", "sequence"),
    "multi_objective_aggregation": ("sum_then_normalize", "normalize_then_sum"),
}
POSITIVE = ("learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps", "num_generations")
NON_NEGATIVE = ("warmup_steps", "weight_decay", "max_grad_norm", "beta", "logging_steps", "save_steps")


def launched_processes() -> tuple[int, bool]:
    """(processes the launcher asked for, whether they actually started as a process group).

    torchrun (what `accelerate launch --multi_gpu`/DeepSpeed/FSDP use) sets WORLD_SIZE in every process.
    accelerate's simple launcher (`accelerate launch --num_processes 2` or `--cpu` on a machine without a
    GPU) starts ONE process; it sets MASTER_ADDR/MASTER_PORT only when more than one was asked for, and
    ACCELERATE_USE_CPU always: that combination without WORLD_SIZE is a request for several processes
    that got one.
    """
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"]), True
    if "ACCELERATE_USE_CPU" in os.environ and "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        return 2, False  # at least two were asked for; accelerate does not pass how many
    return 1, True


def check_launch(argv: list[str], gpu_available: bool | None = None) -> list[str]:
    """`argv`, with `--use_cpu true` added when several processes run without a GPU; refuses a lost launch.

    Without a GPU, processes started by torchrun only form a (gloo) process group when accelerate is told
    they run on the CPU; otherwise each trains alone and all write the same output_dir.
    """
    processes, started = launched_processes()
    if not started:
        raise ConfigError(
            "accelerate started ONE process although several were asked for (on a machine without a GPU "
            "`--num_processes N` alone, or `--cpu`, runs one): type `accelerate launch --config_file "
            "recipes/accelerate/multi_cpu.yaml recipes/<recipe>.py ...` (or `--multi_gpu --num_processes N`)"
        )
    if processes > 1:
        if gpu_available is None:
            import torch

            gpu_available = torch.cuda.is_available()
        if not gpu_available and "--use_cpu" not in argv and not any(a.startswith("--use_cpu=") for a in argv):
            logger.info(
                "%d processes and no GPU: training on the CPU with a gloo process group (--use_cpu true)", processes
            )
            return [*argv, "--use_cpu", "true"]
    return argv


def _is_set(value) -> bool:
    return value is not None and not (isinstance(value, str) and value == "")


def validate_config(*configs) -> None:
    """Check every dataclass of a parsed recipe config: choices (TRL's included), signs, paths."""
    for config in configs:
        for item in dataclasses.fields(config):
            value = getattr(config, item.name, None)
            choices = item.metadata.get("choices") or CHOICES.get(item.name)
            if choices and _is_set(value) and getattr(value, "value", value) not in choices:
                raise ConfigError(
                    f"{item.name}: {value!r} is not one of {', '.join(map(str, choices))}; fix --{item.name}"
                )
            if item.name in POSITIVE and isinstance(value, int | float) and value <= 0:
                raise ConfigError(f"{item.name} must be > 0, got {value}; fix --{item.name}")
            if item.name in NON_NEGATIVE and isinstance(value, int | float) and value < 0:
                raise ConfigError(f"{item.name} must be >= 0, got {value}; fix --{item.name}")
        output_dir = getattr(config, "output_dir", None)
        if output_dir and Path(output_dir).exists() and not Path(output_dir).is_dir():
            raise ConfigError(f"output_dir {output_dir!r} is a file, not a folder; give --output_dir a folder path")
        resume = getattr(config, "resume_from_checkpoint", None)
        if isinstance(resume, str) and resume.lower() not in ("true", "last", "false", ""):
            if not Path(resume).is_dir():
                raise ConfigError(
                    f"resume_from_checkpoint {resume!r} does not exist; give a checkpoint-* folder, or 'true' for "
                    "the newest one in output_dir"
                )


def require_single_process(recipe: str) -> None:
    """Sampling and its files belong to one process: under a multi-process launch every process would sample
    the same problems and write the same files. vLLM spreads one process over GPUs (tensor parallelism)."""
    processes = launched_processes()[0]  # from the launcher's environment: a CPU launch may not form a group
    if processes > 1:
        raise ConfigError(
            f"{recipe} runs as one process (found {processes}): start it with `python recipes/{recipe}.py`, with "
            "sampling_backend: vllm to use several GPUs. For a large SFT, train on its dataset.jsonl with "
            "`accelerate launch recipes/sft.py --dataset_name <output_dir>/.../dataset.jsonl`."
        )
