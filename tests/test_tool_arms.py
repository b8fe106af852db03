"""scripts/bench/tool_arms.py (docs/readouts/what-tools-buy.md's arms): the plan, the budgets the SFT and RFT arms take
from tool_dapo, the report's statistics by hand, and --fast on the stand-in (SmolLM2's real tokenizer and template,
random weights) for one seed, its pooled figures checked against a brute-force computation from the per-problem
files."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))

from scripts.bench import tool_arms  # noqa: E402
from scripts.bench import tool_arms_report as report  # noqa: E402


def test_decision_words_and_headline_by_hand():
    assert report.decision(0.01, 0.2) == "wins"
    assert report.decision(-0.2, -0.01) == "loses"
    assert report.decision(-0.01, 0.2) == "not distinguished"
    # pooled pass@1: per problem the mean over seeds, then over problems
    arms = {
        "a": {0: {"p": 1.0, "q": 0.5}, 1: {"p": 0.5, "q": 0.5}},  # (0.75 + 0.5) / 2 = 0.625
        "b": {0: {"p": 0.0, "q": 0.5}, 1: {"p": 0.5, "q": 0.0}},  # (0.25 + 0.25) / 2 = 0.25
        "c": {0: {"p": 0.0, "q": 0.0}, 1: {"p": 0.0, "q": 0.25}},
    }
    top = report.headline(arms)
    assert (top["top"], top["next"]) == ("a", "b")
    assert top["pass@1"] == {"a": 0.625, "b": 0.25, "c": 0.0625}
    # a - b per problem, mean over seeds: p (1 + 0) / 2 = 0.5, q (0 + 0.5) / 2 = 0.25
    assert top["margin"]["mean"] == pytest.approx(0.375) and top["margin"]["per_seed"] == {0: 0.5, 1: 0.25}
    assert 0.25 <= top["margin"]["ci95"][0] and top["distinguished"]
    assert report.headline({"a": arms["a"]}) is None


def test_curves_cost_and_mean_by_hand(tmp_path):
    records = [
        {"step": 1, "loss": 0.1, "tools/calls_per_completion": 0.5, "entropy": 1.0},
        {"step": 2, "loss": 0.2, "tools/calls_per_completion": 0.25, "entropy": 0.8},
        {"step": 2, "loss": 0.3, "tools/calls_per_completion": 1.0, "entropy": 0.6},  # a resumed step: this one
        {"train_runtime": 12.0},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    curves = report.curves(tmp_path / "metrics.jsonl")
    assert curves["tools/calls_per_completion"] == {1: 0.5, 2: 1.0} and curves["entropy"] == {1: 1.0, 2: 0.6}
    assert curves["tools/failure_frac"] == {}
    mean = report.mean_curves({0: curves, 1: {"entropy": {1: 0.0}}})
    assert mean["entropy"] == {1: 0.5, 2: 0.6}
    spent = report.cost({"tool_cold": 30.0, "eval_tool_cold": 12.0, "this run": 99.0}, {"tool_cold": 2})
    assert spent["minutes"] == 42.0 and spent["core_minutes"] == 72.0
    # a run's steps' own times, the last record of a resumed step: 10 + 30 + 20 s
    timed = [{"step": 1, "timing_s/step": 10.0}, {"step": 2, "timing_s/step": 50.0}, {"step": 2, "timing_s/step": 30.0},
             {"step": 3, "timing_s/step": 20.0}, {"train_runtime": 99.0}]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in timed))
    assert report.steps_minutes(tmp_path / "metrics.jsonl") == pytest.approx(1.0)
    assert report.steps_minutes(tmp_path / "absent.jsonl") == 0.0


def test_the_plan_waits_for_tool_dapo_and_the_dry_run_counts_minutes(tmp_path, capsys):
    args = tool_arms.parse_args(["--seeds", "0", "1", "--output-dir", str(tmp_path)])
    jobs = {job.name: job for job in tool_arms.jobs(args, tmp_path / "base")}
    assert jobs["tool_dapo_s1"].after == ["tool_cold"] and jobs["text_dapo_s0"].after == ["text_cold"]
    assert jobs["tool_sft_more_s1"].after == ["tool_cold", "tool_dapo_s1"]
    assert jobs["tool_rft_s0"].after == ["tool_cold", "tool_dapo_s0"]
    assert jobs["eval_text_cold_given"].after == ["text_cold"] and jobs["eval_tool_cold_withheld"].after == [
        "tool_cold"
    ]
    assert len(jobs) == 2 + 4 * 2 + 4 + 4 * 2
    plan = tool_arms.main(["--seeds", "0", "1", "--output-dir", str(tmp_path), "--dry-run"])
    m = tool_arms.MINUTES
    core_minutes = m["text_cold"] + m["tool_cold"] + 2 * (m["text_dapo"] + m["tool_dapo"] + m["tool_sft_more"])
    core_minutes += 2 * m["tool_rft"] + 2 * (m["eval"] + m["eval_tools"]) + 2 * (m["eval"] + 3 * m["eval_tools"])
    assert sum(minutes for _, minutes in plan["jobs"]) == pytest.approx(core_minutes)
    # the longest chain: the tool cold start, a seed's tool DAPO, its RFT arm and that arm's evaluation with the tool
    longest = m["tool_cold"] + m["tool_dapo"] + max(m["tool_rft"], m["tool_sft_more"]) + m["eval_tools"]
    assert plan["chain_minutes"] == pytest.approx(longest) and plan["chain"][:2] == ["tool_cold", "tool_dapo_s0"]
    assert core_minutes / 2 <= plan["minutes"] <= core_minutes / 2 + longest  # list scheduling's bound
    printed = capsys.readouterr().out
    assert "22 jobs to do" in printed and f"is {longest:.0f} min" in printed
    wide = tool_arms.main(["--seeds", "0", "1", "--output-dir", str(tmp_path), "--dry-run", "--cores", "16"])
    assert wide["minutes"] == pytest.approx(longest)  # every chain side by side: the longest is the whole
    (tmp_path / "tool_cold").mkdir()
    (tmp_path / "tool_cold" / "run_card.json").write_text("{}")  # finished: skipped, nothing waits for it
    order = [job.name for job in tool_arms.jobs(args, tmp_path / "base")]
    jobs = {job.name: job for job in tool_arms.jobs(args, tmp_path / "base")}
    assert "tool_cold" not in jobs and jobs["tool_rft_s0"].after == ["tool_dapo_s0"]
    # a rerun: the trained run's evaluations start first, then the trainings, then the evaluations that wait
    assert order[:2] == ["eval_tool_cold", "eval_tool_cold_withheld"] and order[2] == "text_cold"
    assert order.index("eval_text_cold") > order.index("tool_rft_s1")


def test_the_sized_arms_take_tool_dapos_figures(tmp_path, monkeypatch):
    budget = {"completions": 2560, "tokens_trained": 160_000, "steps": 40, "dataset_name": "arithmetic-hard:1-4",
              "dataset_seed": 1, "max_completion_length": 192, "temperature": 1.0}  # fmt: skip
    monkeypatch.setattr(tool_arms, "sft_row_tokens", lambda budget, tokenizer, rows: 400.0)
    script, config, flags = tool_arms.arm_argv("tool_sft_more", 2, budget, tmp_path, fast=False)
    # 160000 / 400 = 400 rows: 100 per level of the 4, 50 steps of 8
    assert (script, config.name) == ("sft.py", "sft_tools.yaml")
    assert flags[flags.index("--dataset_num_rows") + 1] == "100" and flags[flags.index("--max_steps") + 1] == "50"
    assert flags[flags.index("--dataset_seed") + 1] == "1" and flags[flags.index("--seed") + 1] == "2"
    script, config, flags = tool_arms.arm_argv("tool_rft", 0, budget, tmp_path, fast=False)
    # 2560 completions / 4 per problem / 4 levels = 160 problems per level, sampled as tool_dapo sampled
    assert (script, config.name) == ("rejection_sampling.py", "rejection_sampling.yaml")
    assert flags[flags.index("--dataset_num_rows") + 1] == "160"
    sampling = json.loads(flags[flags.index("--sampling") + 1])
    assert (sampling["n"], sampling["max_new_tokens"], sampling["temperature"]) == (4, 192, 1.0)
    assert (
        flags[flags.index("--tools") + 1] == "python" and flags[flags.index("--max_tool_calling_iterations") + 1] == "3"
    )
    assert flags[flags.index("--max_length") + 1] == str(tool_arms.TOOL_MAX_LENGTH + 192)
    # the cold starts: the same rows, seed and steps (sft.yaml's), the tool one long enough for the hard split's rows
    _, text_config, text = tool_arms.cold_argv("text_cold", fast=False)
    _, tool_config, tool = tool_arms.cold_argv("tool_cold", fast=False)
    assert (text_config.name, tool_config.name) == ("sft.yaml", "sft_tools.yaml") and text == tool[: len(text)]
    assert tool[len(text) :] == ["--max_length", "640"] and text[text.index("--max_steps") + 1] == "60"
    script, config, flags = tool_arms.arm_argv("text_dapo", 1, None, tmp_path, fast=False)
    assert config.name == "dapo.yaml" and flags[flags.index("--max_steps") + 1] == "40"
    assert flags[flags.index("--dataset_name") + 1] == "arithmetic-hard:1-4"


def test_fast_tool_arms_run_and_report(smol_standin_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("recipes.common.command_line.config.setup_logging", lambda *a, **k: None)
    out = tmp_path / "tool_arms"
    argv = ["--fast", "--in-process", "--cores", "1", "--model", str(smol_standin_dir), "--output-dir", str(out),
            "--seeds", "0"]  # fmt: skip
    results = tool_arms.main(argv)
    assert set(results["arms"]) == set(tool_arms.ARMS)
    assert set(results["evaluations"]) == {*tool_arms.ONCE, *(f"{arm}_s0" for arm in tool_arms.ARMS)}
    for name in ("text_cold", "tool_cold", "tool_dapo/seed0", "tool_rft/seed0", "tool_sft_more/seed0"):
        assert (out / name / "run_card.json").is_file()
    card = json.loads((out / "tool_sft_more" / "seed0" / "run_card.json").read_text())
    assert card["base_model"] == str(out / "tool_cold") and card["config"]["script"]["tools"] == ["python"]
    budget = json.loads((out / "tool_rft" / "seed0" / "budget.json").read_text())
    assert budget["completions"] > 0 and budget["dataset_name"] == "arithmetic-hard:1-4"
    protocol = json.loads(next((out / "eval" / "tool_dapo_s0").glob("*/protocol.json")).read_text())
    assert protocol["tools"]["max_tool_calls"] == 3
    assert "tools" not in json.loads(next((out / "eval" / "text_dapo_s0").glob("*/protocol.json")).read_text())

    def values(name):
        rows = [json.loads(line) for line in next((out / "eval" / name).glob("*/per_problem.jsonl")).open()]
        return {row["id"]: row["pass@1"] for row in rows}

    tool_cold, text_cold = values("tool_cold"), values("text_cold")
    for arm, cold in [("tool_dapo", tool_cold), ("text_dapo", text_cold), ("tool_rft", tool_cold)]:
        by_hand = sum(values(f"{arm}_s0")[key] - cold[key] for key in cold) / len(cold)
        assert results["arms"][arm]["pooled_gain"]["mean"] == pytest.approx(by_hand)
    for first, second in report.COMPARISONS:
        a, b = values(f"{first}_s0"), values(f"{second}_s0")
        d = results["comparisons"][f"{first} - {second}"]
        assert d["mean"] == pytest.approx(sum(a[key] - b[key] for key in a) / len(a))
        assert d["decision"] == report.decision(*d["ci95"])
    withheld = values("tool_cold_withheld")
    by_hand = sum(withheld[key] - tool_cold[key] for key in tool_cold) / len(tool_cold)
    assert results["decomposition"]["tool_cold_withheld - tool_cold"]["mean"] == pytest.approx(by_hand)
    assert results["evaluations"]["tool_dapo_s0"]["tools"] is not None  # the summary's tools block
    assert 0 in results["curves"]["per_seed"] and results["curves"]["per_seed"][0]["tools/calls_per_completion"]
    assert results["cost"]["core_minutes"] > 0 and "tool_dapo_s0" in results["cost"]["jobs"]
    text = (out / "report.md").read_text()
    assert "tool_dapo - text_dapo" in text and "Headline" in text and "core-minutes" in text

    # a rerun redoes nothing and reports the same
    minutes = json.loads((out / "timings.json").read_text())
    again = tool_arms.main(argv)
    assert json.loads((out / "timings.json").read_text()) == minutes
    assert json.loads(json.dumps(again["arms"])) == json.loads(json.dumps(results["arms"]))
