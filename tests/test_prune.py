"""recipes/stages/distill/prune.py: MLP-width pruning keeps the most active neurons and nothing else changes."""

from __future__ import annotations

import pytest
import torch


def _texts(tokenizer) -> list[str]:
    from tasks.synthetic import generate_rows

    rows = generate_rows([1, 2, 3], 8, seed=5)
    return [
        tokenizer.apply_chat_template(
            [*row["prompt"], {"role": "assistant", "content": row["solution"]}], tokenize=False
        )
        for row in rows
    ]


def test_neurons_that_never_fire_are_the_ones_cut_and_the_outputs_do_not_move(tiny_model_dir, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from recipes.stages.distill.prune import mlp_importance, prune_mlp_width

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    width = model.config.intermediate_size
    silent = torch.arange(0, width, 2)  # every other neuron: up_proj row zero, so its activation is exactly 0
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.up_proj.weight[silent] = 0.0
    texts = _texts(tiny_tokenizer)
    importance = mlp_importance(model, tiny_tokenizer, texts)
    assert all(float(scores[silent].abs().max()) == 0.0 for scores in importance)
    assert all(bool((scores[1::2] > 0).all()) for scores in importance)

    batch = tiny_tokenizer(texts[:4], return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        before = model(**batch).logits
    parameters = model.num_parameters()
    prune_mlp_width(model, tiny_tokenizer, texts, width // 2)
    with torch.no_grad():
        after = model(**batch).logits
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)  # only silent neurons went
    layers, hidden = model.config.num_hidden_layers, model.config.hidden_size
    assert parameters - model.num_parameters() == layers * 3 * hidden * (width // 2)
    assert model.config.intermediate_size == width // 2
    assert all(layer.mlp.down_proj.in_features == width // 2 for layer in model.model.layers)


def test_a_pruned_model_saves_and_loads_at_its_new_size(tiny_model_dir, tiny_tokenizer, tmp_path):
    from transformers import AutoModelForCausalLM

    from recipes.stages.distill.prune import prune_mlp_width

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prune_mlp_width(model, tiny_tokenizer, _texts(tiny_tokenizer), 64)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.config.intermediate_size == 64 and loaded.num_parameters() == model.num_parameters()


def test_bad_widths_and_architectures_are_refused(tiny_model_dir, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from recipes.stages.distill.prune import prune_mlp_width

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with pytest.raises(ValueError, match="between 1 and"):
        prune_mlp_width(model, tiny_tokenizer, ["x"], model.config.intermediate_size + 1)
    with pytest.raises(ValueError, match="Llama-family"):
        prune_mlp_width(torch.nn.Linear(2, 2), tiny_tokenizer, ["x"], 1)
