"""The benchmark scripts' own logic, without training: scripts/bench/grpo_overhead.py (the bare arm's reward
means what math_accuracy means; two trainers take strict turns) and scripts/bench/sample_efficiency.py
(completions counted from metrics.jsonl, dynamic sampling's extra rounds included; table and plot)."""

from __future__ import annotations

import importlib.util
import json
import threading
from types import SimpleNamespace

from tests.conftest import REPO


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "scripts" / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_sample_efficiency_counts_completions_and_writes_table_and_plot(tmp_path):
    bench = load("sample_efficiency")
    run = tmp_path / "dapo"
    run.mkdir()
    card = {
        "config": {"training": {"num_generations": 8, "per_device_train_batch_size": 64, "num_iterations": 1}},
        "processes": 1,
        "final_step": 3,
    }
    (run / "run_card.json").write_text(json.dumps(card))
    records = [
        {"step": 1, "loss": 0.1, "dynamic_sampling/groups_generated": 8},
        {"step": 2, "loss": 0.1, "dynamic_sampling/groups_generated": 24},  # two extra rounds
        {"step": 2, "loss": 0.1, "dynamic_sampling/groups_generated": 16},  # logged again after a resume
        {"step": 3, "loss": 0.1, "dynamic_sampling/groups_generated": 8},
        {"step": 3, "train_runtime": 60.0},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    assert bench.completions_by_step(run) == {0: 0, 1: 64, 2: 192, 3: 256}

    point = {"pass@1": 0.25, "ci95": [0.2, 0.3], "pass@8": 0.5, "num_correct": [2, 2]}
    start = {**point, "pass@1": 0.2}
    states = {"dapo": {"points": {"2": {**point, "completions": 192}, "3": {**point, "completions": 256}}}}
    args = SimpleNamespace(eval_samples=8, steps=3, model="cold", seed=0)
    bench.write_table(tmp_path / "table.md", states, start, args)
    bench.write_plot(tmp_path / "plot.png", states, start, args)
    table = (tmp_path / "table.md").read_text()
    assert "| DAPO | 3 | 256 | 0.250 [0.200, 0.300] | 0.500 |" in table
    assert "0.250 (192)" in table
    assert (tmp_path / "plot.png").stat().st_size > 1000
