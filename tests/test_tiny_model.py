"""The tiny embedded model: builds offline and deterministically, loads with the Auto classes, has a chat
template whose assistant turns end with EOS (inside the loss mask), and a lossless tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from recipes.common.model.tiny import TinyModelSpec, build_tiny_model, character_vocabulary
from tasks.synthetic import generate_rows
from tests.conftest import REPO


def test_cli_builds_a_model_that_loads_offline(tmp_path):
    out = tmp_path / "tiny"
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_tiny_model.py"), "--output-dir", str(out), "--seed", "3"],
        capture_output=True,
        text=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert tokenizer.eos_token == "<|eos|>" and tokenizer.pad_token == "<|pad|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id
    assert model.config.vocab_size == len(tokenizer)
    assert json.loads((out / "tiny_model.json").read_text())["seed"] == 3


def test_parameter_count_matches_the_spec(tiny_model, tiny_tokenizer):
    spec = TinyModelSpec()
    h, i, v = spec.hidden_size, spec.intermediate_size, len(tiny_tokenizer)
    # tied embedding + per layer (q, k, v, o; gate, up, down; two RMSNorms) + the final RMSNorm
    expected = v * h + spec.num_hidden_layers * (4 * h * h + 3 * h * i + 2 * h) + h
    assert sum(p.numel() for p in tiny_model.parameters()) == expected
    assert tiny_model.config.num_hidden_layers == spec.num_hidden_layers
    assert 0.3e6 < expected < 5e6


def test_build_is_deterministic_for_a_seed(tmp_path):
    def weights(path):
        model = AutoModelForCausalLM.from_pretrained(path)
        return {name: tensor.clone() for name, tensor in model.state_dict().items()}

    a = weights(build_tiny_model(tmp_path / "a", seed=1))
    b = weights(build_tiny_model(tmp_path / "b", seed=1))
    c = weights(build_tiny_model(tmp_path / "c", seed=2))
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert not all(torch.equal(a[name], c[name]) for name in a)
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()


def test_building_does_not_disturb_the_callers_random_state(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(tmp_path / "m", seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_chat_template_renders_turns_and_generation_prompt(tiny_tokenizer):
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
    ]
    rendered = tiny_tokenizer.apply_chat_template(messages, tokenize=False)
    assert rendered == "<|system|>S<|eos|><|user|>U<|eos|><|assistant|>A<|eos|>"
    prompt = tiny_tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt == "<|system|>S<|eos|><|user|>U<|eos|><|assistant|>"


def test_assistant_mask_covers_the_answer_and_its_eos(tiny_tokenizer):
    from trl.chat_template_utils import is_chat_template_stop_token_trained

    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ab"}]
    out = tiny_tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    masked = [token for token, keep in zip(out["input_ids"], out["assistant_masks"], strict=True) if keep]
    assert tiny_tokenizer.decode(masked) == "ab<|eos|>"
    assert masked[-1] == tiny_tokenizer.eos_token_id
    assert is_chat_template_stop_token_trained(tiny_tokenizer)


def test_every_synthetic_row_round_trips_through_the_tokenizer(tiny_tokenizer):
    rows = [row for split in ("train", "eval") for row in generate_rows(list(range(1, 13)), 100, seed=0, split=split)]
    for row in rows:
        text = tiny_tokenizer.apply_chat_template(
            [*row["prompt"], {"role": "assistant", "content": row["solution"]}], tokenize=False
        )
        ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tiny_tokenizer.unk_token_id not in ids, text
        assert tiny_tokenizer.decode(ids) == text


def test_every_printable_character_is_its_own_token(tiny_tokenizer):
    vocabulary = character_vocabulary()
    printable = "".join(chr(code) for code in range(32, 127)) + "\n"
    for char in printable:
        assert char in vocabulary
        ids = tiny_tokenizer(char, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tiny_tokenizer.decode(ids) == char
    assert tiny_tokenizer("é", add_special_tokens=False)["input_ids"] == [tiny_tokenizer.unk_token_id]


def test_assignment_keys_are_single_tokens_so_a_lookup_is_one_induction_step(tiny_tokenizer):
    tokens = tiny_tokenizer.convert_ids_to_tokens(tiny_tokenizer("v=7 t=v", add_special_tokens=False)["input_ids"])
    assert tokens == ["v=", "7", " ", "t=", "v"]
