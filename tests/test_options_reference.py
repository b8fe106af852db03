"""Issue 40, item 9: a usable option reference. At db84883 `grpo.py --help` was 1,533 lines with no word on what
the recipe does and no --config, showed the embedded demo YAML's values as defaults, and README sent the
reader to docs/recipes.md, which had no list of options."""

from __future__ import annotations

import sys

import pytest

from recipes import grpo, sft
from recipes.common.command_line import config, config_defaults
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import options_reference  # noqa: E402


def test_the_option_reference_is_what_the_dataclasses_say(capsys, monkeypatch):
    """`python scripts/options_reference.py --check`, through its main() in this process."""
    monkeypatch.setattr(sys, "argv", ["options_reference.py", "--check"])
    assert options_reference.main() == 0, capsys.readouterr().out


def test_the_check_sees_a_field_the_reference_lacks(monkeypatch):
    text = (REPO / "docs" / "options.md").read_text()
    assert "| `dynamic_sampling` |" in text and "| `rewards` |" in text and "| `dataset_num_rows` |" in text
    stale = text.replace("| `dynamic_sampling` |", "| `dynamic_sampling_old` |")
    assert options_reference.ours_part(stale) != options_reference.ours_part(options_reference.render())


def help_text(recipe, capsys, monkeypatch) -> str:
    monkeypatch.setattr(config, "setup_logging", lambda: None)
    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: False)
    with pytest.raises(SystemExit):
        recipe.cli(["--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("recipe", [grpo, sft])
def test_help_starts_with_the_recipe_and_groups_ours_first(recipe, capsys, monkeypatch):
    text = help_text(recipe, capsys, monkeypatch)
    lines = text.splitlines()
    assert lines[0].endswith("[--config FILE.yaml] [--OPTION VALUE ...]")
    assert lines[2] == recipe.__doc__.strip().splitlines()[0]
    assert "--config FILE.yaml" in text and "docs/options.md" in text
    groups = lines[lines.index("options:") :]
    titles = [line for line in groups if line.endswith(":") and not line.startswith(" ")]
    assert titles[0] == "options:" and titles[1].startswith("this recipe's options")
    assert titles[-1].startswith("model options")


def test_help_shows_the_defaults_a_config_of_ones_own_gets(capsys, monkeypatch):
    text = help_text(grpo, capsys, monkeypatch)
    entry = text[text.index("  --dataset_num_rows") :].split("\n  --")[0]
    assert "(default: None)" in " ".join(entry.split())  # the demo YAML's 2000 is not yours
    bf16 = text[text.index("  --bf16 ") :].split("\n  --")[0]
    assert "(default: False)" in " ".join(bf16.split())  # on a machine without a GPU
