"""The benchmark scripts' own logic, without training: scripts/bench/grpo_overhead.py (the bare arm's reward
means what math_accuracy means; two trainers take strict turns), scripts/bench/reward_hacking.py (its arms are
valid recipe configs, its summary reads the runs). scripts/bench/sample_efficiency.py has its own tests in
tests/test_bench_sample_efficiency.py."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from tests.conftest import load_bench

load = load_bench  # scripts/bench/<name>.py as a module


def test_the_bare_accuracy_reward_agrees_with_math_accuracy_on_the_synthetic_format():
    from rewards import get_reward

    overhead = load("grpo_overhead")
    texts = [
        "<think>\na=b\nb=7\n</think>\n\\boxed{7}",  # correct
        "<think>\na=b\nb=7\n</think>\n\\boxed{8}",  # wrong
        "<think>\nq=i\n</think>\n\\boxed{f=7}",  # an assignment: answers 7
        "<think>\na=7\n</think>\n\\boxed{7} or \\boxed{8}",  # two distinct answers
        "<think>\na=7\n</think>\n\\boxed{7} so \\boxed{7}",  # the same answer twice
        "<think>\na=7\nb=\\boxed{7}",  # reasoning never closed
        "<think>\na=7\n</think>\nthe answer is 7",  # no box
        "<think>\na=7\n</think>\n\\boxed{}",  # empty box
    ]
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    answers = ["7"] * len(texts)
    expected = get_reward("math_accuracy")(completions, answers)
    assert overhead.boxed_integer_accuracy(completions, answers) == expected == [1, 0, 1, 0, 1, 0, 0, 0]


def test_the_turnstile_makes_two_threads_take_strict_turns_step_by_step():
    overhead = load("grpo_overhead")
    turnstile = overhead.Turnstile("ours", "bare")
    order: list[str] = []
    args = SimpleNamespace(seed=0)

    def fake_training(name: str, steps: int) -> None:
        clock = overhead.StepClock(name, turnstile)
        try:
            clock.on_train_begin(args, None, None)
            for _ in range(steps):
                order.append(name)
                clock.on_step_end(args, None, None)
        finally:
            turnstile.finish(name)

    threads = [threading.Thread(target=fake_training, args=(name, 3)) for name in ("bare", "ours")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert order == ["ours", "bare"] * 3


# ---------------------------------------------------------------- scripts/bench/reward_hacking.py


def test_reward_hacking_arms_are_valid_recipe_configs(tmp_path):
    """Each arm's flags parse as recipes/grpo.py options on the tiny config (rewards built, nothing loaded), and
    differ where the arm says: the gate, the ensemble's min, beta, the stop and its checkpoints."""
    from recipes import grpo
    from recipes.common.command_line.config import parse_recipe_args
    from scripts.bench import reward_hacking as bench

    orms = [tmp_path / f"orm_seed{seed}" for seed in range(3)]
    parsed = {
        arm: parse_recipe_args(
            grpo.make_parser().dataclass_types,
            "demo/grpo.yaml",
            ["--output_dir", str(tmp_path / arm), *bench.arm_flags(arm, orms, logging_steps=2)],
        )  # fmt: skip
        for arm in bench.ARMS
    }
    script = {arm: args[0] for arm, args in parsed.items()}
    training = {arm: args[1] for arm, args in parsed.items()}
    assert all(args.gold_rewards == [{"name": "math_accuracy"}] for args in script.values())
    assert script["orm_gate"].rewards[0]["gate"] == "format"
    assert script["orm_ensemble"].rewards[0] == {
        "name": "reward_model",
        "path": [str(p) for p in orms],
        "combine": "min",
    }
    assert training["orm_kl"].beta == 0.1 and training["orm"].beta == 0.0
    assert script["orm_stop"].stop_on_reward_hacking and training["orm_stop"].save_steps == 2
    assert not script["orm"].stop_on_reward_hacking
    assert script["random"].rewards[0]["name"] == "random" and script["verifier"].rewards[0]["name"] == "math_accuracy"


def test_reward_hacking_summary_reads_the_runs(tmp_path):
    """On two hand-made runs: the first and last logs' means, the monitor's steps and the table's cells."""
    from scripts.bench import reward_hacking as bench

    args = bench.parse_args(["--out", str(tmp_path), "--seeds", "0", "1", "--arms", "orm", "--patience", "2"])
    (tmp_path / "cold_start_eval.json").write_text(json.dumps({"pass@1": 0.4}))
    for seed, (gold_end, fired) in enumerate([(0.0, {"diverged_from": 2, "seen_at": 6}), (0.2, None)]):
        folder = tmp_path / "orm" / f"seed{seed}"
        folder.mkdir(parents=True)
        logs = [(2, -1.0, 0.4), (4, 0.0, 0.5), (6, 1.0, 0.1), (8, 2.0, gold_end)]
        folder.joinpath("metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "proxy/reward": p, "gold/math_accuracy": g}) + "\n" for s, p, g in logs)
        )
        folder.joinpath("run_card.json").write_text(json.dumps({"final_step": 8, "reward_hacking": fired}))
        folder.joinpath("eval.json").write_text(
            json.dumps({"pass@1": 0.1 * seed, "examples": [{"answer": "4", "completion": "x", "correct": False}]})
        )
    summary = bench.summarise(args)
    row = summary["arms"]["orm"][0]
    assert row["proxy_start"] == -0.5 and row["proxy_end"] == 1.5  # the first two logs, the last two
    assert row["gold_start"] == pytest.approx(0.45) and row["gold_end"] == pytest.approx(0.05)
    text = bench.report(summary)
    assert "| orm | -0.500 ± 0.000 -> 1.500 ± 0.000 |" in text and "1 of 2 | 6 (2), - |" in text
    bench.plot(summary, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 0
