"""Loading rows into DESIGN.md's schema from the synthetic task, local files, save_to_disk folders,
and the real math sets; errors that name the source, the row and the field."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset

from data_filters.schema import DataArguments, DatasetNotFoundError, SchemaError, load_rows


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_synthetic_rows_by_name():
    rows = load_rows(DataArguments(dataset_name="synthetic:2-3", dataset_num_rows=5))
    assert len(rows) == 10 and sorted(set(rows["difficulty"])) == [2, 3]
    evals = load_rows(DataArguments(dataset_name="synthetic:2", dataset_num_rows=5), split="test")
    assert set(evals["id"]).isdisjoint(rows["id"])


def test_local_jsonl_with_a_question_field_gets_prompts_ids_and_verifier(tmp_path):
    path = write_jsonl(tmp_path / "set.jsonl", [{"problem": "1+1?", "answer": 2}, {"problem": "2+2?", "answer": "4"}])
    args = DataArguments(dataset_name=str(path), system_prompt="Be brief.", user_template="Q: {problem}")
    rows = load_rows(args)
    assert rows[0]["prompt"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q: 1+1?"}]
    assert rows["answer"] == ["2", "4"]
    assert rows["verifier"] == ["math", "math"]
    assert len(set(rows["id"])) == 2
    assert rows["id"] == load_rows(args)["id"]  # stable


def test_parquet_and_save_to_disk_folders(tmp_path):
    data = Dataset.from_list([{"question": "What is 3?", "answer": "3"}])
    data.to_parquet(str(tmp_path / "set.parquet"))
    data.save_to_disk(str(tmp_path / "folder"))
    for name in ("set.parquet", "folder"):
        rows = load_rows(DataArguments(dataset_name=str(tmp_path / name), question_field="question"))
        assert rows[0]["prompt"][-1]["content"] == "What is 3?"


def test_a_bad_row_is_named(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"problem": "ok?", "answer": "1"}, {"problem": "", "answer": "2"}])
    with pytest.raises(SchemaError, match=r"row 1: field 'problem'"):
        load_rows(DataArguments(dataset_name=str(path)))


def test_missing_question_field_is_explained(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [{"text": "hi", "answer": "1"}])
    with pytest.raises(SchemaError, match="question_field"):
        load_rows(DataArguments(dataset_name=str(path)))


@pytest.mark.parametrize("name", ["missing.jsonl", "./nowhere", "no-such-org/no-such-dataset"])
def test_unknown_sources_raise_dataset_not_found(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetNotFoundError):
        load_rows(DataArguments(dataset_name=name))


def test_real_aime24_loads_into_the_schema(shared_math_data):
    rows = load_rows(DataArguments(dataset_name=str(shared_math_data / "aime24.jsonl")))
    assert len(rows) == 30 and len(set(rows["id"])) == 30
    assert all(answer.isdigit() for answer in rows["answer"])
    assert all(prompt[-1]["role"] == "user" for prompt in rows["prompt"])
