"""A new user's mistakes end in one line that names the option, file or row and the fix, with exit code 2,
before anything expensive loads (issue 16, finding 4): misspelled TRL values, negative numbers, an
output_dir that is a file, a missing checkpoint, empty and broken data files, a dataset without the SFT
target column, and eval given a model it cannot load. Issue 28 (items 6, 8, 9, 12): reward mistakes, misspelled
flags and YAML keys, a run too short to leave its warm-up, and --help announcing a run."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import yaml

from eval import evaluate
from recipes import distill, grpo, sft
from recipes.common import held_out_eval as held_out
from recipes.common.command_line import config
from recipes.common.command_line.config import CONFIG_DIR
from recipes.stages.distill import stages as distill_stages
from tests.conftest import REPO


def must_not_run(*args):
    raise AssertionError("the recipe started although its config is wrong")


def cli_error(capsys, monkeypatch, recipe, argv: list[str], main=must_not_run) -> str:
    """Run a recipe's command line in this process; return its one error line (and check that it is one)."""
    monkeypatch.setattr(config, "setup_logging", lambda: None)  # keep pytest's log handlers
    monkeypatch.setattr(recipe, "main", main)
    with pytest.raises(SystemExit) as exit_info:
        recipe.cli(argv)  # the recipe's command line, as `python recipes/<name>.py ARGV` runs it
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err[-2000:]
    assert "usage:" not in err and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--loss_type", "dappo"], "loss_type: 'dappo' is not one of grpo, dr_grpo, dapo"),
        (["--scale_rewards", "grp"], "scale_rewards: 'grp' is not one of group, batch, none"),
        (["--learning_rate", "-1e-4"], "learning_rate must be > 0, got -0.0001"),
        (
            ["--resume_from_checkpoint", "/no/such/checkpoint-5"],
            "resume_from_checkpoint '/no/such/checkpoint-5' does not exist",
        ),
        (["--sampler", "weighted"], "sampler must be one of"),
        (["--rewards", "{name: math_accuracy"], "--rewards: '{name: math_accuracy' is not YAML/JSON"),
        (["--no_such_option", "1"], "unknown option(s) on the command line: --no_such_option 1"),
        (["--max_steps", "0"], "max_steps 0 trains nothing"),  # issue 40: it trained a step at rate 0
    ],
)
def test_config_mistakes_are_one_line_before_the_model_loads(argv, expected, capsys, monkeypatch, tmp_path):
    line = cli_error(capsys, monkeypatch, grpo, ["--output_dir", str(tmp_path / "out"), *argv])
    assert expected in line


def test_an_output_dir_that_is_a_file(capsys, monkeypatch, tmp_path):
    file = tmp_path / "taken"
    file.write_text("x")
    assert "is a file, not a folder" in cli_error(capsys, monkeypatch, sft, ["--output_dir", str(file)])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "the file is empty (no rows)"),
        ('{"problem": "1+1", "answer": "2", "solution": "2"}\nnot json\n', "line 2 is not JSON"),
        ('{"problem": "1+1", "answer": "2"}\n', "SFT needs a 'solution' column"),
    ],
)
def test_data_file_mistakes_name_the_file_and_the_row(content, expected, tiny_model_dir, capsys, monkeypatch, tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(content)
    argv = [
        "--model_name_or_path",
        str(tiny_model_dir),
        "--output_dir",
        str(tmp_path / "o"),
        "--dataset_name",
        str(data),
    ]
    line = cli_error(capsys, monkeypatch, sft, argv, main=sft.main)
    assert str(data) in line and expected in line
    assert not (tmp_path / "o").exists()  # no training started


def test_eval_says_in_one_line_why_a_model_or_a_file_cannot_be_read(tiny_model_dir, capsys, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    cases = [
        (["--model", str(tmp_path / "no_model"), "--dataset", "synthetic:1"], "no such folder"),
        (["--model", "someorg/some-model-not-cached", "--dataset", "synthetic:1"], "not in the local cache"),
        (["--model", str(tiny_model_dir), "--dataset", str(empty)], "the file is empty"),
    ]
    for argv, expected in cases:
        with pytest.raises(SystemExit) as exit_info:
            evaluate.main([*argv, "--output-dir", str(tmp_path / "eval"), "--n", "1"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err


def test_the_real_command_line_exits_2_with_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, str(REPO / "recipes" / "grpo.py"), "--loss_type", "dappo", "--output_dir", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "loss_type" in errors[0] and "Traceback" not in result.stderr


def test_distillation_checks_its_on_policy_options_before_the_offline_stage(
    tiny_model_dir, capsys, monkeypatch, tmp_path
):
    def sampling(*args, **kwargs):
        raise AssertionError("the teacher was sampled before the on_policy options were checked")

    for module in (distill_stages, held_out):  # the teacher's traces and the student's evaluation
        monkeypatch.setattr(module, "make_trace_sampler", sampling)
    argv = [
        "--mode", "both", "--teacher_model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "out"),
        "--dataset_num_rows", "4", "--eval_samples_per_problem", "1", "--on_policy", '{"lmbda": 0.5}',
    ]  # fmt: skip
    line = cli_error(capsys, monkeypatch, distill, argv, main=distill.main)
    assert "on_policy: unknown option(s) ['lmbda']" in line


# ---------------------------------------------------------------- issue 28: rewards, typos, warm-up, --help


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        (
            "[{name: math_acc}]",
            "rewards[0]: unknown reward 'math_acc'; did you mean 'math_accuracy'? available: ",
        ),
        (
            "[{name: math_accuracy}, {name: overlong, weight: heavy}]",
            "rewards[1] (overlong): weight 'heavy' is not a number",
        ),
        (
            "[{name: math_accuracy}, {name: overlong, max_lenn: 3}]",
            "rewards[1] (overlong): reward 'overlong' has no parameter 'max_lenn'; did you mean 'max_len'?",
        ),
        ("[{name: overlong, max_len: many}]", "rewards[0] (overlong): max_len 'many' is not a whole number"),
        ("[{name: overlong, max_len: 10, buffer: 20}]", "rewards[0] (overlong): overlong needs 0 < buffer <= max_len"),
    ],
)
def test_reward_mistakes_name_the_entry_in_one_line(rewards, expected, capsys, monkeypatch, tmp_path):
    line = cli_error(capsys, monkeypatch, grpo, ["--output_dir", str(tmp_path / "out"), "--rewards", rewards])
    assert expected in line, line


def test_reward_mistakes_in_a_yaml_file_are_one_line_too(capsys, monkeypatch, tmp_path):
    config = (REPO / "recipes/configs/demo/dapo.yaml").read_text()
    config += "\nrewards:\n  - {name: math_accuracy, weight: 1.0}\n  - {name: overlong, weight: heavy}\n"
    path = tmp_path / "dapo.yaml"
    path.write_text(config)
    line = cli_error(capsys, monkeypatch, grpo, ["--config", str(path), "--output_dir", str(tmp_path / "out")])
    assert "rewards[1] (overlong): weight 'heavy' is not a number" in line


def test_a_reward_error_raised_while_the_recipe_runs_is_one_line(capsys, monkeypatch, tmp_path):
    from rewards import build_rewards

    def main(script_args, training_args, model_args):
        build_rewards([{"name": "no_such_reward"}])

    line = cli_error(capsys, monkeypatch, grpo, ["--output_dir", str(tmp_path / "out")], main=main)
    assert "unknown reward 'no_such_reward'" in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--learnig_rate", "1e-4"], "--learnig_rate 1e-4; did you mean --learning_rate?"),
        (["--max_step", "2"], "--max_step 2; did you mean --max_steps?"),  # not taken for --max_steps
    ],
)
def test_misspelled_flags_get_the_nearest_option_and_no_prefix_match(argv, expected, capsys, monkeypatch, tmp_path):
    line = cli_error(capsys, monkeypatch, sft, ["--output_dir", str(tmp_path / "out"), *argv])
    assert expected in line, line


def test_misspelled_yaml_keys_get_the_nearest_option(capsys, monkeypatch, tmp_path):
    path = tmp_path / "sft.yaml"
    path.write_text((REPO / "recipes/configs/demo/sft.yaml").read_text() + "\nlearnig_rate: 1.0e-4\n")
    line = cli_error(capsys, monkeypatch, sft, ["--config", str(path), "--output_dir", str(tmp_path / "out")])
    assert "unknown option(s) learnig_rate; did you mean learning_rate?" in line, line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--temprature", "0.5"], "--temprature 0.5; did you mean --temperature?"),
        (["--temp", "0.5"], "--temp 0.5; did you mean --temperature?"),  # no abbreviations
        (["--max_new_tokns", "5"], "did you mean --max_new_tokens?"),  # answered in the spelling typed
    ],
)
def test_eval_flag_mistakes_are_one_line_with_the_nearest_option(argv, expected, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(["--model", "m", "--dataset", "d", "--output-dir", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err


@pytest.mark.parametrize(
    ("config", "max_steps", "expected"),
    [
        ("smollm2-135m/sft.yaml", "3", ["warmup_steps 5 >= max_steps 3", "peaks at 0.0002", "learning_rate 0.0005"]),
        ("smollm2-135m/dapo_lora.yaml", "2", ["warmup_steps 2 >= max_steps 2", "--warmup_steps 0"]),
        ("smollm2-135m/dapo_lora.yaml", "3", ["warm-up takes 2 of the run's 3 steps"]),
    ],
)
def test_a_run_too_short_to_leave_warm_up_is_warned_of(config, max_steps, expected, caplog):
    recipe = sft if config.endswith("sft.yaml") else grpo
    argv = ["--config", f"recipes/configs/{config}", "--max_steps", max_steps]
    with caplog.at_level(logging.WARNING, logger="recipes.common.command_line.checks"):
        _, training, _ = recipe.make_parser().parse_args(argv)
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert any(all(part in warning for part in expected) for warning in warnings), warnings
    assert training.warmup_steps == float(yaml.safe_load((CONFIG_DIR / config).read_text())["warmup_steps"])


def test_the_configured_runs_leave_warm_up_without_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="recipes.common.command_line.checks"):
        sft.make_parser().parse_args(["--config", "recipes/configs/smollm2-135m/sft.yaml"])
        grpo.make_parser().parse_args(["--config", "recipes/configs/smollm2-135m/dapo_lora.yaml"])
        grpo.make_parser().parse_args(["--max_steps", "2", "--lr_scheduler_type", "constant"])  # no warm-up at all
    assert not [record for record in caplog.records if "warm" in record.getMessage()]


def test_help_does_not_announce_a_run(capsys, caplog, monkeypatch):
    monkeypatch.setattr(config, "setup_logging", lambda: None)
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as exit_info:
        grpo.cli(["--help"])
    assert exit_info.value.code == 0
    assert "--learning_rate" in capsys.readouterr().out
    assert not [record for record in caplog.records if "embedded default" in record.getMessage()]
