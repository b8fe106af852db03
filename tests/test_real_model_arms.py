"""scripts/bench/real_model_arms.py on the stand-in (SmolLM2's real tokenizer and template, random weights), --fast:
every arm trains from demo-real's cold start with the repo's recipes at DAPO's budget, is evaluated with the demo's
protocol, and the report pairs each arm with the cold start and with DAPO. The gains themselves are checked
against a brute-force computation from the per-problem files."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))

from scripts.bench import real_model_arms  # noqa: E402
from scripts.bench.real_model_arms_report import arm_results, seed_means, seed_paired  # noqa: E402


def test_arm_results_by_hand():
    cold = {"a": 0.0, "b": 0.5, "c": 1.0}
    runs = {0: {"a": 0.5, "b": 0.5, "c": 1.0}, 1: {"a": 0.25, "b": 1.0, "c": 0.75}}
    result = arm_results(cold, runs)
    assert result["seeds"][0]["gain"] == pytest.approx(0.5 / 3)
    assert result["seeds"][1]["gain"] == pytest.approx((0.25 + 0.5 - 0.25) / 3)
    assert result["gain_mean"] == pytest.approx((0.5 / 3 + 0.5 / 3) / 2)
    assert result["gain_std"] == pytest.approx(0.0)
    # pooled: per problem the mean over seeds of (run - cold): a 0.375, b 0.25, c -0.125
    assert result["pooled_gain"]["mean"] == pytest.approx((0.375 + 0.25 - 0.125) / 3)
    low, high = result["pooled_gain"]["ci95"]
    assert -0.125 <= low <= result["pooled_gain"]["mean"] <= high <= 0.375
    assert seed_means(runs) == {"a": 0.375, "b": 0.75, "c": 0.875}


def test_seed_paired_by_hand():
    # seed k of `after` carried on from seed k of `before`; seed 2 has no `after` and is left out
    before = {0: {"a": 0.0, "b": 0.5}, 1: {"a": 1.0, "b": 0.25}, 2: {"a": 0.0, "b": 0.0}}
    after = {0: {"a": 0.5, "b": 0.5}, 1: {"a": 0.75, "b": 1.0}}
    d = seed_paired(before, after)
    assert d["per_seed"] == {0: pytest.approx(0.25), 1: pytest.approx((-0.25 + 0.75) / 2)}
    # per problem the mean over seeds 0 and 1 of after - before: a (0.5 - 0.25) / 2, b (0 + 0.75) / 2
    assert d["mean"] == pytest.approx((0.125 + 0.375) / 2) and d["problems"] == 2
    assert 0.125 <= d["ci95"][0] <= d["mean"] <= d["ci95"][1] <= 0.375


def test_an_arm_from_another_arms_model_waits_for_it(tmp_path, monkeypatch):
    monkeypatch.setattr(real_model_arms, "arm_argv", lambda arm, seed, *rest: ("grpo.py", tmp_path, [arm]))
    args = real_model_arms.parse_args(["--arms", "dapo_after_sft", "--seeds", "0", "--output-dir", str(tmp_path)])
    assert args.arms == ["dapo_after_sft", "sft_more"]  # the model it starts from is trained too
    assert real_model_arms.parse_args([]).arms == real_model_arms.DEFAULT_ARMS  # and the default list is untouched
    jobs = {job.name: job for job in real_model_arms.arm_jobs(args, {0: {}}, tmp_path / "cold")}
    assert jobs["dapo_after_sft_s0"].after == ["sft_more_s0"] and jobs["sft_more_s0"].after == []
    (tmp_path / "sft_more" / "seed0").mkdir(parents=True)
    (tmp_path / "sft_more" / "seed0" / "run_card.json").write_text("{}")  # finished: nothing to wait for
    jobs = {job.name: job for job in real_model_arms.arm_jobs(args, {0: {}}, tmp_path / "cold")}
    assert "sft_more_s0" not in jobs and jobs["dapo_after_sft_s0"].after == []


def test_a_control_arm_replaces_the_accuracy_reward_and_does_not_filter_on_it(tmp_path):
    budget = {"completions": 2560, "tokens_trained": 49000, "steps": 40, "dataset_name": "arithmetic:1-3",
              "dataset_seed": 1, "precision": ["--sampling_dtype", "bfloat16", "--loss_dtype", "float32"]}  # fmt: skip
    script, _, flags = real_model_arms.arm_argv("random_reward", 2, budget, tmp_path, fast=False)
    assert script == "grpo.py"
    rewards = json.loads(flags[flags.index("--rewards") + 1])
    assert [reward["name"] for reward in rewards] == ["random", "overlong"] and rewards[0]["seed"] == 2
    assert flags[flags.index("--variance_rewards") + 1] == "sum"  # filtering on accuracy would leak the verifier
    assert flags[flags.index("--max_steps") + 1] == "40" and "bfloat16" in flags and flags[-1] == "float32"
    # RFT samples DAPO's completions: 2560 / 4 per problem / 3 levels = 214 problems per level (rounded up)
    script, _, flags = real_model_arms.arm_argv("rft", 0, budget, tmp_path, fast=False)
    assert script == "rejection_sampling.py" and flags[flags.index("--dataset_num_rows") + 1] == "214"
    assert flags[flags.index("--dataset_seed") + 1] == "1"  # DAPO's training problems


def test_the_stale_arm_is_dapo_one_step_behind_on_both_cores(tmp_path):
    budget = {"completions": 2560, "tokens_trained": 49000, "steps": 40, "dataset_name": "arithmetic:1-3",
              "dataset_seed": 1, "precision": ["--sampling_dtype", "bfloat16", "--loss_dtype", "bfloat16"]}  # fmt: skip
    script, config, flags = real_model_arms.arm_argv("dapo_stale", 1, budget, tmp_path, fast=False)
    assert (script, config.name) == ("grpo.py", "dapo_lora.yaml") and "--rewards" not in flags  # DAPO's reward
    assert flags[flags.index("--max_staleness") + 1] == "1" and flags[flags.index("--seed") + 1] == "1"
    assert flags[flags.index("--vllm_importance_sampling_mode") + 1] == "token_truncate"
    assert flags[flags.index("--max_steps") + 1] == "40" and flags[flags.index("--sampling_dtype") + 1] == "bfloat16"
    assert "dapo_stale" not in real_model_arms.DEFAULT_ARMS
    args = real_model_arms.parse_args(["--arms", "dapo_stale", "--seeds", "0", "--output-dir", str(tmp_path)])
    jobs = {job.name: job for job in real_model_arms.arm_jobs(args, {0: budget}, tmp_path / "cold")}
    assert jobs["dapo_stale_s0"].cores == 2 and jobs["eval_dapo_stale_s0"].cores == 1  # trainer and its worker
    one_core = real_model_arms.parse_args([*["--arms", "dapo_stale", "--seeds", "0", "--cores", "1"],
                                           "--output-dir", str(tmp_path)])  # fmt: skip
    assert real_model_arms.arm_jobs(one_core, {0: budget}, tmp_path / "cold")[0].cores == 1  # still runs


def test_fast_arms_run_and_report(smol_standin_dir, tmp_path, monkeypatch):
    # every job in this process (--in-process: the recipes' own cli and eval.evaluate's main, one after another), so
    # that the ~30 jobs pay the imports once; the recipes keep pytest's log handlers
    monkeypatch.setattr("recipes.common.command_line.config.setup_logging", lambda *a, **k: None)
    demo, out = tmp_path / "demo-real", tmp_path / "arms"
    argv = ["--fast", "--in-process", "--model", str(smol_standin_dir), "--demo-dir", str(demo), "--output-dir",
            str(out), "--seeds", "0", "1"]  # fmt: skip
    results = real_model_arms.main(argv)
    default = real_model_arms.DEFAULT_ARMS
    assert set(results["arms"]) == {"dapo", *default}
    for arm in default:
        assert (out / arm / "seed1" / "run_card.json").is_file()
        assert (out / "eval" / f"{arm}_s1" / "done").is_file()
    card = json.loads((out / "random_reward" / "seed1" / "run_card.json").read_text())
    assert card["config"]["training"]["seed"] == 1
    assert card["config"]["script"]["rewards"][0]["name"] == "random"
    assert card["base_model"] == str(demo / "sft")  # every arm starts from demo-real's cold start

    # brute force: the pooled gain of RFT from the per-problem files
    def values(folder):
        rows = [json.loads(line) for line in next(folder.glob("*/per_problem.jsonl")).open()]
        return {row["id"]: row["pass@1"] for row in rows}

    cold = values(demo / "eval" / "sft")
    rft = [values(out / "eval" / f"rft_s{seed}") for seed in (0, 1)]
    pooled = sum((rft[0][key] + rft[1][key]) / 2 - cold[key] for key in cold) / len(cold)
    assert results["arms"]["rft"]["pooled_gain"]["mean"] == pytest.approx(pooled)
    report = (out / "report.md").read_text()
    assert "DAPO minus each arm" in report and real_model_arms.ARMS["format_only"] in report

    # DAPO after continued SFT: trained from sft_more's model of the same seed, reported minus that model
    after = real_model_arms.main([*argv, "--arms", "dapo_after_sft"])["arms"]
    card = json.loads((out / "dapo_after_sft" / "seed1" / "run_card.json").read_text())
    assert card["base_model"] == str(out / "sft_more" / "seed1")
    start = [values(out / "eval" / f"sft_more_s{seed}") for seed in (0, 1)]
    end = [values(out / "eval" / f"dapo_after_sft_s{seed}") for seed in (0, 1)]
    by_hand = sum(end[0][k] + end[1][k] - start[0][k] - start[1][k] for k in cold) / 2 / len(cold)
    assert after["dapo_after_sft"]["minus_start"]["mean"] == pytest.approx(by_hand)
    assert after["dapo_after_sft"]["minus_start"]["per_seed"][1] == pytest.approx(
        sum(end[1][k] - start[1][k] for k in cold) / len(cold)
    )
    assert "minus the model it trained from" in (out / "report.md").read_text()

    # the longer arms: evaluated at each step asked, KL to the cold start logged, the remedy's flags in its run
    long = real_model_arms.main([*argv[:-3], "--seeds", "0", "--arms", "dapo_long", "remedy_long", "--long-evals", "1",
                                 "2", "--remedy", "--beta 0.04"])  # fmt: skip
    assert {"dapo_long@1", "dapo_long@2", "remedy_long@1", "remedy_long@2"} <= set(long["arms"])
    assert "remedy_minus_dapo" in long["arms"]["remedy_long@2"]
    first, last = values(out / "eval" / "dapo_long@1_s0"), values(out / "eval" / "dapo_long@2_s0")
    later = sum(last[key] - first[key] for key in first) / len(first)  # by hand: one seed, step 2 minus step 1
    assert long["arms"]["dapo_long@2"]["minus_first_step"]["mean"] == pytest.approx(later)
    assert "at its last step minus at its first" in (out / "report.md").read_text()
    card = json.loads((out / "remedy_long" / "seed0" / "run_card.json").read_text())
    assert card["config"]["training"]["beta"] == 0.04 and card["final_step"] == 2
    # (the stand-in's random weights earn no reward, so no row trains and no kl is logged: tests/test_reference_kl.py)
    card = json.loads((out / "dapo_long" / "seed0" / "run_card.json").read_text())
    assert card["config"]["training"]["log_reference_kl"] is True and card["config"]["training"]["beta"] == 0.0
    assert (out / "eval" / "dapo_long@1_s0" / "done").is_file()
    # dapo_long continued the demo's DAPO run from its last checkpoint (step 1) instead of training step 1 again
    adapter = "checkpoint-1/adapter_model.safetensors"
    assert (out / "dapo_long" / "seed0" / adapter).read_bytes() == (demo / "dapo" / adapter).read_bytes()
    assert "--resume_from_checkpoint" in card["command"] and card["final_step"] == 2
    steps = [json.loads(line)["step"] for line in (out / "dapo_long" / "seed0" / "metrics.jsonl").open()]
    assert steps.count(1) == 1 and 2 in steps
    card = json.loads((out / "remedy_long" / "seed0" / "run_card.json").read_text())
    assert "--resume_from_checkpoint" not in card["command"]  # the remedy changes the run from step 1

    # a rerun redoes nothing and reports the same
    minutes = json.loads((out / "timings.json").read_text())
    again = real_model_arms.main(argv)["arms"]
    assert json.loads(json.dumps(again)) == json.loads(json.dumps(results["arms"]))
    assert json.loads((out / "timings.json").read_text()) == minutes
    # --report-only reports what has finished and starts nothing: an evaluation taken away stays away
    again = real_model_arms.main([*argv, "--arms", "rft", "sft_more", "--report-only"])["arms"]
    assert json.loads(json.dumps(again["rft"])) == json.loads(json.dumps(results["arms"]["rft"]))
    shutil.rmtree(out / "eval" / "rft_s1")
    again = real_model_arms.main([*argv, "--arms", "rft", "sft_more", "--report-only"])["arms"]
    assert not (out / "eval" / "rft_s1").exists() and list(again["rft"]["seeds"]) == [0]
    assert "Not evaluated yet: rft_s1" in (out / "report.md").read_text()
    with pytest.raises(SystemExit, match="no DAPO run"):
        real_model_arms.main([*argv, "--demo-dir", str(tmp_path / "nothing"), "--report-only"])


@pytest.mark.parametrize("arm, sampling, loss", [("dapo_fp32", "float32", "float32"),
                                                 ("dapo_bf16_sampling", "bfloat16", "float32")])  # fmt: skip
def test_a_precision_arm_is_dapo_in_another_precision(tmp_path, arm, sampling, loss):
    budget = {"completions": 2560, "tokens_trained": 49000, "steps": 40, "dataset_name": "arithmetic:1-3",
              "dataset_seed": 1, "precision": ["--sampling_dtype", "bfloat16", "--loss_dtype", "bfloat16"]}  # fmt: skip
    script, config, flags = real_model_arms.arm_argv(arm, 2, budget, tmp_path, fast=False)
    assert (script, config.name) == ("grpo.py", "dapo_lora.yaml") and "--rewards" not in flags  # DAPO's reward

    def last(name):  # the parser keeps the last value of a flag given twice
        return flags[len(flags) - 1 - flags[::-1].index(name) + 1]

    assert (last("--sampling_dtype"), last("--loss_dtype")) == (sampling, loss)
    assert last("--seed") == "2" and last("--max_steps") == "40" and arm not in real_model_arms.DEFAULT_ARMS


def test_the_precision_section_pairs_seed_k_with_seed_k(tmp_path, monkeypatch):
    from scripts.bench import real_model_arms_report as report

    values = {"sft": {"a": 0.5, "b": 0.5, "c": 0.5}}
    dapo = [{"a": 1.0, "b": 0.5, "c": 0.0}, {"a": 0.5, "b": 0.5, "c": 0.5}, {"a": 0.0, "b": 1.0, "c": 1.0}]
    fp32 = [{"a": 1.0, "b": 1.0, "c": 0.5}, {"a": 0.5, "b": 0.0, "c": 0.5}, {"a": 0.5, "b": 1.0, "c": 1.0}]
    half = [{"a": 1.0, "b": 0.5, "c": 0.5}, {"a": 0.5, "b": 0.5, "c": 0.5}, {"a": 0.0, "b": 1.0, "c": 1.0}]
    for seed in range(3):
        values |= {f"dapo_s{seed}": dapo[seed], f"dapo_fp32_s{seed}": fp32[seed],
                   f"dapo_bf16_sampling_s{seed}": half[seed]}  # fmt: skip
    evaluations = {}
    for name in values:
        (tmp_path / name / "run").mkdir(parents=True)
        (tmp_path / name / "run" / "per_problem.jsonl").touch()
        (tmp_path / name / "done").touch()
        evaluations[name] = tmp_path / name
    monkeypatch.setattr(report, "per_problem", lambda folder, dataset, metric: ("arithmetic", values[folder.name]))
    args = real_model_arms.parse_args(["--arms", *report.PRECISION_ARMS, "--output-dir", str(tmp_path / "out")])
    machine = {"cpu": "AMD EPYC", "isa": ["avx2", "avx512_bf16"], "torch_cpu_capability": "AVX512"}
    runs = {"dapo_s0": {"sampling_dtype": "bfloat16", "loss_dtype": "bfloat16", "machine": machine,
                        "seconds_per_step": 30.0}}  # fmt: skip
    results = report.write_report(args, real_model_arms.labels(args), {}, evaluations, precisions=runs)
    fp32_minus_dapo = results["precision"]["differences"]["dapo_fp32 - dapo"]
    # by hand, seed k minus seed k: (0 + 0.5 + 0.5) / 3, (0 - 0.5 + 0) / 3, (0.5 + 0 + 0) / 3
    assert fp32_minus_dapo["per_seed"] == {0: pytest.approx(1 / 3), 1: pytest.approx(-1 / 6), 2: pytest.approx(1 / 6)}
    assert fp32_minus_dapo["mean"] == pytest.approx((1 / 3 - 1 / 6 + 1 / 6) / 3)
    half_minus_dapo = results["precision"]["differences"]["dapo_bf16_sampling - dapo"]
    assert half_minus_dapo["per_seed"] == {0: pytest.approx(1 / 6), 1: 0.0, 2: 0.0}
    fp32_minus_half = results["precision"]["differences"]["dapo_fp32 - dapo_bf16_sampling"]
    assert fp32_minus_half["mean"] == pytest.approx(fp32_minus_dapo["mean"] - half_minus_dapo["mean"])
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| dapo_s0 | bfloat16 | bfloat16 | AMD EPYC | avx2 avx512_bf16 | AVX512 | 30.0 |" in text
