"""Issue 40, item 1: a config of the user's own on a CPU does not get TRL's GPU defaults. At db84883 a YAML
without `bf16: false` stopped with transformers' "Your setup doesn't support bf16/gpu", and with `use_cpu`, as
that message advised, trained in bf16 with activation recomputation on a CPU."""

from __future__ import annotations

import logging

import pytest

from recipes import grpo, sft
from recipes.common.command_line import config_defaults
from recipes.common.command_line.config import parse_recipe_args


def parse(recipe, tmp_path, yaml_text: str, *flags: str):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml_text + f"output_dir: {tmp_path / 'out'}\n")
    return parse_recipe_args(recipe.make_parser().dataclass_types, "unused.yaml", ["--config", str(path), *flags])


def checkpointing(training) -> bool:
    return bool(getattr(training, "activation_checkpointing", getattr(training, "gradient_checkpointing", False)))


@pytest.mark.parametrize("recipe", [grpo, sft])
def test_a_users_config_on_a_cpu_trains_in_fp32_without_recomputation(recipe, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: False)
    with caplog.at_level(logging.INFO, logger="recipes.common.command_line.config_defaults"):
        parsed = parse(recipe, tmp_path, "learning_rate: 1.0e-5\n")
    training = next(args for args in parsed if hasattr(args, "bf16"))
    assert training.bf16 is False and not checkpointing(training)
    assert "no GPU here: bf16, gradient_checkpointing and dataloader_pin_memory false" in caplog.text


def test_what_the_user_sets_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: False)
    parsed = parse(grpo, tmp_path, "gradient_checkpointing: true\n", "--bf16", "false")
    training = next(args for args in parsed if hasattr(args, "bf16"))
    assert training.bf16 is False and checkpointing(training)


@pytest.mark.parametrize(
    ("accelerator", "flags", "expected"),
    [(False, ["--gradient-checkpointing", "true"], True), (True, ["--no_gradient_checkpointing"], False)],
)
def test_every_spelling_of_the_old_name_wins(accelerator, flags, expected, tmp_path, monkeypatch):
    """transformers copies activation_checkpointing over gradient_checkpointing: at af1faae a spelling of the old
    name that was not moved to the new one (dashes, `--no_`) was lost to the machine's default."""
    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: accelerator)
    training = next(args for args in parse(sft, tmp_path, "bf16: false\n", *flags) if hasattr(args, "bf16"))
    assert checkpointing(training) is expected and training.gradient_checkpointing is expected


def test_with_a_gpu_the_defaults_are_trls(monkeypatch):
    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: True)
    config: dict = {}
    config_defaults.device_defaults(config, [], grpo.make_parser().dataclass_types)
    assert config == {}
