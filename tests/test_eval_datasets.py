"""tasks/datasets.py: registry names with their field maps (checked against local stand-ins, since the Hub
is out of reach), synthetic levels, local paths, and the errors for unknown names."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset

from tasks import datasets as eval_datasets
from tasks.datasets import REGISTRY, gsm8k_final_answer, load_eval_dataset
from tasks.schema import DatasetNotFoundError


@pytest.mark.parametrize(
    "text, expected",
    [("so 18 eggs\n#### 18", "18"), ("#### 1,234", "1234"), ("#### -3 ", "-3"), ("no marker", None), (None, None)],
)
def test_gsm8k_answers(text, expected):
    assert gsm8k_final_answer(text) == expected


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registry_field_maps_produce_schema_rows(name, monkeypatch):
    spec = REGISTRY[name]
    calls = []
    answer = "Natalia sold 48 clips.\n#### 72" if spec.answer_format == "gsm8k" else "72"
    row = {spec.question_field: "How many clips?", spec.answer_field: answer}
    if spec.difficulty_field:
        row[spec.difficulty_field] = 3

    def fake_load_dataset(path, config=None, split=None, **kwargs):
        calls.append((path, config, split))
        return Dataset.from_list([row])

    monkeypatch.setattr("datasets.load_dataset", fake_load_dataset)
    rows = load_eval_dataset(name, system_prompt="Reason step by step.")
    assert calls == [(spec.hub_id, spec.config, spec.split)]
    assert rows[0]["answer"] == "72"
    assert rows[0]["prompt"] == [
        {"role": "system", "content": "Reason step by step."},
        {"role": "user", "content": "How many clips?"},
    ]
    assert rows[0]["verifier"] == "math" and rows[0]["source"] == name and rows[0]["id"]
    if spec.difficulty_field:
        assert rows[0]["difficulty"] == 3


def test_synthetic_levels_are_the_held_out_split():
    rows = load_eval_dataset("synthetic:2-3", num_rows=7)
    assert len(rows) == 14 and sorted(set(rows["difficulty"])) == [2, 3]
    from tasks.synthetic import split_of

    assert all(split_of(row["prompt"][-1]["content"]) == "eval" for row in rows)


def test_local_files_and_the_shared_math_sets(shared_math_data, tmp_path):
    rows = load_eval_dataset(str(shared_math_data / "math500.jsonl"), num_rows=20)
    assert len(rows) == 20 and all(rows["answer"])
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "1+1?", "answer": 2}) + "\n")
    with pytest.raises(Exception, match="question_field"):
        load_eval_dataset(str(path))  # a column named neither 'problem' nor 'prompt': the error says what to set


def test_unknown_names_list_the_registry(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="aime24"):
        load_eval_dataset("aime2024")
    assert "synthetic:<levels>" in eval_datasets.available_eval_datasets()


# ---------------------------------------------------------------- the evaluation's default prompt (issue 28, item 3)


def test_a_math_file_asks_for_a_boxed_answer_unless_a_template_is_given(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"problem": "What is 1+1?", "answer": "2"}) + "\n")
    content = load_eval_dataset(str(path), user_template=None)[0]["prompt"][-1]["content"]
    assert content.startswith("What is 1+1?") and content.endswith("put your final answer within \\boxed{}.")
    explicit = load_eval_dataset(str(path), user_template="Q: {problem}")
    assert explicit[0]["prompt"][-1]["content"] == "Q: What is 1+1?"  # a template given wins


def test_a_registry_math_set_asks_for_a_boxed_answer_by_default(monkeypatch):
    monkeypatch.setattr(
        "datasets.load_dataset", lambda *args, **kwargs: Dataset.from_list([{"problem": "How many?", "answer": "7"}])
    )
    rows = load_eval_dataset("math500", user_template=None)
    assert rows[0]["prompt"][-1]["content"].startswith("How many?")
    assert "\\boxed{}" in rows[0]["prompt"][-1]["content"]


def test_generated_tasks_and_code_sets_keep_their_own_prompts():
    from pathlib import Path

    # the synthetic task's questions carry the format its models were trained on: no instruction added
    plain = load_eval_dataset("synthetic:1-2", num_rows=3, user_template="{problem}")
    default = load_eval_dataset("synthetic:1-2", num_rows=3, user_template=None)
    assert default["prompt"] == plain["prompt"]
    # a local file of code rows: its questions say what to write, and no box is asked for
    code = load_eval_dataset(str(Path(__file__).parent / "data" / "code_easy.jsonl"), num_rows=3, user_template=None)
    assert set(code["verifier"]) == {"code"}
    assert not any("boxed" in row[-1]["content"] for row in code["prompt"])
