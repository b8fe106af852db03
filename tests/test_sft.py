"""recipes/sft.py: the EOS guarantee, a short training run that saves a loadable model with its run card,
the embedded default (no --config), and the errors a user meets first."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import ModelConfig, SFTConfig

from recipes import sft
from recipes.common.command_line import config as command_line_config
from recipes.common.command_line.config import parse_recipe_args
from recipes.common.model.loading import ModelNotFoundError, resolve_model_path
from recipes.common.training.sft_step import EOSTemplateError, check_eos_guarantee
from tests.conftest import REPO


def run_cli(capsys, monkeypatch, *args: str, cwd=REPO) -> tuple[int, str]:
    """`python recipes/sft.py ARGS` from `cwd`, run in this process through the recipe's own command line (sft.cli,
    what the script's __main__ calls): its exit code and what it wrote to stderr. A process of its own would only
    add the imports (seconds each). A recipe's script run by path, in a process of its own, is tested where that is
    the point: test_user_errors.py (a mistake: one line, exit code 2), test_library_noise.py, test_readme_example.py."""
    monkeypatch.setattr(command_line_config, "setup_logging", lambda: None)  # keep pytest's log handlers
    monkeypatch.chdir(cwd)
    try:
        sft.cli(list(args))
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err


def test_eos_guarantee_accepts_our_template(tiny_tokenizer):
    check_eos_guarantee(tiny_tokenizer)


def test_eos_guarantee_rejects_a_template_that_never_ends_the_turn_with_eos(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    # like a base model whose EOS is <|endoftext|> while its template closes turns with <|im_end|>
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|system|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    with pytest.raises(EOSTemplateError, match="never stop"):
        check_eos_guarantee(tokenizer)
    check_eos_guarantee(tokenizer, eos_token="<|system|>")  # the config's eos_token option fixes it


def test_eos_guarantee_rejects_a_missing_template(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = None
    with pytest.raises(EOSTemplateError, match="no chat template"):
        check_eos_guarantee(tokenizer)


def test_a_short_run_trains_and_saves_a_loadable_model_with_its_run_card(tiny_model_dir, tmp_path):
    out = tmp_path / "sft"
    argv = [
        "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(out), "--max_steps", "6",
        "--dataset_num_rows", "16", "--save_strategy", "no", "--logging_steps", "2", "--learning_rate", "3e-3",
    ]  # fmt: skip
    script_args, training_args, model_args = sft.make_parser().parse_args(argv)
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


def test_embedded_default_runs_with_no_config(tmp_path, capsys, monkeypatch, caplog):
    """A fresh clone: the demo config's own model path (artifacts/tiny-base) does not exist, and is built."""
    caplog.set_level(logging.INFO)
    code, stderr = run_cli(
        capsys, monkeypatch,
        "--output_dir", str(tmp_path / "out"), "--max_steps", "2", "--dataset_num_rows", "8", "--save_strategy", "no",
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, stderr[-3000:]
    logged = [record.getMessage() for record in caplog.records]  # the log lines the script writes to stderr
    assert any("embedded default" in line for line in logged)
    assert any("demo's own tiny path" in line for line in logged)  # one line says what is built, before it is
    assert (tmp_path / "artifacts" / "tiny-base" / "config.json").is_file()
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_a_mistyped_model_path_is_an_error_not_a_build(tmp_path, capsys, monkeypatch):
    """demo_model_if_missing: true (the demo config) builds only at artifacts/tiny-base, never at another missing path."""
    argv = ("--model_name_or_path", "artifacts/tiny-bsae", "--output_dir", str(tmp_path / "out"))
    code, stderr = run_cli(capsys, monkeypatch, *argv, cwd=tmp_path)
    assert code != 0
    assert "tiny-bsae" in stderr.splitlines()[-1]
    assert not (tmp_path / "artifacts" / "tiny-bsae").exists()


def test_missing_model_path_gives_a_clear_error(tmp_path, capsys, monkeypatch):
    code, stderr = run_cli(
        capsys, monkeypatch, "--model_name_or_path", str(tmp_path / "nope"), "--demo_model_if_missing", "false"
    )
    assert code != 0
    assert "not found" in stderr and "make_tiny_model.py" in stderr
    assert "Traceback" not in stderr.splitlines()[-1]


def test_unknown_dataset_gives_a_clear_error(tiny_model_dir, tmp_path, capsys, monkeypatch):
    code, stderr = run_cli(
        capsys, monkeypatch,
        "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "no-such-org/no-such-set",
        "--output_dir", str(tmp_path / "x"),
    )  # fmt: skip
    assert code != 0
    assert "no-such-org/no-such-set" in stderr and "local .jsonl" in stderr


def test_missing_config_file_lists_the_available_ones(capsys, monkeypatch):
    code, stderr = run_cli(capsys, monkeypatch, "--config", "recipes/configs/demo/nope.yaml")
    assert code != 0
    assert "not found" in stderr and "recipes/configs/demo/sft.yaml" in stderr


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


# ---------------------------------------------------------------- what the cold start achieves


def test_cold_start_lifts_pass_at_1_from_zero_and_the_model_stops_with_eos(tiny_model_dir, trained_tiny_model_dir):
    """The shared 300-step fixture (150 problems x 8 samples) against the untrained model (x 1: it never answers)."""
    from eval.runner import sample_and_score
    from eval.sampler import SamplingParams, TransformersSampler
    from tasks.synthetic import generate_rows

    rows = generate_rows([1, 2, 3], 50, seed=0, split="eval")  # levels it was trained on, problems it never saw
    measured = {}
    for name, path, n in (("base", tiny_model_dir, 1), ("sft", trained_tiny_model_dir, 8)):
        model = AutoModelForCausalLM.from_pretrained(path)
        assert model.config.use_cache is True  # saved for generation
        sampler = TransformersSampler(model, AutoTokenizer.from_pretrained(path), batch_size=256)
        params = SamplingParams(n=n, temperature=1.0, max_new_tokens=48, seed=0)
        results = sample_and_score(sampler, rows, params, progress=False)
        samples = [sample for result in results for sample in result.samples]
        measured[name] = {
            "pass@1": sum(result.pass_at(1) for result in results) / len(results),
            "stop": sum(sample["finish_reason"] == "stop" for sample in samples) / len(samples),
        }
    assert measured["base"]["pass@1"] == 0.0, measured  # an untrained model never writes the answer
    assert measured["sft"]["pass@1"] > 0.01, measured  # about 0.026 measured (the format; the lookup comes later)
    assert measured["sft"]["stop"] > 0.99, measured  # every answer ends with EOS well within 48 tokens
    assert measured["base"]["stop"] < 0.5, measured


def short_run(model_dir, out, *extra: str):
    argv = [
        "--model_name_or_path", str(model_dir), "--output_dir", str(out), "--max_steps", "3",
        "--dataset_num_rows", "16", "--save_strategy", "no", "--logging_steps", "1", *extra,
    ]  # fmt: skip
    return sft.make_parser().parse_args(argv)


def test_packing_trains_on_packed_rows(tiny_model_dir, tmp_path):
    script_args, training_args, model_args = short_run(tiny_model_dir, tmp_path / "packed", "--packing", "true")
    assert training_args.packing is True
    out = sft.main(script_args, training_args, model_args)
    card = json.loads((out / "run_card.json").read_text())
    assert card["config"]["training"]["packing"] is True and card["final_step"] == 3
    AutoModelForCausalLM.from_pretrained(out)


@pytest.mark.parametrize("merge", [False, True])
def test_lora_saves_an_adapter_or_a_merged_model(tiny_model_dir, tmp_path, merge):
    out = tmp_path / f"lora-{merge}"
    lora = ["--use_peft", "true", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj"]
    sft.main(*short_run(tiny_model_dir, out, *lora, "--merge_lora", str(merge).lower(), "--learning_rate", "1e-2"))
    assert (out / "adapter_config.json").is_file() is not merge
    model = AutoModelForCausalLM.from_pretrained(out)  # an adapter folder loads with its base (peft installed)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = torch.tensor([[10, 20, 30, 40]])
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, base(ids).logits)  # the adapter changed the model
    if merge:
        changed = [
            name for name, value in model.state_dict().items() if not torch.equal(value, base.state_dict()[name])
        ]
        assert changed and all("q_proj" in name or "v_proj" in name for name in changed)  # only the adapted layers


def test_assistant_template_joins_columns_into_the_assistant_turn():
    from datasets import Dataset

    from recipes.common.data import to_sft_conversations

    rows = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "Q?"}], "thinking": "x = {2}", "attempt": "\\boxed{2}", "id": "r0"}]
    )
    out = to_sft_conversations(rows, "s1k", "<think>\n{thinking}\n</think>\n{attempt}")
    assert out[0]["messages"][-1] == {"role": "assistant", "content": "<think>\nx = {2}\n</think>\n\\boxed{2}"}
    with pytest.raises(ValueError, match="deepseek_attempt"):
        to_sft_conversations(rows, "s1k", "{thinking} {deepseek_attempt}")
    empty = Dataset.from_list([{"prompt": [{"role": "user", "content": "Q?"}], "thinking": " ", "id": "r1"}])
    with pytest.raises(ValueError, match="r1.*thinking"):
        to_sft_conversations(empty, "s1k", "{thinking}")


def test_model_config_overrides_extend_the_context_as_the_model_loads(tiny_model_dir):
    from recipes.common.model.loading import load_model

    _, training_args, model_args = short_run(tiny_model_dir, "unused")
    rope = {"rope_type": "default", "rope_theta": 300000.0}
    model = load_model(str(tiny_model_dir), model_args, training_args, {"max_position_embeddings": 2048, "rope_parameters": rope})  # fmt: skip
    assert model.config.max_position_embeddings == 2048 and model.config.rope_parameters["rope_theta"] == 300000.0
    with pytest.raises(ValueError, match="model_config_overrides"):
        short_run(tiny_model_dir, "unused", "--model_config_overrides", "{not json")


def test_every_sft_and_data_recipe_config_parses():
    """The SFT, rejection-sampling and distillation YAMLs (bf16 off only because this machine has no GPU)."""
    import yaml

    from recipes import distill
    from recipes import rejection_sampling as rs
    from recipes.common.command_line.config import CONFIG_DIR

    scripts = {"sft": sft.SFTScriptArguments, "rejection_sampling": rs.RejectionSamplingArguments}
    scripts["distill"] = distill.DistillScriptArguments
    checked = []
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        kind = next((name for name in scripts if path.stem.startswith(name)), None)
        if kind is None:
            continue
        raw = yaml.safe_load(path.read_text())
        cpu = ["--bf16", "false"] if raw.get("bf16") else []
        script_args, training_args, model_args = parse_recipe_args((scripts[kind], SFTConfig, ModelConfig), str(path), cpu)  # fmt: skip
        assert training_args.learning_rate == raw["learning_rate"]
        assert model_args.model_name_or_path or script_args.student_spec  # a model to train, or one to build
        if "eos_token" in raw:
            assert training_args.eos_token == raw["eos_token"]
        checked.append(str(path.relative_to(CONFIG_DIR)))
    expected = {"demo/sft.yaml", "demo/rejection_sampling.yaml", "demo/distill.yaml"}
    expected |= {"qwen2.5-math-1.5b/sft_cold_start.yaml", "qwen2.5-7b/sft_distill.yaml"}
    assert expected <= set(checked), checked
