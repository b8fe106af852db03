"""The benchmark scripts' own logic, without training: scripts/bench/grpo_overhead.py (the bare arm's reward
means what math_accuracy means; two trainers take strict turns). scripts/bench/sample_efficiency.py has its
own tests in tests/test_bench_sample_efficiency.py."""

from __future__ import annotations

import importlib.util
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
