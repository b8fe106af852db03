"""recipes/stages/grpo/step_timing.py and scripts/bench/rollout_cost.py: where a GRPO step's time goes.

The FLOP count and the exclusive phase clocks against hand-computed values, the matmul peak's cache, a
two-step tiny-model DAPO run that logs every timing key per step (generation rounds of dynamic sampling
summed) and summarises them in its run card, and the benchmark's command line and report on a fake
metrics file (the real benchmark needs the real model and is not run here).
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from recipes import grpo
from recipes.common.command_line.config import parse_recipe_args
from recipes.common.training.monitor import without_run_summary
from recipes.stages.grpo import step_timing
from recipes.stages.grpo.step_timing import PHASES, TIMING_KEYS, StepTimer, matmul_peak_flops, step_flops
from tests.conftest import REPO

# ---------------------------------------------------------------- the FLOP count, by hand


def test_step_flops_full_weights_lora_and_recomputation_by_hand():
    # N = 1000 parameters, 10 generated tokens (2N each), 20 trained tokens
    assert step_flops(10, 20, 1000, 1000) == 2 * 1000 * 10 + 6 * 1000 * 20 == 140_000  # full: 6N
    assert step_flops(10, 20, 1000, 10) == 20_000 + (4000 + 20) * 20 == 100_400  # LoRA: 4N + 2 x 10 trainable
    assert step_flops(10, 20, 1000, 0) == 20_000 + 4000 * 20  # a frozen base alone: 4N
    full_recomputed = step_flops(10, 20, 1000, 1000, recomputation=True)
    assert full_recomputed == 20_000 + 8000 * 20 == 20_000 + 120_000 * 4 / 3  # +2N: x4/3 of the trained part
    assert step_flops(10, 20, 1000, 10, recomputation=True) == 20_000 + (6000 + 20) * 20
    assert step_flops(0, 0, 1000, 1000) == 0


# ---------------------------------------------------------------- the clocks, on a hand-driven clock


def test_phases_are_exclusive_and_the_optimizer_is_what_follows_the_last_loss_pass():
    timer = StepTimer()
    timer.params_total, timer.params_trainable, timer.peak_flops_per_s = 100, 100, 1000.0
    clock = [0.0]
    timer._now = lambda: clock[0]

    def at(t: float) -> None:
        clock[0] = t

    at(0.0)
    timer.begin_step()
    at(1.0)
    with timer.phase("forward_backward"):  # 1 -> 10, of which 2 -> 8 prepare
        at(2.0)
        with timer.phase("prepare"):  # 2 -> 8, of which 3 -> 6 generate and 6 -> 7 rewards
            at(3.0)
            with timer.phase("generate"):
                at(6.0)
            with timer.phase("rewards"):
                at(7.0)
            at(8.0)
        timer.count("generated", 40)
        timer.count("trained", 30)
        timer.count("positions", 40)
        at(10.0)
    at(12.0)
    record = timer.end_step()
    assert record["timing_s/generate"] == 3.0 and record["timing_s/rewards"] == 1.0
    assert record["timing_s/logprobs"] == 0.0
    assert record["timing_s/forward_backward"] == 9.0 - 6.0  # its 9 s less the 6 s of input preparation
    assert record["timing_s/optimizer"] == 2.0 and record["timing_s/step"] == 12.0
    assert record["tokens/generated"] == 40 and record["tokens/trained"] == 30
    assert record["tokens/padding_share"] == 0.25
    assert record["perf/flops"] == 2 * 100 * 40 + 6 * 100 * 30
    assert record["perf/flops_per_s"] == record["perf/flops"] / 12.0
    assert record["perf/share_of_peak"] == record["perf/flops_per_s"] / 1000.0
    assert set(record) == set(TIMING_KEYS)
    with timer.phase("generate"):  # outside a step: nothing is counted
        timer.count("generated", 5)
    summary = timer.summary()
    assert summary["steps"] == 1 and summary["seconds_per_step"]["forward_backward"] == 3.0
    assert summary["padding_share"] == 0.25 and summary["flops_per_s"] == record["perf/flops_per_s"]


# ---------------------------------------------------------------- the peak and its cache


def test_the_matmul_peak_is_positive_and_read_back_from_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert step_timing.cache_dir() == tmp_path / "rlvr-recipes"
    first = matmul_peak_flops()
    assert first > 1e6  # any CPU multiplies faster than a megaflop
    path = tmp_path / "rlvr-recipes" / step_timing.CACHE_FILE
    cached = json.loads(path.read_text())
    key = step_timing.machine_key()
    assert cached[key]["flops_per_s"] == first
    assert f"threads {torch.get_num_threads()}" in key

    def no_measurement(*args, **kwargs):
        raise AssertionError("the cached peak should have been read")

    monkeypatch.setattr(step_timing, "_measure_peak", no_measurement)
    cached[key]["flops_per_s"] = 123.0  # the second call returns what the file says
    path.write_text(json.dumps(cached))
    assert matmul_peak_flops() == 123.0
    monkeypatch.setattr(step_timing, "_measure_peak", lambda device: 7.0)
    assert matmul_peak_flops(refresh=True) == 7.0
    assert json.loads(path.read_text())[key]["flops_per_s"] == 7.0


# ---------------------------------------------------------------- a real (tiny) run


SMALL = [
    "--max_steps", "2", "--num_generations", "4", "--per_device_train_batch_size", "8",
    "--max_completion_length", "32", "--dataset_num_rows", "40", "--logging_steps", "1",
    "--save_strategy", "no", "--dataset_name", "synthetic:1-3", "--use_cpu", "true", "--disable_tqdm", "true",
    "--dynamic_sampling_max_rounds", "1",
    # the untrained tiny model scores 0 on every problem: with skip_zero_advantage every row would leave the
    # loss pass, and the pass these tests time would not run
    "--skip_zero_advantage", "false",
]  # fmt: skip
LORA = ["--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8", "--gradient_checkpointing", "true"]


@pytest.mark.parametrize("variant", ["full", "lora_recomputed"])
def test_a_two_step_run_logs_every_timing_key_each_step_and_summarises_them(
    variant, tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "run"
    extra = LORA if variant == "lora_recomputed" else []
    args = parse_recipe_args(
        grpo.make_parser().dataclass_types,
        "demo/dapo.yaml",
        ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(out), *SMALL, *extra],
    )
    grpo.main(*args)

    card = json.loads((out / "run_card.json").read_text())["timing"]
    params, recomputed = card["params"], card["recomputation"]
    if variant == "full":
        assert params["trainable"] == params["total"] > 0 and recomputed is False
    else:
        assert 0 < params["trainable"] < params["total"] / 2 and recomputed is True

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in map(without_run_summary, records) if record]
    assert [record["step"] for record in steps] == [1, 2]
    for record in steps:
        assert all(record[key] >= 0 for key in TIMING_KEYS), record
        phases = sum(record[f"timing_s/{phase}"] for phase in PHASES)
        assert phases <= record["timing_s/step"] + 1e-3
        assert record["timing_s/generate"] > 0 and record["timing_s/forward_backward"] > 0
        assert record["tokens/trained"] > 0 and 0 <= record["tokens/padding_share"] < 1
        # every generation round counted: dynamic sampling's rounds are of equal size in its batch mode
        generated = record["dynamic_sampling/groups_generated"] * 4 * record["completions/mean_length"]
        assert record["tokens/generated"] == pytest.approx(generated, rel=1e-6)
        expected = step_flops(
            record["tokens/generated"], record["tokens/trained"], params["total"], params["trainable"], recomputed
        )
        assert record["perf/flops"] == pytest.approx(expected)
        assert record["perf/flops_per_s"] == pytest.approx(record["perf/flops"] / record["timing_s/step"])
    assert card["steps"] == 2
    assert card["seconds_per_step"]["step"] == pytest.approx(sum(r["timing_s/step"] for r in steps) / 2)
    assert card["peak_flops_per_s"] > 0 and 0 < card["share_of_peak"]


# ---------------------------------------------------------------- the benchmark's arguments and report


def load_rollout_cost():
    spec = importlib.util.spec_from_file_location("bench_rollout_cost", REPO / "scripts/bench/rollout_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_record(step: int, step_time: float, timing: bool) -> dict:
    record = {"step": step, "step_time": step_time, "dynamic_sampling/groups_generated": 4, "loss": 0.1}
    record["completions/mean_length"] = 40.0 + step
    if timing:
        seconds = {"generate": 6.0, "rewards": 0.5, "logprobs": 0.0, "forward_backward": 4.0, "optimizer": 0.5}
        record.update({f"timing_s/{phase}": value for phase, value in seconds.items()})
        record.update({"timing_s/step": 12.0, "tokens/generated": 640, "tokens/trained": 1500})
        record.update({"tokens/padding_share": 0.25, "perf/flops": 1.2e12, "perf/flops_per_s": 1e11})
        record["perf/share_of_peak"] = 0.5  # a peak of 2e11: a bound of 6 s for 1.2e12 FLOPs
    return record


def test_rollout_cost_parses_its_overrides_and_reports_split_bound_and_ratios(tmp_path):
    bench = load_rollout_cost()
    argv = ["--steps", "3", "--max-completion-length", "32", "--num-generations", "4"]
    args = bench.make_parser().parse_args([*argv, "--per-device-train-batch-size", "8", "--old-rev", "none"])
    assert args.old_rev == "none" and bench.make_parser().parse_args([]).old_rev == "4f69dde"
    command = bench.recipe_command(REPO, args, tmp_path / "model", tmp_path / "out")
    assert command[command.index("--max_steps") + 1] == "3"
    assert command[command.index("--max_completion_length") + 1] == "32"
    assert command[command.index("--num_generations") + 1] == "4"
    assert command[command.index("--per_device_train_batch_size") + 1] == "8"
    assert command[command.index("--config") + 1] == str(REPO / bench.DEFAULT_CONFIG)
    config = bench.read_config(REPO, args)
    assert config["num_generations"] == 4 and config["per_device_train_batch_size"] == 8
    config["gradient_accumulation_steps"] = 1  # the figures below: one micro-batch of 8 a step
    variant = bench.make_parser().parse_args(
        ["--variant", "plain", "--compact_generation false --steps_per_generation 1"]
    )
    assert variant.variant == [["plain", "--compact_generation false --steps_per_generation 1"]]
    extra = ["--compact_generation", "false", "--steps_per_generation", "1"]
    assert bench.recipe_command(REPO, args, tmp_path / "model", tmp_path / "out", extra)[-4:] == extra
    varied = bench.read_config(REPO, args, extra)
    assert varied["compact_generation"] is False and varied["steps_per_generation"] == 1

    runs = {}
    for name, step_time, timing in (("old", 20.0, False), ("new", 10.0, True)):
        path = tmp_path / f"{name}.jsonl"
        lines = [
            fake_record(1, 99.0, timing),
            fake_record(2, step_time - 1, timing),
            fake_record(3, step_time + 1, timing),
        ]
        lines.append({"step": 3, "train_runtime": 300.0})  # the end-of-training line is not a step
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        summary = bench.summarise(bench.step_records(path), config)
        runs[name] = {"summary": summary, "peak_rss_bytes": 2 * 2**30}
    new = runs["new"]["summary"]
    assert new["steps"] == [2, 3] and new["step_time"] == 10.0  # the first (warm-up) step left out
    assert new["completions_generated"] == 16 and new["per_generated"] == 10.0 / 16 and new["per_trained"] == 10.0 / 8
    report = bench.format_report(runs, "header")
    assert "| new | 10.00 | 16 | 8 | 42.5 | 0.625 | 1.250 | 2.00 |" in report
    assert "| old | 20.00 | 16 | 8 | 42.5 | 1.250 | 2.500 | 2.00 |" in report
    assert "| generate | 6.00 | 50.0% |" in report and "| other (bookkeeping) | 1.00 | 8.3% |" in report
    assert "the FLOP bound is 6.00 s a step" in report
    assert "ratio to the FLOP bound (step time / (FLOPs / peak)): 2.00x" in report
    assert "ratio per generated completion (new / old s per completion): 0.50x" in report
    assert "ratio per trained completion (new / old s per completion): 0.50x" in report
    runs_with_variant = {
        **runs,
        "plain": {**runs["old"], "summary": {**runs["old"]["summary"], "per_generated": 0.9375, "per_trained": 1.875}},
    }
    report = bench.format_report(runs_with_variant, "header")
    assert "ratio per generated completion (plain / old s per completion): 0.75x" in report
    without_old = bench.format_report({"new": runs["new"]}, "header")
    assert "ratio to the FLOP bound" in without_old and "new / old" not in without_old
    assert bench.main(["--model", str(tmp_path / "absent"), "--old-rev", "none"]) == 2


def test_rollout_cost_compares_each_runs_generation_speed_with_the_transformers_run():
    """The generation table: tokens generated / seconds generating per run, the weight push, and each run's ratio
    to the run named "transformers" (worked out by hand: 600/6 = 100, 900/3 = 300, so 3.00x)."""
    bench = load_rollout_cost()

    def run(tokens: float, seconds: float, push: float) -> dict:
        timing = {"timing_s/generate": seconds, "tokens/generated": tokens, "timing_s/update_weights": push}
        return {"summary": {"timing": timing}}

    lines = bench.generation_table({"transformers": run(600, 6.0, 0.0), "vllm": run(900, 3.0, 0.25)})
    assert "| transformers | 100 | 0.000 | 1.00x |" in lines
    assert "| vllm | 300 | 0.250 | 3.00x |" in lines
    assert bench.generation_table({"new": {"summary": {"timing": {}}}}) == []  # no generation timed: no table
