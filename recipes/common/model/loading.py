"""Model and tokenizer loading shared by the recipes.

What this adds to `from_pretrained`: a model path that is neither a local folder nor reachable on the
Hub gives one error that says which it tried and how to fix it (instead of a stack of HTTP errors under
`HF_HUB_OFFLINE=1`), the embedded default's models are made on demand for the demo configs, and the
tokenizer gets a pad token when it lacks one.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tasks.hub import hub_problem

logger = logging.getLogger(__name__)


@dataclass
class DemoModelArguments:
    """Where a recipe's starting model comes from when its path is missing: the one option every recipe shares
    (each declared its own copy before). DEMO_MODEL says which demo model the recipe starts from: the untrained
    tiny model for SFT, the shipped cold start for the others (distillation: as its teacher)."""

    DEMO_MODEL: ClassVar[str] = "cold_start"

    demo_model_if_missing: bool = field(
        default=False,
        metadata={
            "help": "If the model the recipe starts from (distillation: the teacher) is missing and is the demo's own "
            "path for it (artifacts/tiny-base for sft.py, artifacts/demo/sft for the others), build the tiny model "
            "or copy the cold start shipped in recipes/assets/ there (any other missing path is an error)."
        },
    )

    def missing_model_fallback(self) -> str | None:
        """resolve_model_path's `if_missing` for this recipe: its demo model when the option is on, else None."""
        return self.DEMO_MODEL if self.demo_model_if_missing else None


class ModelNotFoundError(FileNotFoundError):
    """The model path is neither a local model folder nor a Hub model we can reach."""


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


# The embedded default's own model folders (relative to the working directory, as the demo configs name
# them): the only paths at which a missing model is built on the spot, and only when a config asks for it.
DEMO_MODEL_PATHS = {"tiny": "artifacts/tiny-base", "cold_start": "artifacts/demo/sft"}


def adapter_base(path: str | Path) -> str | None:
    """The base model of a LoRA adapter folder (from its adapter_config.json), or None for anything else."""
    config = Path(path) / "adapter_config.json"
    if not (Path(path).is_dir() and config.is_file() and not (Path(path) / "config.json").is_file()):
        return None
    base = json.loads(config.read_text()).get("base_model_name_or_path")
    if not base:
        raise ModelNotFoundError(f"{config} names no base_model_name_or_path, so the adapter cannot be loaded")
    return base


# The demo's cold start, trained once with `python recipes/sft.py` (its embedded default, 2000 steps) and kept
# in the repository (a few MB): a recipe's embedded default starts from it in seconds instead of training it
# first for 15-20 minutes on 2 cores, which no `--max_steps` on the command line would have shortened.
# Its run_card.json records the command, the config and the library versions; recipes/assets/README.md says how
# it was made and how to remake it.
SHIPPED_COLD_START = Path(__file__).resolve().parents[2] / "assets" / "tiny-cold-start"


def _build_demo_model(kind: str, path: Path) -> str:
    if kind == "tiny":
        from recipes.common.model.tiny import build_tiny_model

        logger.warning(
            "%s does not exist: it is the demo's own tiny path, so the tiny base is built now (seconds)", path
        )
        return str(build_tiny_model(path))
    if not (SHIPPED_COLD_START / "config.json").is_file():
        raise ModelNotFoundError(
            f"{path} does not exist and the shipped cold start {SHIPPED_COLD_START} is missing from this install: "
            f"train it with 'python recipes/sft.py --output_dir {path}' (15-20 minutes on 2 CPU cores)"
        )
    logger.warning(
        "%s does not exist: it is the demo's own cold-start path, so the cold start shipped with the repository "
        "is copied there (seconds). To train it yourself instead: python recipes/sft.py --output_dir %s "
        "(2000 steps, 15-20 minutes on 2 CPU cores)",
        path, path,
    )  # fmt: skip
    shutil.copytree(SHIPPED_COLD_START, path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("README.md"))
    return str(path)


def resolve_model_path(name_or_path: str | None, if_missing: str | None = None) -> str:
    """Check that `name_or_path` can be loaded: a model folder, a LoRA adapter folder, or a Hub id.

    A local model folder holds a `config.json`; an adapter folder (what a LoRA run saves) holds an
    `adapter_config.json` whose base model must itself resolve. A Hub id (`org/name`) is passed through
    when the Hub can be reached or the model is in the local cache. `if_missing` ("tiny" or "cold_start")
    builds the embedded default's model when the path is missing (the tiny base in seconds; the cold start
    copied from the one shipped in recipes/assets/), but only at that model's own default path
    (DEMO_MODEL_PATHS): a mistyped folder or a Hub id is an error.
    """
    if not name_or_path:
        raise ModelNotFoundError(
            "no model given: set model_name_or_path in the YAML config or pass --model_name_or_path "
            "(a local folder saved with save_pretrained, or a Hub id such as Qwen/Qwen2.5-Math-1.5B)"
        )
    if if_missing not in (None, *DEMO_MODEL_PATHS):
        raise ValueError(f"if_missing must be one of {sorted(DEMO_MODEL_PATHS)} or None, got {if_missing!r}")
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return str(path)
    base = adapter_base(path)
    if base is not None:
        try:
            resolve_model_path(base)
        except ModelNotFoundError as error:
            raise ModelNotFoundError(f"{name_or_path!r} is a LoRA adapter whose base model fails: {error}") from None
        return str(path)
    empty = not (path.exists() and any(path.iterdir()))
    if if_missing is not None and empty:
        own = Path(DEMO_MODEL_PATHS[if_missing])
        if path.resolve() == own.resolve():
            return _build_demo_model(if_missing, path)
        logger.info("not building a model at %s: only the demo's own path %s is built on demand", path, own)
    if path.exists():
        raise ModelNotFoundError(
            f"{name_or_path!r} exists but holds neither config.json nor adapter_config.json, so it is not a model "
            "saved with save_pretrained. Point model_name_or_path at the folder a trainer saved (its output_dir), or "
            "build the tiny model with: python scripts/make_tiny_model.py --output-dir " + str(path)
        )
    if not _looks_like_hub_id(name_or_path):
        raise ModelNotFoundError(
            f"model {name_or_path!r} not found: no such local folder, and it is not a Hub id of the form "
            "'org/name'. Give a folder saved with save_pretrained, a Hub id, or build the tiny model with "
            "'python scripts/make_tiny_model.py --output-dir DIR'."
        )
    problem = hub_problem(name_or_path, "model")
    if problem:
        raise ModelNotFoundError(problem)
    return name_or_path


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def load_tokenizer(name_or_path: str, revision: str = "main", trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    base = adapter_base(name_or_path)
    if base is not None and not any((Path(name_or_path) / name).is_file() for name in TOKENIZER_FILES):
        name_or_path = base  # an adapter saved without its tokenizer uses the base model's
    tokenizer = AutoTokenizer.from_pretrained(name_or_path, revision=revision, trust_remote_code=trust_remote_code)
    if tokenizer.pad_token is None:
        # Many base models ship without one; padding with EOS is what their authors do in generation.
        tokenizer.pad_token = tokenizer.eos_token
        logger.info("tokenizer has no pad token: using EOS %r", tokenizer.eos_token)
    return tokenizer


def model_init_kwargs(model_args, training_args) -> dict:
    """`from_pretrained` keyword arguments from TRL's `ModelConfig` (dtype, attention, quantisation)."""
    from trl import get_quantization_config

    kwargs = {
        "revision": model_args.model_revision,
        "trust_remote_code": getattr(model_args, "trust_remote_code", False),
        "attn_implementation": model_args.attn_implementation,
    }
    if model_args.dtype not in (None, "auto"):
        import torch

        kwargs["dtype"] = getattr(torch, model_args.dtype)
    elif model_args.dtype == "auto":
        kwargs["dtype"] = "auto"
    quantization = get_quantization_config(model_args)
    if quantization is not None:
        kwargs["quantization_config"] = quantization
        from accelerate import PartialState

        kwargs["device_map"] = {"": PartialState().local_process_index}  # a quantised model lives on one device
    if getattr(training_args, "gradient_checkpointing", False):
        kwargs["use_cache"] = False  # the KV cache is useless while training with checkpointing and warns
    return {key: value for key, value in kwargs.items() if value is not None}


MERGED_START = "merged_start"  # inside a run's output_dir: the plain model its LoRA checkpoints name as base


def load_model(
    name_or_path: str, model_args, training_args, config_overrides: dict | None = None, trained: bool = True
):
    """The model, with `config_overrides` (config attributes, e.g. a longer context) applied as it loads.

    A LoRA adapter folder loads as its base model with the adapter merged in: the plain model that the
    next stage trains (perhaps with a fresh adapter of its own) or samples from.

    When a fresh adapter will be trained on that merged model (`use_peft`), the merged model is also saved
    as `<output_dir>/merged_start/` and named as the new adapter's base. Without it every checkpoint-N
    adapter recorded the first adapter's base and reloaded (in eval, in a resumed run) as that base with the
    second adapter alone: a different model, silently, without the cold start it was trained on. A model
    that is not trained (a distillation teacher) passes `trained=False` and writes nothing there.
    """
    from transformers import AutoModelForCausalLM

    kwargs = {**model_init_kwargs(model_args, training_args), **(config_overrides or {})}
    base = adapter_base(name_or_path)
    if base is None:
        return AutoModelForCausalLM.from_pretrained(name_or_path, **kwargs)
    from peft import PeftModel

    logger.info("%s is a LoRA adapter: loading its base %s and merging the adapter into it", name_or_path, base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, **kwargs), name_or_path)
    model = model.merge_and_unload()
    if trained and getattr(model_args, "use_peft", False) and getattr(training_args, "output_dir", None):
        model.name_or_path = str(_save_merged_start(model, name_or_path, Path(training_args.output_dir)))
    return model


def _save_merged_start(model, adapter: str, output_dir: Path) -> Path:
    """Save the merged start of a LoRA-on-adapter run (the main process), for its checkpoints to name."""
    from accelerate import PartialState

    folder, state = output_dir / MERGED_START, PartialState()
    if state.is_main_process:  # written again on every start: a rerun may start from another adapter
        use_cache = model.config.use_cache
        save_model_for_inference(model, load_tokenizer(adapter), folder)
        model.config.use_cache = use_cache  # the saved copy samples with the cache; training keeps its setting
        logger.info("saved the merged start in %s: the base its LoRA checkpoints name", folder)
    state.wait_for_everyone()
    return folder


def with_kv_cache(generation_kwargs: dict | None) -> dict:
    """Generation keyword arguments with the KV cache on, unless they say otherwise.

    transformers 5 trainers switch the cache off for training (use_cache=False) and TRL's generation inside
    GRPO and on-policy distillation inherits that: every new token would recompute the whole sequence (10x
    slower here).
    """
    return {"use_cache": True, **(generation_kwargs or {})}


def save_trainer_for_inference(
    trainer, output_dir: str | Path, tokenizer=None, merge_lora: bool = False, started_from: str | None = None
) -> Path:
    """Save a trained model as the next stage loads it: with its KV cache on, a LoRA adapter merged when asked.

    Training turns the KV cache off (use_cache=False); a model saved that way samples 10x slower. With LoRA,
    the adapter alone is saved (its adapter_config.json names the base), unless `merge_lora` asks for a
    plain model: what vLLM loads, and what a model trained on top of another adapter must be (an adapter
    records one base, so a chain of adapters cannot be reloaded from the last one: when `started_from` is itself
    an adapter folder, the new adapter is merged whatever `merge_lora` says).
    """
    if not merge_lora and started_from is not None and adapter_base(started_from) is not None:
        merge_lora = True
        logger.info("%s is itself a LoRA adapter: the result is merged and saved as a plain model", started_from)
    model = trainer.model
    output_dir = str(output_dir)
    unwrapped = trainer.accelerator.unwrap_model(model)
    unwrapped.config.use_cache = True
    if hasattr(unwrapped, "get_base_model"):
        unwrapped.get_base_model().config.use_cache = True
    if merge_lora and hasattr(unwrapped, "merge_and_unload"):
        merged = unwrapped.merge_and_unload()
        if trainer.accelerator.is_main_process:
            save_model_for_inference(merged, tokenizer or trainer.processing_class, output_dir)
        logger.info("LoRA adapter merged into the base weights")
    else:
        trainer.save_model(output_dir)  # the model (or its adapter) and, as processing_class, the tokenizer
    return Path(output_dir)


def save_model_for_inference(model, tokenizer, output_dir: str | Path) -> Path:
    """Save a model built or changed outside a trainer (a merged adapter, a pruned student, a converted
    checkpoint) with its KV cache on, beside its tokenizer: the one place such a model is written."""
    model.config.use_cache = True
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return Path(output_dir)
