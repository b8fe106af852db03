"""Issue 57, item 7: one truth about the defaults that differ by machine. At af1faae `grpo.py --help` on a CPU
showed `gradient_checkpointing` and `dataloader_pin_memory` as True, where a CPU run turned the first off and
kept the second on, so that torch warned on every run ("'pin_memory' argument is set as true but no accelerator
is found"). recipes.common.command_line.config_defaults.WITHOUT_AN_ACCELERATOR is now the one list: the run applies it,
--help shows the parser's defaults after it, and docs/options.md's table is held to it here."""

from __future__ import annotations

import dataclasses
import importlib
import re
import warnings

import pytest
import torch

from recipes.common.command_line import config_defaults
from recipes.common.command_line.help import default_of
from tests.conftest import REPO

RECIPES = ("sft", "grpo", "rejection_sampling", "distill", "reward_model")
MACHINE_DEPENDENT = ("bf16", "gradient_checkpointing", "dataloader_pin_memory")
REQUIRED = {"distill": "teacher_model_name_or_path: teacher\n"}  # what a config of one's own cannot leave out


def parser_of(name: str):
    return importlib.import_module(f"recipes.{name}").make_parser()


def help_defaults(name: str, capsys, monkeypatch, accelerator: bool) -> dict[str, str]:
    """What `--help` gives as the default of each option of MACHINE_DEPENDENT, on a machine with or without an
    accelerator; from the recipe's own parser, in this process."""
    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: accelerator)
    with pytest.raises(SystemExit):
        parser_of(name).parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    return {option: re.search(rf"--{option} \[.*?\(default: (\w+)\)", text).group(1) for option in MACHINE_DEPENDENT}


def training_args(name: str, tmp_path, *flags: str):
    """The training config of a run of `name` with a config of one's own that sets only what it must."""
    path = tmp_path / "mine.yaml"
    path.write_text(f"output_dir: {tmp_path / 'out'}\n{REQUIRED.get(name, '')}")
    parsed = parser_of(name).parse_args(["--config", str(path), *flags])
    return next(args for args in parsed if hasattr(args, "dataloader_pin_memory"))


@pytest.mark.parametrize("name", RECIPES)
def test_help_on_a_cpu_shows_what_a_cpu_run_gets(name, capsys, monkeypatch, tmp_path):
    shown = help_defaults(name, capsys, monkeypatch, accelerator=False)
    assert shown == dict.fromkeys(MACHINE_DEPENDENT, "False")
    training = training_args(name, tmp_path)
    assert {option: str(getattr(training, option)) for option in MACHINE_DEPENDENT} == shown


def test_help_with_a_gpu_shows_the_gpu_defaults(capsys, monkeypatch):
    shown = help_defaults("grpo", capsys, monkeypatch, accelerator=True)
    # bf16: TRL's unset, read as true unless fp16 (a GPU run cannot be built here to compare: bf16 needs one)
    assert shown == {"bf16": "None", "gradient_checkpointing": "True", "dataloader_pin_memory": "True"}


class OneWeight(torch.nn.Module):
    """The smallest model a Trainer takes: the test is of the data loader, which any model gets."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, labels=None):
        return {"loss": (self.weight * input_ids).sum()}


def test_a_cpu_run_pins_no_memory_and_torch_does_not_warn(tmp_path, monkeypatch):
    import datasets
    from transformers import Trainer, default_data_collator

    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: False)
    training = training_args("sft", tmp_path, "--report_to", "none")
    assert training.dataloader_pin_memory is False
    rows = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]] * 4, "labels": [[1, 2, 3]] * 4})
    trainer = Trainer(model=OneWeight(), args=training, train_dataset=rows, data_collator=default_data_collator)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next(iter(trainer.get_train_dataloader()))
    assert not [str(warning.message) for warning in caught if "pin_memory" in str(warning.message)]


def test_what_the_user_sets_wins_on_a_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: False)
    assert training_args("sft", tmp_path, "--dataloader_pin_memory", "true").dataloader_pin_memory is True
    assert training_args("sft", tmp_path, "--dataloader-pin-memory=true").dataloader_pin_memory is True


def machine_table(text: str) -> dict[str, tuple[str, str]]:
    """docs/options.md's table under '## Defaults that differ by machine': option -> (on a GPU, without one)."""
    section = text.split("## Defaults that differ by machine", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| `")]
    return {cells[0].strip(" `"): (cells[1].strip(" `"), cells[2].strip(" `")) for cells in rows}


def test_the_docs_table_is_the_list_the_run_applies():
    documented = machine_table((REPO / "docs" / "options.md").read_text())
    applied = getattr(config_defaults, "WITHOUT_AN_ACCELERATOR", ())
    assert documented == {d.option: (str(d.on_a_gpu), str(d.without_accelerator)) for d in applied}
    assert set(documented) == set(MACHINE_DEPENDENT)


def test_the_table_parser_sees_a_stale_row():
    text = (REPO / "docs" / "options.md").read_text()
    stale = text.replace(
        "| `dataloader_pin_memory` | `True` | `False` |", "| `dataloader_pin_memory` | `True` | `True` |"
    )
    assert machine_table(stale) != machine_table(text)


@pytest.mark.parametrize("name", RECIPES)
def test_the_gpu_column_is_what_trls_configs_give(name):
    """TRL's configs read an unset bf16 as `not fp16` (trl.trainer.base_config)."""
    fields = [dataclasses.fields(kind) for kind in parser_of(name).dataclass_types]
    defaults = {field.name: default_of(field) for kind in fields for field in kind}
    applied = getattr(config_defaults, "WITHOUT_AN_ACCELERATOR", ())
    assert applied
    for default in applied:
        value = defaults[default.option]
        assert (not defaults["fp16"] if value is None and default.option == "bf16" else value) == default.on_a_gpu
