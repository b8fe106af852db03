"""What a real model brings that the tiny one does not, on a stand-in with SmolLM2-135M-Instruct's real tokenizer
and chat template (tests/conftest.py `smol_standin_dir`: random 2-layer Llama, 49k BPE vocabulary, a template with
its own system prompt and no {% generation %} markers, pad = EOS). Each test is a bug the real model showed:

1. assistant_only_loss with such a template failed deep inside TRL (rejection sampling: after all its sampling);
2. a LoRA adapter folder saved by sft.py was refused by the other recipes;
3. dynamic sampling and the monitor read a group's variance from the summed reward, so with a shaping reward
   on, groups whose answers were all wrong kept a "variance" and trained on length alone, silently;
4. an instruct model that writes "Answer: 5" unboxed needed the verifier's fallback exposed in eval;
and the embedded default's model is built only at its own path, never at a mistyped one.
"""

from __future__ import annotations

import json

import pytest
import torch
from trl import ModelConfig, SFTConfig

from basics.atomic_files import write_jsonl
from recipes import grpo, sft
from recipes import rejection_sampling as rs
from recipes.common import held_out_eval as held_out
from recipes.common.command_line.config import CONFIG_DIR, parse_recipe_args
from recipes.common.model.loading import ModelNotFoundError, adapter_base, resolve_model_path
from recipes.common.training.sft_step import LossMaskError, as_prompt_completion
from recipes.stages.rejection_sampling import rounds
from tasks.synthetic import generate_rows

SFT_SMALL = [
    "--max_steps", "2", "--per_device_train_batch_size", "4", "--dataset_num_rows", "4", "--save_strategy", "no",
    "--logging_steps", "1", "--max_length", "128", "--disable_tqdm", "true", "--demo_model_if_missing", "false",
]  # fmt: skip


def sft_args(model, out, *extra):
    argv = ["--model_name_or_path", str(model), "--output_dir", str(out), *SFT_SMALL, *extra]
    return sft.make_parser().parse_args(argv)


@pytest.fixture(scope="module")
def smol_adapter(smol_standin_dir, tmp_path_factory):
    """sft.py's default LoRA output on the stand-in: an adapter folder, not a model folder."""
    out = tmp_path_factory.mktemp("smol-lora") / "adapter"
    sft.main(*sft_args(smol_standin_dir, out, "--assistant_only_loss", "false", "--use_peft", "true", "--lora_r", "4"))
    return out


def test_assistant_only_loss_with_a_template_without_markers_fails_before_loading_anything(
    smol_standin_dir, tmp_path, monkeypatch
):
    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the template was checked")

    monkeypatch.setattr("recipes.common.training.sft_step.load_model", no_model)
    with pytest.raises(LossMaskError, match="assistant_only_loss: false"):
        sft.main(*sft_args(smol_standin_dir, tmp_path / "out", "--assistant_only_loss", "true"))


def test_rejection_sampling_checks_the_template_before_its_baseline_and_sampling(
    smol_standin_dir, tmp_path, monkeypatch
):
    def no_sampling(*args, **kwargs):
        raise AssertionError("sampling started before the template was checked")

    for module in (rounds, held_out):  # the round's sampling and the held-out evaluation
        monkeypatch.setattr(module, "make_trace_sampler", no_sampling)
    run = parse_recipe_args(
        (rs.RejectionSamplingArguments, SFTConfig, ModelConfig),
        rs.DEFAULT_CONFIG,
        ["--model_name_or_path", str(smol_standin_dir), "--output_dir", str(tmp_path / "rs"),
         "--assistant_only_loss", "true", "--dataset_num_rows", "2"],
    )  # fmt: skip
    with pytest.raises(LossMaskError):
        rs.main(*run)


def test_without_assistant_only_loss_the_loss_covers_the_answer_only(smol_standin_dir):
    """Prompt/completion rows: TRL's completion_only_loss masks system prompt and question, with any template."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    messages = [{"role": "user", "content": "What is 2+3?"}, {"role": "assistant", "content": "\\boxed{5}"}]
    args = SFTConfig(output_dir="unused", assistant_only_loss=False, report_to="none", use_cpu=True, bf16=False)
    rows = as_prompt_completion(Dataset.from_list([{"messages": messages}]), args)
    assert rows[0]["prompt"] == messages[:1] and rows[0]["completion"] == messages[1:]

    tokenizer = AutoTokenizer.from_pretrained(smol_standin_dir)
    trainer = SFTTrainer(model=str(smol_standin_dir), args=args, train_dataset=rows, processing_class=tokenizer)
    row = trainer.train_dataset[0]
    trained = [token for token, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100]
    assert tokenizer.decode(trained).startswith("\\boxed{5}<|im_end|>")  # the answer and its EOS, nothing else
    assert "SmolLM" not in tokenizer.decode(trained)  # the template's system prompt is not trained on


def test_an_sft_lora_adapter_folder_is_a_model_for_every_other_stage(smol_adapter, smol_standin_dir, tmp_path):
    assert adapter_base(smol_adapter) == str(smol_standin_dir)
    assert resolve_model_path(str(smol_adapter)) == str(smol_adapter)

    # GRPO starts from it (a fresh adapter on top is saved merged: an adapter records one base only)
    out = tmp_path / "grpo"
    argv = [
        "--model_name_or_path", str(smol_adapter), "--output_dir", str(out), "--max_steps", "1",
        "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "8",
        "--dataset_num_rows", "4", "--dataset_name", "synthetic:1-2", "--save_strategy", "steps", "--save_steps", "1",
        "--use_cpu", "true", "--disable_tqdm", "true", "--use_peft", "true", "--lora_r", "4", "--lora_alpha", "64",
        "--learning_rate", "0.05", "--dynamic_sampling", "false",
    ]  # fmt: skip
    grpo.main(*grpo.make_parser().parse_args(argv))
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()

    # its checkpoint (an adapter on the merged start) reloads, as eval loads it, into the model it saved: the
    # checkpoint names <out>/merged_start, not the first adapter's base (which would drop the SFT adapter)
    from transformers import AutoModelForCausalLM

    checkpoint = out / "checkpoint-1"
    assert adapter_base(checkpoint) == str(out / "merged_start")
    probe = torch.tensor([[1, 5, 9, 14, 3]])
    with torch.no_grad():
        reloaded = AutoModelForCausalLM.from_pretrained(checkpoint)(probe).logits
        final = AutoModelForCausalLM.from_pretrained(out)(probe).logits
        base_only = AutoModelForCausalLM.from_pretrained(smol_standin_dir)(probe).logits
    assert torch.allclose(reloaded, final, atol=1e-4)
    assert not torch.allclose(final, base_only, atol=1e-3)

    # eval.evaluate samples from it
    from eval import evaluate

    evaluate.main(
        ["--model", str(smol_adapter), "--dataset", "synthetic:1", "--num-rows", "2", "--n", "2", "--k", "1", "2",
         "--max-new-tokens", "8", "--output-dir", str(tmp_path / "eval"), "--backend", "transformers"]
    )  # fmt: skip
    summary = json.loads((tmp_path / "eval" / "synthetic_1" / "summary.json").read_text())
    assert summary["problems"] == 2


def test_a_rejection_sampling_round_runs_from_an_adapter_folder(smol_adapter, tmp_path):
    rows = [{**row, "answer": row["answer"]} for row in generate_rows([1], 3, seed=5)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    run = parse_recipe_args(
        (rs.RejectionSamplingArguments, SFTConfig, ModelConfig),
        rs.DEFAULT_CONFIG,
        ["--model_name_or_path", str(smol_adapter), "--output_dir", str(tmp_path / "rs"), "--assistant_only_loss",
         "false", "--dataset_name", str(tmp_path / "train.jsonl"), "--eval_dataset_name", str(tmp_path / "train.jsonl"),
         "--num_rounds", "1", "--sampling", "{n: 2, max_new_tokens: 8}",
         "--eval_samples_per_problem", "1", "--max_steps", "1", "--disable_tqdm", "true"],
    )  # fmt: skip
    rs.main(*run)  # the model it samples from is the adapter; a round that keeps nothing stops cleanly
    stats = json.loads((tmp_path / "rs" / "round_1" / "stats.json").read_text())
    assert "pass@1_before" in stats


def test_dynamic_sampling_and_the_monitor_read_variance_from_the_accuracy_reward(smol_standin_dir, tmp_path):
    """Golds no random model writes: accuracy is 0 everywhere, the repetition reward still varies by group."""
    rows = [{"id": f"q{i}", "prompt": [{"role": "user", "content": f"Say {i}."}], "answer": "98765432123"}
            for i in range(16)]  # fmt: skip
    write_jsonl(tmp_path / "never.jsonl", rows)
    out = tmp_path / "dapo"
    argv = [
        "--model_name_or_path", str(smol_standin_dir), "--output_dir", str(out), "--dataset_name",
        str(tmp_path / "never.jsonl"), "--max_steps", "2", "--num_generations", "4", "--per_device_train_batch_size",
        "8", "--max_completion_length", "12", "--logging_steps", "1", "--save_strategy", "no", "--use_cpu", "true",
        "--disable_tqdm", "true", "--dynamic_sampling_max_rounds", "1", "--monitor_patience", "2",
    ]  # fmt: skip
    import yaml

    config = yaml.safe_load((CONFIG_DIR / "demo" / "dapo.yaml").read_text())
    config["rewards"] = [{"name": "math_accuracy"}, {"name": "repetition", "ngram_size": 1}]
    (tmp_path / "dapo.yaml").write_text(yaml.safe_dump(config))
    script_args, training_args, model_args = parse_recipe_args(
        grpo.make_parser().dataclass_types, tmp_path / "dapo.yaml", argv
    )
    assert training_args.dynamic_sampling
    grpo.main(script_args, training_args, model_args)
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in logged if "dynamic_sampling/groups_generated" in record]
    assert steps and all(record["dynamic_sampling/groups_kept_with_variance"] == 0 for record in steps)
    assert all(record["dynamic_sampling/cap_hit"] == 1 for record in steps)
    assert any(record.get("rewards/repetition/std", 0) > 0 for record in logged)  # the shaping reward did vary
    card = json.loads((out / "run_card.json").read_text())
    assert "constant_accuracy" in {warning["kind"] for warning in card["monitor_warnings"]}


def test_eval_reads_an_unboxed_answer_only_when_asked():
    from eval import evaluate
    from rewards.verdicts import score_completions

    row = {"id": "r", "answer": "5", "verifier": "math"}
    text = "2 plus 3 makes 5.\nAnswer: 5"
    assert score_completions([row], [text])[0].correct is not True
    assert score_completions([row], [text], math_options={"fallbacks": True})[0].correct is True
    args = evaluate.parse_args(["--model", "m", "--dataset", "aime24", "--output-dir", "o", "--answer-fallbacks"])
    assert args.answer_fallbacks is True


@pytest.mark.parametrize("missing", ["artifacts/demo/sftt", "Qwen/Qwen2.5-0.5B-Instruct"])
def test_the_cold_start_is_made_only_at_the_demo_s_own_path(missing, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotFoundError):
        resolve_model_path(missing, if_missing="cold_start")
    assert not (tmp_path / missing).exists()
    assert resolve_model_path("artifacts/demo/sft", if_missing="cold_start") == "artifacts/demo/sft"
    assert (tmp_path / "artifacts/demo/sft/model.safetensors").is_file()
