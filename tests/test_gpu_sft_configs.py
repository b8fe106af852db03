"""Every GPU SFT config of recipes/configs/ trains (issue 35's "each GPU config builds"; the GRPO ones, which need
vLLM, are in tests/vllm_cpu/test_gpu_configs.py).

A GPU user's first run must not die on an option no CPU test set: each config runs through recipes/sft.py's own
command line with every option as written except the model (a 2-layer Qwen2 stand-in with SmolLM2's tokenizer and
Qwen2.5's chat template, which TRL ships: no Qwen tokenizer ships offline), the data
(a local file with the columns the config reads), the output folder, one optimizer step, and `use_cpu: true`,
which transformers asks for before it trains in bf16 on a CPU. The model it saves loads and ends its turns with
the config's `eos_token`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trl
import yaml

from recipes.common.command_line.config import CONFIG_DIR
from tests.conftest import SMOL_TOKENIZER, save_standin

# Qwen2.5's own chat template, as TRL ships it (TRL also knows its training version, with the {% generation %}
# markers that assistant_only_loss needs); SmolLM2's tokenizer has its <|im_start|> and <|im_end|> tokens
QWEN2_5_TEMPLATE = Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
GPU_SFT_CONFIGS = sorted(
    path
    for path in CONFIG_DIR.glob("*/*.yaml")
    if path.parent.name not in ("demo", "smollm2-135m", "data_filters") and path.stem.startswith("sft")
)


def stand_in_model(folder: Path) -> Path:
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(SMOL_TOKENIZER)
    tokenizer.chat_template = QWEN2_5_TEMPLATE.read_text()
    return save_standin(
        folder, tokenizer, Qwen2Config, Qwen2ForCausalLM, hidden_size=32, intermediate_size=64,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
    )  # fmt: skip


def rows_for(config: dict) -> list[dict]:
    """Rows with every column the config reads: the question and answer fields, the assistant_template's
    columns, or ready `messages` where the config builds no assistant turn of its own."""
    import re

    rows = []
    for index in range(8):
        row = {config["question_field"]: f"What is {index} + 2?", config["answer_field"]: str(index + 2)}
        template = config.get("assistant_template")
        if template:
            row |= {name: f"{index} + 2 = {index + 2}" for name in re.findall(r"\{(\w+)\}", template)}
        else:
            row["messages"] = [
                {"role": "user", "content": row[config["question_field"]]},
                {"role": "assistant", "content": f"{index} + 2 = \\boxed{{{index + 2}}}"},
            ]
        rows.append(row)
    return rows


def test_every_gpu_sft_config_is_found():
    names = {f"{path.parent.name}/{path.name}" for path in GPU_SFT_CONFIGS}
    assert {"qwen2.5-math-1.5b/sft_cold_start.yaml", "qwen2.5-7b/sft_distill.yaml"} <= names


@pytest.mark.parametrize("config", GPU_SFT_CONFIGS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_the_config_trains_a_step(config, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from recipes import sft

    raw = yaml.safe_load(config.read_text())
    model = stand_in_model(tmp_path / "model")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows_for(raw)))
    out = tmp_path / "out"
    argv = ["--config", str(config), "--model_name_or_path", str(model), "--dataset_name", str(data)]
    argv += ["--output_dir", str(out), "--use_cpu", "true", "--max_steps", "1", "--save_strategy", "no"]
    script_args, training_args, model_args = sft.make_parser().parse_args(argv)
    assert (training_args.bf16, training_args.max_length) == (raw["bf16"], raw["max_length"])  # as written
    sft.main(script_args, training_args, model_args)
    card = json.loads((out / "run_card.json").read_text())
    assert card["final_step"] == 1
    saved = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.eos_token == raw["eos_token"] and saved.config.eos_token_id == tokenizer.eos_token_id
