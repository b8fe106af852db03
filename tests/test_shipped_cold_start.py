"""The demo's cold start kept in the repository (recipes/assets/tiny-cold-start): a recipe's embedded default
starts from it in seconds, where it used to train it first (2000 SFT steps, 16 minutes on 2 cores) whatever
`--max_steps` said."""

from __future__ import annotations

import json
import logging

from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from recipes.common.model.loading import SHIPPED_COLD_START


def test_the_shipped_cold_start_is_the_tiny_model_trained(tiny_model_dir):
    """Same tokenizer and architecture as the tiny base that make_tiny_model.py builds today: a change to the
    tiny model that forgets to remake the shipped copy fails here (recipes/assets/README.md says how)."""
    built, shipped = AutoTokenizer.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(SHIPPED_COLD_START)
    assert shipped.get_vocab() == built.get_vocab() and shipped.chat_template == built.chat_template
    base, trained = AutoConfig.from_pretrained(tiny_model_dir), AutoConfig.from_pretrained(SHIPPED_COLD_START)
    for name in ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        assert getattr(trained, name) == getattr(base, name), name
    assert trained.use_cache is True  # saved for sampling
    card = json.loads((SHIPPED_COLD_START / "run_card.json").read_text())
    assert card["recipe"] == "sft"


def test_the_shipped_cold_start_solves_the_easy_levels():
    """What the demo's later stages need from it: levels 1-4 mostly solved, with EOS (greedy, unseen problems)."""
    from eval.runner import sample_and_score
    from eval.sampler import SamplingParams, TransformersSampler
    from tasks.synthetic import generate_rows

    rows = generate_rows([1, 2, 3, 4], 12, seed=0, split="eval")
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    sampler = TransformersSampler(model, AutoTokenizer.from_pretrained(SHIPPED_COLD_START), batch_size=64)
    results = sample_and_score(sampler, rows, SamplingParams(n=1, temperature=0.0, max_new_tokens=64), progress=False)
    solved = sum(result.pass_at(1) for result in results) / len(results)
    assert solved > 0.6, solved  # 0.9+ measured; a model that has not learned the lookup scores ~0.05


def test_the_embedded_default_of_grpo_starts_in_seconds(tmp_path, monkeypatch, capsys, caplog):
    """`python recipes/grpo.py --max_steps 1` on a fresh clone: the cold start is copied, not trained, and the
    log says so; the run is the one step asked for. Its command line (grpo.cli, what the script's __main__ calls)
    runs in this process, from an empty folder: a process of its own would add only the imports, and a recipe run
    by path is tested where the process is the point (test_library_noise.py, test_multiprocess.py)."""
    from recipes import grpo
    from recipes.common.command_line import config

    monkeypatch.setattr(config, "setup_logging", lambda: None)  # keep pytest's log handlers
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO)
    grpo.cli(["--max_steps", "1", "--save_strategy", "no"])
    said = "\n".join(record.getMessage() for record in caplog.records) + capsys.readouterr().err  # its stderr
    assert "shipped with the repository" in said and "SFTTrainer" not in said
    copied = tmp_path / "artifacts" / "demo" / "sft"
    assert (copied / "model.safetensors").read_bytes() == (SHIPPED_COLD_START / "model.safetensors").read_bytes()
    card = json.loads((tmp_path / "artifacts" / "demo" / "dapo" / "run_card.json").read_text())
    assert card["final_step"] == 1
