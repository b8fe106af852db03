"""Every GPU GRPO config of recipes/configs/ builds its trainer (issue 35, item 5), with vLLM as it asks for it.

A GPU user's first run must not die on an option no CPU test set. Each config is parsed by the recipe's own
command line with every option as written except the three a machine without the Hub cannot have: the model
(a stand-in of the config's family: a 2-layer Qwen2 with the tiny tokenizer, since no Qwen tokenizer ships
offline), the data (a local file with the columns the config reads) and the output folder; `use_cpu: true` is
added, which transformers asks for before it trains in bf16 on a CPU. Then the recipe
builds its trainer: the model in the config's dtype, the rewards, the monitor, and the colocated vLLM engine.
`vllm_tensor_parallel_size: 2` (the 7B config) needs two processes, one per shard: that config is built with 1,
and said so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from recipes.common.command_line.config import CONFIG_DIR
from recipes.common.model.loading import SHIPPED_COLD_START
from tests.conftest import save_standin

pytestmark = pytest.mark.vllm
GPU_GRPO_CONFIGS = sorted(
    path
    for path in CONFIG_DIR.glob("*/*.yaml")
    if path.parent.name not in ("demo", "smollm2-135m", "data_filters") and "use_vllm: true" in path.read_text()
)
MATH_ROW = {"problem": "What is 2 + 3?", "prompt": "What is 2 + 3?", "solution": "\\boxed{5}", "answer": "5"}
CODE_ROW = {
    "description": "Print the sum of two integers read from one line.", "name": "sum", "difficulty": 1,
    "private_tests": {"input": ["1 2\n"], "output": ["3\n"]},
}  # fmt: skip


def stand_in_model(folder: Path) -> Path:
    """A 2-layer Qwen2 (the family of every GPU config's model) with the tiny tokenizer, long enough a context for
    the configs' completion lengths; heads of 64 dimensions (vLLM's CPU attention has no kernel for 16)."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_COLD_START)
    return save_standin(
        folder, tokenizer, Qwen2Config, Qwen2ForCausalLM, hidden_size=128, intermediate_size=256,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
    )  # fmt: skip


def test_every_gpu_grpo_config_is_found():
    names = {f"{path.parent.name}/{path.name}" for path in GPU_GRPO_CONFIGS}
    assert {"qwen2.5-math-1.5b/dapo.yaml", "qwen2.5-7b/dapo.yaml", "qwen2.5-coder-1.5b/grpo_code.yaml"} <= names


@pytest.mark.parametrize("config", GPU_GRPO_CONFIGS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_the_config_builds_its_trainer(config, tmp_path):
    from recipes import grpo
    from recipes.stages.grpo.setup import build_trainer

    model = stand_in_model(tmp_path / "model")
    data = tmp_path / "data.jsonl"
    row = CODE_ROW if yaml.safe_load(config.read_text()).get("verifier") == "code" else MATH_ROW
    data.write_text("\n".join(json.dumps({**row, "name": f"p{i}"}) for i in range(64)) + "\n")
    argv = ["--config", str(config), "--model_name_or_path", str(model), "--dataset_name", str(data)]
    argv += ["--output_dir", str(tmp_path / "out"), "--use_cpu", "true"]  # bf16: true on a CPU asks for it
    if "vllm_tensor_parallel_size: 2" in config.read_text():
        argv += ["--vllm_tensor_parallel_size", "1"]  # two shards need two processes (see the module docstring)
    script_args, training_args, model_args = grpo.make_parser().parse_args(argv)
    built = build_trainer(script_args, training_args, model_args)
    trainer = built.trainer
    assert trainer.use_vllm and trainer.vllm_generation.mode == training_args.vllm_mode == "colocate"
    assert trainer.loss_type == training_args.loss_type and len(built.rows) == 64
    assert next(trainer.model.parameters()).dtype == getattr(torch, model_args.dtype)
    texts = trainer.vllm_generation.llm.generate(["What is 2 + 3?"], use_tqdm=False)  # the engine runs
    assert texts and texts[0].outputs
