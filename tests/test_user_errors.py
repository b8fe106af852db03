"""A new user's mistakes end in one line that names the option, file or row and the fix, with exit code 2,
before anything expensive loads (issue 16, finding 4): misspelled TRL values, negative numbers, an
output_dir that is a file, a missing checkpoint, empty and broken data files, a dataset without the SFT
target column, and eval given a model it cannot load."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from eval import evaluate
from recipes import distill, grpo, sft
from recipes.common import config, distill_stages, traces
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

    for module in (distill_stages, traces):  # the teacher's traces and the student's evaluation
        monkeypatch.setattr(module, "make_trace_sampler", sampling)
    argv = [
        "--mode", "both", "--teacher_model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "out"),
        "--dataset_num_rows", "4", "--eval_samples_per_problem", "1", "--on_policy", '{"lmbda": 0.5}',
    ]  # fmt: skip
    line = cli_error(capsys, monkeypatch, distill, argv, main=distill.main)
    assert "on_policy: unknown option(s) ['lmbda']" in line
