"""pass@k against brute-force enumeration of k-subsets."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from eval.metrics import bootstrap_ci, maj_at_k, mean_at_n, mean_std, paired_difference, pass_at_k


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 11))
def test_equals_brute_force_for_small_n(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_1_is_the_fraction_correct():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_at_k(1, 1, 1) == 1.0 and pass_at_k(1, 0, 1) == 0.0


def test_large_n_is_finite_and_exact():
    n, c, k = 1024, 5, 64
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-9)


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# ---------------------------------------------------------------- maj@k


def brute_force_maj_at_k(classes, correct_class, k):
    """Enumerate every k-subset, count votes, break ties by first appearance among all n samples."""
    first_seen = {}
    for index, label in enumerate(classes):
        if label is not None:
            first_seen.setdefault(label, index)
    wins = 0
    subsets = list(itertools.combinations(range(len(classes)), k))
    for subset in subsets:
        votes = {}
        for index in subset:
            if classes[index] is not None:
                votes[classes[index]] = votes.get(classes[index], 0) + 1
        if votes:
            winner = min(votes, key=lambda label: (-votes[label], first_seen[label]))
            wins += winner == correct_class
    return wins / len(subsets)


def test_maj_at_k_equals_brute_force_on_random_vote_patterns():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 9)
        classes = [rng.choice([None, 0, 1, 2, 3]) for _ in range(n)]
        correct = rng.choice([0, 1, None])
        for k in range(1, n + 1):
            assert maj_at_k(classes, correct, k) == pytest.approx(brute_force_maj_at_k(classes, correct, k), abs=1e-12)


def test_maj_at_k_ties_go_to_the_answer_seen_first():
    assert maj_at_k([0, 1], correct_class=0, k=2) == 1.0
    assert maj_at_k([1, 0], correct_class=0, k=2) == 0.0
    assert maj_at_k([1, 0, 0], correct_class=0, k=3) == 1.0
    assert maj_at_k([None, None, 0], correct_class=0, k=3) == 1.0  # abstentions do not vote
    assert maj_at_k([None, None], correct_class=0, k=2) == 0.0


def test_maj_at_k_with_k_below_n_by_hand():
    # 3 samples: correct, wrong, wrong. k=1: 1/3. k=2: subsets {c,w1} {c,w2} tie -> c first: wins; {w1,w2}: loses
    assert maj_at_k([0, 1, 1], correct_class=0, k=1) == pytest.approx(1 / 3)
    assert maj_at_k([0, 1, 1], correct_class=0, k=2) == pytest.approx(2 / 3)
    assert maj_at_k([0, 1, 1], correct_class=0, k=3) == 0.0


def test_maj_at_k_is_fast_enough_for_large_n():
    rng = random.Random(1)
    classes = [rng.choice([None, 0, 1, 2, 3, 4, 5, 6, 7]) for _ in range(64)]
    value = maj_at_k(classes, 0, 16)
    assert 0.0 <= value <= 1.0


# ---------------------------------------------------------------- bootstrap and seeds


def test_bootstrap_interval_covers_the_true_mean_at_nominal_rate():
    """95% nominal: in 200 simulated datasets of 60 problems with known mean, coverage is at least 90%."""
    rng = random.Random(2)
    true_mean, covered = 0.3, 0
    for trial in range(200):
        values = [1.0 if rng.random() < true_mean else 0.0 for _ in range(60)]
        low, high = bootstrap_ci(values, resamples=2000, seed=trial)
        covered += low <= true_mean <= high
    assert covered / 200 >= 0.90


def test_bootstrap_interval_brackets_the_sample_mean_and_narrows_with_more_problems():
    small = [0.0, 1.0] * 10
    large = [0.0, 1.0] * 500
    low_s, high_s = bootstrap_ci(small)
    low_l, high_l = bootstrap_ci(large)
    assert low_s < 0.5 < high_s and low_l < 0.5 < high_l
    assert high_l - low_l < (high_s - low_s) / 4


def test_paired_difference_keeps_the_pairing_that_separate_intervals_lose():
    """A gain of 0.05 on every one of 40 problems of spread-out difficulty: the paired interval is the gain
    itself, while the two separate intervals overlap almost entirely."""
    first = {f"p{i}": i / 50 for i in range(40)}
    second = {key: value + 0.05 for key, value in first.items()}
    mean, (low, high), shared = paired_difference(first, second)
    assert shared == 40
    assert mean == pytest.approx(0.05) and low == pytest.approx(0.05) and high == pytest.approx(0.05)
    low_first, high_first = bootstrap_ci(list(first.values()))
    low_second, _ = bootstrap_ci(list(second.values()))
    assert low_second < high_first  # unpaired, the same gain looks like noise


def test_paired_difference_against_the_enumerated_bootstrap():
    """Two problems with differences 0 and 1: the resampled mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4,
    so the 2.5% and 97.5% quantiles are 0 and 1. Problems only one run scored are left out."""
    mean, (low, high), shared = paired_difference({"a": 0.5, "b": 0.0, "only_first": 1.0}, {"a": 0.5, "b": 1.0})
    assert (mean, low, high, shared) == (0.5, 0.0, 1.0, 2)
    with pytest.raises(ValueError, match="share no problem"):
        paired_difference({"a": 1.0}, {"b": 1.0})


def test_mean_std_over_seeds():
    assert mean_std([0.2, 0.4]) == pytest.approx((0.3, math.sqrt(0.02)))
    assert mean_std([0.5]) == (0.5, 0.0)
    assert mean_at_n([1.0, 0.0, 0.0, 1.0]) == 0.5


def test_pooled_paired_difference_by_hand():
    """Two seeds of two arms on three problems (one the second seed lacks): per problem the mean over seeds of
    (second - first), on the shared problems only, then over problems; and each pair's own mean."""
    from eval.metrics import pooled_paired_difference

    seed0 = ({"a": 0.5, "b": 0.0, "c": 1.0}, {"a": 1.0, "b": 0.5, "c": 1.0})
    seed1 = ({"a": 0.5, "b": 0.5}, {"a": 0.0, "b": 1.0})
    pooled = pooled_paired_difference([seed0, seed1])
    # a: (+0.5 - 0.5) / 2 = 0; b: (+0.5 + 0.5) / 2 = 0.5; c is not shared
    assert pooled["problems"] == 2 and pooled["mean"] == pytest.approx(0.25)
    assert pooled["per_pair"] == [pytest.approx(0.5), pytest.approx(0.0)]
    assert pooled["ci95"][0] == pytest.approx(0.0) and pooled["ci95"][1] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="share no problem"):
        pooled_paired_difference([({"a": 1.0}, {"b": 1.0})])
