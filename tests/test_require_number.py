"""`require_number` travels with the row: the `arithmetic:` and `synthetic:` tasks set it, a config may set it for
any dataset, and every stage that scores a row (the GRPO reward, the pass-rate filter, rejection sampling's keep
rule, eval's pass@k) reads the same column, so `\\boxed{7+5}` for a gold of 12 is wrong in all of them at once.
Real sets (MATH, AIME rows, a user's file without the column) keep today's verdicts."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset

from data_filters.pass_rate import gold_problems, measure_pass_rates
from eval.runner import sample_and_score
from eval.sampler import Sample, SamplingParams
from rewards import get_reward
from rewards.verdicts import REQUIRE_NUMBER, score_completions
from tasks.schema import DataArguments, SchemaError, load_rows
from tasks.synthetic import generate_named

COPIED = "Adding the two numbers: \\boxed{7+5}"
COMPUTED = "Adding the two numbers: \\boxed{12}"


class Scripted:
    """A sampler that answers every prompt with the same completions (no model: fixed strings)."""

    def __init__(self, texts: list[str]):
        self.texts = texts

    def generate(self, prompts, params, keys=None):
        return [[Sample(text, 5, "stop") for text in self.texts] for _ in prompts]


def arithmetic_row_with_gold(gold: str) -> dict:
    """A row of the arithmetic task, as the task built it, whose gold is `gold`."""
    rows = generate_named("arithmetic:1-2", 100)
    found = [row for row in rows if row["answer"] == gold]
    assert found, f"no arithmetic row with gold {gold}"
    return found[0]


def trl_columns(row: dict, size: int) -> dict:
    """The keyword arguments TRL's GRPOTrainer gives a reward: every column but the prompt, one value per sample."""
    return {key: [value] * size for key, value in row.items() if key != "prompt"}


@pytest.mark.parametrize("name", ["arithmetic:1-4", "synthetic:1-3"])
def test_generated_tasks_ask_for_a_number_by_default(name):
    rows = generate_named(name, 5)
    assert rows and all(row[REQUIRE_NUMBER] is True for row in rows)
    loaded = load_rows(DataArguments(dataset_name=name, dataset_num_rows=5), split="eval")
    assert set(loaded[REQUIRE_NUMBER]) == {True}
    off = load_rows(DataArguments(dataset_name=name, dataset_num_rows=5, require_number=False))
    assert set(off[REQUIRE_NUMBER]) == {False}


def test_an_arithmetic_row_scored_by_the_reward_rejects_the_copied_expression():
    row = arithmetic_row_with_gold("12")
    reward = get_reward("math_accuracy")  # as a recipe's YAML `{name: math_accuracy}` builds it
    assert reward([COPIED, COMPUTED], **trl_columns(row, 2)) == [0.0, 1.0]
    scores = score_completions([row, row], [COPIED, COMPUTED])
    assert [score.correct for score in scores] == [False, True]
    assert scores[0].reason == "an expression, not a number"


def test_every_stage_agrees_on_an_arithmetic_row():
    row = arithmetic_row_with_gold("12")
    sampler, params = Scripted([COPIED, COMPUTED, COPIED, COPIED]), SamplingParams(n=4)
    # eval's pass@k and rejection sampling's keep rule (recipes.common.traces keeps samples eval.runner calls correct)
    (result,) = sample_and_score(sampler, [row], params, progress=False)
    assert [sample["correct"] for sample in result.samples] == [False, True, False, False]
    # the pass-rate filter: the gold verifies against itself under the option, and one sample in four passes
    assert gold_problems([row]) == [None]
    (measured,) = measure_pass_rates([row], sampler, params, progress=False)
    assert measured["pass_rate"] == 0.25
    # the same filter summing the reward as TRL does: the reward reads the same column
    (summed,) = measure_pass_rates([row], sampler, params, rewards=[{"name": "math_accuracy"}], progress=False)
    assert summed["reward_mean"] == 0.25


def test_rows_without_the_column_keep_todays_verdicts(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"problem": "Compute 7 + 5.", "answer": "12"}) + "\n")
    (row,) = load_rows(DataArguments(dataset_name=str(path))).to_list()
    assert REQUIRE_NUMBER not in row  # a real set's rows (MATH, AIME, a user's file) get no new column
    assert score_completions([row], [COPIED])[0].correct is True
    assert get_reward("math_accuracy")([COPIED], **trl_columns(row, 1)) == [1.0]
    # a config asks for it for every row of any dataset, and it travels with the rows
    (strict,) = load_rows(DataArguments(dataset_name=str(path), require_number=True)).to_list()
    assert strict[REQUIRE_NUMBER] is True
    assert score_completions([strict], [COPIED])[0].correct is False
    assert score_completions([strict], [COPIED], math_options={REQUIRE_NUMBER: False})[0].correct is True


def test_a_column_of_the_source_is_read_and_checked(tmp_path):
    path = tmp_path / "mine.jsonl"
    lines = [{"problem": "Compute 7 + 5.", "answer": "12", REQUIRE_NUMBER: True}, {"problem": "Why?", "answer": "1"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = load_rows(DataArguments(dataset_name=str(path))).to_list()
    assert [score.correct for score in score_completions(rows, [COPIED, "\\boxed{3-2}"])] == [False, True]
    path.write_text(json.dumps({"problem": "Compute 7 + 5.", "answer": "12", REQUIRE_NUMBER: "maybe"}) + "\n")
    with pytest.raises(SchemaError, match=REQUIRE_NUMBER):
        load_rows(DataArguments(dataset_name=str(path)))
    with pytest.raises(ValueError, match=REQUIRE_NUMBER):
        DataArguments(dataset_name=str(path), require_number="maybe")
    assert DataArguments(require_number="false").require_number is False  # as a command line writes it


def test_a_dataset_keeps_the_column_for_trl():
    """GRPO's rows are a `datasets.Dataset`; the column must survive it to reach the reward's keyword arguments."""
    rows = Dataset.from_list(generate_named("arithmetic:1", 3))
    assert rows.features[REQUIRE_NUMBER].dtype == "bool"


def test_shaping_rewards_built_on_correctness_follow_the_row_s_require_number():
    """cosine (and kimi_length) ask the verifier whether a completion is correct: on an arithmetic row the copied
    expression is wrong for them too, as for math_accuracy."""
    from rewards.registry import get_reward

    cosine = get_reward("cosine", max_len=100)
    completions = [r"\boxed{7+5}", r"\boxed{12}"]
    scores = cosine(completions, answer=["12", "12"], require_number=[True, True], completion_ids=[[1] * 5] * 2)
    assert scores[0] < 0 < scores[1]  # the expression scores as a wrong answer, the number as a right one
    free = cosine(completions, answer=["12", "12"], completion_ids=[[1] * 5] * 2)
    assert free[0] == free[1] > 0  # without the column, both are correct (the old behaviour everywhere)
