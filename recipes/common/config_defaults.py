"""What a config of the user's own gets for the options it leaves unset, beyond the dataclasses' own defaults.

Three corrections of TRL's and transformers' defaults, all applied to the YAML mapping before it is parsed, so that a value the
user gives (in the YAML or as a flag) always wins: on a machine without a GPU, bf16 and activation
recomputation off (TRL's configs default both on, for GPUs); DDP without `find_unused_parameters` (transformers
turns it on whenever recomputation is off, and every process of a launch then warns that it found none: the
recipes' models use every trainable parameter); and activation recomputation under transformers 5's name
whichever name was used.
"""

from __future__ import annotations

import dataclasses
import logging

logger = logging.getLogger(__name__)


def _field_names(dataclass_types: tuple) -> set[str]:
    return {field.name for kind in dataclass_types for field in dataclasses.fields(kind)}


def _given(name: str, config: dict, argv: list[str]) -> bool:
    return name in config or any(token == f"--{name}" or token.startswith(f"--{name}=") for token in argv)


def _accelerator_available() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return torch.cuda.is_available()


def device_defaults(config: dict, argv: list[str], dataclass_types: tuple) -> None:
    """On a machine without a GPU, what TRL's GPU defaults would force on a config of the user's own: bf16 (which
    transformers then refuses on a CPU, advising use_cpu, after which the run trains in bf16 all the same) and
    activation recomputation (slower, for memory a CPU run seldom lacks). Set to false when neither the YAML
    nor a flag sets them (bf16 also when `loss_dtype` is set, which decides it), and said in one line; a value the
    user gives always wins."""
    if "bf16" not in _field_names(dataclass_types) or _accelerator_available():
        return
    # loss_dtype (the GRPO config's) chooses the precision itself, bf16 included; forcing bf16 false here would
    # pre-empt its `auto`
    names = [] if _given("loss_dtype", config, argv) else ["bf16"]
    if not any(_given(name, config, argv) for name in ("gradient_checkpointing", "activation_checkpointing")):
        names.append("gradient_checkpointing")
    chosen = [name for name in names if not _given(name, config, argv)]
    for name in chosen:
        config[name] = False
    if chosen:
        logger.info(
            "no GPU here: %s false (TRL's defaults are for GPUs); set them in the config or as flags to choose",
            " and ".join(chosen),
        )


_CHECKPOINTING_RENAMES = (
    ("gradient_checkpointing", "activation_checkpointing"),
    ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
)


def checkpointing_by_its_new_name(config: dict, argv: list[str], dataclass_types: tuple) -> list[str]:
    """Activation recomputation under transformers 5's name, whichever name the YAML or the flags use.

    transformers 5 renamed `gradient_checkpointing*` to `activation_checkpointing*` and warns ("is deprecated")
    whenever the old name is set and the new one is not, which TRL's configs always do: they default
    `gradient_checkpointing` to True. Our YAMLs keep the old name (what TRL's documentation and every recipe in
    the field write), so it is moved to the new one here, and the trainer config's own default is given under
    the new name when neither is set. Nothing changes where the installed transformers has no new name.
    """
    training = next(
        (kind for kind in dataclass_types if "activation_checkpointing" in {f.name for f in dataclasses.fields(kind)}),
        None,
    )
    if training is None:
        return argv
    for old, new in _CHECKPOINTING_RENAMES:
        if old in config:
            config.setdefault(new, config.pop(old))
        argv = [
            f"--{new}{token[len(old) + 2 :]}" if token == f"--{old}" or token.startswith(f"--{old}=") else token
            for token in argv
        ]
    given = "activation_checkpointing" in config or any(
        token == "--activation_checkpointing" or token.startswith("--activation_checkpointing=") for token in argv
    )
    if not given:
        default = {f.name: f.default for f in dataclasses.fields(training)}.get("gradient_checkpointing")
        config["activation_checkpointing"] = bool(default) if default is not None else False
    return argv


def ddp_defaults(config: dict, argv: list[str], dataclass_types: tuple) -> None:
    """`ddp_find_unused_parameters` false where the config and the flags leave it unset (see the module's docstring)."""
    if "ddp_find_unused_parameters" in _field_names(dataclass_types) and not _given(
        "ddp_find_unused_parameters", config, argv
    ):
        config["ddp_find_unused_parameters"] = False
