"""data_filters/curriculum.py: difficulty buckets, and a sampler whose draw frequencies follow the weights
max(1 - p, floor) (a chi-square test), that updates p online, is deterministic for a seed, lays indices out
like TRL's RepeatSampler, and plugs into a GRPOTrainer subclass."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from datasets import Dataset

from data_filters.curriculum import CurriculumSampler, add_difficulty_buckets, difficulty_bucket

# Upper 0.1% points of the chi-square distribution (from tables), by degrees of freedom.
CHI2_999 = {4: 18.467, 5: 20.515, 7: 24.322}


def chi_square(counts: Counter, weights: list[float], total: int) -> float:
    norm = sum(weights)
    return sum((counts[i] - total * w / norm) ** 2 / (total * w / norm) for i, w in enumerate(weights))


def test_buckets():
    assert [difficulty_bucket(p) for p in (0.0, 0.1, 1 / 3, 0.5, 0.9, 1.0, None)] == [
        "unsolved", "hard", "medium", "medium", "easy", "solved", "unknown",
    ]  # fmt: skip
    assert difficulty_bucket(0.5, edges=[0.5], labels=["low", "high"]) == "high"
    with pytest.raises(ValueError, match="labels"):
        difficulty_bucket(0.5, edges=[0.5], labels=["one"])
    dataset, counts = add_difficulty_buckets(Dataset.from_dict({"pass_rate": [0.0, 0.2, 0.2, 1.0, None]}))
    assert dataset["difficulty_bucket"] == ["unsolved", "hard", "hard", "solved", "unknown"]
    assert counts == {"unsolved": 1, "hard": 2, "solved": 1, "unknown": 1}


def test_draw_frequencies_follow_one_minus_p_within_sampling_error():
    rates = [0.0, 0.25, 0.5, 0.75, 1.0, None]
    sampler = CurriculumSampler(rates, num_samples=30_000, batch_size=100, floor=0.05, unknown_pass_rate=0.5, seed=3)
    weights = [1.0, 0.75, 0.5, 0.25, 0.05, 0.5]  # max(1 - p, 0.05), the unknown row at p = 0.5
    assert sampler.weights().tolist() == weights
    draws = list(sampler)
    assert len(draws) == len(sampler) == 30_000
    counts = Counter(draws)
    assert chi_square(counts, weights, len(draws)) < CHI2_999[5]
    # the test has power: the same draws are far from uniform weights
    assert chi_square(counts, [1.0] * 6, len(draws)) > 100 * CHI2_999[5]


def test_updates_move_the_weights_and_the_draws():
    sampler = CurriculumSampler([0.0, 0.0, 0.0, 0.0, 0.0], ids=list("abcde"), batch_size=50, num_samples=20_000)
    sampler.update(["a"] * 4 + ["b"] * 4, [1, 1, 1, 1, 1.0, 0.0, 0.0, 0.0])  # a: mean 1, b: mean 0.25
    assert sampler.pass_rates[:2] == pytest.approx([0.3, 0.075])  # EMA, alpha 0.3, from 0
    sampler.update([0], [True])  # an index works too
    assert sampler.pass_rates[0] == pytest.approx(0.3 * 0.7 + 0.3)
    for _ in range(30):
        sampler.update(["a"], [1.0])
    assert sampler.pass_rates[0] > 0.99
    weights = sampler.weights().tolist()
    assert weights[0] == 0.05  # the floor: solved, still drawn now and then
    counts = Counter(sampler)
    assert chi_square(counts, weights, len(sampler)) < CHI2_999[4]
    assert 0 < counts[0] < counts[2] / 10
    sampler.update(["c", "c"], [None, float("nan")])  # nothing to learn
    assert sampler.pass_rates[2] == 0.0
    with pytest.raises(KeyError, match="unknown row id"):
        sampler.update(["zz"], [1.0])


def test_running_mean_estimator_and_unknown_rows():
    sampler = CurriculumSampler([0.5, None], estimator="mean", prior_weight=4)
    sampler.update([0, 0, 1, 1], [1.0, 1.0, 0.0, 1.0])  # row 0: one observation of 1.0; row 1: first observation 0.5
    assert sampler.pass_rates == pytest.approx([(0.5 * 4 + 1.0) / 5, 0.5])
    sampler.update([0], [0.0])
    assert sampler.pass_rates[0] == pytest.approx((0.5 * 4 + 1.0 + 0.0) / 6)
    sampler.update([1], [3.0])  # clipped to 1
    assert sampler.pass_rates[1] == pytest.approx((0.5 + 1.0) / 2)


def test_deterministic_for_a_seed_and_resumable():
    def draws(seed):
        return list(CurriculumSampler([0.1, 0.5, 0.9, 0.3], num_samples=200, batch_size=4, seed=seed))

    assert draws(7) == draws(7) and draws(7) != draws(8)
    first = CurriculumSampler([0.1, 0.5, 0.9, 0.3], num_samples=40, batch_size=4, seed=1)
    list(first)
    state = json.loads(json.dumps(first.state_dict()))  # plain JSON: a trainer writes it beside its checkpoint
    resumed = CurriculumSampler([0.1, 0.5, 0.9, 0.3], num_samples=40, batch_size=4, seed=99)
    resumed.load_state_dict(state)
    assert list(resumed) == list(first)


def test_layout_matches_trl_repeat_sampler():
    sampler = CurriculumSampler([0.2] * 10, num_samples=9, batch_size=3, mini_repeat_count=2, repeat_count=2, seed=0)
    out = list(sampler)
    assert len(out) == len(sampler) == 3 * 3 * 2 * 2  # 3 draws of 3 indices, each twice, each draw twice
    chunks = [out[i : i + 12] for i in range(0, len(out), 12)]
    for chunk in chunks:
        group = chunk[:6]
        assert chunk[6:] == group  # repeat_count: the same generation batch again
        assert group[0::2] == group[1::2]  # mini_repeat_count: each index twice in a row (one GRPO group)


def test_plugs_into_a_grpo_trainer_subclass(tiny_model_dir, tmp_path):
    """recipes/stages/grpo/trainer.py's subclass, with the curriculum's default options: TRL's dataloader draws
    through our sampler and the rewards flow back into it."""
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    rows = [
        {"prompt": [{"role": "user", "content": f"q{i}"}], "id": f"r{i}", "pass_rate": p}
        for i, p in enumerate([0.0, 1.0, 1.0, 1.0])
    ]
    args = RLVRGRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, max_completion_length=4,
        bf16=False, use_cpu=True, report_to="none", seed=0, max_steps=1, gradient_checkpointing=False,
        sampler="pass_rate_weighted", compact_generation=False, trim_padding=False, share_prompts=False,
    )  # fmt: skip
    trainer = RLVRGRPOTrainer(
        model=str(tiny_model_dir), reward_funcs=lambda completions, **kw: [1.0] * len(completions), args=args,
        train_dataset=Dataset.from_list(rows),
    )  # fmt: skip
    batch = next(iter(trainer.get_train_dataloader()))
    assert isinstance(trainer.curriculum, CurriculumSampler)
    prompts = [row["prompt"][0]["content"] for row in batch]
    assert len(prompts) == 4 and prompts[0::2] == prompts[1::2]  # groups of num_generations
    # weights 1 : 0.05 : 0.05 : 0.05 -> q0 is drawn most of the time
    draws = Counter(trainer.curriculum.draw()[0] for _ in range(2000))
    assert draws[0] / 2000 == pytest.approx(1 / 1.15, abs=0.04)
    assert torch.is_tensor(trainer.curriculum.weights())

    # one training step: the rewards (all 1.0) flow back into the pass rates of the rows drawn
    trainer.train()
    drawn = {index for index, rate in enumerate(trainer.curriculum.pass_rates) if rate != [0.0, 1.0, 1.0, 1.0][index]}
    assert trainer.curriculum.pass_rates[0] == pytest.approx(0.3) and drawn == {0}  # EMA from 0 toward 1
