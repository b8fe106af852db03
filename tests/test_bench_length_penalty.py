"""scripts/bench/length_penalty.py (issue 59): the per-level paired arithmetic and "where it gives up" against hand
values on made-up runs, the trap's advantages computed by hand beside the trainer's for both `scale_rewards`
settings, and a --fast run of a length pair and the trap pair, end to end, that a rerun skips."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from tests.conftest import load_bench

load = load_bench  # scripts/bench/<name>.py as a module


def run(accuracy: dict[int, list[float]], tokens: dict[int, list[float]]) -> dict:
    """A made-up eval.json: per level, its problems' pass@1 and mean tokens (problem ids shared across runs)."""
    problems = {
        f"L{level}p{i}": {"level": level, "pass@1": a, "tokens": t}
        for level in accuracy
        for i, (a, t) in enumerate(zip(accuracy[level], tokens[level], strict=True))
    }
    return {"problems": problems, "done": True}


# Two seeds, two levels, two problems a level.
BASE = {
    0: run({1: [1.0, 1.0], 2: [0.5, 0.75]}, {1: [20, 22], 2: [30, 34]}),
    1: run({1: [1.0, 0.75], 2: [0.75, 0.5]}, {1: [21, 21], 2: [32, 30]}),
}
ARM = {  # keeps level 1, falls on level 2 in both seeds and every problem
    0: run({1: [1.0, 0.75], 2: [0.0, 0.25]}, {1: [18, 18], 2: [14, 16]}),
    1: run({1: [1.0, 1.0], 2: [0.25, 0.0]}, {1: [19, 17], 2: [15, 13]}),
}


def test_pooled_per_level_differences_by_hand():
    report = load("length_penalty_report")
    level1 = report.pooled_difference(ARM, BASE, "pass@1", level=1)
    # seed 0: (0 + -0.25) / 2 = -0.125; seed 1: (0 + 0.25) / 2 = +0.125; per problem over seeds: 0, 0 -> 0
    assert level1["per_seed"] == {0: pytest.approx(-0.125), 1: pytest.approx(0.125)}
    assert level1["mean"] == pytest.approx(0.0) and level1["problems"] == 2
    level2 = report.pooled_difference(ARM, BASE, "pass@1", level=2)
    # problem 0: seed 0 -0.5, seed 1 -0.5 -> -0.5; problem 1: -0.5, -0.5 -> -0.5
    assert level2["mean"] == pytest.approx(-0.5) and level2["ci95"] == pytest.approx([-0.5, -0.5])
    tokens = report.pooled_difference(ARM, BASE, "tokens")
    # per problem over seeds: L1p0 (-2 - 2) / 2 = -2, L1p1 (-4 - 4) / 2 = -4, L2p0 (-16 - 17) / 2, L2p1 (-18 - 17) / 2
    assert tokens["mean"] == pytest.approx((-2 - 4 - 16.5 - 17.5) / 4)
    assert report.mean_of(BASE[0], "tokens", level=2) == 32
    assert report.gives_up_at(ARM, BASE) == [2]
    assert report.gives_up_at(BASE, BASE) == []
    with pytest.raises(ValueError, match="share no seed"):
        report.pooled_difference({2: ARM[0]}, BASE, "pass@1")


def test_the_start_and_end_windows_of_a_curve():
    report = load("length_penalty_report")
    assert report.window([None, 1.0, 2.0, 3.0, 4.0], first=True, size=3) == pytest.approx(2.0)
    assert report.window([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], first=False, size=5) == pytest.approx(4.0)
    assert report.window([None], first=True, size=3) is None


def test_the_report_reads_what_the_runs_hold(tmp_path):
    bench, report = load("length_penalty"), load("length_penalty_report")
    found = {"start": BASE[0], "weak_start": None, "lambda_0": BASE, "lambda_0.1": ARM}
    args = SimpleNamespace(steps=60, eval_problems=2, eval_samples=4, seeds=[0, 1], weak_steps=300,
                           table=tmp_path / "t.md", plot_dir=tmp_path)  # fmt: skip
    arms = {name: bench.LENGTH_ARMS[name] for name in ("lambda_0", "lambda_0.1")}
    report.write_report(found, {"group": arms}, {}, args)
    table = (tmp_path / "t.md").read_text()
    # per seed: (1 + .75 + 0 + .25) / 4 = 0.5 and (1 + 1 + .25 + 0) / 4 = 0.5625: mean 0.531, sample std 0.044
    assert "| accuracy - 0.1 x length | 2 | 0.531 ± 0.044 |" in table
    assert "| 2 | 0.625 | -0.500 [-0.500, -0.500] |" in table
    arm_row = next(line for line in table.splitlines() if line.startswith("| accuracy - 0.1 x length | 2 |"))
    assert arm_row.endswith("| 2 |")  # the levels where accuracy falls beyond noise: level 2 only
    assert (tmp_path / "length_by_level.png").is_file()


def test_every_arm_parses_as_recipes_grpo_options():
    bench = load("length_penalty")
    from recipes import grpo
    from recipes.common.command_line.config import parse_recipe_args

    for name, arm in {**bench.LENGTH_ARMS, **bench.LENGTH_NONE_ARMS, **bench.trap_arms(0.001)}.items():
        argv = [*arm.flags({}, 0), "--output_dir", "/tmp/unused"]
        script, training, _ = parse_recipe_args(grpo.make_parser().dataclass_types, str(arm.config), argv)
        rewards = {reward["name"]: reward["weight"] for reward in script.rewards}
        assert rewards["math_accuracy"] == 1.0 and "overlong" not in rewards, name
        assert training.variance_rewards == ["sum"] and script.dataset_name == "synthetic:1-12", name
        if "lambda_" in name and not name.endswith("lambda_0"):
            assert rewards["length_penalty"] == float(name.split("_")[-1])
        if not name.startswith("trap_"):  # dapo.yaml's scale is group; the amendment's arms divide by nothing
            assert training.scale_rewards == ("none" if name.startswith("none_") else "group"), name
            assert (bench.LENGTH_NONE_ARMS if name.startswith("none_") else bench.LENGTH_ARMS)[name] is arm
        if name.startswith("trap_"):
            assert training.scale_rewards == name.split("_")[1] and training.dynamic_sampling is False
            assert rewards["length_penalty"] == 0.001


@pytest.mark.parametrize("scale", ["group", "none"])
def test_the_trap_group_advantages_by_hand_and_by_the_trainer(tmp_path, scale):
    """A group scored [0, 0, 0.01, 0] (all wrong, one completion 10 tokens shorter at lambda 0.001): divided by
    the group's std, the 0.01 becomes an advantage as large as right against wrong."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from recipes.common.model.loading import SHIPPED_COLD_START, load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    group = [0.0, 0.0, 0.01, 0.0]

    def scores(completions, **kwargs):
        return [group[index % 4] for index in range(len(completions))]

    # By hand: mean 0.0025; sample std sqrt((3 x 0.0025^2 + 0.0075^2) / 3) = 0.005; TRL adds 1e-4 to the std.
    by_hand = [r - 0.0025 for r in group]
    if scale == "group":
        by_hand = [a / (0.005 + 1e-4) for a in by_hand]  # -0.490, -0.490, +1.471, -0.490
    rows = generate_rows([1], 2, seed=0)
    args = RLVRGRPOConfig(
        output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=8, max_completion_length=8,
        scale_rewards=scale, loss_type="dapo", beta=0.0, dynamic_sampling=False, report_to=[], use_cpu=True,
        bf16=False, save_strategy="no", seed=0,
    )  # fmt: skip
    trainer = RLVRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START), reward_funcs=[scores], args=args,
        train_dataset=Dataset.from_list(rows), processing_class=load_tokenizer(str(SHIPPED_COLD_START)),
    )  # fmt: skip
    trainer.model.train()
    batch = trainer._generate_and_score_completions([row for row in rows for _ in range(4)])
    assert batch["advantages"].tolist() == pytest.approx(by_hand * 2, abs=1e-6)
    if scale == "group":
        assert max(batch["advantages"].tolist()) > 1.4  # as large as a right answer among wrong ones
    assert torch.isfinite(batch["advantages"]).all()


def test_a_fast_run_of_a_length_pair_and_the_trap_then_a_rerun_skips_it(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from recipes.common.model.loading import SHIPPED_COLD_START

    bench = load("length_penalty")
    monkeypatch.setattr("recipes.common.command_line.config.setup_logging", lambda *a, **k: None)

    def in_process(argv, log, label, threads):  # a child process's job, run here: one import of torch for all
        args = bench.parse_args(argv[1:])
        bench.run_job(args.job[0], int(args.job[1]), args)
        return 0

    monkeypatch.setattr(bench, "run_child", in_process)
    out = tmp_path / "bench"
    argv = ["--fast", "--model", str(SHIPPED_COLD_START), "--base", str(tiny_model_dir), "--arms", "lambda_0",
            "lambda_0.1", "trap_none", "trap_group", "--output-dir", str(out), "--jobs", "1"]  # fmt: skip
    bench.main(argv)
    for arm in ("lambda_0", "lambda_0.1", "trap_none", "trap_group"):
        saved = json.loads((out / arm / "seed0" / "eval.json").read_text())
        assert saved["done"] and saved["curves"]["step"] == [1, 2]
        assert sorted({p["level"] for p in saved["problems"].values()}) == list(range(1, 13))
    card = json.loads((out / "lambda_0.1" / "seed0" / "run_card.json").read_text())
    assert {"name": "length_penalty", "weight": 0.1} in card["rewards"]
    trap = json.loads((out / "trap_group" / "seed0" / "run_card.json").read_text())
    assert trap["base_model"] == str(out / "weak_start") and trap["config"]["training"]["scale_rewards"] == "group"
    table = (out / "length_penalty.md").read_text()
    assert "| accuracy - 0.1 x length | 1 |" in table and "scale_rewards group | 0 |" in table
    assert (out / "length_trap.png").is_file() and (out / "length_by_level.png").is_file()
    capsys.readouterr()
    bench.main(argv)
    assert "0 job(s) to do" in capsys.readouterr().out
