"""Answer classes for majority voting: answers that the verifier deems equal vote together.

Voting over raw strings splits `\\frac12` and `0.5` into two camps (lighteval does this); here:
* every sample the verifier scored correct is in the gold answer's class;
* wrong answers are grouped first by `rewards.math.answer_key` (the exact value of a number, else a
  canonical spelling), then groups whose representatives math-verify finds equal are merged (pairs
  of two exact numbers are never compared: different values are never equal);
* a sample without an extracted answer does not vote.

The merge asks the verifier with one sample's answer in the gold's place; an answer that does not parse as a
whole is then "a gold that cannot be parsed", which the verifier warns about. No gold is involved here, so
voting asks it not to (`warn_unscorable=False`): the two answers just stay apart.
"""

from __future__ import annotations

from fractions import Fraction

from rewards.math import answer_key, verify_batch


def answer_classes(samples: list[dict], timeout_s: float = 2.0) -> tuple[list[int | None], int | None]:
    """(class label per sample, the correct class's label or None). Labels are small integers."""
    classes: list[int | None] = [None] * len(samples)
    correct_label = 0 if any(sample.get("correct") for sample in samples) else None
    group_of_key: dict = {}
    representatives: list[str] = []
    for index, sample in enumerate(samples):
        if sample.get("correct"):
            classes[index] = 0
        elif sample.get("extracted"):
            key = answer_key(sample["extracted"])
            if key not in group_of_key:
                group_of_key[key] = len(representatives)
                representatives.append(sample["extracted"])
            classes[index] = 1 + group_of_key[key]
    parent = list(range(len(representatives)))

    def find(group: int) -> int:
        while parent[group] != group:
            parent[group] = parent[parent[group]]
            group = parent[group]
        return group

    exact = [isinstance(key[1], Fraction) for key in group_of_key]  # keys in insertion order = group order
    pairs = [
        (i, j)
        for i in range(len(representatives))
        for j in range(i + 1, len(representatives))
        if not (exact[i] and exact[j])
    ]
    if pairs:
        golds = [representatives[i] for i, _ in pairs]
        completions = [f"\\boxed{{{representatives[j]}}}" for _, j in pairs]
        verdicts = verify_batch(golds, completions, timeout_s=timeout_s, warn_unscorable=False)
        for (i, j), verdict in zip(pairs, verdicts, strict=True):
            if verdict.correct:
                parent[find(j)] = find(i)
    return [None if label is None else (0 if label == 0 else 1 + find(label - 1)) for label in classes], correct_label
