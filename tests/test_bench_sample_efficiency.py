"""scripts/bench/sample_efficiency.py over seeds: the aggregation (mean ± std across seeds, the paired comparison
with a variant's parent) against hand-computed values on fake per-seed results, the completion counts from
metrics.jsonl, every variant's flags as recipes/grpo.py parses them, the cost estimate, and a --fast run of two
variants x two seeds that a rerun skips."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from types import SimpleNamespace

import pytest

from tests.conftest import load_bench

load = load_bench  # scripts/bench/<name>.py as a module


def run(num_correct: list[int], completions: int, per_kept: float | None = None, n: int = 2, step: int = 4) -> dict:
    """A fake eval.json: one evaluated checkpoint with these per-problem correct counts out of n."""
    pass1 = sum(num_correct) / (n * len(num_correct))
    point = {"pass@1": pass1, "ci95": [pass1 - 0.1, pass1 + 0.1], f"pass@{n}": min(1.0, 2 * pass1),
             "num_correct": num_correct, "protocol": {"n": n}, "completions": completions}  # fmt: skip
    return {"points": {str(step): point}, "completions_per_kept_group": per_kept, "done": True}


# Four held-out problems, two samples each, three seeds. Per-problem pass@1 (correct / 2):
#   parent  seed 0 [1, .5, 0, .5] = 0.500   seed 1 [1, 1, 0, 0] = 0.500    seed 2 [1, 1, .5, .5] = 0.750
#   variant seed 0 [1, 1, .5, .5] = 0.750   seed 1 [1, 1, .5, 0] = 0.625   seed 2 [1, 1, 1, .5]  = 0.875
PARENT = {0: run([2, 1, 0, 1], 640, 16.0), 1: run([2, 2, 0, 0], 704, 20.0), 2: run([2, 2, 1, 1], 768)}
VARIANT = {0: run([2, 2, 1, 1], 512), 1: run([2, 2, 1, 0], 512), 2: run([2, 2, 2, 1], 512)}


def test_a_variant_over_seeds_is_mean_and_sample_std_with_each_seeds_interval():
    stats = load("sample_efficiency_stats")
    summary = stats.variant_summary(PARENT)
    # mean (0.5 + 0.5 + 0.75) / 3; deviations -1/12, -1/12, 1/6: variance (1/144 + 1/144 + 1/36) / 2 = 1/48
    assert summary["pass@1"]["mean"] == pytest.approx(7 / 12)
    assert summary["pass@1"]["std"] == pytest.approx(math.sqrt(1 / 48))
    assert summary["by_seed"][2] == {"pass@1": 0.75, "ci95": [0.65, 0.85]}
    assert summary["completions"] == pytest.approx(704)
    assert summary["completions_per_kept_group"] == pytest.approx(18.0)  # the two seeds that report one
    variant = stats.variant_summary(VARIANT)
    assert variant["pass@1"]["mean"] == pytest.approx(0.75)
    assert variant["pass@1"]["std"] == pytest.approx(0.125)  # deviations 0, -1/8, 1/8
    assert variant["completions_per_kept_group"] is None  # no dynamic sampling


def test_the_paired_comparison_by_hand():
    stats = load("sample_efficiency_stats")
    compared = stats.paired_comparison(VARIANT, PARENT)
    assert compared["seeds"] == [0, 1, 2]
    assert compared["differences"] == pytest.approx({0: 0.25, 1: 0.125, 2: 0.125})
    assert compared["mean"] == pytest.approx(1 / 6)
    # deviations 1/12, -1/24, -1/24: variance (1/144 + 1/576 + 1/576) / 2 = 1/192
    assert compared["std"] == pytest.approx(math.sqrt(1 / 192))
    # Per-problem differences averaged over the seeds: [0, 1/6, 1/2, 0]. A resample of the 4 problems draws
    # only the two zeros with probability (2/4)^4 = 6.25% > 2.5%, so the interval's lower end is exactly 0:
    # every seed is higher, and still the 4-problem bootstrap cannot exclude no difference.
    assert compared["ci95"][0] == 0.0 and 1 / 6 < compared["ci95"][1] <= 0.5
    assert compared["reading"] == stats.NO_DIFFERENCE
    assert stats.paired_comparison(VARIANT, {}) is None
    only_two = stats.paired_comparison(VARIANT, {seed: PARENT[seed] for seed in (0, 2)})
    assert only_two["seeds"] == [0, 2] and only_two["mean"] == pytest.approx(0.1875)


def test_the_reading_needs_the_interval_and_every_seed_to_agree():
    stats = load("sample_efficiency_stats")
    assert stats.reading([0.1, 0.2, 0.05], (0.01, 0.2)) == "higher"
    assert stats.reading([-0.1, -0.2, -0.05], (-0.2, -0.01)) == "lower"
    assert stats.reading([0.1, 0.2, -0.05], (0.01, 0.2)) == stats.NO_DIFFERENCE  # one seed disagrees
    assert stats.reading([0.1, 0.2, 0.05], (-0.01, 0.2)) == stats.NO_DIFFERENCE  # the interval holds 0
    assert stats.reading([0.1], (0.05, 0.2)) == "one seed: not tested"
    # Every problem better by the same 1/2 under every seed: the interval is that point, the reading "higher".
    better = {seed: run([1] * 20, 512) for seed in (0, 1, 2)}
    worse = {seed: run([0] * 20, 512) for seed in (0, 1, 2)}
    compared = stats.paired_comparison(better, worse)
    assert compared["ci95"] == pytest.approx([0.5, 0.5]) and compared["reading"] == "higher"
    assert stats.paired_comparison(worse, better)["reading"] == "lower"


def test_the_table_and_plot_show_spreads_and_the_comparison(tmp_path):
    stats = load("sample_efficiency_stats")
    runs = load("sample_efficiency_runs")
    start = run([0, 1, 0, 1], 0)["points"]["4"]  # the cold start is one evaluation
    setup = {"steps": 4, "eval_samples": 2, "model": "cold", "seeds": [0, 1, 2], "levels": "5-12"}
    results = {"dapo": PARENT, "dapo_no_overlong": VARIANT, "format_only": {}}
    stats.write_table(tmp_path / "table.md", results, start, runs.VARIANTS, setup)
    stats.write_plot(tmp_path / "plot.png", results, start, runs.VARIANTS, setup)
    table = (tmp_path / "table.md").read_text()
    assert "| DAPO | 3 | 0.583 ± 0.144 | 0: 0.500 [0.400, 0.600]; 1: 0.500 [0.400, 0.600]; 2: 0.750" in table
    assert "| 704 | 18.0 |" in table
    assert "| DAPO without the overlong reward | DAPO | +0.250, +0.125, +0.125 | +0.167 ± 0.072 | [+0.000, " in table
    assert "no significant difference |" in table
    assert (tmp_path / "plot.png").stat().st_size > 1000


def write_run(folder, records, num_generations=8):
    folder.mkdir(parents=True)
    card = {"config": {"training": {"num_generations": num_generations, "per_device_train_batch_size": 64,
                                    "num_iterations": 1}}, "processes": 1, "final_step": 3}  # fmt: skip
    (folder / "run_card.json").write_text(json.dumps(card))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))


def test_completions_sampled_and_per_kept_group_come_from_metrics_jsonl(tmp_path):
    runs = load("sample_efficiency_runs")
    generated, kept = "dynamic_sampling/groups_generated", "dynamic_sampling/groups_kept_with_variance"
    write_run(tmp_path / "dapo", [
        {"step": 1, "loss": 0.1, generated: 8, kept: 8},
        {"step": 2, "loss": 0.1, generated: 24, kept: 8},  # two extra rounds
        {"step": 2, "loss": 0.1, generated: 16, kept: 8},  # logged again after a resume: this one counts
        {"step": 3, "loss": 0.1, generated: 8, kept: 6},  # the cap: two zero-variance groups let through
        {"step": 3, "train_runtime": 60.0},
    ])  # fmt: skip
    assert runs.completions_by_step(tmp_path / "dapo") == {0: 0, 1: 64, 2: 192, 3: 256}
    assert runs.completions_per_kept_group(tmp_path / "dapo") == pytest.approx(256 / 22)
    write_run(tmp_path / "grpo", [{"step": 1, "loss": 0.1}, {"step": 2, "loss": 0.1}])
    assert runs.completions_by_step(tmp_path / "grpo") == {0: 0, 1: 64, 2: 128}
    assert runs.completions_per_kept_group(tmp_path / "grpo") is None


def test_every_variant_is_the_config_it_claims_as_recipes_grpo_parses_it(tmp_path):
    """Each variant's flags through recipes/grpo.py's own parser: the ablated field, and only it, changes."""
    from recipes import grpo
    from recipes.common.command_line.config import parse_recipe_args
    from recipes.stages.grpo.config import variance_reward_names

    runs = load("sample_efficiency_runs")
    args = SimpleNamespace(model=tmp_path / "cold", steps=6, save_steps=3, fast=False)

    def parsed(name, seed=1):
        argv = runs.grpo_argv(name, seed, args, tmp_path / name)
        config = argv[argv.index("--config") + 1]
        argv = argv[: argv.index("--config")] + argv[argv.index("--config") + 2 :]
        script, training, _ = parse_recipe_args(grpo.make_parser().dataclass_types, config, argv)
        assert training.seed == seed and training.max_steps == 6 and training.save_steps == 3
        return script, training

    dapo_script, dapo = parsed("dapo")
    grpo_script, plain = parsed("grpo")
    assert (dapo.beta, dapo.epsilon_high, dapo.dynamic_sampling) == (0.0, 0.28, True)
    assert [r["name"] for r in dapo_script.rewards] == ["math_accuracy", "overlong"]
    assert parsed("grpo_beta0")[1].beta == 0.0 and plain.beta == 0.04
    assert parsed("dapo_no_clip_higher")[1].epsilon_high == dapo.epsilon == 0.2
    assert [r["name"] for r in parsed("dapo_no_overlong")[0].rewards] == ["math_accuracy"]

    def variance(script, training):  # the rewards the trainer reads a group's variance from (None: their sum)
        return variance_reward_names(training.variance_rewards, [r["name"] for r in script.rewards])

    assert variance(*parsed("dapo_filter_sum")) is None and variance(dapo_script, dapo) == ["math_accuracy"]
    assert parsed("dapo_no_ds")[1].dynamic_sampling is False
    random_script, random_training = parsed("random_reward", seed=2)
    assert random_script.rewards[0] == {"name": "random", "weight": 1.0, "p": 0.5, "seed": 2}
    assert random_script.rewards[1] == dapo_script.rewards[1] and random_training.epsilon_high == 0.28
    assert [r["name"] for r in parsed("format_only")[0].rewards] == ["format_only", "overlong"]
    for name, variant in runs.VARIANTS.items():
        assert variant.parent is None or variant.parent in runs.VARIANTS, name
    if "dynamic_sampling_mode" in recipe_options():
        for mode in ("batch", "reference", "adaptive"):
            assert parsed(f"dapo_ds_{mode}")[1].dynamic_sampling_mode == mode


def recipe_options() -> set[str]:
    """Every option recipes/grpo.py parses (its own, its trainer config's, ModelConfig's)."""
    from recipes.grpo import make_parser

    return {field.name for kind in make_parser().dataclass_types for field in dataclasses.fields(kind)}


def test_dynamic_sampling_mode_variants_need_the_recipe_option(capsys):
    bench = load("sample_efficiency")
    if "dynamic_sampling_mode" in recipe_options():
        args = bench.parse_args(["--variants", "dapo_ds_adaptive", "dapo_ds_batch", "--dry-run"])
        assert args.variants == ["dapo_ds_adaptive", "dapo_ds_batch"]
    else:  # a clear error before anything runs, not a failed training run per seed
        with pytest.raises(SystemExit):
            bench.parse_args(["--variants", "dapo", "dapo_ds_adaptive"])
        assert "['dapo_ds_adaptive'] need recipes/grpo.py's --dynamic_sampling_mode" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse_args(["--variants", "dapo_typo"])
    assert "unknown variant(s) ['dapo_typo']" in capsys.readouterr().err


def test_the_estimate_schedules_the_runs_on_the_parallel_jobs(monkeypatch):
    bench = load("sample_efficiency")
    costs = {"step_s": 1.0, "dynamic_step_s": 2.0, "capped_step_s": 3.0, "eval_completion_s": 0.01,
             "job_start_s": 30.0, "idle_overhead": 1.0}  # fmt: skip
    monkeypatch.setattr(bench, "COSTS", costs)
    args = bench.parse_args(["--steps", "60", "--eval-problems", "25", "--eval-samples", "8", "--jobs", "2"])
    # one evaluation: 8 levels x 25 problems x 8 samples x 0.01 s = 16 s
    assert bench.job_minutes("cold_start", args) == pytest.approx((30 + 16) / 60)
    assert bench.job_minutes("grpo", args) == pytest.approx((30 + 60 + 16) / 60)
    assert bench.job_minutes("dapo", args) == pytest.approx((30 + 120 + 16) / 60)
    assert bench.job_minutes("format_only", args) == pytest.approx((30 + 180 + 16) / 60)  # every step at the cap
    jobs = [("cold_start", 0), ("grpo", 0), ("dapo", 0), ("grpo", 1)]
    # worker A: cold start 46 s, then dapo 166 s = 212 s; worker B: grpo 106 s, then grpo 106 s = 212 s
    assert bench.estimate_minutes(jobs, args) == pytest.approx(212 / 60)
    args.jobs = 1
    assert bench.estimate_minutes(jobs, args) == pytest.approx((46 + 106 + 166 + 106) / 60)
    costs["idle_overhead"] = 1.5  # CPU time to wall time scales every job
    assert bench.estimate_minutes(jobs, args) == pytest.approx(1.5 * (46 + 106 + 166 + 106) / 60)


def test_fast_run_of_two_variants_over_two_seeds_then_a_rerun_skips_it(
    trained_tiny_model_dir, tmp_path, capsys, monkeypatch
):
    bench = load("sample_efficiency")
    monkeypatch.setattr("recipes.common.command_line.config.setup_logging", lambda *a, **k: None)

    def in_process(argv, log, label, threads):  # a child process's job, run here: one import of torch for all
        import torch

        args, before = bench.parse_args(argv[1:]), torch.get_num_threads()
        try:
            bench.run_job(args.job[0], int(args.job[1]), args)
        finally:
            torch.set_num_threads(before)  # the job sets its own (--threads)
        return 0

    monkeypatch.setattr(bench, "run_child", in_process)
    out = tmp_path / "bench"
    argv = ["--fast", "--model", str(trained_tiny_model_dir), "--variants", "grpo", "random_reward", "--seeds", "0",
            "1", "--output-dir", str(out), "--jobs", "1"]  # fmt: skip
    bench.main(argv)
    table = (out / "sample_efficiency.md").read_text()
    for seed in (0, 1):
        for name in ("grpo", "random_reward"):
            saved = json.loads((out / name / f"seed{seed}" / "eval.json").read_text())
            assert saved["done"] and list(saved["points"]) == ["2"]
            card = json.loads((out / name / f"seed{seed}" / "run_card.json").read_text())
            assert card["config"]["training"]["seed"] == seed
    random_card = json.loads((out / "random_reward" / "seed1" / "run_card.json").read_text())
    assert random_card["rewards"][0] == {"name": "random", "weight": 1.0, "p": 0.5, "seed": 1}
    assert "| GRPO | 2 |" in table and "| DAPO with a random 0/1 reward (control) | 2 |" in table
    assert (out / "sample_efficiency.png").is_file()
    stamp = (out / "grpo" / "seed1" / "eval.json").stat().st_mtime
    capsys.readouterr()
    started = time.time()
    bench.main(argv)
    assert "0 run(s) to do" in capsys.readouterr().out
    assert (out / "grpo" / "seed1" / "eval.json").stat().st_mtime == stamp and time.time() - started < 30
