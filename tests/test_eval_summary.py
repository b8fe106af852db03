"""What an evaluation tells its user (issue 28, items 3, 11, 12): why samples fail and where the files went,
a default prompt that asks math sets for a box, compare's wording when no run is ahead, curves that do not hide
each other, and majority voting that does not warn about "golds" that are the samples' own answers.

The model here is a stand-in whose text is fixed by the prompt, so nothing depends on a float kernel."""

from __future__ import annotations

import json
import logging

import pytest

from eval import compare, evaluate
from eval.sampler import Sample

# ---------------------------------------------------------------- item 3: why samples fail, and where they went


class BoxesOnlyWhenAsked:
    """A stand-in model that answers 2 to everything, in a box only when the prompt asks for one."""

    def generate(self, prompts, params, keys=None):
        results = []
        for prompt in prompts:
            text = " ".join(message["content"] for message in prompt)
            answer = "So the result is \\boxed{2}." if "\\boxed{}" in text else "The result is 2."
            results.append([Sample(answer, 6, "stop") for _ in range(params.n)])
        return results


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """A model folder that passes check_model, a two-problem math file (golds 2 and 3), and the stand-in sampler."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "my.jsonl"
    rows = [{"problem": "What is 1+1?", "answer": "2"}, {"problem": "What is 1+2?", "answer": "3"}]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setattr("eval.sampler.make_sampler", lambda *args, **kwargs: BoxesOnlyWhenAsked())
    return model, data


def evaluate_args(model, data, out, *extra):
    return [
        "--model", str(model), "--dataset", str(data), "--n", "2", "--k", "1", "2", "--backend", "transformers",
        "--output-dir", str(out), *extra,
    ]  # fmt: skip


def test_the_default_prompt_asks_a_math_set_for_a_boxed_answer(stand_in, tmp_path, capsys):
    model, data = stand_in
    summaries = evaluate.main(evaluate_args(model, data, tmp_path / "run"))
    summary = summaries["my"]
    assert summary["metrics"]["pass@1"]["mean"] == pytest.approx(0.5)  # 2 is right for one problem of two
    assert summary["outcomes"] == {"correct": 0.5, "wrong answer": 0.5}
    assert "\\boxed{}" in summary["protocol"]["user_template"]
    printed = capsys.readouterr().out
    assert "correct 50.0%" in printed and "wrong answer 50.0%" in printed
    folder = tmp_path / "run" / "my"
    assert str(folder / "summary.json") in printed and str(folder / "samples.jsonl") in printed
    assert json.loads((folder / "summary.json").read_text())["outcomes"] == summary["outcomes"]


def test_the_summary_says_that_no_sample_boxed_an_answer(stand_in, tmp_path, capsys):
    model, data = stand_in
    summaries = evaluate.main(evaluate_args(model, data, tmp_path / "run", "--user-template", "{problem}"))
    assert summaries["my"]["metrics"]["pass@1"]["mean"] == 0.0
    assert summaries["my"]["outcomes"] == {"no boxed answer": 1.0}
    printed = capsys.readouterr().out
    assert "no boxed answer 100.0%" in printed
    assert "--user-template" in printed and "--answer-fallbacks" in printed  # what to do about it
    assert str(tmp_path / "run" / "my" / "summary.json") in printed


def test_outcome_labels_group_the_verifiers_reasons():
    from eval.report import outcome_shares

    samples = [
        {"correct": True, "reason": "exact number comparison", "finish_reason": "stop"},
        {"correct": False, "reason": "exact number comparison", "finish_reason": "stop"},
        {"correct": False, "reason": "math-verify", "finish_reason": "stop"},
        {"correct": False, "reason": "no boxed answer", "finish_reason": "length"},
        {"correct": False, "reason": "verification overran 2 s", "finish_reason": "stop"},
        {"correct": False, "reason": "case 3: timeout (2.0 s)", "finish_reason": "stop"},
        {"correct": None, "reason": "gold answer cannot be parsed as a whole", "finish_reason": "stop"},
        {"correct": False, "reason": "wrong answer", "finish_reason": "stop"},
    ]
    shares = outcome_shares(samples)
    assert shares == {
        "wrong answer": 3 / 8,
        "correct": 1 / 8,
        "no boxed answer (cut at --max-new-tokens)": 1 / 8,
        "verification timeout": 1 / 8,
        "timeout": 1 / 8,
        "not scored: gold answer cannot be parsed as a whole": 1 / 8,
    }
    assert sum(shares.values()) == pytest.approx(1.0)


# ---------------------------------------------------------------- item 11: compare's wording and its plots


def write_run(folder, name, curve, solved):
    """A finished run by hand: pass@k means per k, and per-problem pass@k values at the largest k."""
    dataset = folder / name / "set"
    dataset.mkdir(parents=True)
    metrics = {f"pass@{k}": {"mean": value, "ci95": [max(value - 0.05, 0), value + 0.05]} for k, value in curve.items()}
    (dataset / "summary.json").write_text(json.dumps({"metrics": metrics}))
    top = max(curve)
    (dataset / "per_problem.jsonl").write_text(
        "".join(json.dumps({"id": pid, f"pass@{top}": v}) + "\n" for pid, v in solved.items())
    )
    return folder / name


def test_two_runs_at_zero_everywhere_are_tied_not_one_ahead(tmp_path, capsys):
    zeros = {1: 0.0, 2: 0.0, 4: 0.0}
    base = write_run(tmp_path, "base", zeros, {"p1": 0.0, "p2": 0.0})
    rl = write_run(tmp_path, "rl", zeros, {"p1": 0.0, "p2": 0.0})
    report = compare.main([str(base), str(rl), "--output", str(tmp_path / "out")])
    assert "stays ahead" not in report
    assert "identical" in report and "neither run is ahead" in report
    printed = capsys.readouterr().out
    assert str(tmp_path / "out" / "compare.md") in printed
    assert str(tmp_path / "out" / "pass_at_k_set.png") in printed
    assert (tmp_path / "out" / "pass_at_k_set.png").exists()


def test_a_run_ahead_without_a_crossing_is_named(tmp_path):
    base = write_run(tmp_path, "base", {1: 0.2, 2: 0.3, 4: 0.5}, {"p1": 1.0})
    rl = write_run(tmp_path, "rl", {1: 0.2, 2: 0.4, 4: 0.6}, {"p1": 1.0})
    report = compare.compare(base, rl, tmp_path / "out")
    assert "Crossover: none for k in 1..4: rl stays ahead, level at k = 1." in report
    # the run ahead is named whichever side of the comparison it is on
    assert "Crossover: none for k in 1..4: rl stays ahead, level at k = 1." in compare.compare(rl, base, tmp_path / "b")


def test_identical_curves_are_drawn_apart_and_say_so():
    from eval.report import curve_styles

    styles = curve_styles({"base": [0.0, 0.0], "rl": [0.0, 0.0], "other": [0.1, 0.2]})
    assert styles["base"]["label"] == "base" and styles["other"]["label"] == "other"
    assert "identical to base" in styles["rl"]["label"]
    assert len({style["marker"] for style in styles.values()}) == 3  # a shape of its own per curve
    assert styles["rl"]["markersize"] > styles["base"]["markersize"]  # around the first one's, not under it


def test_the_plot_legend_names_identical_runs(tmp_path):
    from eval.report import plot_pass_at_k

    summary = {"metrics": {f"pass@{k}": {"mean": 0.0, "ci95": [0.0, 0.0]} for k in (1, 2)}}
    labels = plot_pass_at_k({"base": summary, "rl": summary}, [1, 2], tmp_path / "plot.png", "set")
    assert labels == ["base", "rl (identical to base)"]
    assert (tmp_path / "plot.png").stat().st_size > 1000


# ---------------------------------------------------------------- item 12: voting does not warn about golds


def test_voting_on_unparsable_answers_logs_no_gold_warning(caplog):
    from eval.voting import answer_classes
    from rewards.math import verify_batch

    # "???" and "a=" do not parse as a whole: put in the gold's place by the vote, they used to be reported
    # as golds that cannot be parsed, although every one of them is a sample's answer
    samples = [{"correct": False, "extracted": answer} for answer in ("???", "a=", "x + 1", "???")]
    with caplog.at_level(logging.WARNING):
        classes, correct = answer_classes(samples)
    assert classes[0] == classes[3] and len({classes[0], classes[1], classes[2]}) == 3 and correct is None
    assert not [record for record in caplog.records if "gold" in record.getMessage()]
    # the switch is for the vote only: a real gold that cannot be parsed is still reported
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        verdict = verify_batch(["\\frac{"], ["\\boxed{2}"], ids=["issue-28-vote-check"])[0]
    assert verdict.correct is None
    assert any("cannot be parsed as a whole" in record.getMessage() for record in caplog.records)
