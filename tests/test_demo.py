"""scripts/demo.py --fast: every stage of the pipeline runs through the recipes, every stage is evaluated, the
report and its plots are written, a rerun skips what exists, and a seed fixes the result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, build_once

sys.path.insert(0, str(REPO / "scripts"))

import demo  # noqa: E402
import demo_seeds  # noqa: E402

STAGES = ["base", "sft", "dapo", "rs", "distill"]


def test_fast_demo_runs_every_stage_and_reruns_cheaply(tmp_path, capsys):
    out = tmp_path / "demo"
    table = demo.main(["--fast", "--threads", "1", "--output-dir", str(out)])
    printed = capsys.readouterr().out
    assert list(table) == STAGES
    for stage in STAGES:
        row = table[stage]
        assert sorted(row["by_level"]) == demo.EVAL_LEVELS
        assert 0.0 <= row["pass@1 (5-12)"]["mean"] <= 1.0
        assert (out / "eval" / stage).is_dir()
    # the base model is untrained: it cannot answer, whatever the sampling
    assert table["base"]["pass@1 (1-4)"]["mean"] == 0.0
    report = (out / "report.md").read_text()
    assert "| stage | pass@1, levels 1-4 |" in report and "| stage | pass@1, levels 1-4 |" in printed
    for stage in STAGES:
        assert demo.STAGE_NAMES[stage] in report
    assert (out / "pass_at_k.png").stat().st_size > 0 and (out / "grpo_curves.png").stat().st_size > 0
    # the budget curve of the cold start and DAPO models (eval/budget.py), forced answers counted per budget
    assert "## Thinking budget" in report and (out / "budget_curve.png").stat().st_size > 0
    assert f"| {demo.STAGE_NAMES['dapo']} | 4 |" in report
    assert "- filter (synthetic:1-10" in report and "- dapo: 2 steps" in report
    pool = [json.loads(line) for line in (out / "filter" / "rl_pool.jsonl").open()]
    assert pool and all("pass_rate" in row for row in pool)
    # report.json carries what the report over seeds (--seeds, scripts/demo_seeds.py) reads back
    record = json.loads((out / "report.json").read_text())
    assert record["seed"] == 0 and record["filter"] == {"rows_in": 20, "rows_out": len(pool)}
    over_one_seed = demo_seeds.aggregate_seeds({0: record})["stages"]
    assert list(over_one_seed) == STAGES
    assert over_one_seed["dapo"]["pass@1 (5-12)"]["mean"] == table["dapo"]["pass@1 (5-12)"]["mean"]
    assert json.loads((out / "dapo" / "run_card.json").read_text())["config"]["script"]["dataset_name"] == str(
        out / "filter" / "rl_pool.jsonl"
    )

    stamps = {stage: (out / stage / "run_card.json").stat().st_mtime_ns for stage in ("sft", "dapo", "rs", "distill")}
    # the rerun reads every evaluation back in this process (--jobs 1): the worker process ran above
    again = demo.main(["--fast", "--threads", "1", "--jobs", "1", "--output-dir", str(out)])
    assert {stage: (out / stage / "run_card.json").stat().st_mtime_ns for stage in stamps} == stamps  # not redone
    assert again == table


@pytest.fixture(scope="session")
def two_runs_of_one_seed(shared_dir) -> tuple[Path, dict]:
    """The demo with seed 3 and the random-reward control, run twice, into a/ and b/ (with their stage tables), once
    per test run: the control's test reads a/, the determinism test compares the two."""
    argv = ["--fast", "--threads", "1", "--jobs", "1", "--seed", "3", "--skip", "rs", "distill",
            "--control", "random-reward"]  # fmt: skip

    def build(target: Path) -> None:
        for run in ("a", "b"):
            table = demo.main([*argv, "--output-dir", str(target / run)])
            (target / f"{run}.json").write_text(json.dumps(table))

    folder = build_once(shared_dir, "demo-seed3-twice", build)
    return folder, {run: json.loads((folder / f"{run}.json").read_text()) for run in ("a", "b")}


def test_random_reward_control_trains_on_a_coin_flip(two_runs_of_one_seed):
    folder, tables = two_runs_of_one_seed
    out = folder / "a"
    assert list(tables["a"]) == ["base", "sft", "dapo", "dapo_random"]
    card = json.loads((out / "dapo_random" / "run_card.json").read_text())
    names = [reward["name"] for reward in card["rewards"]]
    assert "random" in names and "math_accuracy" not in names
    assert "math_accuracy" in [
        reward["name"] for reward in json.loads((out / "dapo" / "run_card.json").read_text())["rewards"]
    ]
    assert "Random-reward control" in (out / "report.md").read_text()


def test_demo_is_deterministic_for_a_seed(two_runs_of_one_seed):
    folder, tables = two_runs_of_one_seed
    assert tables["a"] == tables["b"]
    for stage in ("dapo", "dapo_random"):
        samples = [(folder / run / "eval" / stage).glob("*/samples.jsonl") for run in ("a", "b")]
        a, b = (next(iter(paths)).read_text() for paths in samples)
        assert a == b


def test_verdicts_say_whether_intervals_overlap():
    def stat(mean, low, high):
        return {"mean": mean, "ci95": [low, high]}

    table = {
        "base": {"pass@1 (1-4)": stat(0.0, 0.0, 0.0), "pass@1 (5-12)": stat(0.0, 0.0, 0.0)},
        "sft": {"pass@1 (1-4)": stat(0.9, 0.85, 0.95), "pass@1 (5-12)": stat(0.2, 0.15, 0.25)},
        "dapo": {"pass@1 (1-4)": stat(0.9, 0.85, 0.95), "pass@1 (5-12)": stat(0.24, 0.2, 0.3)},
    }
    table["dapo_random"] = {"pass@1 (1-4)": stat(0.1, 0.05, 0.15), "pass@1 (5-12)": stat(0.05, 0.0, 0.1)}
    lines = demo.verdicts(table)
    assert lines[0] == "- Cold start over base, pass@1 on levels 1-4: +0.900 (intervals do not overlap)."
    assert lines[1] == "- DAPO over cold start, pass@1 on levels 5-12: +0.040 (intervals overlap)."
    assert lines[2].startswith(
        "- Random-reward control over cold start, levels 5-12: -0.150 (intervals do not overlap)"
    )
