"""What a config of the user's own gets for the options it leaves unset, beyond the dataclasses' own defaults.

Three corrections of TRL's and transformers' defaults, all applied to the YAML mapping before it is parsed, so that a value the
user gives (in the YAML or as a flag) always wins: on a machine without an accelerator, the options of
`WITHOUT_AN_ACCELERATOR` (bf16, activation recomputation and pinned memory off: TRL's and transformers'
defaults are for GPUs); DDP without `find_unused_parameters` (transformers turns it on whenever recomputation
is off, and every process of a launch then warns that it found none: the recipes' models use every trainable
parameter); and activation recomputation under transformers 5's name whichever name was used.

`WITHOUT_AN_ACCELERATOR` is the one list of what differs by machine: the run applies it here, `--help` shows its
values because it shows the parser's defaults after this, and docs/options.md's table is written from it
(recipes.common.command_line.help) and held to it by tests/test_machine_defaults.py.
"""

from __future__ import annotations

import dataclasses
import logging
import typing

logger = logging.getLogger(__name__)


class MachineDefault(typing.NamedTuple):
    """An option whose default differs on a machine without an accelerator (no CUDA, XPU or MPS device)."""

    option: str
    on_a_gpu: bool  # what TRL's training configs give it (bf16: unset, which TRL makes true unless fp16)
    without_accelerator: bool
    why: str
    chosen_by: tuple[str, ...] = ()  # other options that, when given, choose this one: it is then left alone


WITHOUT_AN_ACCELERATOR = (
    MachineDefault(
        "bf16", True, False,
        "TRL's configs leave it unset, which they read as true unless fp16; transformers refuses bf16 on a CPU, "
        "advising use_cpu, after which the run trains in bf16 all the same. A GRPO config's loss_dtype, where "
        "given, chooses the precision instead",
        chosen_by=("loss_dtype",),
    ),
    MachineDefault(
        "gradient_checkpointing", True, False,
        "recomputing activations is slower, for memory a CPU run seldom lacks",
        chosen_by=("activation_checkpointing",),
    ),
    MachineDefault(
        "dataloader_pin_memory", True, False,
        "pinned memory is for copies to an accelerator: without one torch pins nothing and warns on every run",
    ),
)  # fmt: skip


def _field_names(dataclass_types: tuple) -> set[str]:
    return {field.name for kind in dataclass_types for field in dataclasses.fields(kind)}


def flag_name(token: str) -> str | None:
    """`--dataloader-pin-memory=true` -> 'dataloader_pin_memory'; None for a token that is not a long flag."""
    if not token.startswith("--"):
        return None
    return token[2:].partition("=")[0].replace("-", "_")


def _given(name: str, config: dict, argv: list[str]) -> bool:
    """Whether the YAML or a flag sets `name`, in any spelling the parser takes (dashes, `--no_name`)."""
    return name in config or any(flag_name(token) in (name, f"no_{name}") for token in argv)


def _accelerator_available() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return torch.cuda.is_available()


def machine_defaults() -> tuple[MachineDefault, ...]:
    """The defaults this machine changes: `WITHOUT_AN_ACCELERATOR` where there is no accelerator, else none."""
    return () if _accelerator_available() else WITHOUT_AN_ACCELERATOR


def device_defaults(config: dict, argv: list[str], dataclass_types: tuple) -> None:
    """On a machine without an accelerator, `WITHOUT_AN_ACCELERATOR`'s values for the options that neither the
    YAML nor a flag sets (nor an option that chooses them), said in one line: a value the user gives, such as
    `--dataloader_pin_memory true`, always wins."""
    fields = _field_names(dataclass_types)
    chosen = []
    for default in machine_defaults():
        if default.option in fields and not any(
            _given(name, config, argv) for name in (default.option, *default.chosen_by)
        ):
            config[default.option] = default.without_accelerator
            chosen.append(default.option)
    if chosen:
        names = " and ".join([", ".join(chosen[:-1]), chosen[-1]] if len(chosen) > 1 else chosen)
        logger.info(
            "no GPU here: %s false (TRL's defaults are for GPUs); set them in the config or as flags to choose", names
        )


_CHECKPOINTING_RENAMES = (
    ("gradient_checkpointing", "activation_checkpointing"),
    ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
)


def _renamed(token: str, old: str, new: str) -> str:
    """A flag of `old` in any spelling the parser takes, as the flag of `new` (which has no `--no_` form)."""
    name = flag_name(token)
    if name == old:
        return f"--{new}{token[len(old) + 2 :]}"
    return f"--{new}=false" if name == f"no_{old}" else token


def checkpointing_by_its_new_name(config: dict, argv: list[str], dataclass_types: tuple) -> list[str]:
    """Activation recomputation under transformers 5's name, whichever name the YAML or the flags use.

    transformers 5 renamed `gradient_checkpointing*` to `activation_checkpointing*` and warns ("is deprecated")
    whenever the old name is set and the new one is not, which TRL's configs always do: they default
    `gradient_checkpointing` to True. Our YAMLs keep the old name (what TRL's documentation and every recipe in
    the field write), so it is moved to the new one here, and the trainer config's own default is given under
    the new name when neither is set. transformers then copies the new name's value to the old one, so a flag
    of the old name in a spelling left here (`--gradient-checkpointing`, `--no_gradient_checkpointing`) would
    be lost: every spelling is moved. The old name's default follows the new one's, as the run will, so that
    --help shows one value under both. Nothing changes where the installed transformers has no new name.
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
        argv = [_renamed(token, old, new) for token in argv]
    if not _given("activation_checkpointing", config, argv):
        default = {f.name: f.default for f in dataclasses.fields(training)}.get("gradient_checkpointing")
        config["activation_checkpointing"] = bool(default) if default is not None else False
    for old, new in _CHECKPOINTING_RENAMES:
        if new in config:
            config[old] = config[new]
    return argv


def ddp_defaults(config: dict, argv: list[str], dataclass_types: tuple) -> None:
    """`ddp_find_unused_parameters` false where the config and the flags leave it unset (see the module's docstring)."""
    if "ddp_find_unused_parameters" in _field_names(dataclass_types) and not _given(
        "ddp_find_unused_parameters", config, argv
    ):
        config["ddp_find_unused_parameters"] = False
