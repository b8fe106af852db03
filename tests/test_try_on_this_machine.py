"""`--try_on_this_machine true` (recipes/common/command_line/try_here.py): every GRPO and SFT config of recipes/configs/<model>/,
the GPU ones included, trains one step on this machine, offline, through the recipe's own command line.

Each swap is said in the log, and what the cluster will run is left as the YAML has it: the loss, clip-higher,
the rewards, dynamic sampling, LoRA. The stand-ins are built once per family into a cache shared by the module.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from pathlib import Path

import pytest
import yaml

from recipes.common.command_line import config as recipe_config
from recipes.common.command_line.config import CONFIG_DIR
from recipes.common.command_line.try_here import TRY_DATASETS, TRY_MAX_LENGTH_WITH_TOOLS, TRY_SIZES, try_on_this_machine
from tests.conftest import REPO

NOT_MODEL_FOLDERS = ("demo", "data_filters")


def recipe_of(path: Path) -> str | None:
    """sft for an SFT config, grpo for a GRPO one (it names a loss_type), None for the other stages'."""
    if path.stem.startswith("sft"):
        return "sft"
    return "grpo" if "loss_type" in yaml.safe_load(path.read_text()) else None


CONFIGS = sorted(
    path for path in CONFIG_DIR.glob("*/*.yaml") if path.parent.name not in NOT_MODEL_FOLDERS and recipe_of(path)
)


@pytest.fixture(scope="module", autouse=True)
def stand_in_cache(tmp_path_factory):
    """One stand-in per family for the whole module (this worker's own: no two processes write one folder)."""
    before = os.environ.get("RLVR_RECIPES_CACHE")
    os.environ["RLVR_RECIPES_CACHE"] = str(tmp_path_factory.mktemp("try-cache"))
    yield
    if before is None:
        os.environ.pop("RLVR_RECIPES_CACHE")
    else:
        os.environ["RLVR_RECIPES_CACHE"] = before


@pytest.fixture
def logged(monkeypatch, caplog):
    """The recipes' own logging setup left out, so that caplog keeps the lines the option says."""
    monkeypatch.setattr(recipe_config, "setup_logging", lambda: None)
    caplog.set_level(logging.INFO, logger="recipes.common.command_line.try_here")
    return caplog


@pytest.fixture
def fresh_clone(tmp_path, monkeypatch):
    """The working directory of a fresh clone, which CI always is: the configs' relative paths (artifacts/models/...,
    artifacts/demo-real/..., tests/data/...) are read from here, not from this checkout, where `make real-model` or
    `make demo-real` may have left a real model: that folder would be kept, and the test would train the real
    135 M model (a minute a config on 2 cores) instead of the stand-in, so what it runs would depend on the checkout."""
    root = tmp_path / "clone"
    root.mkdir()
    (root / "tests").symlink_to(REPO / "tests")  # the rows smollm2-135m/grpo_code.yaml names
    monkeypatch.chdir(root)


def expected_swaps(raw: dict) -> set[str]:
    """The options whose swap a config's YAML calls for on a machine without GPU, Hub or vLLM."""
    swaps = {"bf16"} if raw.get("bf16") else set()
    if not Path(raw["model_name_or_path"]).is_dir():
        swaps.add("model")
    if (TRY_DATASETS / f"{raw['dataset_name'].replace('/', '__')}.jsonl").is_file():
        swaps.add("dataset_name")
    if raw.get("dtype") == "bfloat16":
        swaps.add("dtype")
    if raw.get("use_vllm") and importlib.util.find_spec("vllm") is None:
        swaps.add("use_vllm")
    most = {**TRY_SIZES, **({"max_length": TRY_MAX_LENGTH_WITH_TOOLS} if raw.get("tools") else {})}
    return swaps | {name for name, limit in most.items() if name != "max_steps" and raw.get(name, 0) > limit}


def test_every_model_config_is_tried():
    names = {f"{path.parent.name}/{path.name}" for path in CONFIGS}
    assert {"qwen2.5-7b/dapo.yaml", "qwen2.5-7b/sft_distill.yaml", "qwen2.5-coder-1.5b/grpo_code.yaml"} <= names
    assert {"deepseek-r1-distill-qwen-1.5b/dapo.yaml", "smollm2-135m/dapo_lora.yaml"} <= names
    assert "smollm2-135m/eval.yaml" not in names


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_the_config_trains_a_step_here(config, tmp_path, logged, fresh_clone):
    raw = yaml.safe_load(config.read_text())
    recipe = importlib.import_module(f"recipes.{recipe_of(config)}")
    out = tmp_path / "out"
    argv = ["--config", str(config), "--try_on_this_machine", "true", "--max_steps", "1", "--output_dir", str(out)]
    recipe.make_parser().run(recipe.main, argv)

    card = json.loads((out / "run_card.json").read_text())
    assert card["final_step"] == 1
    said = {
        record.getMessage().split()[1]
        for record in logged.records
        if record.name == "recipes.common.command_line.try_here"
    }
    assert expected_swaps(raw) <= said, f"swaps not said: {expected_swaps(raw) - said}"
    script, training, model = (card["config"][part] for part in ("script", "training", "model"))
    for name in ("loss_type", "epsilon_high", "beta", "scale_rewards", "dynamic_sampling", "max_length"):
        if name in raw and name not in TRY_SIZES:
            assert training[name] == raw[name], name
    if "rewards" in raw:
        assert [reward["name"] for reward in script["rewards"]] == [reward["name"] for reward in raw["rewards"]]
        assert script["rewards"] == raw["rewards"]  # their options too: overlong's max_len as the cluster runs it
    assert (model["use_peft"], model["lora_r"]) == (raw.get("use_peft", False), raw.get("lora_r", model["lora_r"]))
    assert training["bf16"] is False and model["dtype"] in (None, "float32", "auto")


def test_a_local_model_and_the_flags_given_are_kept(tmp_path, tiny_model_dir, logged):
    """The option refuses nothing silently: a model folder (here the YAML's) and a flag the user gives stay."""
    from recipes import grpo

    raw = yaml.safe_load((CONFIG_DIR / "qwen2.5-math-1.5b" / "dapo.yaml").read_text())
    local = tmp_path / "dapo.yaml"
    local.write_text(yaml.safe_dump({**raw, "model_name_or_path": str(tiny_model_dir)}))
    argv = ["--config", str(local), "--try_on_this_machine", "--max_completion_length", "64", "--num_generations", "2"]
    script_args, training_args, model_args = grpo.make_parser().parse_args(argv)
    assert model_args.model_name_or_path == str(tiny_model_dir)
    assert (training_args.max_completion_length, training_args.num_generations) == (64, 2)
    assert training_args.output_dir == raw["output_dir"] + "-try"
    assert any("is a local folder: kept" in record.getMessage() for record in logged.records)


def test_nothing_changes_unless_asked():
    config = {"model_name_or_path": "Qwen/Qwen2.5-7B", "bf16": True, "use_vllm": True}
    from recipes import grpo

    argv = ["--max_steps", "1"]
    assert try_on_this_machine(config, argv, grpo.make_parser().dataclass_types, None) == argv
    assert config == {"model_name_or_path": "Qwen/Qwen2.5-7B", "bf16": True, "use_vllm": True}
