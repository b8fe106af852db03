"""The adversarial corpus (tests/data/math_adversarial.jsonl): every entry returns within the per-item
timeout + 1 s, raises nothing, and every hack scores 0."""

from __future__ import annotations

import time

import pytest

from rewards.math import math_accuracy, start_workers, verify
from tests.support.adversarial import load_corpus

TIMEOUT_S = 2.0
CORPUS = load_corpus()


@pytest.fixture(scope="module", autouse=True)
def warm_pool():
    """Start the verifier's worker processes first: their one-time boot is not a per-item cost."""
    start_workers()


@pytest.mark.parametrize("row", CORPUS, ids=[row["name"] for row in CORPUS])
def test_returns_in_time_and_hacks_score_zero(row):
    started = time.monotonic()
    verdict = verify(row["gold"], row["completion"], timeout_s=TIMEOUT_S)
    elapsed = time.monotonic() - started
    assert elapsed <= TIMEOUT_S + 1.0, f"{row['name']}: {elapsed:.2f} s"
    expect = row["expect"]
    if expect == 1:
        assert verdict.correct is True, verdict
    elif expect == 0:
        assert verdict.correct is False, verdict
    elif expect == "unscored":
        assert verdict.correct is None, verdict


def test_the_whole_corpus_as_one_reward_batch():
    rows = [row for row in CORPUS if row["gold"] is not None]
    started = time.monotonic()
    scores = math_accuracy([row["completion"] for row in rows], answer=[row["gold"] for row in rows])
    assert time.monotonic() - started <= 3 * (TIMEOUT_S + 1.0)  # items run in parallel on the pool
    for row, score in zip(rows, scores, strict=True):
        if row["expect"] == 0:
            assert score == 0.0, row["name"]
        elif row["expect"] == 1:
            assert score == 1.0, row["name"]
