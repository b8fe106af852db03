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


# Expressions dressed up to pass for the number 12 under `require_number` (a reader of rewards/math/literal.py
# would try these): spacing, wrappers, unicode operators, labels, units, separators, equations.
SMUGGLED_NUMBERS = [
    "7+5",
    "7\\,+\\,5",
    "12\\!+\\!0",
    "12\n+0",
    "12 \\\\ + 0",
    "{12}+{0}",
    "\\mathbf{7}+\\mathbf{5}",
    "\\text{ }7+5",
    "7+5 \\text{ apples}",
    "= 7 + 5",
    "\\approx 7+5",
    "x = 12 = 7+5",
    "7+5 = 12",
    "12 = 7+5",
    "12^{\\circ} + 0",
    "12,\\!000 - 11,\\!988",
    "\\left. 12 \\right.",
    "\\left(12\\right)",
    "\\frac{12}{1}",
    "\\frac{-24}{-2}",
    "-\\frac{-12}{1}",
    "-(-12)",
    "3\u00d74",  # ×
    "24\u00f72",  # ÷
    "3\u22c54",  # ⋅
    "3\u22174",  # ∗
    "7\uff0b5",  # fullwidth +
    "17\u22125",  # unicode minus as an operator
    "1.2e1",
    "1.2 \\cdot 10",
    "\\sqrt{144}",
    "\\lceil 11.5 \\rceil",
    "12_{10}",
    "12+0i",
    "\\displaystyle{\\frac{24}{2}}",
]


@pytest.mark.parametrize("answer", SMUGGLED_NUMBERS)
def test_require_number_catches_expressions_in_disguise(answer):
    completion = f"\\boxed{{{answer}}}"
    started = time.monotonic()
    verdict = verify("12", completion, timeout_s=TIMEOUT_S, require_number=True)
    assert time.monotonic() - started <= TIMEOUT_S + 1.0
    assert verdict.correct is False, verdict
    if verify("12", completion, timeout_s=TIMEOUT_S).correct:  # credited without the option: say why not now
        assert verdict.reason in ("an expression, not a number", "not a number"), verdict


def test_require_number_on_the_whole_corpus_only_ever_rejects():
    """The option never credits what the default rejects, raises nothing, and stays within the time bound."""
    rows = [row for row in CORPUS if row["gold"] is not None]
    completions, golds = [row["completion"] for row in rows], [row["gold"] for row in rows]
    default = math_accuracy(completions, answer=golds)
    started = time.monotonic()
    strict = math_accuracy(completions, answer=golds, require_number=[True] * len(rows))
    assert time.monotonic() - started <= 3 * (TIMEOUT_S + 1.0)
    for row, before, after in zip(rows, default, strict, strict=True):
        assert after in (before, 0.0), row["name"]
        if row["expect"] == 0:
            assert after == 0.0, row["name"]


# A hedge written inside the box: the tidy step strips trailing text as if it were a unit, so `\boxed{12 \text{ or
# so}}` used to be read as 12 and credited. Hedged answers score 0 (a policy would learn to hedge every answer).
@pytest.mark.parametrize(
    "completion",
    [
        r"\boxed{12 \text{ or so}}",
        r"\boxed{12 \text{ maybe}}",
        r"\boxed{12\text{ (not sure)}}",
        r"\boxed{\text{about }12}",
        r"\boxed{12 \text{ if } n > 0}",
        r"\boxed{12 \text{ probably}}",
    ],
)
def test_a_hedge_inside_the_box_scores_zero(completion):
    verdict = verify("12", completion)
    assert verdict.correct is False and verdict.reason == "hedged answer", verdict


@pytest.mark.parametrize(
    ("gold", "completion"),
    [
        ("12", r"\boxed{12 \text{ apples}}"),
        ("12", r"\boxed{12 \text{ cm}}"),
        ("8.24", r"\boxed{\approx 8.24 \text{ mph}}"),  # a rounded answer, as MATH's own solutions write it
        (r"\text{not possible}", r"\boxed{\text{not possible}}"),  # the gold's own words are no hedge
        (r"\text{odd}", r"\boxed{\text{odd}}"),
    ],
)
def test_words_that_do_not_hedge_are_still_credited(gold, completion):
    assert verify(gold, completion).correct is True
