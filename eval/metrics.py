"""Estimators for evaluation from n samples per problem.

* `pass_at_k`: the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on
  Code"): with n samples of which c are correct, the chance that k samples drawn without replacement
  include a correct one, 1 - C(n-c, k) / C(n, k), computed as the running product
  1 - prod_{i=n-c+1}^{n} (1 - k/i) so that nothing overflows for large n.
* `maj_at_k`: majority voting over answer classes (answers the verifier deems equal vote together), the
  exact expectation over all k-subsets of the n samples (multivariate hypergeometric counting), with a
  deterministic tie-break: among tied classes, the one that appeared first among the n samples wins.
* `bootstrap_ci`: a percentile bootstrap over problems of a dataset mean.
* `paired_difference`: the mean difference of two evaluations on the same problems, with a bootstrap
  interval of the per-problem differences (tighter than comparing two separate intervals).
* `mean_std`: aggregation over seeds.
"""

from __future__ import annotations

import math


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with `c` correct out of `n` samples."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    none_correct = 1.0
    for i in range(n - c + 1, n + 1):
        none_correct *= 1.0 - k / i
    return 1.0 - none_correct


def mean_at_n(scores: list[float]) -> float:
    """The mean score over all n samples of a problem (for 0/1 scores, pass@1)."""
    if not scores:
        raise ValueError("mean@n of no samples")
    return sum(scores) / len(scores)


def _poly_mul(a: list[int], b: list[int], degree: int) -> list[int]:
    out = [0] * (min(len(a) + len(b) - 1, degree + 1))
    for i, x in enumerate(a):
        if x == 0 or i > degree:
            continue
        for j, y in enumerate(b[: degree + 1 - i]):
            out[i + j] += x * y
    return out


def maj_at_k(classes: list[int | None], correct_class: int | None, k: int) -> float:
    """Expected majority-vote accuracy of k samples drawn without replacement from the n given ones.

    `classes[i]` is the answer class of sample i (None: it gave no answer and does not vote); classes
    are ranked for ties by their first appearance in `classes`. `correct_class` is the class equal to
    the gold answer (None: no sample is correct).
    """
    n = len(classes)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if correct_class is None or correct_class not in classes:
        return 0.0
    order: list[int] = []
    counts: dict[int, int] = {}
    for label in classes:
        if label is not None:
            if label not in counts:
                order.append(label)
            counts[label] = counts.get(label, 0) + 1
    abstain = classes.count(None)
    correct_rank = order.index(correct_class)
    m = counts[correct_class]
    ways = 0
    for x in range(1, min(m, k) + 1):  # x samples of the correct class in the subset
        rest = k - x
        if rest > n - m:
            continue
        # Ways to draw `rest` samples from the others with every other class below x (strictly when it
        # appeared before the correct class and so would win a tie) and abstentions unrestricted.
        poly = [math.comb(abstain, y) for y in range(min(abstain, rest) + 1)]
        for rank, label in enumerate(order):
            if label == correct_class:
                continue
            limit = min(counts[label], x - 1 if rank < correct_rank else x, rest)
            poly = _poly_mul(poly, [math.comb(counts[label], y) for y in range(limit + 1)], rest)
        if rest < len(poly):
            ways += math.comb(m, x) * poly[rest]
    return ways / math.comb(n, k)


def bootstrap_ci(values: list[float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0):
    """Percentile bootstrap interval of the mean of `values` (one value per problem)."""
    import numpy as np

    if not values:
        raise ValueError("a confidence interval of no values")
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = (1 - confidence) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def paired_difference(first: dict, second: dict, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0):
    """Mean of second - first over the problems both score (dicts problem id -> value), with its bootstrap interval.

    Two models evaluated on the same problems differ by less than their separate intervals suggest: most of
    each interval's width is which problems were drawn, and that is shared. Resampling the per-problem
    differences keeps the pairing, so a gain can be significant while the two intervals overlap.
    Returns (mean, (low, high), number of shared problems).
    """
    shared = sorted(set(first) & set(second))
    if not shared:
        raise ValueError("the two evaluations share no problem: nothing to pair")
    differences = [second[key] - first[key] for key in shared]
    return sum(differences) / len(differences), bootstrap_ci(differences, confidence, resamples, seed), len(shared)


def pooled_paired_difference(pairs: list[tuple[dict, dict]], confidence: float = 0.95, seed: int = 0) -> dict:
    """second - first pooled over several (first, second) pairs (dicts problem id -> value), e.g. seed k of one
    arm against seed k of another: per problem the mean over the pairs of the difference, on the problems every
    pair shares, then the mean over problems with its bootstrap interval. Also each pair's own mean difference.

    Averaging over seeds before resampling problems keeps both pairings: the seeds' and the problems'.
    Returns {"mean", "ci95": [low, high], "per_pair": [...], "problems": count}.
    """
    if not pairs:
        raise ValueError("no pairs to pool")
    shared = sorted(set.intersection(*(set(first) & set(second) for first, second in pairs)))
    if not shared:
        raise ValueError("the pairs share no problem: nothing to pool")
    by_problem = [sum(second[key] - first[key] for first, second in pairs) / len(pairs) for key in shared]
    per_pair = [sum(second[key] - first[key] for key in shared) / len(shared) for first, second in pairs]
    low, high = bootstrap_ci(by_problem, confidence, seed=seed)
    return {"mean": sum(by_problem) / len(by_problem), "ci95": [low, high], "per_pair": per_pair,
            "problems": len(shared)}  # fmt: skip


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value): how a number moves across seeds."""
    if not values:
        raise ValueError("mean of no values")
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((value - mean) ** 2 for value in values) / (len(values) - 1))
