"""Every gold answer of the real sets in ../shared/data/math verifies against itself, boxed, and not
against a perturbed version of itself."""

from __future__ import annotations

import json

import pytest

from rewards.math import verify_batch


@pytest.mark.parametrize("name", ["aime24", "amc", "math500"])
def test_gold_answers_verify_against_themselves_and_not_against_perturbations(shared_math_data, name):
    golds = [json.loads(line)["answer"] for line in (shared_math_data / f"{name}.jsonl").read_text().splitlines()]
    assert golds
    same = verify_batch(golds, [f"The answer is \\boxed{{{gold}}}." for gold in golds])
    shifted = verify_batch(golds, [f"\\boxed{{{gold} + 1}}" for gold in golds])
    assert [gold for gold, verdict in zip(golds, same, strict=True) if verdict.correct is not True] == []
    assert [gold for gold, verdict in zip(golds, shifted, strict=True) if verdict.correct is not False] == []
    numeric = [gold for gold in golds if gold.lstrip("-").isdigit()]
    off_by_one = verify_batch(numeric, [f"\\boxed{{{int(gold) + 1}}}" for gold in numeric])
    assert all(verdict.correct is False for verdict in off_by_one)
