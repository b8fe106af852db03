"""Held-out pass@1 during GRPO training (recipes.stages.grpo.held_out): per problem from the accuracy reward of
its samples, over problems with a bootstrap interval, logged every eval_steps; the checkpoint kept by the rule
the config fixed before the run."""

from __future__ import annotations

import json

import pytest
import torch

from eval.metrics import bootstrap_ci
from recipes import grpo
from recipes.common.command_line.config import parse_recipe_args
from recipes.stages.grpo.held_out import HeldOutScores, held_out_data_args, without_training_problems
from tasks.data_arguments import DataArguments

NAMES, ACCURACY, SAMPLES = ["format", "math_accuracy"], "math_accuracy", 3  # 3 samples per problem


def test_pass_at_1_per_problem_then_over_problems_with_its_interval():
    held_out = HeldOutScores()
    # two eval batches, gathered: problems of 3 samples each; accuracy 1 right, 0 or -1 wrong, NaN unscored
    held_out.record(torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, -1.0], [0.0, 0.0], [0.0, 0.0]]),
                    NAMES, ACCURACY, SAMPLES, training=False)  # fmt: skip
    held_out.record(torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, float("nan")], [0, 1], [0, 0]]),
                    NAMES, ACCURACY, SAMPLES, training=False)  # fmt: skip
    per_problem = [2 / 3, 0.0, 1.0, 1 / 3]  # worked out by hand from the second column
    logs = {"eval_loss": 0.5}
    held_out.into(logs, training=False)  # in place: transformers picks the best checkpoint from this very dict
    assert logs["eval_pass@1"] == pytest.approx(sum(per_problem) / 4)
    low, high = bootstrap_ci(per_problem)
    assert (logs["eval_pass@1_low"], logs["eval_pass@1_high"]) == pytest.approx((low, high))
    assert logs["eval_pass@1_problems"] == 4 and logs["eval_loss"] == 0.5
    held_out.into(again := {"eval_loss": 0.4}, training=False)  # the next evaluation starts afresh
    assert "eval_pass@1" not in again


def test_training_batches_are_not_held_out():
    held_out = HeldOutScores()
    held_out.record(torch.ones(3, 2), NAMES, ACCURACY, SAMPLES, training=True)
    held_out.into(logs := {"loss": 1.0}, training=True)
    assert logs == {"loss": 1.0}
    held_out.into(logs, training=False)  # nothing was recorded in training
    assert logs == {"loss": 1.0}


def test_held_out_options_go_over_the_training_datas():
    base = DataArguments(dataset_name="synthetic:1-3", dataset_num_rows=400, dataset_seed=0)
    held = held_out_data_args(base, {"dataset_seed": 5, "dataset_num_rows": 16})
    assert (held.dataset_name, held.dataset_seed, held.dataset_num_rows) == ("synthetic:1-3", 5, 16)
    with pytest.raises(ValueError, match="held_out: unknown data option.*'dataset_sed'.*did you mean 'dataset_seed'"):
        held_out_data_args(base, {"dataset_sed": 5})


def test_a_held_out_problem_that_is_also_trained_on_is_left_out():
    from datasets import Dataset

    rows = Dataset.from_list([{"id": "a", "prompt": "1"}, {"id": "b", "prompt": "2"}])
    held = Dataset.from_list([{"id": "b", "prompt": "2"}, {"id": "c", "prompt": "3"}])
    assert without_training_problems(held, rows)["id"] == ["c"]
    unnamed = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "2"}]}, {"prompt": [{"role": "user", "content": "9"}]}]
    )
    trained = Dataset.from_list([{"prompt": [{"role": "user", "content": "2"}]}])
    assert without_training_problems(unnamed, trained)["prompt"] == [[{"role": "user", "content": "9"}]]
    with pytest.raises(ValueError, match="all 1 held-out problems are training problems too"):
        without_training_problems(rows.select([0]), rows)


def parse(*argv: str):
    return parse_recipe_args(grpo.make_parser().dataclass_types, "demo/dapo.yaml", ["--output_dir", "/tmp/x", *argv])


def test_held_out_and_eval_strategy_go_together():
    with pytest.raises(ValueError, match="set eval_strategy: steps and eval_steps"):
        parse("--held_out", "{dataset_seed: 1}")
    with pytest.raises(ValueError, match="evaluates the held_out problems: give them"):
        parse("--eval_strategy", "steps", "--eval_steps", "2")


def test_a_run_logs_held_out_pass_at_1_and_keeps_its_best_checkpoint(trained_tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    script_args, training_args, model_args = parse(
        "--model_name_or_path", str(trained_tiny_model_dir), "--output_dir", str(out), "--max_steps", "2",
        "--num_generations", "4", "--per_device_train_batch_size", "8", "--max_completion_length", "32",
        "--dataset_num_rows", "40", "--logging_steps", "1", "--use_cpu", "true", "--disable_tqdm", "true",
        "--held_out", "{dataset_seed: 7, dataset_num_rows: 1}", "--eval_strategy", "steps", "--eval_steps", "1",
        "--num_generations_eval", "2", "--per_device_eval_batch_size", "4", "--save_strategy", "steps",
        "--save_steps", "1", "--load_best_model_at_end", "true", "--metric_for_best_model", "pass@1",
        "--log_reference_kl", "true", "--skip_zero_advantage", "false",
    )  # fmt: skip
    grpo.main(script_args, training_args, model_args)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evaluated = [record for record in records if "eval_pass@1" in record]
    assert [record["step"] for record in evaluated] == [1, 2]
    for record in evaluated:
        assert record["eval_pass@1_problems"] == 6
        assert 0 <= record["eval_pass@1_low"] <= record["eval_pass@1"] <= record["eval_pass@1_high"] <= 1
        assert record["eval_pass@1"] * 12 == pytest.approx(round(record["eval_pass@1"] * 12))  # 6 problems x 2
    card = json.loads((out / "run_card.json").read_text())
    best = max(evaluated, key=lambda record: record["eval_pass@1"])  # the first of equals, as transformers keeps
    kept = card["kept_checkpoint"]
    assert kept["rule"] == "best pass@1" and kept["metric"] == pytest.approx(best["eval_pass@1"])
    assert kept["checkpoint"].endswith(f"checkpoint-{best['step']}")
    assert card["datasets"]["held_out"]["rows"] == 6

    # the collapse's curves, each step, drawn by default: held-out pass@1, the group reward std and the share of
    # groups without any, entropy, KL to the cold start (beta is 0: log_reference_kl), the clip ratios
    from recipes import plot_curves

    drawn = plot_curves.plot_curves([out], tmp_path / "curves.png")
    collapse = ["eval_pass@1", "groups/std_mean", "groups/zero_std_frac", "entropy", "kl", "clip_ratio/low_mean",
                "clip_ratio/high_mean"]  # fmt: skip
    assert [metric for metric in drawn if metric in collapse] == collapse
    # every step: the loss pass too, whose groups may all agree on the tiny model under some CPU kernels (AVX2's
    # samples did, in CI), which skip_zero_advantage would leave without a loss pass and its curves
    assert all(len(drawn[metric][str(out)]) == 2 for metric in collapse)


def test_plot_curves_draws_held_out_pass_at_1_first(tmp_path):
    from recipes import plot_curves

    run = tmp_path / "run"
    run.mkdir()
    records = [
        {"step": 1, "reward": 0.2},
        {"step": 1, "eval_pass@1": 0.3, "eval_pass@1_low": 0.2, "eval_pass@1_high": 0.4},
        {"step": 2, "reward": 0.4},
        {"step": 2, "eval_pass@1": 0.5, "eval_pass@1_low": 0.35, "eval_pass@1_high": 0.6},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    drawn = plot_curves.plot_curves([run], tmp_path / "curves.png")
    assert list(drawn)[:2] == ["eval_pass@1", "reward"] and drawn["eval_pass@1"][str(run)] == [(1, 0.3), (2, 0.5)]
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_gold_metrics_by_hand():
    from recipes.stages.grpo.gold import gold_metrics

    nan = float("nan")
    per_func = torch.tensor([[1.0, 0.5], [0.0, nan], [1.0, 1.0]])  # two training rewards, one unscored
    rewards = torch.tensor([1.5, 0.0, 2.0])
    gold = torch.tensor([[0.0], [1.0], [1.0]])
    metrics = gold_metrics(per_func, rewards, gold, ["format", "judge"], ["math_accuracy"])
    assert metrics == {
        "proxy/reward": pytest.approx(3.5 / 3),
        "proxy/format": pytest.approx(2 / 3),
        "proxy/judge": pytest.approx(0.75),  # the unscored completion left out
        "gold/math_accuracy": pytest.approx(2 / 3),
    }
