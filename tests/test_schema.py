"""Loading rows into the row schema (tasks/schema.py) from the synthetic task, local files, save_to_disk folders,
and the real math sets; errors that name the source, the row and the field."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset

from tasks.datasets import load_eval_dataset
from tasks.rows import BOX_INSTRUCTION, MATH_USER_TEMPLATE
from tasks.schema import DataArguments, DatasetNotFoundError, SchemaError, load_rows, load_rows_with_report


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
        assert rows[0]["prompt"][-1]["content"] == MATH_USER_TEMPLATE.replace("{problem}", "What is 3?")


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


# ---------------------------------------------------------------- field maps, validation per verifier, drop mode


def test_a_field_map_renames_columns_and_keeps_source_ids(tmp_path):
    rows = [
        {"uid": 17, "question": "What is 3?", "final": "3", "level": 2, "worked": "3 is 3."},
        {"uid": 18, "question": "What is 4?", "final": "4", "level": 5, "worked": "4 is 4."},
    ]
    path = write_jsonl(tmp_path / "mapped.jsonl", rows)
    field_map = {"question": "question", "answer": "final", "id": "uid", "difficulty": "level", "solution": "worked"}
    loaded = load_rows(DataArguments(dataset_name=str(path), field_map=field_map))
    assert loaded["id"] == ["17", "18"]
    assert (
        loaded["answer"] == ["3", "4"]
        and loaded["difficulty"] == [2, 5]
        and loaded["solution"] == ["3 is 3.", "4 is 4."]
    )
    assert loaded[0]["prompt"] == [{"role": "user", "content": MATH_USER_TEMPLATE.replace("{problem}", "What is 3?")}]
    # the same map as a JSON string (a command-line flag)
    again = load_rows(DataArguments(dataset_name=str(path), field_map=json.dumps(field_map)))
    assert again["id"] == loaded["id"]
    with pytest.raises(SchemaError, match="'tests' to the column 'cases'"):
        load_rows(DataArguments(dataset_name=str(path), field_map={"question": "question", "tests": "cases"}))
    with pytest.raises(ValueError, match="schema fields"):
        DataArguments(field_map={"answr": "final"})


def test_templates_with_latex_braces_and_the_missing_answer_column(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"problem": "1+1?", "answer": "2"}])
    template = "{problem}\nPut your final answer within \\boxed{}."
    rows = load_rows(DataArguments(dataset_name=str(path), user_template=template))
    assert rows[0]["prompt"][0]["content"] == "1+1?\nPut your final answer within \\boxed{}."
    with pytest.raises(SchemaError, match="answer_field"):
        load_rows(DataArguments(dataset_name=str(path), answer_field="gold"))


def test_code_rows_need_readable_tests(tmp_path):
    good = {"inputs": ["1\n"], "outputs": ["1\n"]}
    rows = [
        {"problem": "echo", "tests": json.dumps(good)},
        {"problem": "broken", "tests": "{not json"},
        {"problem": "none", "tests": None},
    ]
    path = write_jsonl(tmp_path / "code.jsonl", rows)
    with pytest.raises(SchemaError) as error:
        load_rows(DataArguments(dataset_name=str(path)))
    message = str(error.value)
    assert (
        "2 of 3 rows" in message
        and "row 1: field 'tests' cannot be read" in message
        and "row 2: field 'tests'" in message
    )
    loaded, report = load_rows_with_report(DataArguments(dataset_name=str(path), on_error="drop"))
    assert loaded["verifier"] == ["code"] and loaded["problem"] == ["echo"]
    assert report.rows_in == 3 and report.rows_kept == 1 and report.rows_dropped == 2


def test_unknown_verifiers_are_rejected(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [{"problem": "p", "answer": "1", "verifier": "lean"}])
    with pytest.raises(SchemaError, match="field 'verifier' is 'lean', not a known verifier"):
        load_rows(DataArguments(dataset_name=str(path)))


def test_math_train_null_answers_are_named_and_dropped_in_drop_mode(shared_math_data):
    path = shared_math_data / "math_train.jsonl"
    lines = path.read_text().splitlines()
    null_rows = [i for i, line in enumerate(lines) if json.loads(line)["answer"] is None]
    empty_rows = [i for i, line in enumerate(lines) if json.loads(line)["answer"] == ""]
    assert len(null_rows) == 2 and len(empty_rows) == 2  # the data README names the 2 nulls; 2 more are ""
    with pytest.raises(SchemaError) as error:
        load_rows(DataArguments(dataset_name=str(path)))
    message = str(error.value)
    for index in null_rows:
        assert f"row {index}: field 'answer' is None; a math row needs a gold answer" in message
    for index in empty_rows:
        assert f"row {index}: field 'answer' is ''" in message
    assert "math_train.jsonl: 4 of 7474 rows break the schema" in message and "on_error: drop" in message

    rows, report = load_rows_with_report(DataArguments(dataset_name=str(path), on_error="drop"))
    assert len(rows) == 7474 - 4 and report.rows_dropped == 4
    assert report.reasons() == {"answer is None": 2, "answer is ''": 2}
    assert [entry["row"] for entry in report.to_dict()["dropped_rows"]] == sorted(null_rows + empty_rows)
    assert all(answer.strip() for answer in rows["answer"])


def test_a_source_id_column_is_kept_without_a_field_map(tmp_path):
    path = write_jsonl(
        tmp_path / "set.jsonl",
        [{"id": "aime-7", "problem": "1+1?", "answer": 2}, {"id": "", "problem": "2+2?", "answer": "4"}],
    )
    rows = load_rows(DataArguments(dataset_name=str(path)))
    assert rows[0]["id"] == "aime-7"
    assert rows[1]["id"].startswith("set-") and rows[1]["id"] != "set-"  # an empty id falls back to the hash


def test_the_default_prompt_asks_math_rows_for_a_box_and_leaves_code_rows_alone(tmp_path):
    """The recipes write the prompt eval.evaluate writes for the same rows: training and evaluation of a user's
    file see one prompt, and the math verifier, which reads boxes, has a box to read."""
    tests = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"problem": "What is 3?", "answer": "3", "verifier": "math"},
            {"problem": "Echo the input.", "answer": "", "tests": tests, "verifier": "code"},
        ],
    )
    loaded = load_rows(DataArguments(dataset_name=str(path)))
    assert loaded[0]["prompt"][-1]["content"] == "What is 3?\n\n" + BOX_INSTRUCTION
    assert loaded[1]["prompt"][-1]["content"] == "Echo the input." and loaded[1]["verifier"] == "code"
    own = load_rows(DataArguments(dataset_name=str(path), user_template="Q: {problem}"))
    assert [row["prompt"][-1]["content"] for row in own] == ["Q: What is 3?", "Q: Echo the input."]
    evaluated = load_eval_dataset(str(path), user_template=None)  # eval.evaluate's default
    assert evaluated["prompt"] == loaded["prompt"]
    generated = load_rows(DataArguments(dataset_name="synthetic:1", dataset_num_rows=2))
    assert BOX_INSTRUCTION not in generated[0]["prompt"][-1]["content"]  # the tasks keep their trained format
