"""Model and tokenizer loading shared by the recipes.

What this adds to `from_pretrained`: a model path that is neither a local folder nor reachable on the
Hub gives one error that says which it tried and how to fix it (instead of a stack of HTTP errors under
`HF_HUB_OFFLINE=1`), the tiny embedded model is built on demand for the demo configs, and the
tokenizer gets a pad token when it lacks one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)


class ModelNotFoundError(FileNotFoundError):
    """The model path is neither a local model folder nor a Hub model we can reach."""


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


def resolve_model_path(name_or_path: str | None, build_tiny_if_missing: bool = False) -> str:
    """Check that `name_or_path` can be loaded; build the tiny model there first when asked to.

    A local folder must hold a `config.json`. A Hub id (`org/name`) is passed through when the Hub can
    be reached or the model is in the local cache.
    """
    if not name_or_path:
        raise ModelNotFoundError(
            "no model given: set model_name_or_path in the YAML config or pass --model_name_or_path "
            "(a local folder saved with save_pretrained, or a Hub id such as Qwen/Qwen2.5-Math-1.5B)"
        )
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return str(path)
    if build_tiny_if_missing and not (path.exists() and any(path.iterdir())):
        from recipes.common.tiny_model import build_tiny_model

        logger.info("model folder %s does not exist: building the tiny embedded model there", path)
        return str(build_tiny_model(path))
    if path.exists():
        raise ModelNotFoundError(
            f"{name_or_path!r} exists but holds no config.json, so it is not a model saved with save_pretrained. "
            "Point model_name_or_path at the folder a trainer saved (its output_dir), or build the tiny model "
            "with: python scripts/make_tiny_model.py --output-dir " + str(path)
        )
    if not _looks_like_hub_id(name_or_path):
        raise ModelNotFoundError(
            f"model {name_or_path!r} not found: no such local folder, and it is not a Hub id of the form "
            "'org/name'. Give a folder saved with save_pretrained, a Hub id, or build the tiny model with "
            "'python scripts/make_tiny_model.py --output-dir DIR'."
        )
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(name_or_path, "config.json"), str):
            raise ModelNotFoundError(
                f"Hub model {name_or_path!r} is not in the local cache and HF_HUB_OFFLINE is set. Download it on a "
                "machine with Hub access (huggingface-cli download " + name_or_path + ") or give a local folder."
            )
    return name_or_path


def load_tokenizer(name_or_path: str, revision: str = "main", trust_remote_code: bool = False):
    from transformers import AutoTokenizer

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


def load_model(name_or_path: str, model_args, training_args, config_overrides: dict | None = None):
    """The model, with `config_overrides` (config attributes, e.g. a longer context) applied as it loads."""
    from transformers import AutoModelForCausalLM

    kwargs = {**model_init_kwargs(model_args, training_args), **(config_overrides or {})}
    return AutoModelForCausalLM.from_pretrained(name_or_path, **kwargs)
