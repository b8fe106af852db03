"""`--try_on_this_machine true`: a recipe's config, a cluster's included, run for a few steps on this machine.

Why: a researcher should see a 7B config's whole path (its data schema, rewards, loss, dynamic sampling, LoRA,
monitor, saving) work on a laptop before paying for the cluster, and without this the first try fails three
times in a row (bf16 on a CPU, a Hub dataset no machine here reaches, vLLM not installed). The option changes
only what this machine cannot run, each change in one log line, and leaves everything else as the cluster will
run it:

* the model: kept where it names a local folder (a given `--model_name_or_path` wins), else a small stand-in
  of the config's family (recipes.common.model.tiny.save_stand_in: a random 2-layer model with SmolLM2's
  tokenizer and the family's chat template as TRL ships it), built once per family into a cache folder;
* the data: a Hub dataset is replaced by the handful of rows recipes/assets/try-datasets/ ships for it, with
  the columns the configs read (a name with no shipped rows is kept, and said);
* lengths, batch sizes, steps and rows cut to `TRY_SIZES` (num_generations kept dividing the batch, as TRL requires);
* without an accelerator: fp32 instead of bf16/fp16, use_cpu, DeepSpeed dropped, vLLM's tensor parallelism 1;
  anywhere: vLLM off where it is not installed, flash attention as sdpa where flash-attn is not installed;
* the output folder: `<output_dir>-try`, so that the cluster's run never resumes a stand-in's checkpoint.

A flag on the command line is the user's choice and is never changed, except a model or dataset flag that
names something this machine cannot load.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

OPTION = "try_on_this_machine"
ASSETS = Path(__file__).resolve().parents[2] / "assets"
TRY_DATASETS = ASSETS / "try-datasets"  # <hub owner>__<name>.jsonl: a few rows with the Hub set's columns

# What a 2-core CPU trains a step of in seconds: an upper bound for each, a config's smaller value is kept.
TRY_SIZES = {
    "max_completion_length": 32,
    "max_length": 256,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 1,
    "num_generations": 4,
    "max_steps": 2,
}
# Cut only where a config sets them: TRL's steps_per_generation follows the accumulation; unset, dataset_num_rows
# means all rows (a Hub set's rows are the shipped handful already)
ONLY_WHERE_SET = {"steps_per_generation": 1, "dataset_num_rows": 8}
# With tools the system turn lists their schemas (SmolLM2 in TRL's Qwen2.5 template: about 340 tokens), so a row cut
# to TRY_SIZES' 256 would lose its question and answer: a tool config keeps up to this many.
TRY_MAX_LENGTH_WITH_TOOLS = 512


@dataclass
class TryOnThisMachineArguments:
    """The option itself, a field of the recipes' own arguments (recipes/stages/*/arguments.py), so that --help,
    docs/options.md and the run card show it; what it changes is applied to the YAML before parsing
    (`try_on_this_machine`)."""

    try_on_this_machine: bool = field(
        default=False,
        metadata={
            "help": "Run this config, a cluster's included, for a few steps here: a stand-in of the model's family "
            "unless the model is a local folder, the rows shipped for a Hub dataset, lengths and batches cut down, "
            "fp32, no DeepSpeed and no vLLM where this machine lacks them; each change is one log line, all else "
            "runs as written (docs/recipes.md)."
        },
    )


@dataclass(frozen=True)
class Family:
    """A model family a config names: the architecture and chat template its stand-in gets."""

    name: str
    matches: tuple[str, ...]  # lower-case parts of a model name or config folder that name the family
    architecture: str  # transformers' config and model classes, without their suffixes
    chat_template: str | None  # one of TRL's shipped templates (trl/chat_templates/); None: SmolLM2's own
    special_tokens: tuple[tuple[str, str], ...] = ()  # (bos, eos) the template writes, added to the tokenizer


FAMILIES = (
    Family(
        "deepseek-r1-distill-qwen", ("deepseek-r1-distill",), "Qwen2", "deepseek_r1_distill.jinja",
        (("bos_token", "<｜begin▁of▁sentence｜>"), ("eos_token", "<｜end▁of▁sentence｜>")),
    ),
    Family("qwen2.5", ("qwen",), "Qwen2", "qwen2_5.jinja"),
    Family("smollm2", ("smollm", "llama"), "Llama", None),
)  # fmt: skip
STAND_IN_SIZES = {
    "hidden_size": 128,  # heads of 64 dimensions: vLLM's CPU attention has no kernel for smaller ones
    "intermediate_size": 256,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 4096,
}


def _flag(argv: list[str], name: str) -> tuple[int, int, str | None] | None:
    """(start, end, value) of `--name VALUE`, `--name=VALUE` or a bare `--name` (value None) in argv; else None."""
    from recipes.common.command_line.config_defaults import flag_name

    for index, token in enumerate(argv):
        if flag_name(token) != name:
            continue
        _, equals, inline = token.partition("=")
        if equals:
            return index, index + 1, inline
        following = argv[index + 1] if index + 1 < len(argv) else None
        if following is None or following.startswith("--"):
            return index, index + 1, None
        return index, index + 2, following
    return None


def asked_to_try(config: dict, argv: list[str]) -> bool:
    """Whether the command line (`--try_on_this_machine [true]`) or else the YAML asks for a try."""
    from basics.option_values import is_yes

    given = _flag(argv, OPTION)
    if given is None:
        return is_yes(config.get(OPTION, False))
    return given[2] is None or is_yes(given[2])


def cache_dir() -> Path:
    """Where stand-ins are built once and reused: $RLVR_RECIPES_CACHE, else ~/.cache/rlvr-recipes."""
    return Path(os.environ.get("RLVR_RECIPES_CACHE") or Path.home() / ".cache" / "rlvr-recipes")


def family_of(model: str | None, config_path: Path | None) -> Family | None:
    """The family a model name names, else the one the config's folder names (recipes/configs/<model>/)."""
    for text in (model or "", config_path.parent.name if config_path else ""):
        for family in FAMILIES:
            if any(part in text.lower() for part in family.matches):
                return family
    return None


def stand_in(family: Family) -> Path:
    """The family's stand-in model folder, built on first use (about a second) and reused after."""
    import transformers
    from transformers import AutoTokenizer

    from basics.atomic_files import write_atomic
    from recipes.common.model.tiny import SMOLLM2_TOKENIZER, save_stand_in

    target = cache_dir() / "stand-ins" / f"{family.name}-h{STAND_IN_SIZES['hidden_size']}"
    if (target / ".built").is_file():
        return target
    tokenizer = AutoTokenizer.from_pretrained(SMOLLM2_TOKENIZER)
    if family.chat_template:
        import trl

        tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / family.chat_template).read_text()
    if family.special_tokens:
        tokenizer.add_special_tokens(dict(family.special_tokens))
        tokenizer.pad_token = tokenizer.eos_token
    config_class = getattr(transformers, f"{family.architecture}Config")
    model_class = getattr(transformers, f"{family.architecture}ForCausalLM")
    save_stand_in(target, tokenizer, config_class, model_class, **STAND_IN_SIZES)
    write_atomic(target / ".built", f"{family.name}\n")
    return target


def _say(option: str, old, new, why: str) -> None:
    logger.info("%s: %s %s -> %s (%s)", OPTION, option, old, new, why)


def _defaults(dataclass_types: tuple) -> dict:
    from recipes.common.command_line.help import default_of

    return {item.name: default_of(item) for kind in dataclass_types for item in dataclasses.fields(kind)}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def try_on_this_machine(config: dict, argv: list[str], dataclass_types: tuple, config_path: Path | None) -> list[str]:
    """Where the option is asked for, the YAML mapping changed as the module's docstring says and each change
    logged; returns argv without the model or dataset flag it replaced. Else config and argv as they were."""
    from recipes.common.command_line.config_defaults import machine_defaults

    defaults = _defaults(dataclass_types)
    if OPTION not in defaults or {"-h", "--help"} & set(argv) or not asked_to_try(config, argv):
        return argv
    without_accelerator = bool(machine_defaults())
    argv = _model(config, argv, config_path)
    argv = _dataset(config, argv)
    _sizes(config, argv, defaults)
    _machine(config, argv, defaults, without_accelerator)
    if "output_dir" in defaults and _flag(argv, "output_dir") is None and config.get("output_dir"):
        old = str(config["output_dir"]).rstrip("/")
        config["output_dir"] = f"{old}-try"
        _say("output_dir", old, config["output_dir"], "the cluster's run must never resume a stand-in's checkpoint")
    return argv


def _without(argv: list[str], given) -> list[str]:
    return argv if given is None else argv[: given[0]] + argv[given[1] :]


def _model(config: dict, argv: list[str], config_path: Path | None) -> list[str]:
    given = _flag(argv, "model_name_or_path")
    model = given[2] if given else config.get("model_name_or_path")
    if model and Path(str(model)).expanduser().is_dir():
        logger.info("%s: model %s is a local folder: kept", OPTION, model)
        return argv
    if config.get("demo_model_if_missing"):  # the demo's own model, built or copied where it is missing
        return argv
    family = family_of(model, config_path)
    why = f"not a local folder; a random 2-layer {family.architecture if family else 'Llama'}"
    if family is None:
        family = FAMILIES[-1]
        why += " (the family is not recognised: SmolLM2's)"
    else:
        template = family.chat_template.removesuffix(".jinja") if family.chat_template else "SmolLM2's own"
        why += f" with SmolLM2's tokenizer and the {template} chat template"
    config["model_name_or_path"] = str(stand_in(family))
    _say("model", model, config["model_name_or_path"], why)
    return _without(argv, given)


def _dataset(config: dict, argv: list[str]) -> list[str]:
    from tasks.synthetic import is_synthetic_name

    given = _flag(argv, "dataset_name")
    name = given[2] if given else config.get("dataset_name")
    if not name or is_synthetic_name(name) or Path(name).expanduser().exists():
        return argv
    rows = TRY_DATASETS / f"{name.replace('/', '__')}.jsonl"
    if not rows.is_file():
        shipped = ", ".join(sorted(path.stem.replace("__", "/") for path in TRY_DATASETS.glob("*.jsonl")))
        logger.warning("%s: no rows ship for dataset %s (only for %s): give a local file", OPTION, name, shipped)
        return argv
    count = sum(1 for line in rows.read_text().splitlines() if line.strip())
    config["dataset_name"] = str(rows)
    _say("dataset_name", name, rows, f"a Hub dataset; {count} rows with its columns, shipped with the recipes")
    return _without(argv, given)


def _sizes(config: dict, argv: list[str], defaults: dict) -> None:
    for name, most in TRY_SIZES.items():
        if name not in defaults or _flag(argv, name) is not None:
            continue
        if name == "max_length" and config.get("tools"):
            most = TRY_MAX_LENGTH_WITH_TOOLS
        value = config.get(name, defaults[name])
        if name == "max_steps" and (value is None or value < 0):
            value = None  # "train for the epochs": a try trains steps
        if value is None or value > most:
            config[name] = most
            _say(name, value, most, "what a stand-in on this machine trains in seconds")
    for name, most in ONLY_WHERE_SET.items():
        if name in config and _flag(argv, name) is None and config[name] > most:
            _say(name, config[name], most, "what a stand-in on this machine trains in seconds")
            config[name] = most
    generations = config.get("num_generations", defaults.get("num_generations"))
    batch = config.get("per_device_train_batch_size", defaults.get("per_device_train_batch_size"))
    if generations and batch and batch % generations and _flag(argv, "per_device_train_batch_size") is None:
        config["per_device_train_batch_size"] = generations
        _say("per_device_train_batch_size", batch, generations, "num_generations must divide the batch (TRL)")


def _machine(config: dict, argv: list[str], defaults: dict, without_accelerator: bool) -> None:
    from eval.sampler import vllm_available

    def change(name: str, new, why: str, when) -> None:
        old = config.get(name, defaults.get(name))
        if name in defaults and _flag(argv, name) is None and when(old):
            config[name] = new
            _say(name, old, new, why)

    if without_accelerator:
        change("bf16", False, "no accelerator here: fp32", lambda old: old is not False)
        change("fp16", False, "no accelerator here: fp32", lambda old: bool(old))
        change("dtype", "float32", "no accelerator here: fp32", lambda old: old in ("bfloat16", "float16"))
        change("use_cpu", True, "no accelerator here", lambda old: not old)
        change(
            "deepspeed",
            None,
            "a DeepSpeed JSON's GPU settings; for ZeRO on this CPU, launch with "
            "recipes/accelerate/zero2.yaml or zero3.yaml and --mixed_precision no",
            lambda old: bool(old),
        )
        change("vllm_tensor_parallel_size", 1, "one process here", lambda old: (old or 1) > 1)
    if not vllm_available():
        change("use_vllm", False, "vLLM is not installed here: transformers generates", lambda old: old is True)
    if not _installed("flash_attn"):
        change("attn_implementation", "sdpa", "flash-attn is not installed here", lambda old: "flash" in str(old))
