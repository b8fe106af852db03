"""Checks a recipe runs before any expensive work: how it was launched, and the whole config.

Why: a mistake found after the model loads and the first generation costs minutes on a 7B model, and a
launch that silently runs as one process (or as N independent trainings writing into one folder) costs a
whole run. Every check here ends in a `ConfigError` whose message names the option and the fix; the
command line turns it into one line and exit code 2 (recipes.common.command_line.config.run_recipe_cli).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import sys
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


RELAUNCHED = "RLVR_RELAUNCHED"  # set in a launch this module started again; it is not started a third time
MULTI_CPU_CONFIG = Path(__file__).resolve().parents[2] / "accelerate" / "multi_cpu.yaml"


def _launcher_processes() -> tuple[int | None, list[str]]:
    """(the `--num_processes` of the `accelerate launch` that started this process, the launcher's own options
    to keep), from its command line in /proc; (None, []) where that cannot be read."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            words = [word.decode(errors="replace") for word in handle.read().split(b"\0") if word]
    except OSError:
        return None, []
    if not any(word == "launch" or word.endswith("launch.py") or word.endswith(".launch") for word in words):
        return None, []
    count, keep = None, []
    for index, word in enumerate(words):
        name, _, value = word.partition("=")
        if name in ("--num_processes", "--num-processes"):
            value = value or (words[index + 1] if index + 1 < len(words) else "")
            count = int(value) if value.isdigit() else None
        if name in ("--main_process_port", "--main-process-port"):
            keep += ["--main_process_port", value or (words[index + 1] if index + 1 < len(words) else "0")]
    return count, keep


def _relaunch_on_the_cpu(argv: list[str]) -> None:
    """Start the run again as the launch that was meant: `--num_processes N` on a machine without a GPU (where
    accelerate's simple launcher starts one process), as N processes with recipes/accelerate/multi_cpu.yaml.
    The process image is replaced, so the outer launcher waits for it and reports its exit status."""
    count, keep = _launcher_processes()
    script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else None
    if not count or count < 2 or script is None or os.environ.get(RELAUNCHED):
        return
    logger.warning(
        "accelerate started one process for --num_processes %d (no GPU here): starting the run again as %d "
        "processes on the CPU (accelerate launch --config_file %s); give that config yourself to skip this",
        count, count, MULTI_CPU_CONFIG,
    )  # fmt: skip
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(MULTI_CPU_CONFIG)]
    command += ["--num_processes", str(count), *keep, script, *argv]
    environment = {key: value for key, value in os.environ.items() if key not in ("MASTER_ADDR", "MASTER_PORT")}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, command, {**environment, RELAUNCHED: "1"})


def check_launch(argv: list[str], gpu_available: bool | None = None, relaunch: bool = False) -> list[str]:
    """`argv`, with `--use_cpu true` added when several processes run without a GPU; a lost launch is started
    again as the one meant (`relaunch`: the real command line), else refused in one line.

    Without a GPU, processes started by torchrun only form a (gloo) process group when accelerate is told
    they run on the CPU; otherwise each trains alone and all write the same output_dir.
    """
    processes, started = launched_processes()
    if not started and relaunch:
        _relaunch_on_the_cpu(argv)  # returns only where it cannot
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


SCHEDULERS_WITHOUT_WARMUP = ("constant", "reduce_lr_on_plateau")  # transformers ignores warmup_steps for these


def warmup_steps_of(config) -> int:
    """The warm-up steps a config's scheduler will take, as transformers counts them: warmup_steps below 1 is a
    ratio of max_steps (transformers 5), and an older transformers' warmup_ratio counts when warmup_steps is 0."""
    warmup = getattr(config, "warmup_steps", 0) or 0
    if not warmup:
        warmup = getattr(config, "warmup_ratio", 0) or 0  # transformers 4
        return math.ceil(config.max_steps * warmup) if warmup else 0
    return int(warmup) if warmup >= 1 else math.ceil(config.max_steps * warmup)


def warmup_warning(config) -> str | None:
    """A warning when the linear warm-up takes more than half of a run of `max_steps` steps, else None.

    Why: a short run (`--max_steps 3` on a config made for 60) stays in warm-up throughout and trains at a
    fraction of the configured learning rate, which nothing else shows. The warm-up is left as configured:
    `--max_steps` may be a smoke test of the real run, whose schedule it should keep.
    """
    max_steps, learning_rate = getattr(config, "max_steps", None), getattr(config, "learning_rate", None)
    if not isinstance(max_steps, int) or max_steps <= 0 or not isinstance(learning_rate, int | float):
        return None
    scheduler = getattr(config, "lr_scheduler_type", None)
    if str(getattr(scheduler, "value", scheduler)) in SCHEDULERS_WITHOUT_WARMUP:
        return None
    warmup = warmup_steps_of(config)
    if 2 * warmup <= max_steps:
        return None
    suggested = f"--warmup_steps {max_steps // 10} (or 0)" if max_steps >= 10 else "--warmup_steps 0"
    shorter = f"pass {suggested} to train at the configured rate"
    if warmup >= max_steps:  # the rate at optimizer step k is learning_rate * k / warmup
        peak = learning_rate * (max_steps - 1) / warmup
        return (
            f"the run never leaves warm-up: warmup_steps {warmup} >= max_steps {max_steps}, so the learning rate "
            f"climbs from 0 and peaks at {peak:.3g} of the configured learning_rate {learning_rate:.3g}; {shorter}"
        )
    return (
        f"warm-up takes {warmup} of the run's {max_steps} steps (warmup_steps {warmup}, max_steps {max_steps}): "
        f"the learning rate reaches the configured {learning_rate:.3g} only at step {warmup + 1}; "
        f"if that is not intended, {shorter}"
    )


def validate_config(*configs) -> None:
    """Check every dataclass of a parsed recipe config: choices (TRL's included), signs, paths, and a dataclass's
    own `check_with(*configs)` where it reads another's options; warn of a run too short to leave its warm-up."""
    for config in configs:
        warning = warmup_warning(config)
        if warning and os.environ.get("RANK", "0") == "0":  # once per launch, not once per process
            logger.warning(warning)
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
            if item.name == "max_steps" and value == 0:  # the Trainer would run one step at learning rate 0
                raise ConfigError(
                    "max_steps 0 trains nothing; give --max_steps a positive number of steps, or -1 to train "
                    "for num_train_epochs"
                )
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
            _check_holds_a_checkpoint(resume, output_dir)
            _check_not_damaged(resume)
        _check_vllm_installed(config)
    for config in configs:  # a check that reads two of the dataclasses (grpo.py: the rewards and variance_rewards)
        check_with = getattr(config, "check_with", None)
        if callable(check_with):
            check_with(*configs)


def _check_vllm_installed(config) -> None:
    """vLLM named where it is not installed (`use_vllm: true`, which every GPU GRPO config sets, or a sampling
    mapping's `backend: vllm`): one line that says how to install it or how to do without (eval.sampler)."""
    from eval.sampler import VLLMUnavailableError, require_vllm
    from eval.sampling_options import SamplingOptions

    try:
        if getattr(config, "use_vllm", None) is True:
            require_vllm("use_vllm: true", "--use_vllm false (the recipe's own sampler)")
        for item in dataclasses.fields(config):
            value = getattr(config, item.name, None)
            if isinstance(value, SamplingOptions) and value.backend == "vllm":
                require_vllm(f"{item.name}: {{backend: vllm}}", f"--{item.name} '{{backend: transformers}}'")
    except VLLMUnavailableError as error:
        raise ConfigError(str(error)) from None


def require_single_process(recipe: str) -> None:
    """Sampling and its files belong to one process: under a multi-process launch every process would sample
    the same problems and write the same files. vLLM spreads one process over GPUs (tensor parallelism)."""
    processes = launched_processes()[0]  # from the launcher's environment: a CPU launch may not form a group
    if processes > 1:
        raise ConfigError(
            f"{recipe} runs as one process (found {processes}): start it with `python recipes/{recipe}.py`, with "
            "sampling: {backend: vllm} to use several GPUs. For a large SFT, train on its dataset.jsonl with "
            "`accelerate launch recipes/sft.py --dataset_name <output_dir>/.../dataset.jsonl`."
        )


def _check_holds_a_checkpoint(folder: str, output_dir: str | None) -> None:
    """A path given to resume from must be a checkpoint: a folder the Trainer wrote its state into. Why: a run's
    output_dir (or any other folder) given here ended in transformers' "Can't find a valid checkpoint" traceback
    after the model had loaded. One line naming what was looked for and the checkpoints that do exist."""
    from recipes.common.checkpoints.folders import TRAINER_STATE, complete_checkpoints

    if (Path(folder) / TRAINER_STATE).is_file():
        return
    places = dict.fromkeys(str(place) for place in (folder, output_dir) if place and Path(place).is_dir())
    found = [str(checkpoint) for place in places for checkpoint in complete_checkpoints(place)]
    there = (
        f"the complete checkpoints there: {', '.join(found[:5])}{' ...' if len(found) > 5 else ''}"
        if found
        else f"none was found in {' or '.join(places)}"
    )
    raise ConfigError(
        f"resume_from_checkpoint {folder!r} holds no checkpoint (looked for {TRAINER_STATE}, which the Trainer "
        f"writes last into each checkpoint-N folder); {there}. Give one of them, or 'true' for the newest in "
        "output_dir"
    )


def _check_not_damaged(checkpoint: str) -> None:
    """One line naming the damaged file and the newest checkpoint before it that reads to its end."""
    from recipes.common.checkpoints.folders import complete_checkpoints, damage

    problem = damage(checkpoint)
    if problem is None:
        return
    path = Path(checkpoint)
    earlier = [c for c in complete_checkpoints(path.parent, up_to=path) if c != path and damage(c) is None]
    fix = (
        f"resume from {earlier[0]} (--resume_from_checkpoint {earlier[0]}, or true, which skips damaged ones)"
        if earlier
        else "no earlier checkpoint of this run reads to its end: start afresh (leave out --resume_from_checkpoint)"
    )
    raise ConfigError(f"resume_from_checkpoint {checkpoint!r} is damaged: {problem}; {fix}")
