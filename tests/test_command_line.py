"""The command lines as a new user types them (issue 16, findings 5, 6 and 8): nested options from flags,
merged into the YAML's; dashed and underscored flags everywhere; eval's column mapping; filter configs that
run from any directory; compare's crossover and protocol check; progress bars and the tiny model's size."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml
from trl import ModelConfig, SFTConfig

from data_filters.__main__ import main as data_filters_main
from eval import compare, evaluate
from recipes import distill, grpo, rejection_sampling
from recipes.common.command_line.config import CONFIG_DIR, parse_recipe_args
from tasks.datasets import load_eval_dataset
from tests.conftest import REPO


def parse_grpo(*argv: str):
    return parse_recipe_args(grpo.make_parser().dataclass_types, "demo/grpo.yaml", list(argv))


# ---------------------------------------------------------------- nested options (finding 5)


def test_nested_options_are_set_from_the_command_line():
    script, training, _ = parse_grpo(
        "--sampler", "pass_rate_weighted", "--curriculum", "{floor: 0.2, estimator: mean}",
        "--rewards", '[{"name": "math_accuracy", "weight": 0.5}, {"name": "think_format", "weight": 0.1}]',
    )  # fmt: skip
    assert training.curriculum == {"floor": 0.2, "estimator": "mean"}
    assert script.rewards == [{"name": "math_accuracy", "weight": 0.5}, {"name": "think_format", "weight": 0.1}]
    _, training, _ = parse_grpo("--curriculum={floor: 0.3}")
    assert training.curriculum == {"floor": 0.3}


def test_a_nested_override_is_merged_into_the_yaml_mapping():
    yaml_on_policy = yaml.safe_load((CONFIG_DIR / "demo/distill.yaml").read_text())["on_policy"]
    assert "beta" in yaml_on_policy and yaml_on_policy.get("max_steps") != 3
    script, _, _ = distill.make_parser().parse_args(["--on_policy", '{"max_steps": 3}'])
    assert script.on_policy == {**yaml_on_policy, "max_steps": 3}  # beta and the rest kept
    for text in ('{"learning_rate": 1e-4}', "{learning_rate: 1e-4}"):  # a number in JSON and in YAML flow style
        script, _, _ = distill.make_parser().parse_args(["--on_policy", text])
        assert script.on_policy["learning_rate"] == 1e-4 and script.on_policy["beta"] == yaml_on_policy["beta"]


def test_negative_numbers_are_values_and_still_checked():
    _, training, _ = parse_grpo("--beta", "0.0", "--epsilon", "0.2", "--max_grad_norm=1.5")
    assert training.max_grad_norm == 1.5
    with pytest.raises(ValueError, match="learning_rate must be > 0"):
        parse_grpo("--learning_rate", "-1e-4")


# ---------------------------------------------------------------- both spellings (finding 5)


def test_eval_takes_underscored_flags_too():
    args = evaluate.parse_args(
        ["--model", "m", "--dataset", "d", "--output_dir", "o", "--top_p", "0.5", "--max_new_tokens", "7",
         "--num_rows=3", "--question_field", "q", "--answer_field", "final", "--field_map", "{id: uid}"]
    )  # fmt: skip
    assert (args.top_p, args.max_new_tokens, args.num_rows, str(args.output_dir)) == (0.5, 7, 3, "o")
    assert (args.question_field, args.answer_field, args.field_map) == ("q", "final", {"id": "uid"})
    dashed = evaluate.parse_args(["--model", "m", "--dataset", "d", "--output-dir", "o", "--top-p", "0.5"])
    assert dashed.top_p == 0.5


def test_make_tiny_model_takes_both_spellings_and_states_its_true_size(tiny_model, tmp_path):
    import ast

    script = REPO / "scripts" / "make_tiny_model.py"
    help_text = ast.get_docstring(ast.parse(script.read_text()))  # --help prints the module docstring
    claimed = float(re.search(r"about ([\d.]+) M parameters", help_text).group(1)) * 1e6
    actual = tiny_model.num_parameters()  # the fixture builds it with the script's defaults
    assert abs(claimed - actual) / actual < 0.05, (claimed, actual)
    # the underscored spelling, through the script's own main() in this process (tests/test_tiny_model.py runs the
    # script by path, with the dashed one)
    spec = importlib.util.spec_from_file_location("make_tiny_model", script)
    make_tiny_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_tiny_model)
    make_tiny_model.main(["--output_dir", str(tmp_path / "tiny")])
    assert (tmp_path / "tiny" / "config.json").is_file()


# ---------------------------------------------------------------- eval's column mapping (finding 5)


def test_eval_maps_the_columns_of_a_local_file(tmp_path):
    data = tmp_path / "set.jsonl"
    data.write_text(
        "".join(json.dumps({"q": f"What is {i}+1?", "final": str(i + 1), "uid": f"u{i}"}) + "\n" for i in range(3))
    )
    rows = load_eval_dataset(
        str(data), question_field="q", answer_field="final", field_map={"id": "uid"}, user_template="Solve: {problem}"
    )
    assert [row["answer"] for row in rows] == ["1", "2", "3"]
    assert [row["id"] for row in rows] == ["u0", "u1", "u2"]
    assert rows[1]["prompt"][-1]["content"] == "Solve: What is 1+1?"


# ---------------------------------------------------------------- filter configs from anywhere (finding 5)


def test_a_filter_config_finds_its_input_beside_it_from_another_directory(tmp_path, monkeypatch):
    folder = tmp_path / "configs"
    folder.mkdir()
    rows = [{"problem": "What is 1+1?", "answer": "2"}, {"problem": "what is 1 + 1?", "answer": "2"}]
    (folder / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "filter.yaml").write_text(
        "input: {dataset_name: rows.jsonl}\nsteps:\n  - {step: dedup}\noutput: {path: kept.jsonl}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert data_filters_main(["--config", str(folder / "filter.yaml"), "--quiet", "--num_rows", "2"]) == 0
    kept = (elsewhere / "kept.jsonl").read_text().splitlines()  # the output: relative to the cwd, like --output
    assert len(kept) == 1  # the two spellings of one question are one question


# ---------------------------------------------------------------- compare (finding 6)


def write_run(folder, name, curve, protocol=None):
    dataset = folder / name / "set"
    dataset.mkdir(parents=True)
    metrics = {f"pass@{k}": {"mean": value, "ci95": [value - 0.05, value + 0.05]} for k, value in curve.items()}
    summary = {"metrics": metrics, "protocol": protocol or {"n": 8, "temperature": 0.6, "top_p": 0.95}}
    (dataset / "summary.json").write_text(json.dumps(summary))
    (dataset / "per_problem.jsonl").write_text(json.dumps({"id": "p1", "pass@8": 1.0}) + "\n")
    return folder / name


def test_curves_that_tie_at_k_1_and_part_do_not_cross(tmp_path):
    assert compare.crossover([1, 2, 4, 8], [0.5, 0.6, 0.7, 0.8], [0.5, 0.7, 0.8, 0.9]) is None
    assert compare.crossover([1, 2, 4], [0.5, 0.6, 0.7], [0.6, 0.6, 0.7]) is None  # meet and stay level
    assert compare.crossover([1, 2, 4], [0.5, 0.6, 0.7], [0.6, 0.6, 0.6]) == 2.0  # above, level at 2, below
    # differences +0.1 at k=1, -0.1 at k=2: the sign changes halfway on log2 k, at k = 2 ** 0.5
    assert compare.crossover([1, 2], [0.5, 0.6], [0.6, 0.5]) == pytest.approx(2**0.5)
    a = write_run(tmp_path, "a", {1: 0.5, 2: 0.6, 4: 0.7, 8: 0.8})
    b = write_run(tmp_path, "b", {1: 0.5, 2: 0.7, 4: 0.8, 8: 0.9})
    report = compare.compare(a, b, tmp_path / "report")
    assert "cross near" not in report and "Crossover: none" in report


def test_compare_refuses_runs_sampled_under_different_protocols(tmp_path, capsys):
    a = write_run(tmp_path, "a", {1: 0.5, 2: 0.6}, {"n": 8, "temperature": 0.6, "top_p": 0.95})
    b = write_run(tmp_path, "b", {1: 0.4, 2: 0.7}, {"n": 8, "temperature": 1.0, "top_p": 0.95})
    with pytest.raises(SystemExit) as exit_info:
        compare.main([str(a), str(b), "--output", str(tmp_path / "r")])
    assert exit_info.value.code == 2
    assert "temperature: 0.6 vs 1.0" in capsys.readouterr().err
    report = compare.main([str(a), str(b), "--output", str(tmp_path / "r"), "--allow_protocol_mismatch"])
    assert "Warning: different protocols on set" in report and "temperature: 0.6 vs 1.0" in report


# ---------------------------------------------------------------- progress bars (finding 8)


@pytest.mark.parametrize("recipe", [rejection_sampling, distill])
def test_the_long_sft_recipes_show_progress_bars(recipe):
    arguments = recipe.RejectionSamplingArguments if recipe is rejection_sampling else recipe.DistillScriptArguments
    _, training, _ = parse_recipe_args((arguments, SFTConfig, ModelConfig), recipe.DEFAULT_CONFIG, [])
    assert training.disable_tqdm is False


def test_activation_checkpointing_is_set_under_transformers_new_name_without_a_deprecation_warning(tmp_path):
    """TRL's configs default `gradient_checkpointing` to True, which transformers 5 warned about on every run
    ("`gradient_checkpointing` is deprecated"); the YAMLs' old name still sets it."""
    import warnings

    from recipes import grpo

    config = (REPO / "recipes/configs/smollm2-135m/dapo_lora.yaml").read_text()
    yaml_with_old_name = tmp_path / "dapo_lora.yaml"  # the shipped one turns it off (micro-batches instead)
    yaml_with_old_name.write_text(config.replace("gradient_checkpointing: false", "gradient_checkpointing: true"))
    assert "gradient_checkpointing: true" in yaml_with_old_name.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        for argv, expected in (
            ([], False),  # the demo's YAML: gradient_checkpointing false
            (["--gradient_checkpointing", "true"], True),
            (["--gradient_checkpointing=true"], True),
            (["--config", str(yaml_with_old_name)], True),
        ):
            training = grpo.make_parser().parse_args(argv)[1]
            assert training.activation_checkpointing is expected and training.gradient_checkpointing is expected
