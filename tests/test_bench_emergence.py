"""scripts/bench/emergence.py (issue 59, item 3): the crossing steps against hand values, the two measures and the
drift arm's reward on hand strings, the bases' rows (an exact share showing working, all else identical), the
runs' command lines as recipes/grpo.py parses them, the cost estimate, and a --fast run of every base that a rerun
skips and a change of settings refuses."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import load_bench

load = load_bench  # scripts/bench/<name>.py as a module


# ---------------------------------------------------------------- crossing steps ("passes" means >=)


def test_crossing_steps_are_the_first_step_at_or_above_each_threshold():
    """A threshold is crossed at the first step whose share is >= it; None when no step reaches it."""
    crossing = load("emergence_measures").crossing_steps
    # Steps 1..6: 0.06 (step 3) is the first >= 5%, 0.6 (step 5) the first >= 50%, 0.97 (step 6) the first >= 95%.
    assert crossing([0, 0.02, 0.06, 0.4, 0.6, 0.97]) == {0.05: 3, 0.5: 5, 0.95: 6}
    assert crossing([0, 0.01, 0.049]) == {0.05: None, 0.5: None, 0.95: None}  # never
    assert crossing([]) == {0.05: None, 0.5: None, 0.95: None}
    # A share equal to the threshold crosses it; one just under does not.
    assert crossing([0.05, 0.5, 0.949, 0.95]) == {0.05: 1, 0.5: 2, 0.95: 4}
    assert crossing([0.0499, 0.4999]) == {0.05: 2, 0.5: None, 0.95: None}
    # The first crossing counts even when the share falls back; NaN never crosses.
    assert crossing([math.nan, 0.06, 0.01, 0.7]) == {0.05: 2, 0.5: 4, 0.95: None}
    # A mapping step -> share (metrics.jsonl's steps, in any order), and other thresholds.
    assert crossing({5: 0.6, 2: 0.1, 3: 0.03}) == {0.05: 2, 0.5: 5, 0.95: None}
    assert crossing([0.2, 0.3], thresholds=(0.25,)) == {0.25: 2}


# ---------------------------------------------------------------- the measures, by hand


WORKED = "<think>\ng=e\ne=58\n</think>\n\\boxed{58}"
DIRECT = "<think>\n</think>\n\\boxed{58}"


@pytest.mark.parametrize(
    ("text", "working", "after_box"),
    [
        (WORKED, True, False),
        (DIRECT, False, False),
        ("<think>\n \n</think>\n\\boxed{58}", False, False),  # blank reasoning is no working
        (DIRECT + "\nz=3", False, True),
        (WORKED + "\n\\boxed{58}", True, True),  # a second box is text after the first
        (WORKED + " \n\n", True, False),  # whitespace after the box is nothing
        ("\\boxed{58}", False, False),  # no tags, no reasoning
        ("g=58\n\\boxed{58} so", True, True),  # no tags: the reasoning is what precedes the box
        ("<think>\ng=e\ne=", True, False),  # cut off inside the reasoning: no answer, so nothing after it
        ("<think>\ng=e\n</think>\nthe answer is 58", True, False),  # no box
        ("<think>\n\\boxed{3} g=e\n</think>\n\\boxed{58}", True, False),  # a box inside the reasoning is not the answer
        ("", False, False),
    ],
)
def test_the_measures_on_hand_strings(text, working, after_box):
    """Working shown and text after the box, for completions written by hand."""
    measures = load("emergence_measures")
    assert measures.is_working(text) is working
    assert measures.has_text_after_box(text) is after_box


def test_the_measures_as_rewards_take_trls_completions():
    """The reward forms score strings and message lists alike; the drift arm's reward is the negated measure."""
    measures = load("emergence_measures")
    completions = [
        [{"role": "assistant", "content": WORKED}],
        DIRECT + " junk",
        [{"role": "assistant", "content": DIRECT}],
    ]
    assert measures.shows_working(completions, prompts=[None] * 3) == [1.0, 0.0, 0.0]
    assert measures.text_after_box(completions) == [0.0, 1.0, 0.0]
    assert measures.no_text_after_box(completions) == [0.0, -1.0, 0.0]


# ---------------------------------------------------------------- the bases' rows


def test_the_bases_rows_differ_only_in_an_exact_seeded_share_showing_working():
    """Same ids, prompts, answers and order for every base; the working rows an exact, nested, seeded share."""
    from tasks.synthetic import generate_rows

    measures, bench = load("emergence_measures"), load("emergence")
    rows = generate_rows([1, 2, 3, 4], 200, seed=0)  # 800 rows, 200 per level
    working = {}
    for name, share in bench.BASES.items():
        built = measures.base_rows(rows, share, seed=0)
        assert [(r["id"], r["prompt"], r["answer"], r["difficulty"]) for r in built] == [
            (r["id"], r["prompt"], r["answer"], r["difficulty"]) for r in rows
        ]
        kept = {r["id"] for r, original in zip(built, rows, strict=True) if r["solution"] == original["solution"]}
        direct = [r for r in built if r["id"] not in kept]
        assert all(r["solution"] == f"<think>\n</think>\n\\boxed{{{r['answer']}}}" for r in direct)
        assert all(measures.is_working(r["solution"]) for r in built if r["id"] in kept)
        assert not any(measures.is_working(r["solution"]) or measures.has_text_after_box(r["solution"]) for r in direct)
        by_level = [sum(r["id"] in kept for r in built if r["difficulty"] == level) for level in (1, 2, 3, 4)]
        assert by_level == [round(share * 200)] * 4, name  # exact per level: 20, 4, 1, 0
        working[name] = kept
    assert [len(working[name]) for name in ("work10", "work2", "work0.5", "work0")] == [80, 16, 4, 0]
    assert working["work0.5"] < working["work2"] < working["work10"]  # one seeded shuffle: nested shares
    assert measures.base_rows(rows, 0.02, seed=0) == measures.base_rows(rows, 0.02, seed=0)
    other = {r["id"] for r, o in zip(measures.base_rows(rows, 0.1, seed=1), rows, strict=True) if r == o}
    assert other != working["work10"] and len(other) == 80


# ---------------------------------------------------------------- the runs' command lines and the estimate


def test_each_arm_is_the_dapo_config_with_its_rewards_as_recipes_grpo_parses_it(tmp_path):
    """grpo_argv through recipes/grpo.py's own parser: accuracy alone, the two gold measures, the pool, the fix."""
    from recipes import grpo
    from recipes.common.command_line.config import parse_recipe_args

    bench = load("emergence")
    args = bench.parse_args(["--output-dir", str(tmp_path), "--steps", "7"])

    def parsed(arm, seed):
        """The (script, training, model) options recipes/grpo.py parses from this arm's command line."""
        argv = bench.grpo_argv(args, arm, "work10", seed)
        config = argv[argv.index("--config") + 1]
        argv = argv[: argv.index("--config")] + argv[argv.index("--config") + 2 :]
        return parse_recipe_args(grpo.make_parser().dataclass_types, config, argv)

    script, training, model = parsed("accuracy", 2)
    assert script.rewards == [{"name": "math_accuracy", "weight": 1.0}]  # dapo.yaml's overlong shaping dropped
    assert [spec["name"].rpartition(":")[2] for spec in script.gold_rewards] == ["shows_working", "text_after_box"]
    assert (script.dataset_name, script.dataset_num_rows, script.dataset_seed) == ("synthetic:2-6", 400, 1)
    assert (training.seed, training.max_steps, training.beta, training.dynamic_sampling) == (2, 7, 0.0, True)
    assert model.model_name_or_path == str(tmp_path / "bases" / "work10" / "model")
    fixed = parsed("no_after_box", 0)[0].rewards
    assert fixed[0] == script.rewards[0] and fixed[1]["weight"] == 0.2
    assert fixed[1]["name"].endswith("emergence_measures.py:no_text_after_box")


def test_the_estimate_runs_the_bases_then_the_runs_on_the_parallel_jobs(monkeypatch):
    """--dry-run's cost model by hand: each job's minutes, the two phases on two workers, the planned runs."""
    bench = load("emergence")
    costs = {"sft_step_s": 0.1, "sft_row_s": 0.001, "grpo_step_s": 1.0, "eval_completion_s": 0.01,
             "job_start_s": 10.0, "idle_overhead": 1.0}  # fmt: skip
    monkeypatch.setattr(bench, "COSTS", costs)
    args = bench.parse_args(["--sft-steps", "100", "--sft-rows", "1000", "--steps", "20", "--eval-problems", "5",
                             "--eval-samples", "2", "--jobs", "2"])  # fmt: skip
    # a base: 10 + 100 x 0.1 + 4000 rows x 0.001 + 6 levels x 5 x 2 x 0.01 = 24.6 s; a run: 10 + 20 + 0.5 = 30.5 s
    assert bench.job_minutes(("base", "work10", 0), args) == pytest.approx(24.6 / 60)
    assert bench.job_minutes(("accuracy", "work10", 1), args) == pytest.approx(30.5 / 60)
    bases = [("base", name, 0) for name in ("work10", "work2", "work0")]
    runs = [("accuracy", "work10", 0)] * 3
    # bases on 2 workers: 2 x 24.6 on one, then the runs: 2 x 30.5 on one (the runs wait for the bases)
    assert bench.estimate_minutes([bases, runs], args) == pytest.approx((49.2 + 61) / 60)
    assert bench.planned_runs(args)[-3:] == [("no_after_box", "work10", seed) for seed in (0, 1, 2)]
    assert len(bench.planned_runs(args)) == 15
    assert bench.planned_runs(bench.parse_args(["--bases", "work0", "--seeds", "4"])) == [("accuracy", "work0", 4)]


# ---------------------------------------------------------------- a --fast run, end to end


def test_fast_run_of_every_base_then_a_rerun_skips_it_and_other_settings_are_refused(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    """--fast end to end (the jobs in this process): every base and run saved and in the report; a rerun
    launches nothing; other --steps are refused."""
    import torch

    bench = load("emergence")
    monkeypatch.setattr("recipes.common.command_line.config.setup_logging", lambda *a, **k: None)
    threads = torch.get_num_threads()

    def in_process(job, args):
        """A child process's job, run here with the options it is passed: one torch import for all."""
        bench.main(["--job", job[0], job[1], str(job[2]), *bench.passed_on(args)])
        return 0

    monkeypatch.setattr(bench, "launch", in_process)
    out = tmp_path / "bench"
    argv = ["--fast", "--base", str(tiny_model_dir), "--output-dir", str(out), "--jobs", "1"]
    try:
        bench.main(argv)
    finally:
        torch.set_num_threads(threads)
    rows = {name: [json.loads(line) for line in (out / "bases" / name / "rows.jsonl").open()] for name in bench.BASES}
    for name in bench.BASES:
        saved = json.loads((out / "bases" / name / "base.json").read_text())
        assert saved["done"] and sorted(saved["by_level"]) == ["1", "2", "3", "4", "5", "6"]
        assert [(r["id"], r["answer"]) for r in rows[name]] == [(r["id"], r["answer"]) for r in rows["work0"]]
    assert sum(r["solution"] != o["solution"] for r, o in zip(rows["work10"], rows["work0"], strict=True)) == 4
    runs = [("accuracy", name, 0) for name in bench.BASES] + [("no_after_box", "work10", 0)]
    for arm, base, seed in runs:
        saved = json.loads((out / arm / base / f"seed{seed}" / "eval.json").read_text())
        assert saved["done"] and list(saved["series"]["working"]) == ["1", "2"]
        assert set(saved["series"]) == {"working", "after_box", "accuracy"}
        assert {p["level"] for p in saved["per_problem"].values()} == {2, 3, 4, 5, 6}
    card = json.loads((out / "no_after_box" / "work10" / "seed0" / "run_card.json").read_text())
    assert card["rewards"][1]["weight"] == 0.2 and card["base_model"] == str(out / "bases" / "work10" / "model")
    table = (out / "emergence.md").read_text()
    for name in bench.BASES:
        assert f"| {name} | " in table and f"| accuracy only | {name} | 0 | " in table
    assert "| accuracy + 0.2 x no text after the box | work10 | 0 | " in table and "\n| 0 | " in table
    assert (out / "emergence.png").stat().st_size > 1000
    monkeypatch.setattr(bench, "launch", lambda job, args: pytest.fail(f"{job} relaunched"))
    capsys.readouterr()
    bench.main(argv)
    assert "0 base(s) and 0 run(s) to do" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="made with other settings"):
        bench.main([*argv, "--steps", "3"])


def test_the_pooled_difference_over_seeds_by_hand():
    """Two seeds against one base: per problem the mean over seeds of (run - base) share, then over problems."""
    measures = load("emergence_measures")

    def saved(correct: list[int], n: int = 4) -> dict:
        return {"per_problem": {f"p{i}": {"n": n, "correct": c, "working": 0, "after_box": 0}
                                for i, c in enumerate(correct)}}  # fmt: skip

    base = saved([1, 2, 0])
    runs = [saved([2, 2, 4]), saved([3, 1, 0])]
    # per problem: p0 ((2-1) + (3-1)) / 2 / 4 = 0.375; p1 (0 + -1) / 2 / 4 = -0.125; p2 (4 + 0) / 2 / 4 = 0.5
    pooled = measures.pooled_difference(runs, [base, base], "correct")
    assert pooled["mean"] == pytest.approx((0.375 - 0.125 + 0.5) / 3) and pooled["problems"] == 3
    assert pooled["ci95"][0] <= pooled["mean"] <= pooled["ci95"][1]
    assert measures.pooled_difference(runs, [base, base], "working")["mean"] == 0
    with pytest.raises(ValueError, match="pair each run"):
        measures.pooled_difference(runs, [base], "correct")
