"""Estimators for evaluation from n samples per problem.

`pass_at_k` is the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on
Code"): with n samples of which c are correct, the chance that k samples drawn without replacement
contain at least one correct one is 1 - C(n-c, k) / C(n, k). It is computed as a running product,
1 - prod_{i=n-c+1}^{n} (1 - k/i), so no binomial coefficient overflows for large n.
"""

from __future__ import annotations


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


def mean(values) -> float:
    values = list(values)
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)
