"""recipes/sft.py: the EOS guarantee, a short training run that saves a loadable model with its run card,
the embedded default (no --config), and the errors a user meets first."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import ModelConfig, SFTConfig

from recipes import sft
from recipes.common.config import parse_recipe_args
from recipes.common.model import ModelNotFoundError, resolve_model_path
from tests.conftest import REPO


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(REPO / "recipes" / "sft.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=REPO,
    )


def test_eos_guarantee_accepts_our_template(tiny_tokenizer):
    sft.check_eos_guarantee(tiny_tokenizer)


def test_eos_guarantee_rejects_a_template_that_never_ends_the_turn_with_eos(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    # like a base model whose EOS is <|endoftext|> while its template closes turns with <|im_end|>
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|system|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    with pytest.raises(sft.EOSTemplateError, match="never stop"):
        sft.check_eos_guarantee(tokenizer)
    sft.check_eos_guarantee(tokenizer, eos_token="<|system|>")  # the config's eos_token option fixes it


def test_eos_guarantee_rejects_a_missing_template(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = None
    with pytest.raises(sft.EOSTemplateError, match="no chat template"):
        sft.check_eos_guarantee(tokenizer)


def test_a_short_run_trains_and_saves_a_loadable_model_with_its_run_card(tiny_model_dir, tmp_path):
    out = tmp_path / "sft"
    argv = [
        "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(out), "--max_steps", "6",
        "--dataset_num_rows", "16", "--save_strategy", "no", "--logging_steps", "2", "--learning_rate", "3e-3",
    ]  # fmt: skip
    script_args, training_args, model_args = parse_recipe_args(
        (sft.SFTScriptArguments, SFTConfig, ModelConfig), sft.DEFAULT_CONFIG, argv
    )
    assert training_args.bf16 is False and training_args.gradient_checkpointing is False  # from the demo YAML
    assert script_args.dataset_name == "synthetic:1-4"
    sft.main(script_args, training_args, model_args)

    trained = AutoModelForCausalLM.from_pretrained(out)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert any(
        not torch.equal(a, b) for a, b in zip(trained.state_dict().values(), base.state_dict().values(), strict=True)
    )
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.eos_token == "<|eos|>" and tokenizer.chat_template
    card = json.loads((out / "run_card.json").read_text())
    assert card["recipe"] == "sft" and card["config"]["training"]["max_steps"] == 6
    assert card["datasets"]["train"]["rows"] == 4 * 16
    assert card["versions"]["trl"].startswith("1.16")


def test_embedded_default_runs_with_no_config(tmp_path):
    model_dir = tmp_path / "fresh-tiny"  # does not exist: the demo config builds it
    result = run_cli(
        "--model_name_or_path", str(model_dir), "--output_dir", str(tmp_path / "out"), "--max_steps", "2",
        "--dataset_num_rows", "8", "--save_strategy", "no",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "embedded default" in result.stderr
    assert (model_dir / "config.json").is_file()
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_missing_model_path_gives_a_clear_error(tmp_path):
    result = run_cli("--model_name_or_path", str(tmp_path / "nope"), "--build_tiny_model", "false")
    assert result.returncode != 0
    assert "not found" in result.stderr and "make_tiny_model.py" in result.stderr
    assert "Traceback" not in result.stderr.splitlines()[-1]


def test_unknown_dataset_gives_a_clear_error(tiny_model_dir, tmp_path):
    result = run_cli(
        "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "no-such-org/no-such-set",
        "--output_dir", str(tmp_path / "x"),
    )  # fmt: skip
    assert result.returncode != 0
    assert "no-such-org/no-such-set" in result.stderr and "local .jsonl" in result.stderr


def test_missing_config_file_lists_the_available_ones():
    result = run_cli("--config", "recipes/configs/demo/nope.yaml")
    assert result.returncode != 0
    assert "not found" in result.stderr and "recipes/configs/demo/sft.yaml" in result.stderr


@pytest.mark.parametrize(
    "name, message",
    [("", "no model given"), ("./missing-dir", "not found"), ("a/b/c", "not found")],
)
def test_resolve_model_path_errors_say_what_to_do(name, message):
    with pytest.raises(ModelNotFoundError, match=message):
        resolve_model_path(name)


def test_uncached_hub_model_offline_is_explained(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="not in the local cache"):
        resolve_model_path("no-such-org/no-such-model")
