"""eval.power: the sample size of a paired comparison, against figures worked out by hand."""

from __future__ import annotations

import json

import pytest

from eval.power import detectable_gain, main, pilot_effect_variance, problem_variance, problems_needed

Z = 1.959964 + 0.841621  # z_{0.975} + z_{0.80}


def test_one_problems_variance_by_hand():
    # p = 0.5, n = 4, one seed: 0.25/4 + 0.25/4 = 0.125; three seeds: 0.0625 + 0.25/12 = 0.083333
    assert problem_variance(0.5, 4) == pytest.approx(0.125)
    assert problem_variance(0.5, 4, seeds=3) == pytest.approx(0.0625 + 0.25 / 12)
    assert problem_variance(0.0, 4) == 0.0 and problem_variance(1.0, 16, tau2=0.01) == pytest.approx(0.01)


def test_problems_needed_by_hand():
    # every problem at p = 0.5, n = 4, one seed: Var 0.125; P = Z^2 * 0.125 / 0.05^2 = 7.8489 * 50 = 392.4 -> 393
    assert problems_needed([0.5] * 10, 4, 0.05) == 393
    # half the problems solved always or never (variance 0), half at 0.5: mean variance 0.0625 -> 196.2 -> 197
    assert problems_needed([0.0, 1.0, 0.5, 0.5], 4, 0.05) == 197
    # a pilot's tau^2 adds to every problem: 0.125 + 0.02 = 0.145 -> 7.8489 * 0.145 / 0.0025 = 455.2 -> 456
    assert problems_needed([0.5], 4, 0.05, tau2=0.02) == 456
    assert detectable_gain([0.5], 393, 4) == pytest.approx(Z * (0.125 / 393) ** 0.5)
    assert detectable_gain([0.5], 393, 4) <= 0.05 < detectable_gain([0.5], 392, 4)
    with pytest.raises(ValueError):
        problems_needed([], 4, 0.05)


def test_pilot_effect_variance_removes_the_sampling_part():
    old = {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}
    new = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0}  # differences +-0.5: sample variance 0.25 * 4/3 = 0.3333
    # sampling part: 0.25/4 + (0 or 0)/4 = 0.0625 per problem -> tau^2 = 0.3333 - 0.0625 = 0.2708
    assert pilot_effect_variance(old, new, 4) == pytest.approx(1 / 3 - 0.0625)
    assert pilot_effect_variance(old, dict(old), 4) == 0.0  # never below zero


def test_the_command_reads_an_evaluation_folder(tmp_path, capsys):
    run = tmp_path / "eval" / "run"
    run.mkdir(parents=True)
    (run / "per_problem.jsonl").write_text("".join(json.dumps({"id": str(i), "pass@1": 0.5}) + "\n" for i in range(8)))
    (run / "summary.json").write_text(json.dumps({"protocol": {"n": 4}}))
    text = main([str(tmp_path / "eval"), "--samples", "4", "16"])
    assert "| 4 | 393 |" in text and "8 problems" in text
    assert f"| 16 | {problems_needed([0.5], 16, 0.05)} |" in text
