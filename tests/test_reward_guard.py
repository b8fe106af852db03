"""Issue 40, item 4: a reward that misbehaves is named in one line. At db84883 a reward that raised ended the run
at step 1 with TRL's traceback (exit 1), one that returned strings with `ValueError: too many dimensions 'str'`
naming no reward, and a slow one stalled every step without a word."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest

from recipes import grpo
from recipes.common.command_line import config
from recipes.common.training.monitor import RLVRMonitor
from rewards.guard import MIN_ROWS, RewardFailedError, check_scores, guarded
from rewards.registry import register, unregister

COLD_START = grpo.Path(__file__).resolve().parents[1] / "recipes" / "assets" / "tiny-cold-start"


def returning(*values):
    def reward(completions, **columns):
        return values[0] if len(values) == 1 else list(values)

    reward.__name__ = "mine"
    return reward


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (["0.5", 1.0], "reward mine returned '0.5' (a str) for row 0 (id 'p0'): a reward returns a finite number"),
        ([1.0, math.nan], "reward mine returned nan (a float) for row 1 (id 'p1')"),
        ([1.0], "reward mine returned 1 scores for 2 completions"),
        ("1.0", "reward mine returned '1.0' (a str), not a list of 2 scores"),
    ],
)
def test_what_is_not_a_score_is_named_with_its_row(returned, expected):
    scores, problem = check_scores("mine", returned, 2, {"id": ["p0", "p1"]})
    assert problem.startswith(expected), problem
    assert all(score is None or isinstance(score, float) for score in scores) and len(scores) == 2


def test_scores_of_other_numeric_types_pass_as_floats():
    import numpy
    import torch

    scores, problem = check_scores("mine", (True, 2, None, 0.25, numpy.float32(0.5), torch.tensor(3.0)), 6, {})
    assert problem is None and scores == [1.0, 2.0, None, 0.25, 0.5, 3.0]
    _, problem = check_scores("mine", [torch.ones(2)], 1, {})
    assert "returned tensor" in problem


def test_the_first_batch_is_the_check_and_later_failures_score_none(caplog):
    calls = []

    def flaky(completions, **columns):
        calls.append(len(completions))
        if len(calls) == 2:
            raise KeyError("answer")
        return [1.0] * len(completions)

    reward = guarded(flaky)
    assert reward(["a", "b"]) == [1.0, 1.0] and reward.__name__ == "flaky"
    with caplog.at_level(logging.WARNING, logger="rewards.guard"):
        assert reward(["a", "b"]) == [None, None]
    assert "reward flaky raised KeyError: 'answer'; 2 rows of this batch scored None" in caplog.text
    with pytest.raises(RewardFailedError, match=r"reward mine raised ZeroDivisionError.*first batch"):
        guarded(returning_error())(["a"])


def returning_error():
    def reward(completions, **columns):
        return 1 / 0

    reward.__name__ = "mine"
    return reward


def test_a_reward_that_fails_on_most_rows_stops_the_run_in_one_line():
    state = {"calls": 0}

    def mostly_broken(completions, **columns):
        state["calls"] += 1
        return [1.0] * len(completions) if state["calls"] == 1 else ["x"] * len(completions)

    reward = guarded(mostly_broken)
    reward(["a"] * 8)
    with pytest.raises(RewardFailedError, match=r"could not score 24 of the 32 rows seen, more than 50%"):
        for _ in range(MIN_ROWS // 8):
            reward(["a"] * 8)


def test_a_reward_taking_most_of_a_step_is_warned_of_with_its_name(tmp_path, caplog):
    slow = guarded(returning([1.0]))
    slow.last_call_s = 7.5
    monitor = RLVRMonitor(tmp_path, reward_functions=[slow])
    state = SimpleNamespace(global_step=3, is_world_process_zero=True)
    with caplog.at_level(logging.WARNING):
        monitor.on_log(None, state, SimpleNamespace(), logs={"timing_s/rewards": 8.0, "timing_s/step": 10.0})
    assert "the rewards took 8.0 of the step's 10.0 s (80%); the slowest, mine, took 7.5 s" in caplog.text
    quiet = RLVRMonitor(tmp_path / "quiet", reward_functions=[slow])
    quiet.on_log(None, state, SimpleNamespace(), logs={"timing_s/rewards": 2.0, "timing_s/step": 10.0})
    assert quiet.warnings == []


@pytest.fixture
def string_reward():
    register("test_returns_strings")(lambda: lambda completions, **columns: ["1.0"] * len(completions))
    yield "test_returns_strings"
    unregister("test_returns_strings")


def test_grpo_with_a_reward_returning_strings_stops_in_one_line_before_any_update(
    string_reward, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(config, "setup_logging", lambda: None)
    argv = [
        "--model_name_or_path", str(COLD_START), "--dataset_name", "synthetic:1", "--dataset_num_rows", "16",
        "--num_generations", "4", "--per_device_train_batch_size", "8", "--max_completion_length", "16",
        "--max_steps", "2", "--warmup_steps", "0", "--use_cpu", "true", "--disable_tqdm", "true",
        "--rewards", f"[{{name: {string_reward}}}]", "--output_dir", str(tmp_path / "run"),
    ]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        grpo.cli(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "reward test_returns_strings returned '1.0' (a str) for row 0" in errors[0], err
    assert "Traceback" not in err and not (tmp_path / "run" / "model.safetensors").exists()
